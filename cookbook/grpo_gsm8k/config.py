"""
The training configuration: defaults, then a YAML file (``--config``), then flags.

Every field of :class:`TrainConfig` is a flag (``--batch-size 8``; booleans also take
``--no-...``). The ``admission``, ``budget`` and ``history`` sections hold the fields of
``GroupAdmissionConfig``, ``SamplingBudgetConfig`` and ``PromptHistoryConfig``; a YAML
section is merged key by key over the defaults, and single keys are set with
``--admission.min_reward_std 1e-6`` or ``--budget.max_resample_rounds 3`` (values are read
as YAML: ``null``, ``[accuracy]``).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from group_admission import GroupAdmissionConfig, PromptHistoryConfig, SamplingBudgetConfig
from grpo_gsm8k.grpo import ADVANTAGE_SCALES, LOSS_AGGREGATIONS

__all__ = ["DEFAULT_SYSTEM_PROMPT", "TrainConfig", "parse_config"]

DEFAULT_SYSTEM_PROMPT = (
    "Solve the math word problem. Reason briefly, step by step, then give the final "
    "answer on its own line as '#### N' (a number only)."
)


def _positive(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    declared = str(attribute.type)  # annotations are strings (PEP 563)
    if value is None and "None" in declared:
        return
    wanted = int if declared in ("int", "int | None") else (int, float)
    if isinstance(value, bool) or not isinstance(value, wanted) or value <= 0:
        kind = "an integer" if wanted is int else "a number"
        raise ValueError(f"'{attribute.name}' must be {kind} > 0 (got {value!r})")


def _one_of(*choices: str) -> Any:
    def check(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in choices:
            raise ValueError(f"'{attribute.name}' must be one of {list(choices)} (got {value!r})")

    return check


def _section(cls: type, **required: Any) -> Any:
    def check(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        cls.from_mapping({**required, **value})  # type: ignore[attr-defined]  # names the bad key or value

    return check


@attrs.frozen(kw_only=True)
class TrainConfig:
    """Every setting of a run. Defaults are the real hub ids and a GPU-sized recipe."""

    # what to train on
    model: str = "Qwen/Qwen2.5-0.5B-Instruct"
    dataset: str = "openai/gsm8k"
    subset: str | None = "main"
    split: str = "train"
    eval_split: str = "test"
    question_field: str = "question"
    answer_field: str = "answer"
    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT
    max_train_problems: int | None = attrs.field(default=None, validator=_positive)
    # where
    device: str = "auto"
    # compute precision of forward passes (autocast); weights and optimizer stay float32
    dtype: str = attrs.field(default="float32", validator=_one_of("float32", "bfloat16", "float16"))
    seed: int = 0
    # sampling
    steps: int = attrs.field(default=200, validator=_positive)
    # stop once this many samples are generated, or after ``steps``, whichever comes first
    max_samples: int | None = attrs.field(default=None, validator=_positive)
    batch_size: int = attrs.field(default=8, validator=_positive)
    num_generations: int = attrs.field(default=8, validator=_positive)
    max_new_tokens: int = attrs.field(default=256, validator=_positive)
    temperature: float = attrs.field(default=1.0, validator=_positive)
    top_p: float = attrs.field(default=1.0, validator=_positive)
    generation_batch_size: int = attrs.field(default=64, validator=_positive)
    resample: str = attrs.field(default="fresh", validator=_one_of("fresh", "retry"))
    skip_prompts: bool = False  # skip the prompts a PromptHistory expects to be dead (the ``history``)
    carry_rate: bool = True
    # reward
    brevity_weight: float = 0.5
    brevity_chars: int = attrs.field(default=300, validator=_positive)
    lenient_answers: bool = False  # no '#### N' / \boxed{N}: fall back to the last number
    # optimisation
    lr: float = attrs.field(default=1e-6, validator=_positive)
    weight_decay: float = 0.0
    max_grad_norm: float = attrs.field(default=1.0, validator=_positive)
    clip_eps: float = attrs.field(default=0.2, validator=_positive)
    clip_eps_high: float | None = attrs.field(default=None, validator=_positive)
    advantage_scale: str = attrs.field(default="group", validator=_one_of(*ADVANTAGE_SCALES))
    loss_aggregation: str = attrs.field(default="token", validator=_one_of(*LOSS_AGGREGATIONS))
    mini_batch_groups: int | None = attrs.field(default=None, validator=_positive)
    ppo_epochs: int = attrs.field(default=1, validator=_positive)
    micro_batch_size: int = attrs.field(default=16, validator=_positive)
    # group admission and the resampling budget (fields of the core configs)
    admission: dict[str, Any] = attrs.field(
        factory=lambda: {"min_reward_std": 1e-6, "gate_on": ["accuracy"]},
        validator=_section(GroupAdmissionConfig),
    )
    budget: dict[str, Any] = attrs.field(
        factory=lambda: {"max_extra_groups": 8, "max_extra_groups_per_round": 8, "max_resample_rounds": 2},
        validator=_section(SamplingBudgetConfig),
    )
    # prompt skipping (with skip_prompts): fields of PromptHistoryConfig; group_size and seed
    # default to num_generations and seed
    history: dict[str, Any] = attrs.field(factory=dict, validator=_section(PromptHistoryConfig, group_size=1))
    # output
    output_dir: str = "runs/grpo_gsm8k"
    eval_problems: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    eval_dataset: str | None = None  # held-out problems from elsewhere (default: the dataset's eval_split)
    # also evaluate each time the generated samples pass a multiple of this (an x-axis of cost)
    eval_every_samples: int | None = attrs.field(default=None, validator=_positive)
    plot: bool = True
    progress: bool = True
    prometheus_port: int | None = None
    save_model: bool = False

    def admission_config(self) -> GroupAdmissionConfig:
        """The admission policy's config."""
        return GroupAdmissionConfig.from_mapping(self.admission)

    def budget_config(self) -> SamplingBudgetConfig:
        """The budget controller's config."""
        return SamplingBudgetConfig.from_mapping(self.budget)

    def history_config(self) -> PromptHistoryConfig:
        """The prompt history's config (used with ``skip_prompts``)."""
        return PromptHistoryConfig.from_mapping(
            {"group_size": self.num_generations, "seed": self.seed, **self.history}
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON- and YAML-safe dict (logged at the head of every run)."""
        return attrs.asdict(self)


_SECTIONS = {
    "admission": GroupAdmissionConfig,
    "budget": SamplingBudgetConfig,
    "history": PromptHistoryConfig,
}


# PyYAML reads "1e-6" (no dot) as text; settings files and flags mean a number.
_FLOAT_TEXT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _numbers(value: Any) -> Any:
    """Turn number-looking text into floats, recursively (``"1e-6"`` -> ``1e-06``)."""
    if isinstance(value, str) and _FLOAT_TEXT.match(value.strip()):
        return float(value)
    if isinstance(value, list):
        return [_numbers(item) for item in value]
    return value


def _is_text(name: str) -> bool:
    return str(attrs.fields_dict(TrainConfig)[name].type) in ("str", "str | None")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grpo_gsm8k",
        description="GRPO on GSM8K with group admission and bounded resampling.",
        epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", help="YAML file of settings (flags override it)")
    for field in attrs.fields(TrainConfig):
        if field.name in _SECTIONS:
            continue
        flag = "--" + field.name.replace("_", "-")
        if str(field.type) == "bool":
            parser.add_argument(
                flag, dest=field.name, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS
            )
        else:
            parser.add_argument(flag, dest=field.name, default=argparse.SUPPRESS, metavar="VALUE")
    for section, cls in _SECTIONS.items():
        for field in attrs.fields(cls):
            name = f"{section}.{field.name}"
            parser.add_argument(f"--{name}", dest=name, default=argparse.SUPPRESS, metavar="VALUE")
    return parser


def _from_flag(name: str, text: Any) -> Any:
    """Read a flag's text as YAML, except for text settings (a model id may look like a number)."""
    if not isinstance(text, str):
        return text  # a boolean flag
    if "." not in name and _is_text(name):
        nullable = str(attrs.fields_dict(TrainConfig)[name].type) == "str | None"
        return None if nullable and text.lower() in ("null", "none", "~") else text
    return _numbers(yaml.safe_load(text))


def _coerce(name: str, value: Any) -> Any:
    """YAML values: text settings stay text, number-looking text elsewhere becomes a number."""
    if _is_text(name):
        return value if value is None else str(value)
    return _numbers(value)


def parse_config(argv: Sequence[str] | None = None) -> TrainConfig:
    """
    Build the config from defaults, the ``--config`` YAML file and the flags.

    Raises:
        ValueError: an unknown key in the YAML file, or an invalid value (named).
    """
    args = vars(_build_parser().parse_args(argv))
    values: dict[str, Any] = {}
    defaults = TrainConfig()
    sections = {name: dict(getattr(defaults, name)) for name in _SECTIONS}
    path = args.pop("config", None)
    if path:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, Mapping):
            raise ValueError(f"'{path}' must hold a YAML mapping of settings")
        known = attrs.fields_dict(TrainConfig)
        unknown = sorted(set(loaded) - set(known))
        if unknown:
            raise ValueError(f"unknown setting(s) {unknown} in '{path}' (known: {sorted(known)})")
        for key, value in loaded.items():
            if key in _SECTIONS:
                if not isinstance(value, Mapping):
                    raise ValueError(f"'{key}' in '{path}' must be a mapping (got {value!r})")
                sections[key].update({k: _numbers(v) for k, v in value.items()})
            else:
                values[key] = _coerce(key, value)
    for key, text in args.items():
        value = _from_flag(key, text)
        if "." in key:
            section, name = key.split(".", 1)
            sections[section][name] = value
        else:
            values[key] = value
    values.update(sections)
    return TrainConfig(**values)
