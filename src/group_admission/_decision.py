"""``GroupAdmissionDecision``: the verdict on one group and the statistics behind it."""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

import attrs

from . import _checks
from ._reasons import RejectionReason
from ._validation import deprecated

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
    ``mean_pairwise_similarity_above_threshold``, then a host's own checks
    (``BatchAdmissionResult.CHECK_BITS`` lists the checks in this order).

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
        """
        Deprecated alias of :attr:`failed_checks` (a batch result's ``reasons`` were primary reasons).

        .. deprecated:: 0.2.0
            Use :attr:`failed_checks`; removed in 0.3.0.
        """
        deprecated("GroupAdmissionDecision.reasons", "use failed_checks (the primary reason is .reason)")
        return self.failed_checks

    @property
    def gate_checks(self) -> tuple[str, ...]:
        """
        The gate checks that failed: :attr:`failed_checks` after the external reasons.

        A caller's reason is never a gate check, even when it is named like one.

        .. versionadded:: 0.2.0
        """
        return self.failed_checks[len(self.external_reasons) :]

    @property
    def reward_rejected(self) -> bool:
        """
        Whether any reward check failed, whatever the primary reason (never a caller's reason).

        A host's reward check counts too (OpenRLHF's ``mean_outside_dynamic_filtering_range``).
        """
        rewards = _checks.TABLE.reward_names
        return any(check in rewards for check in self.gate_checks)

    @property
    def near_duplicate_rejected(self) -> bool:
        """Whether the redundancy check failed, whatever the primary reason (never a caller's reason)."""
        return _checks.TABLE.similarity.name in self.gate_checks

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
