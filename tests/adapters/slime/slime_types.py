"""
Test doubles of slime's types and rollout loop.

Mirrors THUDM/slime at commit 624b824a898ab0ec1fcb4d373004c7f3852bf515 (2026-08-21,
``v0.3.1-38-g624b824a8``), field for field:

- ``Sample`` and ``Sample.Status``: ``slime/utils/types.py`` L94-248 (fields in declaration
  order; the token/metadata helper methods are left out, ``get_reward_value`` and
  ``effective_response_length`` are kept as upstream writes them);
- ``DynamicFilterOutput``, ``should_drop_dynamic_filter_output``, ``call_dynamic_filter``,
  ``MetricGatherer``: ``slime/rollout/filter_hub/base_types.py``;
- ``DynamicFilterOutputV030`` and ``call_dynamic_filter_v030``: the same file at tag v0.3.0
  (commit bf14dc21f9500746447f2572d0692e981c4d2a7e), before ``keep_when_insufficient``;
- ``load_function``, ``SingletonMeta``: ``slime/utils/misc.py``;
- ``GenerateState``: the ``remaining_batch_size``/``pendings``/``aborted`` bookkeeping of
  ``slime/rollout/sglang_rollout.py`` L84-145 (no tokenizer, no SGLang);
- ``generate_rollout``: the filter and drop logic of ``generate_rollout_async`` L374-470,
  run synchronously over groups that are already generated and rewarded;
- ``log_rollout_data``: ``slime/observability/rollout_metrics.py`` L256-265;
- ``make_args``, ``make_sample``, ``check_dynamic_filter_path``,
  ``check_rollout_all_samples_process_path``: slime's CPU plugin contract test
  ``tests/plugin_contracts/test_plugin_path_loading_contracts.py``.

The code is written for these tests; only the interfaces and semantics follow slime.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from importlib import import_module
from typing import Any

import pytest

UPSTREAM_COMMIT = "624b824a898ab0ec1fcb4d373004c7f3852bf515"
V030_COMMIT = "bf14dc21f9500746447f2572d0692e981c4d2a7e"


@dataclass
class Sample:
    """slime's ``Sample`` (``slime/utils/types.py``)."""

    group_index: int | None = None
    index: int | None = None
    rollout_id: int | None = None
    prompt: str | list[dict[str, str]] = ""
    tokens: list[int] = field(default_factory=list)
    multimodal_inputs: dict[str, Any] | None = None
    multimodal_train_inputs: dict[str, Any] | None = None
    multimodal_train_input_id: str | None = None
    apply_chat_template_kwargs: dict = field(default_factory=dict)
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    rollout_top_p_token_ids: Any = None
    rollout_top_p_token_offsets: Any = None
    rollout_routed_experts: Any = None
    remove_sample: bool = False
    teacher_log_probs: list[float] | None = None

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    status: Status = Status.PENDING

    metadata: dict = field(default_factory=dict)
    generate_function_path: str | None = None
    custom_rm_path: str | None = None
    train_metadata: dict | None = None
    session_id: str | None = None
    non_generation_time: float = 0.0

    @dataclass
    class SpecInfo:
        spec_accept_token_num: int = 0
        spec_draft_token_num: int = 0
        spec_verify_ct: int = 0
        completion_token_num: int = 0

    spec_info: SpecInfo = field(default_factory=SpecInfo)

    @dataclass
    class PrefixCacheInfo:
        cached_tokens: int = 0
        total_prompt_tokens: int = 0

    prefix_cache_info: PrefixCacheInfo = field(default_factory=PrefixCacheInfo)

    def get_reward_value(self, args: Any) -> float:
        return self.reward if not args.reward_key else self.reward[args.reward_key]  # type: ignore[index,return-value]

    @property
    def effective_response_length(self) -> int:
        return sum(self.loss_mask) if self.loss_mask is not None else self.response_length


@dataclass
class DynamicFilterOutput:
    """``slime/rollout/filter_hub/base_types.py`` at HEAD."""

    keep: bool
    reason: str | None = None
    keep_when_insufficient: bool = False


def should_drop_dynamic_filter_output(
    output: DynamicFilterOutput, *, remaining_batch_size: int, target_data_size: int
) -> bool:
    if output.keep:
        return False
    return not (output.keep_when_insufficient and remaining_batch_size <= target_data_size)


def call_dynamic_filter(fn: Callable[..., Any] | None, *args: Any, **kwargs: Any) -> DynamicFilterOutput:
    if fn is None:
        return DynamicFilterOutput(keep=True)
    output = fn(*args, **kwargs)
    if not isinstance(output, DynamicFilterOutput):
        output = DynamicFilterOutput(keep=output)
    return output


@dataclass
class DynamicFilterOutputV030:
    """``DynamicFilterOutput`` at v0.3.0: no ``keep_when_insufficient``."""

    keep: bool
    reason: str | None = None


def call_dynamic_filter_v030(fn: Callable[..., Any] | None, *args: Any, **kwargs: Any) -> Any:
    if fn is None:
        return DynamicFilterOutputV030(keep=True)
    output = fn(*args, **kwargs)
    if not isinstance(output, DynamicFilterOutputV030):
        output = DynamicFilterOutputV030(keep=output)
    return output


class MetricGatherer:
    def __init__(self) -> None:
        self._dynamic_filter_drop_reason_count: defaultdict[str, int] = defaultdict(lambda: 0)

    def on_dynamic_filter_drop(self, reason: str | None) -> None:
        if not reason:
            return
        self._dynamic_filter_drop_reason_count[reason] += 1

    def collect(self) -> dict[str, int]:
        return {
            f"rollout/dynamic_filter/drop_{reason}": count
            for reason, count in self._dynamic_filter_drop_reason_count.items()
        }


@cache
def load_function(path: str) -> Any:
    module_path, _, attr = path.rpartition(".")
    return getattr(import_module(module_path), attr)


class SingletonMeta(type):
    _instances: dict[type, Any] = {}  # noqa: RUF012  (upstream shares one dict across classes)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls not in cls._instances:
            cls._instances[cls] = super().__call__(*args, **kwargs)
        return cls._instances[cls]

    def clear_instances(cls) -> None:
        cls._instances = {}


class GenerateState(metaclass=SingletonMeta):
    """The rollout bookkeeping of slime's ``GenerateState``; 'generating' a group is instant."""

    def __init__(self, args: Any) -> None:
        self.args = args
        self.reset()

    def reset(self) -> None:
        self.remaining_batch_size = 0
        self.pendings: list[list[Any]] = []
        self.aborted = False

    def submit_generate_tasks(self, samples: list[list[Any]]) -> None:
        self.pendings.extend(samples)
        self.remaining_batch_size += len(samples)


def _first_index(group: list[Any]) -> int:
    return group[0][0].index if isinstance(group[0], list) else group[0].index


def generate_rollout(
    args: Any, rollout_id: int, data_source: Callable[[int], list[list[Any]]], *, done_batch_size: int = 1
) -> tuple[list[list[Any]], dict[str, int]]:
    """
    ``generate_rollout_async`` without SGLang: groups from ``data_source`` are already rewarded.

    Groups complete in submission order, ``done_batch_size`` per ``asyncio.wait``. Returns
    the kept groups and the rollout metrics. ``args.slime_version == "v0.3.0"`` runs the
    v0.3.0 loop, which drops every ``keep=False`` group.
    """
    legacy = getattr(args, "slime_version", "head") == "v0.3.0"
    state = GenerateState(args)
    dynamic_filter = (
        load_function(args.dynamic_sampling_filter_path)
        if args.dynamic_sampling_filter_path is not None
        else None
    )
    metric_gatherer = MetricGatherer()
    target_data_size = args.rollout_batch_size
    data: list[list[Any]] = []
    all_data: list[list[Any]] = []
    while len(data) < target_data_size:
        while state.remaining_batch_size < target_data_size:
            state.submit_generate_tasks(data_source(args.over_sampling_batch_size))
        done, state.pendings = state.pendings[:done_batch_size], state.pendings[done_batch_size:]
        for group in done:
            assert len(group) == args.n_samples_per_prompt
            all_data.append(group)
            if legacy:
                output = call_dynamic_filter_v030(dynamic_filter, args, group)
                drop = not output.keep
            else:
                output = call_dynamic_filter(dynamic_filter, args, group)
                drop = should_drop_dynamic_filter_output(
                    output, remaining_batch_size=state.remaining_batch_size, target_data_size=target_data_size
                )
            if drop:
                metric_gatherer.on_dynamic_filter_drop(reason=output.reason)
                state.remaining_batch_size -= 1
                continue
            if len(data) < target_data_size:
                data.append(group)
    assert len(data) == args.rollout_batch_size
    data = sorted(data, key=_first_index)
    all_samples = sorted(all_data, key=_first_index)
    state.reset()
    if getattr(args, "rollout_sample_filter_path", None) is not None:
        load_function(args.rollout_sample_filter_path)(args, data)
    if getattr(args, "rollout_all_samples_process_path", None) is not None:
        load_function(args.rollout_all_samples_process_path)(args, all_samples, data_source)
    return data, metric_gatherer.collect()


def log_rollout_data(
    rollout_id: int, args: Any, samples: Any, rollout_extra_metrics: Any, rollout_time: float
) -> dict[str, Any] | None:
    """What slime logs for a rollout (``None`` when the custom log function takes over)."""
    if getattr(args, "custom_rollout_log_function_path", None) is not None:
        custom_log_func = load_function(args.custom_rollout_log_function_path)
        if custom_log_func(rollout_id, args, samples, rollout_extra_metrics, rollout_time):
            return None
    return {**(rollout_extra_metrics or {})}


def make_args(**overrides: Any) -> Any:
    """The contract test's ``make_args``."""

    class Args:
        rollout_global_dataset = False
        buffer_filter_path = None
        n_samples_per_prompt = 2
        custom_rm_path = None
        group_rm = False
        rm_type = None
        reward_key = None

    args = Args()
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


def make_sample(index: int, reward: Any = 1.0, **fields: Any) -> Sample:
    """The contract test's ``make_sample``, with overridable fields."""
    values: dict[str, Any] = {
        "index": index,
        "prompt": f"prompt-{index}",
        "response": f"response-{index}",
        "label": f"label-{index}",
        "tokens": [100 + index, 200 + index],
        "response_length": 2,
        "reward": reward,
        "status": Sample.Status.COMPLETED,
        "metadata": {},
    }
    values.update(fields)
    return Sample(**values)


def check_dynamic_filter_path(path: str) -> None:
    """The contract test's check of a ``--dynamic-sampling-filter-path``."""
    fn = load_function(path)
    assert tuple(inspect.signature(fn).parameters)[:2] == ("args", "samples")
    output = call_dynamic_filter(fn, make_args(), [make_sample(0, reward=1.0), make_sample(1, reward=2.0)])
    assert isinstance(output, DynamicFilterOutput)


def check_rollout_all_samples_process_path(path: str) -> None:
    """The contract test's check of a ``--rollout-all-samples-process-path``."""
    fn = load_function(path)
    assert tuple(inspect.signature(fn).parameters)[:3] == ("args", "all_groups", "data_source")
    args = type("Args", (), {})()
    fn(args, [[Sample(index=0)]], object())
    assert hasattr(args, "processed_group_count")


def install(monkeypatch: pytest.MonkeyPatch, *, version: str = "head") -> None:
    """Make ``import slime...`` find these doubles (``version``: ``"head"`` or ``"v0.3.0"``)."""
    output = DynamicFilterOutput if version == "head" else DynamicFilterOutputV030
    base_types = {"DynamicFilterOutput": output, "MetricGatherer": MetricGatherer}
    base_types["call_dynamic_filter"] = call_dynamic_filter if version == "head" else call_dynamic_filter_v030
    if version == "head":
        base_types["should_drop_dynamic_filter_output"] = should_drop_dynamic_filter_output
    modules = {
        "slime": {},
        "slime.rollout": {},
        "slime.rollout.filter_hub": {},
        "slime.rollout.filter_hub.base_types": base_types,
        "slime.rollout.sglang_rollout": {"GenerateState": GenerateState},
        "slime.utils": {},
        "slime.utils.misc": {"SingletonMeta": SingletonMeta, "load_function": load_function},
        "slime.utils.types": {"Sample": Sample},
    }
    for name, attributes in modules.items():
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        monkeypatch.setitem(sys.modules, name, module)
