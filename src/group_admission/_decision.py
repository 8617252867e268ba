"""``GroupAdmissionDecision``: the verdict on one group and the statistics behind it."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any

import attrs

from ._exceptions import CheckpointError
from ._reasons import CHECK_SIMILARITY, REWARD_CHECKS, RejectionReason
from ._validation import describe, is_real

__all__ = ["GroupAdmissionDecision"]


def _json_float(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


# Not slotted: a frozen slotted attrs class sets each field through object.__setattr__,
# which makes construction (once per group, on the hot path) almost twice as slow.
@attrs.frozen(kw_only=True, slots=False)
class GroupAdmissionDecision:
    """
    The verdict of :meth:`GroupAdmissionPolicy.evaluate` on one group.

    The decision names one primary ``reason`` (``None`` when admitted) and lists every
    check that failed in ``failed_checks``: first the external reasons, then the reward
    checks (``reward_std_below_threshold``, ``reward_range_below_threshold``,
    ``insufficient_nontrivial_advantages``), then
    ``mean_pairwise_similarity_above_threshold``.

    The reward statistics describe the gated reward over unique rollouts; they are NaN
    when the rewards held a missing or non-finite value, or when a statistic overflowed
    float64 (``reward_overflow``). ``reward_std`` is the population
    standard deviation. The similarity statistics are ``None`` unless the redundancy gate
    ran on at least two rollouts.

    Decisions are built by the policy, which has already checked every value, so the
    class carries no validators (it sits on the hot path).

    .. versionadded:: 0.1.0
    """

    reason: RejectionReason | None
    failed_checks: tuple[str, ...] = ()
    external_reasons: tuple[str, ...] = ()
    group_size: int
    unique_rollouts: int
    reward_mean: float
    reward_std: float
    reward_range: float
    nontrivial_advantage_count: int
    mean_pairwise_similarity: float | None = None
    max_pairwise_similarity: float | None = None
    group_key: Hashable | None = None

    @property
    def admitted(self) -> bool:
        """Whether the group may be trained on."""
        return self.reason is None

    @property
    def primary_rejection_reason(self) -> str | None:
        """The primary reason as a plain string (``None`` when admitted)."""
        return None if self.reason is None else self.reason.value

    @property
    def reasons(self) -> tuple[str, ...]:
        """Alias of ``failed_checks``."""
        return self.failed_checks

    @property
    def reward_rejected(self) -> bool:
        """Whether any reward check failed, whatever the primary reason."""
        return any(check in REWARD_CHECKS for check in self.failed_checks)

    @property
    def near_duplicate_rejected(self) -> bool:
        """Whether the redundancy check failed, whatever the primary reason."""
        return CHECK_SIMILARITY in self.failed_checks

    def _contradiction(self) -> str | None:
        """
        What makes this decision one that no judgement produces, or ``None``.

        Only what every count relies on: external reasons exactly on ``external``
        rejections, and no failed check on an admitted group. Hosts may amend a gate
        rejection with checks of their own.
        """
        reason = self.reason
        if (reason is RejectionReason.EXTERNAL) != bool(self.external_reasons):
            external = list(self.external_reasons)
            return f"reason {self.primary_rejection_reason!r} with external_reasons {external!r}"
        if reason is None and self.failed_checks:
            return f"an admitted group with failed_checks {list(self.failed_checks)!r}"
        return None

    def to_dict(self) -> dict[str, Any]:
        """
        Return a plain, JSON-safe dict for logs and traces.

        The reason is its string value; NaN statistics become ``None``.
        """
        return {
            "admitted": self.admitted,
            "reason": self.primary_rejection_reason,
            "failed_checks": list(self.failed_checks),
            "external_reasons": list(self.external_reasons),
            "group_size": self.group_size,
            "unique_rollouts": self.unique_rollouts,
            "reward_mean": _json_float(self.reward_mean),
            "reward_std": _json_float(self.reward_std),
            "reward_range": _json_float(self.reward_range),
            "nontrivial_advantage_count": self.nontrivial_advantage_count,
            "mean_pairwise_similarity": _json_float(self.mean_pairwise_similarity),
            "max_pairwise_similarity": _json_float(self.max_pairwise_similarity),
            "group_key": self.group_key,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroupAdmissionDecision:
        """
        Rebuild a decision from :meth:`to_dict` output, such as a decision log record.

        ``admitted`` is derived from ``reason``; when present it must agree with it. The
        similarity statistics and ``group_key`` may be absent; a ``group_key`` list (JSON's
        form of a tuple) becomes a tuple again.

        Raises:
            CheckpointError: a key is missing or unknown, a value has the wrong type, or the
                record contradicts itself (an external reason without the reason
                ``external``, an admitted group with failed checks, ...).
        """
        if not isinstance(data, Mapping):
            msg = f"'data' must be a GroupAdmissionDecision dict (got {describe(data)})"
            raise CheckpointError(msg)
        missing = [key for key in _REQUIRED if key not in data]
        if missing:
            msg = f"GroupAdmissionDecision dict is missing key(s) {missing!r}"
            raise CheckpointError(msg)
        unknown = sorted(str(key) for key in data if key not in _REQUIRED and key not in _OPTIONAL)
        if unknown:
            msg = f"GroupAdmissionDecision dict has unknown key(s) {unknown!r}"
            raise CheckpointError(msg)
        reason = _reason(data["reason"])
        admitted = data.get("admitted", reason is None)
        if admitted is not (reason is None):
            msg = f"'admitted' ({admitted!r}) contradicts 'reason' ({data['reason']!r})"
            raise CheckpointError(msg)
        group_key = _tuples(data.get("group_key"))
        try:
            hash(group_key)
        except TypeError:
            msg = f"'group_key' must be hashable (got {describe(group_key)})"
            raise CheckpointError(msg) from None
        decision = cls(
            reason=reason,
            failed_checks=_strings(data, "failed_checks"),
            external_reasons=_strings(data, "external_reasons"),
            group_size=_count(data, "group_size", 1),
            unique_rollouts=_count(data, "unique_rollouts", 1),
            reward_mean=_statistic(data, "reward_mean"),
            reward_std=_statistic(data, "reward_std"),
            reward_range=_statistic(data, "reward_range"),
            nontrivial_advantage_count=_count(data, "nontrivial_advantage_count", 0),
            mean_pairwise_similarity=_real_or_none(data, "mean_pairwise_similarity"),
            max_pairwise_similarity=_real_or_none(data, "max_pairwise_similarity"),
            group_key=group_key,
        )
        problem = decision._contradiction()
        if problem:
            msg = f"GroupAdmissionDecision dict is contradictory: {problem}"
            raise CheckpointError(msg)
        return decision


_REQUIRED = (
    "reason",
    "failed_checks",
    "external_reasons",
    "group_size",
    "unique_rollouts",
    "reward_mean",
    "reward_std",
    "reward_range",
    "nontrivial_advantage_count",
)
_OPTIONAL = ("admitted", "mean_pairwise_similarity", "max_pairwise_similarity", "group_key")
_REASON_NAMES = ", ".join(repr(reason.value) for reason in RejectionReason)


def _tuples(value: object) -> object:
    """A JSON list back to the tuple it was written from (JSON has no tuples)."""
    return tuple(_tuples(item) for item in value) if isinstance(value, list) else value


def _reason(value: object) -> RejectionReason | None:
    if value is None:
        return None
    if isinstance(value, str):
        for reason in RejectionReason:
            if reason.value == value:
                return reason
    msg = f"'reason' must be None or one of {_REASON_NAMES} (got {describe(value)})"
    raise CheckpointError(msg)


def _strings(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = data[key]
    if (
        isinstance(value, (str, bytes))
        or not isinstance(value, (list, tuple))
        or not all(isinstance(item, str) for item in value)
    ):
        msg = f"'{key}' must be a list of strings (got {describe(value)})"
        raise CheckpointError(msg)
    return tuple(value)


def _count(data: Mapping[str, Any], key: str, minimum: int) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        msg = f"'{key}' must be an integer >= {minimum} (got {describe(value)})"
        raise CheckpointError(msg)
    return value


def _real_or_none(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if is_real(value):
        try:
            return float(value)
        except OverflowError:
            pass
    msg = f"'{key}' must be a real number or None (got {describe(value)})"
    raise CheckpointError(msg)


def _statistic(data: Mapping[str, Any], key: str) -> float:
    """A reward statistic: ``None`` (JSON's stand-in for NaN) reads back as NaN."""
    value = _real_or_none(data, key)
    return math.nan if value is None else value
