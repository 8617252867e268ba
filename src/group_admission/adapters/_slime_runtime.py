"""
The slime adapter's machinery: settings, reading a slime group, and one runtime per configuration.

slime loads the filter and the post-rollout hook by import path inside its
``RolloutManager`` actor, so module-level state lives as long as the actor. Each distinct
``group_admission`` settings mapping gets one runtime (policy, statistics, failure streak),
built on first use and reused by every later call.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import structlog

from .._config import GroupAdmissionConfig
from .._decision import GroupAdmissionDecision
from .._loading import from_mapping
from .._metrics import AdmissionStats
from .._policy import GroupAdmissionPolicy
from .._validation import check_ge, check_int, check_names_in, check_optional, describe
from ._adapter_runtime import (
    FailureStreak,
    GroupInput,
    as_policy_config,
    check_bool,
    check_gate_on_unset,
    scalar_reward,
    settings_key,
    to_str_tuple,
)

__all__ = [
    "METRIC_PREFIX",
    "SETTINGS_ATTR",
    "SlimeAdmissionSettings",
    "SlimeRuntime",
    "live_remaining_batch_size",
    "read_group",
    "runtime_for",
]

#: The ``args`` attribute that ``--custom-config-path`` sets from the YAML's top-level key.
SETTINGS_ATTR = "group_admission"
#: Prefix of the metrics the log hook adds beside slime's ``rollout/dynamic_filter/...``.
METRIC_PREFIX = "rollout/group_admission/"

_STATUSES = ("pending", "completed", "truncated", "aborted", "failed")

_log = structlog.get_logger("group_admission.adapters.slime")


@attrs.frozen(kw_only=True)
class SlimeAdmissionSettings:
    """
    The slime adapter's settings: the ``group_admission`` mapping of ``--custom-config-path``.

    Args:
        policy: The :class:`GroupAdmissionConfig` fields (``gate_on`` is not supported:
            slime gives one scalar reward per sample; pick a component with
            ``--reward-key``).
        keep_when_insufficient: Mark gate rejections (``exact_dead``, ``near_tie``,
            ``redundant``) with slime's ``keep_when_insufficient``, so slime keeps them
            rather than start another over-sampling wave. External rejections are always
            dropped. slime before v0.3.1 lacks the field: the adapter then drops strictly
            and warns once.
        max_consecutive_failed_groups: Stop the run with
            :class:`ConsecutiveFailedGroupsError` after this many consecutive external
            rejections (``None``: never).
        reject_statuses: Sample statuses that make a group ``external``.

    .. versionadded:: 0.1.0
    """

    policy: GroupAdmissionConfig = attrs.field(
        factory=GroupAdmissionConfig, converter=as_policy_config, validator=check_gate_on_unset
    )
    keep_when_insufficient: bool = attrs.field(default=True, validator=check_bool)
    max_consecutive_failed_groups: int | None = attrs.field(
        default=8, validator=check_optional(check_int, check_ge(1))
    )
    reject_statuses: tuple[str, ...] = attrs.field(
        default=("aborted", "failed"),
        converter=to_str_tuple,
        validator=check_names_in(_STATUSES, "sample status"),
    )

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None) -> SlimeAdmissionSettings:
        """
        Build the settings from the ``group_admission`` mapping (``None``: all defaults).

        Raises:
            TypeError: the value is not a mapping, or a setting has the wrong type.
            ValueError: a key is unknown or a value is out of range.
        """
        if mapping is None:
            return cls()
        if not isinstance(mapping, Mapping):
            msg = (
                f"'{SETTINGS_ATTR}' (set on slime's args by --custom-config-path) must be a "
                f"mapping (got {describe(mapping)})"
            )
            raise TypeError(msg)
        return from_mapping(cls, mapping, source=f"'{SETTINGS_ATTR}' settings")


def _status_name(sample: Any) -> str | None:
    status = getattr(sample, "status", None)
    value = getattr(status, "value", status)
    return value if isinstance(value, str) else None


def _read_member(args: Any, sample: Any, reject: tuple[str, ...], slot: int, out: GroupInput) -> None:
    if not hasattr(sample, "get_reward_value"):
        out.reject("malformed_member", slot)
        return
    status = _status_name(sample)
    if status is not None and status in reject:
        out.external.append(status)
    reward: float | None = None
    if getattr(sample, "reward", None) is not None:
        try:
            raw = sample.get_reward_value(args)
        except KeyError:
            out.external.append("reward_key_missing")
        except Exception:  # a bad member rejects its group; it must never stop training
            out.external.append("unreadable_reward")
        else:
            reward, problem = scalar_reward(raw)
            if problem is not None:
                out.external.append(problem)
    response = getattr(sample, "response", None)
    out.add(reward, response if isinstance(response, str) else None, slot)


def read_group(args: Any, samples: Any, reject_statuses: tuple[str, ...]) -> GroupInput:
    """
    Translate one slime group (``list[Sample]``, or ``list[list[Sample]]`` with fan-out) for the policy.

    Each inner list of a fan-out group is one rollout: its segments share one rollout id,
    so the policy counts the rollout once. Unusable members become external reasons.
    """
    out = GroupInput()
    if isinstance(samples, (str, bytes)) or not isinstance(samples, Sequence) or not samples:
        out.reject("malformed_group", 0)
        return out
    for slot, member in enumerate(samples):
        segments = member if isinstance(member, (list, tuple)) else (member,)
        if not segments:
            out.reject("empty_rollout", slot)
        for segment in segments:
            if out.group_key is None:
                out.group_key = getattr(segment, "group_index", None)
            _read_member(args, segment, reject_statuses, slot, out)
    return out


def live_remaining_batch_size() -> int | None:
    """
    Read slime's live ``GenerateState.remaining_batch_size`` (``None`` when it cannot be read).

    This reads private state of the module that calls the filter, without importing or
    constructing anything (``GenerateState`` is a singleton whose constructor loads a
    tokenizer). It tells the filter whether slime's fallback will keep a rejected group.
    """
    module = sys.modules.get("slime.rollout.sglang_rollout")
    state_cls = getattr(module, "GenerateState", None)
    instances = getattr(state_cls, "_instances", None)
    state = instances.get(state_cls) if isinstance(instances, dict) else None
    value = getattr(state, "remaining_batch_size", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class SlimeRuntime:
    """The policy, statistics and bookkeeping of one ``group_admission`` configuration."""

    def __init__(self, settings: SlimeAdmissionSettings) -> None:
        self.settings = settings
        self.policy = GroupAdmissionPolicy(settings.policy)
        self.stats = AdmissionStats()
        self.streak = FailureStreak(settings.max_consecutive_failed_groups, "slime")
        self.last_rollout: dict[str, int | float] = {}
        self.warned: set[str] = set()
        self._logged = True
        self._fallback_kept = 0
        self._fallback_unknown = 0
        self._lock = threading.Lock()

    def judge(self, args: Any, samples: Any) -> GroupAdmissionDecision:
        """The policy's decision on one slime group."""
        return read_group(args, samples, self.settings.reject_statuses).evaluate(self.policy)

    def note_fallback(self, fallback: bool | None) -> None:
        """Count one rejection marked ``keep_when_insufficient``: kept (True), dropped, or unknown (None)."""
        with self._lock:
            if fallback is None:
                self._fallback_unknown += 1
            else:
                self._fallback_kept += fallback

    def drain_fallbacks(self) -> tuple[int, int]:
        """The fallback keeps known and unknown since the last call, and reset both."""
        with self._lock:
            counts = (self._fallback_kept, self._fallback_unknown)
            self._fallback_kept = self._fallback_unknown = 0
        return counts

    def finish_rollout(self, rollout: AdmissionStats, *, fallback_estimated: bool) -> dict[str, int | float]:
        """Fold one rollout into the totals and publish its metrics."""
        with self._lock:
            self.stats = self.stats.merge(rollout)
            metrics: dict[str, int | float] = {
                f"{METRIC_PREFIX}{name}": value for name, value in rollout.metrics().items()
            }
            metrics[f"{METRIC_PREFIX}cumulative_effective_group_rate"] = self.stats.effective_group_rate
            metrics[f"{METRIC_PREFIX}fallback_estimated"] = int(fallback_estimated)
            self.last_rollout = metrics
            self._logged = False
        _log.info("group_admission_rollout", **{k.removeprefix(METRIC_PREFIX): v for k, v in metrics.items()})
        return metrics

    def take_last_rollout(self) -> dict[str, int | float]:
        """The last rollout's metrics if they were not handed out yet, else an empty dict."""
        with self._lock:
            if self._logged:
                return {}
            self._logged = True
            return dict(self.last_rollout)

    def warn_once(self, key: str, event: str, **fields: Any) -> None:
        """Log a warning the first time ``key`` comes up for this configuration."""
        if key in self.warned:
            return
        self.warned.add(key)
        _log.warning(event, **fields)


_RUNTIMES: dict[str, SlimeRuntime] = {}
_RUNTIMES_LOCK = threading.Lock()


def runtime_for(args: Any) -> SlimeRuntime:
    """
    The runtime of the configuration in ``args.group_admission``, built on first use.

    Raises:
        TypeError, ValueError: the settings are invalid (named by key).
    """
    raw = getattr(args, SETTINGS_ATTR, None)
    key = settings_key(raw)
    runtime = _RUNTIMES.get(key)
    if runtime is None:
        settings = SlimeAdmissionSettings.from_mapping(raw)
        with _RUNTIMES_LOCK:
            runtime = _RUNTIMES.setdefault(key, SlimeRuntime(settings))
    return runtime


def reset_runtimes() -> None:
    """Forget every configuration's runtime and statistics (for tests and notebooks)."""
    with _RUNTIMES_LOCK:
        _RUNTIMES.clear()
