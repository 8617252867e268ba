"""
The verdicts: ``GroupAdmissionDecision`` on one group, ``BatchAdmissionResult`` on a batch.

A batch result holds the same fields as arrays over groups, and gives each row back as a
decision; both are values that counting, limits and the prompt history read, whichever
path (``evaluate`` or ``evaluate_batch``) judged them.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator
from typing import Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt

from . import _checks
from ._reasons import ADMITTED_CODE, REASONS_BY_CODE, RejectionReason
from ._validation import deprecated, describe

__all__ = ["BatchAdmissionResult", "GroupAdmissionDecision"]


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


@attrs.frozen(kw_only=True, eq=False)
class BatchAdmissionResult:
    """
    The decisions of :meth:`GroupAdmissionPolicy.evaluate_batch`, as arrays over groups.

    ``reason_codes[i]`` indexes :attr:`REASONS` (0 = admitted; see
    :attr:`RejectionReason.code`). Statistics are NaN where they do not apply, exactly as
    in :class:`GroupAdmissionDecision`. ``check_flags`` is a bit mask of failed gate checks
    (see :attr:`CHECK_BITS`); ``external_reasons`` maps the index of each group that has
    external reasons to them (other groups are absent). Every per-group value is an array
    attribute (``admitted``, ``primary_reasons`` and the statistics); :meth:`decision` and
    :meth:`decisions` build ordinary decision objects.

    .. versionadded:: 0.1.0
    """

    #: ``REASONS[code]`` is the primary reason of a group with that code.
    REASONS: ClassVar[tuple[RejectionReason | None, ...]] = REASONS_BY_CODE
    #: The bit of each check in ``check_flags``, in ``failed_checks`` order. Bits are
    #: append-only: a check added later takes a new bit and no bit moves.
    #: ``mean_outside_dynamic_filtering_range`` (16) is OpenRLHF's rule, which its adapter
    #: applies to decisions after the policy; ``evaluate_batch`` never sets it.
    CHECK_BITS: ClassVar[dict[str, int]] = dict(_checks.TABLE.bits)

    reason_codes: npt.NDArray[np.int8]
    check_flags: npt.NDArray[np.uint8]
    external_reasons: dict[int, tuple[str, ...]]
    group_size: int
    unique_rollouts: npt.NDArray[np.int64]
    reward_mean: npt.NDArray[np.float64]
    reward_std: npt.NDArray[np.float64]
    reward_range: npt.NDArray[np.float64]
    nontrivial_advantage_count: npt.NDArray[np.int64]
    mean_pairwise_similarity: npt.NDArray[np.float64]
    max_pairwise_similarity: npt.NDArray[np.float64]
    group_keys: tuple[Hashable, ...] | None = None

    def __len__(self) -> int:
        return len(self.reason_codes)

    @property
    def admitted(self) -> npt.NDArray[np.bool_]:
        """Boolean mask of admitted groups."""
        mask: npt.NDArray[np.bool_] = self.reason_codes == ADMITTED_CODE
        return mask

    @property
    def primary_reasons(self) -> npt.NDArray[np.object_]:
        """The primary reason of every group as a string (``None`` when admitted), an array over groups."""
        names = [None if reason is None else reason.value for reason in self.REASONS]
        return np.array(names, dtype=object)[self.reason_codes]

    def reasons(self) -> list[str | None]:
        """
        Deprecated: :attr:`primary_reasons` as a list (a decision's ``reasons`` were its failed checks).

        .. deprecated:: 0.2.0
            Use :attr:`primary_reasons`; removed in 0.3.0.
        """
        deprecated("BatchAdmissionResult.reasons()", "use primary_reasons (failed checks are check_flags)")
        reasons: list[str | None] = self.primary_reasons.tolist()
        return reasons

    def decision(self, index: int) -> GroupAdmissionDecision:
        """
        The decision on group ``index`` (negative indices count from the end).

        Raises:
            TypeError: ``index`` is not an integer.
            IndexError: ``index`` is out of range.
        """
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            msg = f"'index' must be an integer (got {describe(index)})"
            raise TypeError(msg)
        groups = len(self)
        if not -groups <= index < groups:
            msg = f"'index' must be in [-{groups}, {groups}) (got {describe(index)})"
            raise IndexError(msg)
        index = int(index) % groups  # the external reasons are keyed by the non-negative index
        flags = int(self.check_flags[index])
        external = self.external_reasons.get(index, ())
        checks = _checks.TABLE.bits.items()
        return GroupAdmissionDecision(
            reason=self.REASONS[int(self.reason_codes[index])],
            failed_checks=(*external, *(check for check, bit in checks if flags & bit)),
            external_reasons=external,
            group_size=self.group_size,
            unique_rollouts=int(self.unique_rollouts[index]),
            reward_mean=float(self.reward_mean[index]),
            reward_std=float(self.reward_std[index]),
            reward_range=float(self.reward_range[index]),
            nontrivial_advantage_count=int(self.nontrivial_advantage_count[index]),
            mean_pairwise_similarity=_json_float(float(self.mean_pairwise_similarity[index])),
            max_pairwise_similarity=_json_float(float(self.max_pairwise_similarity[index])),
            group_key=None if self.group_keys is None else self.group_keys[index],
        )

    def decisions(self) -> list[GroupAdmissionDecision]:
        """Every group's decision, in order."""
        return [self.decision(index) for index in range(len(self))]

    def __iter__(self) -> Iterator[GroupAdmissionDecision]:
        return iter(self.decisions())
