"""
slime adapter: a ``--dynamic-sampling-filter-path`` filter backed by the admission policy.

Three functions plug into slime by import path, with no change to slime:

- :func:`admission_filter` for ``--dynamic-sampling-filter-path``: judges each completed
  group and returns slime's ``DynamicFilterOutput``;
- :func:`record_all_samples` for ``--rollout-all-samples-process-path``: records every
  completed group of a rollout (kept and dropped) into the admission statistics, including
  the groups kept only by slime's ``keep_when_insufficient`` fallback;
- :func:`log_rollout_metrics` for ``--custom-rollout-log-function-path``: adds those
  statistics to slime's rollout metrics.

Settings come from the ``group_admission`` mapping of the ``--custom-config-path`` YAML
(see :class:`SlimeAdmissionSettings`). This module never imports slime at import time, and
it holds no gate logic of its own.
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from functools import cache
from typing import Any

from .._decision import GroupAdmissionDecision
from .._metrics import AdmissionStats
from .._reasons import RejectionReason
from ._adapter_runtime import ConsecutiveFailedGroupsError, primary_detail
from ._slime_runtime import SlimeAdmissionSettings, live_remaining_batch_size, runtime_for

__all__ = [
    "ConsecutiveFailedGroupsError",
    "DynamicFilterOutput",
    "SlimeAdmissionSettings",
    "admission_filter",
    "admission_stats",
    "drop_reason",
    "judge_group",
    "last_rollout_metrics",
    "log_rollout_metrics",
    "record_all_samples",
    "should_drop",
]


@dataclasses.dataclass
class DynamicFilterOutput:
    """
    Stand-in for slime's ``DynamicFilterOutput``, used only when slime is not importable.

    It has the same fields as slime's (v0.3.1 and later). When slime is importable the
    filter returns slime's own class, which its loop and plugin contract test require.

    .. versionadded:: 0.1.0
    """

    keep: bool
    reason: str | None = None
    keep_when_insufficient: bool = False


@cache
def filter_output_type() -> tuple[type[Any], bool]:
    """
    The output class to return, and whether it has ``keep_when_insufficient``.

    slime's own ``DynamicFilterOutput`` when slime is importable (the field exists from
    v0.3.1 on), else :class:`DynamicFilterOutput`.
    """
    try:
        module = importlib.import_module("slime.rollout.filter_hub.base_types")
        output_type: type[Any] = module.DynamicFilterOutput
    except (ImportError, AttributeError):
        output_type = DynamicFilterOutput
    fields = getattr(output_type, "__dataclass_fields__", {})
    return output_type, "keep_when_insufficient" in fields


def should_drop(
    keep: bool,
    *,
    keep_when_insufficient: bool,
    remaining_batch_size: int,
    target_data_size: int,
) -> bool:
    """
    Apply slime's drop rule to one filtered group (``should_drop_dynamic_filter_output``).

    A kept group is never dropped. A rejected group marked ``keep_when_insufficient`` is
    kept when dropping it would leave fewer submitted-but-not-dropped groups than the
    target (``remaining_batch_size <= target_data_size``), because that would force
    another over-sampling wave. Every other rejected group is dropped, and slime then
    decrements ``remaining_batch_size``.

    This is the one definition that the adapter's documentation and the simulator's
    slime strategy share.

    .. versionadded:: 0.1.0
    """
    if keep:
        return False
    return not (keep_when_insufficient and remaining_batch_size <= target_data_size)


def drop_reason(decision: GroupAdmissionDecision) -> str | None:
    """
    The ``reason`` the filter gives slime: short, stable and low-cardinality.

    ``None`` when admitted; ``exact_dead``, ``near_tie`` or ``redundant`` for a gate
    rejection; ``external_<detail>`` (e.g. ``external_aborted``,
    ``external_missing_reward``) for an external one. slime counts each dropped group as
    the metric ``rollout/dynamic_filter/drop_<reason>``.

    .. versionadded:: 0.1.0
    """
    if decision.reason is None:
        return None
    if decision.reason is RejectionReason.EXTERNAL:
        return f"external_{primary_detail(decision)}"
    return decision.primary_rejection_reason


def judge_group(args: Any, samples: Any) -> GroupAdmissionDecision:
    """
    The policy's decision on one slime group, without any bookkeeping.

    For custom rollout functions that call the policy themselves. ``samples`` is a
    ``list[Sample]`` or, with a fan-out generate function, a ``list[list[Sample]]`` (each
    inner list is one rollout, counted once). Rewards are read with
    ``sample.get_reward_value(args)``.

    .. versionadded:: 0.1.0
    """
    return runtime_for(args).judge(args, samples)


def admission_filter(args: Any, samples: Any, **kwargs: Any) -> Any:
    """
    Judge one completed slime group: the ``--dynamic-sampling-filter-path`` function.

    slime calls it as ``call_dynamic_filter(fn, args, group)``, synchronously, once per
    completed group. A rejected group gets ``keep=False`` and a :func:`drop_reason`. Gate
    rejections also carry ``keep_when_insufficient=True`` when the settings ask for it
    and slime supports it; external rejections never do.

    Args:
        args: slime's parsed arguments; ``args.group_admission`` holds the settings.
        samples: The group: ``list[Sample]``, or ``list[list[Sample]]`` with fan-out.
        **kwargs: Accepted for slime's documented signature; unused.

    Returns:
        slime's ``DynamicFilterOutput`` (or :class:`DynamicFilterOutput` without slime).

    Raises:
        ConsecutiveFailedGroupsError: ``max_consecutive_failed_groups`` external
            rejections came in a row.
        TypeError, ValueError: the ``group_admission`` settings are invalid.

    .. versionadded:: 0.1.0
    """
    runtime = runtime_for(args)
    decision = runtime.judge(args, samples)
    runtime.streak.observe(decision, dropped=not decision.admitted)
    output_type, has_fallback_field = filter_output_type()
    if decision.admitted:
        return output_type(keep=True)
    reason = drop_reason(decision)
    if not runtime.settings.keep_when_insufficient or decision.reason is RejectionReason.EXTERNAL:
        return output_type(keep=False, reason=reason)
    if not has_fallback_field:
        _warn_fallback_unsupported(runtime.warned)
        return output_type(keep=False, reason=reason)
    runtime.note_fallback(_slime_keeps_rejection(args))
    return output_type(keep=False, reason=reason, keep_when_insufficient=True)


def _slime_keeps_rejection(args: Any) -> bool | None:
    """Whether slime's fallback will keep the rejection at hand (``None``: cannot tell)."""
    remaining = live_remaining_batch_size()
    target = getattr(args, "rollout_batch_size", None)
    if remaining is None or not isinstance(target, int):
        return None
    return not should_drop(
        False, keep_when_insufficient=True, remaining_batch_size=remaining, target_data_size=target
    )


def _warn_fallback_unsupported(warned: set[str]) -> None:
    if "keep_when_insufficient" in warned:
        return
    warned.add("keep_when_insufficient")
    warnings.warn(
        "this slime has no DynamicFilterOutput.keep_when_insufficient (added in v0.3.1): "
        "rejected groups are dropped strictly, so every rejection can start another "
        "over-sampling wave; set 'keep_when_insufficient: false' in the group_admission "
        "settings to silence this warning",
        RuntimeWarning,
        stacklevel=3,
    )


def record_all_samples(args: Any, all_groups: Any, data_source: Any) -> None:
    """
    Record every completed group of a rollout: the ``--rollout-all-samples-process-path`` hook.

    slime calls it once per rollout as ``process_func(args, all_samples, data_source)``
    with every completed group, kept and dropped, and each is judged again (the policy is
    deterministic, so the verdicts are the filter's). A rejected group that slime kept
    through ``keep_when_insufficient`` counts as ``fallback_admitted``: the filter knows
    this exactly when it can read slime's live ``remaining_batch_size``; otherwise the
    count is a lower bound (``rollout_batch_size`` minus the admitted groups) and the
    metric ``fallback_estimated`` is 1.

    The rollout's metrics are logged as the structlog event ``group_admission_rollout``,
    added to the totals (:func:`admission_stats`) and kept for :func:`log_rollout_metrics`.
    Like slime's reference hook it also sets ``args.processed_group_count``.

    Args:
        args: slime's parsed arguments.
        all_groups: Every completed group of the rollout.
        data_source: slime's ``data_source.get_samples`` (unused).

    .. versionadded:: 0.1.0
    """
    runtime = runtime_for(args)
    rollout = AdmissionStats()
    # The policy is deterministic, so judging again gives the filter's verdicts.
    rollout.add_many([runtime.judge(args, group) for group in all_groups])
    known, unknown = runtime.drain_fallbacks()
    gate_rejected = rollout.exact_dead + rollout.near_tie + rollout.redundant
    known = min(known, gate_rejected)
    estimated = 0
    target = getattr(args, "rollout_batch_size", None)
    if unknown and isinstance(target, int):
        estimated = min(unknown, gate_rejected - known, max(0, target - rollout.admitted - known))
    rollout.record_fallback(known + estimated)
    runtime.finish_rollout(rollout, fallback_estimated=unknown > 0)
    args.processed_group_count = len(all_groups)


def log_rollout_metrics(
    rollout_id: int, args: Any, samples: Any, rollout_extra_metrics: Any, rollout_time: float
) -> bool:
    """
    Add the last rollout's admission metrics to slime's: ``--custom-rollout-log-function-path``.

    slime calls it before its own rollout logging; it merges the metrics recorded by
    :func:`record_all_samples` (keys ``rollout/group_admission/<name>``) into
    ``rollout_extra_metrics`` and returns ``False`` so that slime's default logging goes
    on and reports them. Each rollout's metrics are reported once.

    .. versionadded:: 0.1.0
    """
    runtime = runtime_for(args)
    metrics = runtime.take_last_rollout()
    if not metrics:
        runtime.warn_once(
            "no_rollout_recorded",
            "group_admission_no_rollout_recorded",
            rollout_id=rollout_id,
            hint="configure --rollout-all-samples-process-path "
            "group_admission.adapters.slime.record_all_samples",
        )
    elif isinstance(rollout_extra_metrics, dict):
        rollout_extra_metrics.update(metrics)
    return False


def admission_stats(args: Any) -> AdmissionStats:
    """
    A copy of the admission counts of every rollout so far, for the settings in ``args``.

    .. versionadded:: 0.1.0
    """
    return AdmissionStats().merge(runtime_for(args).stats)


def last_rollout_metrics(args: Any) -> dict[str, int | float]:
    """
    The metrics of the last recorded rollout (empty before the first), for the settings in ``args``.

    .. versionadded:: 0.1.0
    """
    return dict(runtime_for(args).last_rollout)
