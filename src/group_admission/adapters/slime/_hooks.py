"""
The functions slime loads by import path, over one ``AdmissionSession`` per settings configuration.

They run in slime's ``RolloutManager`` actor, so the sessions live as long as the actor.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import threading
import warnings
from functools import cache
from typing import Any

import structlog

from ..._decision import GroupAdmissionDecision
from ..._exceptions import ConsecutiveFailedGroupsError
from ..._host_rules.slime import fallback_kept_lower_bound, should_drop
from ..._metrics import AdmissionStats
from ..._reasons import RejectionReason
from ..._session import AdmissionSession
from .._adapter_runtime import Registry, settings_key
from ._read import live_remaining_batch_size, read_group
from ._settings import METRIC_PREFIX, SETTINGS_ATTR, SlimeAdmissionSettings

__all__ = [
    "DynamicFilterOutput",
    "admission_filter",
    "admission_stats",
    "drop_reason",
    "judge_group",
    "last_rollout_metrics",
    "log_rollout_metrics",
    "record_all_samples",
    "reset",
]

_log = structlog.get_logger("group_admission.adapters.slime")


@dataclasses.dataclass
class DynamicFilterOutput:
    """
    Stand-in for slime's ``DynamicFilterOutput`` (same fields), returned only when slime is not importable.

    .. versionadded:: 0.1.0
    """

    keep: bool
    reason: str | None = None
    keep_when_insufficient: bool = False


@cache
def _output_type() -> tuple[type[Any], bool]:
    """The output class (slime's, else the stand-in), and whether it has ``keep_when_insufficient``."""
    try:
        module = importlib.import_module("slime.rollout.filter_hub.base_types")
        output_type: type[Any] = module.DynamicFilterOutput
    except (ImportError, AttributeError):
        output_type = DynamicFilterOutput
    return output_type, "keep_when_insufficient" in getattr(output_type, "__dataclass_fields__", {})


class _Runtime:
    """One configuration's session, and what slime has not been told yet about the rollout in progress."""

    def __init__(self, settings: SlimeAdmissionSettings) -> None:
        self.settings = settings
        self.session = AdmissionSession(settings.policy, limits=settings.limits, host="slime")
        self.last_rollout: dict[str, int | float] = {}
        self.warned: set[str] = set()
        self.lock = threading.Lock()
        self.unknown_fallbacks = 0  # rejections marked for slime's fallback whose fate was unknown
        self.unlogged = False
        self._closed = AdmissionStats()  # the session's counts when the last rollout closed

    def rollout(self) -> AdmissionStats:
        """The counts since the last rollout closed."""
        return self.session.stats.difference(self._closed)

    def close_rollout(self, *, fallback_estimated: bool) -> None:
        """Publish the rollout's metrics and start the next rollout."""
        total = self.session.stats
        metrics: dict[str, int | float] = {
            f"{METRIC_PREFIX}{name}": value
            for name, value in total.difference(self._closed).metrics().items()
        }
        metrics[f"{METRIC_PREFIX}cumulative_effective_group_rate"] = total.effective_group_rate
        metrics[f"{METRIC_PREFIX}fallback_estimated"] = int(fallback_estimated)
        self._closed, self.last_rollout, self.unlogged = total, metrics, True
        _log.info("group_admission_rollout", **{k.removeprefix(METRIC_PREFIX): v for k, v in metrics.items()})


_RUNTIMES: Registry[_Runtime] = Registry()


def _runtime(args: Any) -> _Runtime:
    raw = getattr(args, SETTINGS_ATTR, None)
    return _RUNTIMES.get(settings_key(raw), lambda: _Runtime(SlimeAdmissionSettings.from_mapping(raw)))


def reset() -> None:
    """
    Forget every configuration's session and counts, and the detected slime (for tests and notebooks).

    .. versionadded:: 0.2.0
    """
    _RUNTIMES.clear()
    _output_type.cache_clear()


def drop_reason(decision: GroupAdmissionDecision) -> str | None:
    """
    The ``reason`` the filter gives slime, which counts it as ``rollout/dynamic_filter/drop_<reason>``.

    ``None`` when admitted; ``exact_dead``, ``near_tie`` or ``redundant``; or
    ``external_<detail>`` (e.g. ``external_aborted``).

    .. versionadded:: 0.1.0
    """
    if decision.reason is RejectionReason.EXTERNAL:
        return f"external_{decision.external_reasons[0] if decision.external_reasons else 'external'}"
    return decision.primary_rejection_reason


def judge_group(args: Any, samples: Any) -> GroupAdmissionDecision:
    """
    The policy's decision on one slime group, counted nowhere (for custom rollout functions).

    ``samples`` is a ``list[Sample]``, or ``list[list[Sample]]`` with fan-out (each inner
    list is one rollout, counted once); rewards are read with ``sample.get_reward_value(args)``.

    .. versionadded:: 0.1.0
    """
    runtime = _runtime(args)
    return read_group(args, samples, runtime.settings.reject_statuses).evaluate(runtime.session.policy)


def admission_filter(args: Any, samples: Any, **kwargs: Any) -> Any:
    """
    Judge and count one completed group: the ``--dynamic-sampling-filter-path`` function.

    slime calls it synchronously, once per completed group, with its parsed ``args``
    (``args.group_admission`` holds the settings). A rejected group gets ``keep=False``, a
    :func:`drop_reason` and, for a gate rejection when the settings ask for it,
    ``keep_when_insufficient=True``. Returns slime's ``DynamicFilterOutput`` (the stand-in
    without slime).

    Raises:
        ConsecutiveFailedGroupsError: too many external rejections in a row.
        TypeError, ValueError: the ``group_admission`` settings are invalid.

    .. versionadded:: 0.1.0
    """
    runtime = _runtime(args)
    decision = read_group(args, samples, runtime.settings.reject_statuses).judge(runtime.session).decision
    output_type, has_fallback_field = _output_type()
    if decision.admitted:
        return output_type(keep=True)
    reason = drop_reason(decision)
    if not runtime.settings.keep_when_insufficient or decision.reason is RejectionReason.EXTERNAL:
        return output_type(keep=False, reason=reason)
    if not has_fallback_field:
        _warn_fallback_unsupported(runtime.warned)
        return output_type(keep=False, reason=reason)
    remaining, target = live_remaining_batch_size(), getattr(args, "rollout_batch_size", None)
    if remaining is None or not isinstance(target, int):
        with runtime.lock:
            runtime.unknown_fallbacks += 1
    elif not should_drop(
        False, keep_when_insufficient=True, remaining_batch_size=remaining, target_data_size=target
    ):
        runtime.session.record_fallback()  # slime is about to keep it: the rule is slime's own
    return output_type(keep=False, reason=reason, keep_when_insufficient=True)


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
    Close a rollout's counts: the ``--rollout-all-samples-process-path`` hook.

    slime passes every completed group of the rollout: the groups its filter judged (if
    no filter ran, the hook judges them, never stopping the run). Rejections slime kept
    by ``keep_when_insufficient`` count as ``fallback_admitted``, estimated from below
    (metric ``fallback_estimated`` = 1) when slime's live state was unreadable. Logs the
    structlog event ``group_admission_rollout`` and sets ``args.processed_group_count``.

    .. versionadded:: 0.1.0
    """
    runtime = _runtime(args)
    with runtime.lock:
        if not runtime.rollout().candidates:
            for group in all_groups:
                # slime dropped none of these groups, so there is no resampling loop to stop.
                with contextlib.suppress(ConsecutiveFailedGroupsError):
                    read_group(args, group, runtime.settings.reject_statuses).judge(runtime.session)
        rollout, unknown = runtime.rollout(), runtime.unknown_fallbacks
        target = getattr(args, "rollout_batch_size", None)
        if unknown and isinstance(target, int):
            gate_rejected = rollout.exact_dead + rollout.near_tie + rollout.redundant
            runtime.session.record_fallback(
                fallback_kept_lower_bound(
                    unknown=unknown,
                    gate_rejected=gate_rejected,
                    known=rollout.fallback_admitted,
                    target=target,
                    admitted=rollout.admitted,
                )
            )
        runtime.unknown_fallbacks = 0
        runtime.close_rollout(fallback_estimated=unknown > 0)
    args.processed_group_count = len(all_groups)


def log_rollout_metrics(
    rollout_id: int, args: Any, samples: Any, rollout_extra_metrics: Any, rollout_time: float
) -> bool:
    """
    Add the last rollout's metrics to slime's: the ``--custom-rollout-log-function-path`` hook.

    Merges ``rollout/group_admission/<name>`` into ``rollout_extra_metrics`` once per
    rollout, sets ``args.logged_rollout_id`` (slime's contract for custom log functions),
    and returns ``False`` so that slime's own logging goes on and reports them.

    .. versionadded:: 0.1.0
    """
    args.logged_rollout_id = rollout_id
    runtime = _runtime(args)
    with runtime.lock:
        metrics = dict(runtime.last_rollout) if runtime.unlogged else {}
        runtime.unlogged = False
    if not metrics and "no_rollout_recorded" not in runtime.warned:
        runtime.warned.add("no_rollout_recorded")
        _log.warning(
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
    A copy of the counts of every group judged so far under the settings in ``args``.

    .. versionadded:: 0.1.0
    """
    return _runtime(args).session.stats


def last_rollout_metrics(args: Any) -> dict[str, int | float]:
    """
    The metrics of the last closed rollout (empty before one) under the settings in ``args``.

    .. versionadded:: 0.1.0
    """
    return dict(_runtime(args).last_rollout)
