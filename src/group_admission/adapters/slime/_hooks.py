"""The slime adapter's settings and the functions slime loads by import path, over ``AdmissionSession``s."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import warnings
from collections.abc import Mapping
from functools import cache
from typing import Any, ClassVar, TypeVar

import attrs
import structlog

from ... import (
    AdmissionStats,
    ConsecutiveFailedGroupsError,
    DropLimits,
    GroupAdmissionConfig,
    GroupAdmissionDecision,
    RejectionReason,
)
from ..._host_rules.slime import fallback_kept_lower_bound, should_drop
from .._kit import (
    AdapterSession,
    SessionRegistry,
    check_bool,
    check_names_in,
    failed_streak_field,
    find_host,
    host_versions,
    log_metrics,
    scalar_policy_config,
    settings_from,
    to_str_tuple,
)
from ._groups import read_group

#: The slime versions the adapter supports (0.3.0 without ``keep_when_insufficient``: see the docs).
SUPPORTED_VERSIONS = host_versions({"slime": ">=0.3.0"})
#: The ``args`` attribute that ``--custom-config-path`` sets from the YAML's top-level key.
SETTINGS_ATTR = "group_admission"
#: Prefix of the metrics the log hook adds beside slime's ``rollout/dynamic_filter/...``.
METRIC_PREFIX = "rollout/group_admission/"

_STATUSES = ("pending", "completed", "truncated", "aborted", "failed")
S = TypeVar("S")


class ArgsSettings:
    """Settings read from the mapping that ``--custom-config-path`` sets on slime's ``args.<ATTR>``."""

    __slots__ = ()
    #: The ``args`` attribute holding the mapping (the YAML's top-level key).
    ATTR: ClassVar[str]

    @classmethod
    def from_mapping(cls: type[S], mapping: Mapping[str, Any] | None) -> S:
        """
        Build the settings from their mapping on slime's ``args`` (``None``: all defaults).

        Raises:
            TypeError: the value is not a mapping, or a setting has the wrong type.
            ValueError: a key is unknown or a value is out of range.
        """
        attr = cls.ATTR  # type: ignore[attr-defined]  # every subclass sets it
        source = f"'{attr}' (set on slime's args by --custom-config-path)"
        return settings_from(cls, mapping, source, where=f"'{attr}' settings")


@attrs.frozen(kw_only=True)
class SlimeAdmissionSettings(ArgsSettings):
    """
    The slime adapter's settings: the ``group_admission`` mapping of ``--custom-config-path``.

    ``policy`` holds :class:`GroupAdmissionConfig` fields (not ``gate_on``);
    ``keep_when_insufficient`` marks gate rejections for slime's fallback;
    ``max_consecutive_failed_groups`` (``None``: never) stops the run after that many
    external rejections in a row; ``reject_statuses`` are the sample statuses that make a
    group ``external``. docs/adapters/slime.md explains each.

    .. versionadded:: 0.1.0
    """

    ATTR: ClassVar[str] = SETTINGS_ATTR
    policy: GroupAdmissionConfig = attrs.field(factory=GroupAdmissionConfig, converter=scalar_policy_config)
    keep_when_insufficient: bool = attrs.field(default=True, validator=check_bool)
    max_consecutive_failed_groups: int | None = failed_streak_field()
    reject_statuses: tuple[str, ...] = attrs.field(
        default=("aborted", "failed"),
        converter=to_str_tuple,
        validator=check_names_in(_STATUSES, "sample status"),
    )

    @property
    def limits(self) -> DropLimits:
        """The session's drop limits: slime keeps no drop budget, only the failure streak."""
        return DropLimits(max_consecutive_failed_groups=self.max_consecutive_failed_groups)


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
    module = find_host(
        "slime.rollout.filter_hub.base_types",
        adapter="group_admission.adapters.slime",
        versions=SUPPORTED_VERSIONS,
    )
    output_type: type[Any] = getattr(module, "DynamicFilterOutput", None) or DynamicFilterOutput
    return output_type, "keep_when_insufficient" in getattr(output_type, "__dataclass_fields__", {})


def _live_remaining_batch_size() -> int | None:
    """Slime's live ``GenerateState.remaining_batch_size``, read without importing or building it."""
    module = sys.modules.get("slime.rollout.sglang_rollout")
    state_cls = getattr(module, "GenerateState", None)
    instances = getattr(state_cls, "_instances", None)
    state = instances.get(state_cls) if isinstance(instances, dict) else None
    value = getattr(state, "remaining_batch_size", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _SlimeSession(AdapterSession[SlimeAdmissionSettings]):
    """One configuration's session, and what slime has not been told yet about the rollout in progress."""

    def __init__(self, settings: SlimeAdmissionSettings) -> None:
        super().__init__(settings, host="slime")
        self.last_rollout: dict[str, int | float] = {}
        self.unknown_fallbacks = 0  # rejections marked for slime's fallback whose fate was unknown
        self.unlogged = False

    def close_rollout(self, *, fallback_estimated: bool) -> None:
        """Publish the rollout's metrics and start the next rollout."""
        metrics = self.window.close(METRIC_PREFIX)
        metrics[f"{METRIC_PREFIX}fallback_estimated"] = int(fallback_estimated)
        self.last_rollout, self.unlogged = metrics, True
        log_metrics(_log, "group_admission_rollout", metrics, METRIC_PREFIX)


_SESSIONS: SessionRegistry[_SlimeSession] = SessionRegistry(on_reset=_output_type.cache_clear)


def _runtime(args: Any) -> _SlimeSession:
    raw = getattr(args, SETTINGS_ATTR, None)
    return _SESSIONS.get(raw, lambda: _SlimeSession(SlimeAdmissionSettings.from_mapping(raw)))


def reset() -> None:
    """
    Forget every configuration's session and counts, and the detected slime (for tests and notebooks).

    .. versionadded:: 0.2.0
    """
    _SESSIONS.reset()


def drop_reason(decision: GroupAdmissionDecision) -> str | None:
    """
    The ``reason`` the filter gives slime (``None`` when admitted; ``external_<detail>`` when external).

    .. versionadded:: 0.1.0
    """
    if decision.reason is RejectionReason.EXTERNAL:
        return f"external_{decision.external_reasons[0] if decision.external_reasons else 'external'}"
    return decision.primary_rejection_reason


def judge_group(args: Any, samples: Any) -> GroupAdmissionDecision:
    """
    The policy's decision on one slime group, counted nowhere (for custom rollout functions).

    ``samples`` is a ``list[Sample]``, or ``list[list[Sample]]`` with fan-out.

    .. versionadded:: 0.1.0
    """
    runtime = _runtime(args)
    return read_group(args, samples, runtime.settings.reject_statuses).evaluate(runtime.session.policy)


def admission_filter(args: Any, samples: Any, **kwargs: Any) -> Any:
    """
    Judge and count one completed group: the ``--dynamic-sampling-filter-path`` function.

    Returns slime's ``DynamicFilterOutput`` (the stand-in without slime).

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
        if runtime.warn_once("keep_when_insufficient"):
            warnings.warn(
                "this slime has no DynamicFilterOutput.keep_when_insufficient (added in v0.3.1): "
                "rejected groups are dropped strictly, so every rejection can start another "
                "over-sampling wave; set 'keep_when_insufficient: false' in the group_admission "
                "settings to silence this warning",
                RuntimeWarning,
                stacklevel=2,
            )
        return output_type(keep=False, reason=reason)
    remaining, target = _live_remaining_batch_size(), getattr(args, "rollout_batch_size", None)
    if remaining is None or not isinstance(target, int):
        with runtime.lock:
            runtime.unknown_fallbacks += 1
    elif not should_drop(
        False, keep_when_insufficient=True, remaining_batch_size=remaining, target_data_size=target
    ):
        runtime.session.record_fallback()  # slime is about to keep it: the rule is slime's own
    return output_type(keep=False, reason=reason, keep_when_insufficient=True)


def record_all_samples(args: Any, all_groups: Any, data_source: Any) -> None:
    """
    Close a rollout's counts: the ``--rollout-all-samples-process-path`` hook.

    Counts the rejections slime kept by ``keep_when_insufficient`` (judging the groups
    itself if no filter ran) and sets ``args.processed_group_count``.

    .. versionadded:: 0.1.0
    """
    runtime = _runtime(args)
    with runtime.lock:
        if not runtime.window.pending().candidates:
            for group in all_groups:
                # slime dropped none of these groups, so there is no resampling loop to stop.
                with contextlib.suppress(ConsecutiveFailedGroupsError):
                    read_group(args, group, runtime.settings.reject_statuses).judge(runtime.session)
        rollout, unknown = runtime.window.pending(), runtime.unknown_fallbacks
        target = getattr(args, "rollout_batch_size", None)
        if unknown and isinstance(target, int):
            runtime.session.record_fallback(
                fallback_kept_lower_bound(
                    unknown=unknown,
                    gate_rejected=rollout.rejected - rollout.external,  # every reason but external
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

    Merges them into ``rollout_extra_metrics`` once per rollout, sets
    ``args.logged_rollout_id`` and returns ``False`` so that slime's own logging goes on.

    .. versionadded:: 0.1.0
    """
    args.logged_rollout_id = rollout_id
    runtime = _runtime(args)
    with runtime.lock:
        metrics = dict(runtime.last_rollout) if runtime.unlogged else {}
        runtime.unlogged = False
    if not metrics and runtime.warn_once("no_rollout_recorded"):
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
