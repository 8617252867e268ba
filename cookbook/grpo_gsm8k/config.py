"""
The training configuration: defaults, then a YAML file (``--config``), then flags.

Every field of :class:`TrainConfig` is a flag (``--batch-size 8``; booleans also take
``--no-...``), and ``--help`` lists each with what it does and its default. ``admission``
is one ``group_admission.SessionConfig`` block: a ``preset`` (default ``recommended``) and
the ``policy``, ``budget``, ``limits``, ``history`` and ``loss_scale`` that override it. A
YAML ``admission`` block is merged over the default key by key (a section field by field),
and single keys are set with ``--admission.policy.min_reward_std 1e-6`` or
``--admission.budget.max_resample_rounds 3`` (values are read as YAML, ``1e-6`` a number:
``null``, ``[accuracy]``). ``--admission.preset null`` starts from the blank configuration
(every gate off), ``--admission.history null`` turns prompt skipping off.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import attrs

from cookbook.grpo_gsm8k.grpo import ADVANTAGE_SCALES, LOSS_AGGREGATIONS
from group_admission import (
    DropLimits,
    GroupAdmissionConfig,
    PromptHistoryConfig,
    SamplingBudgetConfig,
    SessionConfig,
    parse_yaml,
)

__all__ = ["DEFAULT_SYSTEM_PROMPT", "PLAIN_GRPO", "ConfigError", "TrainConfig", "parse_config"]

DEFAULT_SYSTEM_PROMPT = (
    "Solve the math word problem. Reason briefly, step by step, then give the final "
    "answer on its own line as '#### N' (a number only)."
)
#: The admission block's default: the library's recommended configuration, gated on the
#: outcome (the brevity term is shaping, never signal).
DEFAULT_ADMISSION: Mapping[str, Any] = {"preset": "recommended", "policy": {"gate_on": ["accuracy"]}}
#: Plain GRPO, the baseline: every group trained on (the blank policy), one round, no skipping.
PLAIN_GRPO: Mapping[str, Any] = {"preset": None, "history": None, "loss_scale": "kept"}
#: The sections of the admission block, and the classes whose fields they hold.
SECTIONS: Mapping[str, type] = {
    "policy": GroupAdmissionConfig,
    "budget": SamplingBudgetConfig,
    "limits": DropLimits,
    "history": PromptHistoryConfig,
}
BASELINES = ("plain",)


class ConfigError(ValueError):
    """A setting that cannot be used; the message names it (``train.py`` prints it in one line)."""


def _positive(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    declared = str(attribute.type)  # annotations are strings (PEP 563)
    if value is None and "None" in declared:
        return
    wanted = int if declared in ("int", "int | None") else (int, float)
    if isinstance(value, bool) or not isinstance(value, wanted) or value <= 0:
        kind = "an integer" if wanted is int else "a number"
        raise ValueError(f"'{attribute.name}' must be {kind} > 0 (got {value!r})")


def _one_of(*choices: str | None) -> Any:
    def check(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in choices:
            raise ValueError(f"'{attribute.name}' must be one of {list(choices)} (got {value!r})")

    return check


def session_config(admission: Mapping[str, Any]) -> SessionConfig:
    """
    The ``SessionConfig`` an admission block describes (``preset: null``: no preset).

    Raises:
        TypeError, ValueError: a key, section or value of the block is invalid (named).
    """
    if not isinstance(admission, Mapping):
        raise TypeError(f"'admission' must be a mapping, a SessionConfig block (got {admission!r})")
    block = dict(admission)
    if "preset" in block and block["preset"] is None:
        del block["preset"]
    return SessionConfig.from_mapping(block)


def _admission(_inst: object, _attribute: attrs.Attribute[Any], value: Any) -> None:
    session_config(value)  # names the bad key or value


def _setting(default: Any, help: str, validator: Any = None, **kwargs: Any) -> Any:
    """A field with its ``--help`` text."""
    return attrs.field(default=default, validator=validator, metadata={"help": help}, **kwargs)


@attrs.frozen(kw_only=True)
class TrainConfig:
    """Every setting of a run. Defaults are the real hub ids and a GPU-sized recipe."""

    # what to train on
    model: str = _setting("Qwen/Qwen2.5-0.5B-Instruct", "hub id or local folder of the policy")
    dataset: str = _setting("openai/gsm8k", "hub id or local folder of GSM8K-format problems")
    subset: str | None = _setting("main", "the dataset's config name (null: none)")
    split: str = _setting("train", "split to train on")
    eval_split: str = _setting("test", "split of the held-out problems")
    question_field: str = _setting("question", "the problems' question column")
    answer_field: str = _setting("answer", "the problems' answer column (ending in '#### N')")
    system_prompt: str | None = _setting(DEFAULT_SYSTEM_PROMPT, "system message of every prompt (null: none)")
    max_train_problems: int | None = _setting(None, "use only the first N training problems", _positive)
    # where
    device: str = _setting("auto", "cpu, cuda, cuda:N or auto")
    dtype: str = _setting(
        "float32",
        "compute precision of forward passes (autocast); weights and AdamW stay float32",
        _one_of("float32", "bfloat16", "float16"),
    )
    seed: int = _setting(0, "seed of the prompt order, the sampling and the initial weights' updates")
    # sampling
    steps: int = _setting(200, "GRPO steps (at most; see max_samples)", _positive)
    max_samples: int | None = _setting(
        None, "stop once this many samples are generated, or after steps, whichever comes first", _positive
    )
    batch_size: int = _setting(8, "groups trained on per step: the admission target", _positive)
    num_generations: int = _setting(8, "completions per prompt (G)", _positive)
    max_new_tokens: int = _setting(256, "longest completion, in tokens", _positive)
    temperature: float = _setting(1.0, "sampling temperature", _positive)
    top_p: float = _setting(1.0, "nucleus sampling", _positive)
    generation_batch_size: int = _setting(64, "prompts per generate call", _positive)
    resample: str = _setting(
        "fresh",
        "prompts of a resampling round: new ones (fresh) or the rejected again (retry)",
        _one_of("fresh", "retry"),
    )
    carry_rate: bool = _setting(True, "one session for the whole run (plans start from the last step's rate)")
    # reward
    brevity_weight: float = _setting(
        0.5, "weight of the brevity term in the reward (accuracy + weight x brevity)"
    )
    brevity_chars: int = _setting(
        300, "characters a completion may use before brevity decays (to 0 at twice)", _positive
    )
    lenient_answers: bool = _setting(False, "no '#### N' or \\boxed{N}: fall back to the last number")
    # optimisation
    lr: float = _setting(1e-6, "AdamW learning rate", _positive)
    weight_decay: float = _setting(0.0, "AdamW weight decay")
    max_grad_norm: float = _setting(1.0, "gradient clipping norm", _positive)
    clip_eps: float = _setting(0.2, "PPO clip below (and above, without clip_eps_high)", _positive)
    clip_eps_high: float | None = _setting(None, "PPO clip above (DAPO's clip-higher)", _positive)
    advantage_scale: str = _setting(
        "group", "divide advantages by the group's std, the batch's, or none", _one_of(*ADVANTAGE_SCALES)
    )
    loss_aggregation: str = _setting(
        "token", "average the loss over tokens (DAPO) or per completion first", _one_of(*LOSS_AGGREGATIONS)
    )
    mini_batch_groups: int | None = _setting(
        None, "groups per optimizer step (null: all of the step's)", _positive
    )
    ppo_epochs: int = _setting(1, "passes over the step's groups", _positive)
    micro_batch_size: int = _setting(16, "sequences per forward pass", _positive)
    # group admission: one SessionConfig block
    admission: dict[str, Any] = attrs.field(
        factory=lambda: dict(DEFAULT_ADMISSION),
        validator=_admission,
        metadata={"help": "a SessionConfig block: preset, policy, budget, limits, history, loss_scale"},
    )
    baseline: str | None = _setting(
        None,
        "also train plain GRPO (every group) on the same seed and samples, in a second process, side by side",
        _one_of(None, *BASELINES),
    )
    # output
    output_dir: str = _setting("runs/grpo_gsm8k", "folder of the run's files")
    eval_problems: int = _setting(
        0, "held-out problems for greedy accuracy (0: none)", attrs.validators.ge(0)
    )
    eval_dataset: str | None = _setting(
        None, "held-out problems from elsewhere (default: the dataset's eval_split)"
    )
    eval_every_samples: int | None = _setting(
        None, "also evaluate each time the generated samples pass a multiple of this", _positive
    )
    plot: bool = _setting(True, "write curves.png")
    progress: bool = _setting(True, "a progress bar on a terminal (plain lines otherwise)")
    prometheus_port: int | None = _setting(None, "serve the group_admission_* counters on this port")
    save_model: bool = _setting(False, "save the trained policy under output_dir/model")

    def session_config(self) -> SessionConfig:
        """The admission block as the library's ``SessionConfig``."""
        return session_config(self.admission)

    def to_dict(self) -> dict[str, Any]:
        """A JSON- and YAML-safe dict (logged at the head of every run)."""
        return attrs.asdict(self)


def merge_admission(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``update``: a section given as a mapping updates the base's section field by field."""
    merged = dict(base)
    for key, value in update.items():
        if key in SECTIONS and isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def _is_text(name: str) -> bool:
    return str(attrs.fields_dict(TrainConfig)[name].type) in ("str", "str | None")


class _Parser(argparse.ArgumentParser):
    """Argument errors in one line, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _default_text(field: attrs.Attribute[Any]) -> str:
    default = field.default.factory() if isinstance(field.default, attrs.Factory) else field.default  # type: ignore[arg-type,union-attr]
    text = "null" if default is None else str(default)
    return (text if len(text) < 60 else text[:57] + "...").replace("%", "%%")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="grpo_gsm8k",
        description="GRPO on GSM8K with group admission and bounded resampling.",
        epilog=(__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", metavar="FILE", help="YAML file of settings (flags override it)")
    for field in attrs.fields(TrainConfig):
        if field.name == "admission":
            continue
        flag, help_text = (
            "--" + field.name.replace("_", "-"),
            f"{field.metadata['help']} (default: {_default_text(field)})",
        )
        if str(field.type) == "bool":
            parser.add_argument(
                flag,
                dest=field.name,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=help_text,
            )
        else:
            parser.add_argument(
                flag, dest=field.name, default=argparse.SUPPRESS, metavar="VALUE", help=help_text
            )
    _add_admission_flags(parser)
    return parser


def _add_admission_flags(parser: argparse.ArgumentParser) -> None:
    """The ``admission`` block's flags: the preset, the loss scale, each section and its fields."""
    group = parser.add_argument_group(
        "admission (a group_admission SessionConfig block)",
        f"default: {dict(DEFAULT_ADMISSION)}; --admission.preset null starts from every gate off",
    )
    group.add_argument(
        "--admission.preset",
        dest="admission.preset",
        default=argparse.SUPPRESS,
        metavar="NAME",
        help=f"the named configuration to start from: {', '.join(SessionConfig.PRESETS)} or null",
    )
    group.add_argument(
        "--admission.loss_scale",
        dest="admission.loss_scale",
        default=argparse.SUPPRESS,
        metavar="MODE",
        help="kept, target, linear or sqrt (default: the preset's)",
    )
    for section, cls in SECTIONS.items():
        group.add_argument(
            f"--admission.{section}",
            dest=f"admission.{section}",
            default=argparse.SUPPRESS,
            metavar="YAML",
            help=f"the whole {section} section (null: none)",
        )
        for field in attrs.fields(cls):
            if section == "history" and field.name == "group_size":
                continue  # the history's group size is num_generations
            name = f"admission.{section}.{field.name}"
            group.add_argument(
                f"--{name}",
                dest=name,
                default=argparse.SUPPRESS,
                metavar="VALUE",
                help=f"{cls.__name__}.{field.name}",
            )


def _from_flag(name: str, text: Any) -> Any:
    """Read a flag's text as YAML, except for text settings (a model id may look like a number)."""
    if not isinstance(text, str):
        return text  # a boolean flag
    if "." not in name and _is_text(name):
        nullable = str(attrs.fields_dict(TrainConfig)[name].type) == "str | None"
        return None if nullable and text.lower() in ("null", "none", "~") else text
    return parse_yaml(text, source=f"--{name}")


def _coerce(name: str, value: Any) -> Any:
    """YAML values: text settings stay text (a model id may be read as a number)."""
    if _is_text(name):
        return value if value is None else str(value)
    return value


def _read_file(path: str) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read '{path}': {exc.strerror or exc}") from None
    loaded = parse_yaml(text, source=path) or {}
    if not isinstance(loaded, Mapping):
        raise ConfigError(f"'{path}' must hold a YAML mapping of settings (got {loaded!r})")
    known = attrs.fields_dict(TrainConfig)
    unknown = sorted(set(loaded) - set(known))
    if unknown:
        raise ConfigError(f"unknown setting(s) {unknown} in '{path}' (known: {sorted(known)})")
    if "admission" in loaded and not isinstance(loaded["admission"], Mapping):
        raise ConfigError(f"'admission' in '{path}' must be a mapping (got {loaded['admission']!r})")
    return dict(loaded)


def parse_config(argv: Sequence[str] | None = None) -> TrainConfig:
    """
    Build the config from defaults, the ``--config`` YAML file and the flags.

    Raises:
        ConfigError: a setting cannot be used: an unreadable file, an unknown key, an
            invalid value (each named). Argument syntax errors exit with status 2.
    """
    args = vars(_build_parser().parse_args(argv))
    values: dict[str, Any] = {}
    admission = dict(DEFAULT_ADMISSION)
    path = args.pop("config", None)
    try:
        if path:
            for key, value in _read_file(path).items():
                if key == "admission":
                    admission = merge_admission(admission, value)
                else:
                    values[key] = _coerce(key, value)
        for key, text in args.items():
            value = _from_flag(key, text)
            if key.startswith("admission."):
                *_, section_or_key = key.split(".", 1)
                section, _, name = section_or_key.partition(".")
                admission = merge_admission(admission, {section: {name: value}} if name else {section: value})
            else:
                values[key] = value
        return TrainConfig(**values, admission=admission)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from exc
