"""
The gate checks as a table: one frozen row per check, which everything about a check reads.

A row says what its check is called, its bit in a batch result's ``check_flags``, the family
it is counted under (``reward`` checks in ``reward_rejected``, the ``similarity`` check in
``near_duplicate_rejected``) and the primary reason it gives. A check of the policy
(:class:`GateCheck`) also says which statistic it measures, which
:class:`GroupAdmissionConfig` field holds its threshold, how the statistic fails it (a
:class:`Bound`, attrs' ``_NumberValidator`` idea: one frozen comparison instead of a sentence
of code per gate) and how the explainer words it. A host rule (a :class:`Check` only) is
applied by its ``_host_rules`` module after the policy, and named, counted and given its
reason by its row like any other.

Readers, all at call time through ``_checks.TABLE`` (so a test can add a row and see it
everywhere, ``tests/test_gate_table.py``): the scalar and batch reward gates and the
similarity gate (``_judge``), :func:`primary_reason` and the batch precedence table, the
encoding of ``check_flags`` (``_batch``) and their decoding (``_decision``),
``GroupAdmissionDecision.reward_rejected``, the counts and their conservation
(``_metrics``), ``GroupAdmissionConfig.reward_gate_enabled``, the explainer (``_explain``),
OpenRLHF's host rule and the property tests' strategies (``tests/strategies.py``).

Adding a reward check on a statistic the gates compute (``mean``, ``std``, ``range``,
``nontrivial``): a row appended to :data:`TABLE`'s ``reward`` with the next free bit, its
threshold field on :class:`GroupAdmissionConfig` (off by default) and its line in
``docs/config.md``. A new statistic is also computed twice in ``_judge`` (scalar and batch,
bit for bit) and carried by the decision and the batch result. A new reason is a
:class:`RejectionReason` member, appended so that existing codes keep their values.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs
import numpy as np
import numpy.typing as npt

from ._reasons import RejectionReason

__all__ = [
    "CHECK_MEAN_RANGE",
    "CHECK_NONTRIVIAL",
    "CHECK_RANGE",
    "CHECK_SIMILARITY",
    "CHECK_STD",
    "REL_TOL",
    "TABLE",
    "Bound",
    "Check",
    "CheckTable",
    "GateCheck",
    "primary_reason",
]

#: A statistic this close to its threshold, relative to the reward scale, meets it: decimal
#: rewards such as 0.12 - 0.1 land a few ulps below 0.02.
REL_TOL = 1e-12

Family = Literal["reward", "similarity"]
#: The most bits ``check_flags`` (uint8) holds.
_FLAG_BITS = 8


@attrs.frozen
class Bound:
    """
    How a statistic fails its threshold: below a minimum, or above a maximum.

    A minimum is off at 0, a maximum at ``None``. ``tolerant``: a statistic within
    ``REL_TOL`` of the reward scale (or of the threshold, if larger) meets the threshold.
    ``dead_fails``: identical rewards fail it whatever the statistic says, since their
    advantage is exactly zero.
    """

    minimum: bool
    tolerant: bool = False
    dead_fails: bool = False

    def enabled(self, threshold: Any) -> bool:
        """Whether ``threshold`` turns the check on."""
        return bool(threshold > 0) if self.minimum else threshold is not None

    def fails(self, value: float, threshold: Any, scale: float, dead: bool) -> bool:
        """
        Whether one group's statistic fails ``threshold`` (``scale``: its largest reward magnitude).

        Never when the threshold turns the check off. This runs for every check of every
        group ``evaluate`` judges, so it tests its flags inline.
        """
        if self.minimum:
            if not threshold > 0:
                return False
        elif threshold is None:
            return False
        if self.dead_fails and dead:
            return True
        limit: float = threshold
        if self.tolerant:
            slack = REL_TOL * max(threshold, scale)
            limit = threshold - slack if self.minimum else threshold + slack
        return value < limit if self.minimum else value > limit

    def fails_batch(
        self,
        values: npt.NDArray[Any],
        threshold: float,
        slack: npt.NDArray[np.float64],
        dead: npt.NDArray[np.bool_],
    ) -> npt.NDArray[np.bool_]:
        """
        Row-wise :meth:`fails`; ``slack`` is ``REL_TOL * scale`` per row.

        ``REL_TOL * max(threshold, scale)`` is ``max(REL_TOL * threshold, REL_TOL * scale)``
        bit for bit (rounding is monotonic), so the product with the scale is taken once for
        every row of the table.
        """
        failing: npt.NDArray[np.bool_]
        if not self.tolerant:
            failing = np.less(values, threshold) if self.minimum else np.greater(values, threshold)
        else:
            bound = np.maximum(slack, REL_TOL * threshold)
            if self.minimum:
                failing = np.less(values, np.subtract(threshold, bound, out=bound))
            else:
                failing = np.greater(values, np.add(threshold, bound, out=bound))
        if self.dead_fails:
            failing |= dead
        return failing


@attrs.frozen(kw_only=True)
class Check:
    """
    One named check: its failed-check name, its bit in ``check_flags``, its family and its reason.

    A failed ``reward`` check on identical rewards gives ``exact_dead`` whatever its
    ``reason``: the group's advantage is exactly zero.
    """

    name: str
    bit: int
    family: Family
    reason: RejectionReason

    def reason_on(self, dead: bool) -> RejectionReason:
        """The reason this check gives on its own, on a group whose gated rewards are identical or not."""
        return RejectionReason.EXACT_DEAD if dead and self.family == "reward" else self.reason


@attrs.frozen(kw_only=True)
class GateCheck(Check):
    """
    A check of the policy: a statistic held to a :class:`GroupAdmissionConfig` threshold.

    ``statistic`` names a reward statistic of the gates (``mean``, ``std``, ``range``,
    ``nontrivial``) or, for the similarity check, ``mean_pairwise_similarity``. The
    explainer says ``"<gate>: rejects a group <rejects>"``, with ``rejects`` formatted with
    ``threshold`` (written ``:g``) and ``config``.
    """

    field: str
    statistic: str
    bound: Bound
    gate: str
    rejects: str

    def enabled(self, config: Any) -> bool:
        """Whether ``config`` turns this check on."""
        return self.bound.enabled(getattr(config, self.field))

    def describe(self, config: Any) -> str:
        """What this check of ``config`` does, in one line of the explainer."""
        threshold = getattr(config, self.field)
        if not self.bound.enabled(threshold):
            off = "= 0" if self.bound.minimum else "is None"
            return f"{self.gate}: off ({self.field} {off})."
        written = f"{threshold:g}" if isinstance(threshold, float) else str(threshold)
        return f"{self.gate}: rejects a group " + self.rejects.format(threshold=written, config=config)


def _check_rows(table: CheckTable) -> None:
    """Refuse a table whose rows would be ambiguous in ``failed_checks``, ``check_flags`` or the counts."""
    names, bits = [row.name for row in table.rows], [row.bit for row in table.rows]
    repeated = sorted(
        {name for name in names if names.count(name) > 1} | {str(b) for b in bits if bits.count(b) > 1}
    )
    if repeated:
        msg = f"checks must have distinct names and bits (got {repeated} twice)"
        raise ValueError(msg)
    for row in table.rows:
        if row.bit <= 0 or row.bit & (row.bit - 1) or row.bit >= 1 << _FLAG_BITS:
            limit = 1 << _FLAG_BITS
            msg = f"check {row.name!r} must have a bit that is a power of two below {limit} (got {row.bit})"
            raise ValueError(msg)
        if row.reason is RejectionReason.EXTERNAL:
            msg = f"check {row.name!r} must not give 'external', which only external reasons give"
            raise ValueError(msg)
    if any(row.family != "reward" for row in table.reward) or table.similarity.family != "similarity":
        msg = "the policy's reward checks must be of family 'reward' and its similarity check of 'similarity'"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class CheckTable:
    """
    Every check, in ``failed_checks`` order: the policy's reward checks, its similarity check, the host rules.

    The order of the rows is the order of ``failed_checks``; the bits are the rows' own,
    append-only, so a row added later takes a new bit and no existing bit moves.
    """

    reward: tuple[GateCheck, ...]
    similarity: GateCheck
    host: tuple[Check, ...] = ()

    def __attrs_post_init__(self) -> None:
        _check_rows(self)

    def adding(self, check: GateCheck) -> CheckTable:
        """This table with one more reward check of the policy (after the others)."""
        return attrs.evolve(self, reward=(*self.reward, check))

    @functools.cached_property
    def rows(self) -> tuple[Check, ...]:
        """Every check, in ``failed_checks`` order."""
        return (*self.reward, self.similarity, *self.host)

    @functools.cached_property
    def by_name(self) -> Mapping[str, Check]:
        """Each check by its failed-check name."""
        return {row.name: row for row in self.rows}

    @functools.cached_property
    def bits(self) -> dict[str, int]:
        """The bit of each check in ``check_flags``, in ``failed_checks`` order."""
        return {row.name: row.bit for row in self.rows}

    def family_bits(self, family: Family) -> int:
        """The ``check_flags`` mask of one family's checks."""
        return sum(row.bit for row in self.rows if row.family == family)

    @functools.cached_property
    def reward_names(self) -> frozenset[str]:
        """The names of every ``reward`` check (the policy's and the host rules')."""
        return frozenset(row.name for row in self.rows if row.family == "reward")

    def reasons_only_of(self, family: Family) -> tuple[RejectionReason, ...]:
        """The reasons that only checks of ``family`` give (each counts under it), by precedence."""
        own = {row.reason for row in self.rows if row.family == family}
        others = {row.reason for row in self.rows if row.family != family}
        return tuple(reason for reason in RejectionReason if reason in own - others)

    def reason_of(self, failed: Sequence[str], dead: bool) -> RejectionReason:
        """The primary reason of a group that failed the checks named ``failed`` and no external reason."""
        # Members are listed in precedence order, so the lowest code is the primary reason.
        return min((self.by_name[name].reason_on(dead) for name in failed), key=lambda reason: reason.code)

    @functools.cached_property
    def dead_bit(self) -> int:
        """The bit above every check's: set in a batch row's case when its gated rewards are identical."""
        return 1 << max(self.bits.values()).bit_length()

    @functools.cached_property
    def external_bit(self) -> int:
        """The bit above ``dead_bit``: set in a batch row's case when it has external reasons."""
        return self.dead_bit << 1

    @functools.cached_property
    def case_dtype(self) -> np.dtype[Any]:
        """The smallest unsigned type that holds a batch row's case."""
        return np.min_scalar_type(2 * self.external_bit - 1)

    @functools.cached_property
    def precedence(self) -> npt.NDArray[np.int8]:
        """
        The primary reason's code of every case, as :func:`primary_reason` assigns it (0: admitted).

        A case is a row's ``check_flags``, plus ``dead_bit`` when its gated reward range is
        exactly 0 and ``external_bit`` when it has external reasons.
        """
        table = np.zeros(2 * self.external_bit, dtype=np.int8)
        for case in range(len(table)):
            failed = [row.name for row in self.rows if case & row.bit]
            if case & self.external_bit:
                table[case] = RejectionReason.EXTERNAL.code
            elif failed:
                table[case] = self.reason_of(failed, bool(case & self.dead_bit)).code
        return table


#: Identical rewards fail it; the population std of the gated reward.
STD = GateCheck(
    name="reward_std_below_threshold",
    bit=1,
    family="reward",
    reason=RejectionReason.NEAR_TIE,
    field="min_reward_std",
    statistic="std",
    bound=Bound(minimum=True, tolerant=True, dead_fails=True),
    gate="std gate",
    rejects="whose population std is below {threshold} (GRPO's sample std is larger by sqrt(n/(n-1))).",
)
RANGE = GateCheck(
    name="reward_range_below_threshold",
    bit=2,
    family="reward",
    reason=RejectionReason.NEAR_TIE,
    field="min_reward_range",
    statistic="range",
    bound=Bound(minimum=True, tolerant=True, dead_fails=True),
    gate="range gate",
    rejects="whose max - min is below {threshold}, the reward's effective resolution.",
)
NONTRIVIAL = GateCheck(
    name="insufficient_nontrivial_advantages",
    bit=4,
    family="reward",
    reason=RejectionReason.NEAR_TIE,
    field="min_nontrivial_advantages",
    statistic="nontrivial",
    bound=Bound(minimum=True),
    gate="advantage gate",
    rejects=(
        "with fewer than {threshold} member(s) whose reward differs from the group mean by more "
        "than {config.advantage_tolerance:g}."
    ),
)
SIMILARITY = GateCheck(
    name="mean_pairwise_similarity_above_threshold",
    bit=8,
    family="similarity",
    reason=RejectionReason.REDUNDANT,
    field="max_mean_pairwise_similarity",
    statistic="mean_pairwise_similarity",
    bound=Bound(minimum=False),
    gate="redundancy gate",
    rejects=(
        "whose completions' mean pairwise similarity (token {config.similarity_ngram_size}-gram "
        "Jaccard) exceeds {threshold}; completion texts are then required."
    ),
)
#: OpenRLHF's dynamic-filtering range (``_host_rules.openrlhf``): the mean of the scores
#: outside the range drops a group the policy admitted. A reward check of the host's.
MEAN_RANGE = Check(
    name="mean_outside_dynamic_filtering_range", bit=16, family="reward", reason=RejectionReason.NEAR_TIE
)

#: Every check. Read it as ``_checks.TABLE`` at call time, never imported by name.
TABLE = CheckTable(reward=(STD, RANGE, NONTRIVIAL), similarity=SIMILARITY, host=(MEAN_RANGE,))

CHECK_STD = STD.name
CHECK_RANGE = RANGE.name
CHECK_NONTRIVIAL = NONTRIVIAL.name
CHECK_SIMILARITY = SIMILARITY.name
CHECK_MEAN_RANGE = MEAN_RANGE.name


def primary_reason(external: Sequence[str], failed: Sequence[str], dead: bool) -> RejectionReason | None:
    """
    Pick the one primary reason from what failed, by precedence.

    ``external`` holds the external reasons, ``failed`` the names of the failed checks of
    :data:`TABLE` and ``dead`` whether the gated rewards are identical. External reasons
    win; otherwise each failed check gives its row's reason (``exact_dead`` for a reward
    check on identical rewards) and the first in :class:`RejectionReason` order wins.
    """
    if external:
        return RejectionReason.EXTERNAL
    return TABLE.reason_of(failed, dead) if failed else None
