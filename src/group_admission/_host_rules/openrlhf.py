"""
OpenRLHF's dynamic-filtering keep rule (``SamplesGenerator._generate_vllm``, OpenRLHF 0.11.2).

OpenRLHF keeps a group when the mean of its members' ``scores`` lies strictly inside
``--algo.dynamic_filtering_range``, and applies the rule only when every member has a
score. It never looks at the spread: a graded group tied at 0.5 passes ``(0, 1)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from .._checks import CHECK_MEAN_RANGE, primary_reason
from .._decision import GroupAdmissionDecision

__all__ = ["CHECK_MEAN_RANGE", "amend_by_mean_range", "keeps_mean"]


def keeps_mean(scores: Sequence[float], low: float, high: float) -> bool:
    """
    OpenRLHF's test: ``low < mean(scores) < high``, the mean summed left to right as OpenRLHF does.

    A NaN mean fails both comparisons, so OpenRLHF drops such a group.

    .. versionadded:: 0.2.0
    """
    mean = sum(scores) / len(scores)
    return low < mean < high


def amend_by_mean_range(
    decision: GroupAdmissionDecision, scores: Sequence[float | None], low: float, high: float
) -> GroupAdmissionDecision:
    """
    The decision with OpenRLHF's range rule applied after the policy's gates.

    An admitted group whose every member has a score and whose mean OpenRLHF would drop
    becomes a rejection with the failed check ``mean_outside_dynamic_filtering_range``, a
    reward check of the table (``_checks``), which names its reason: ``exact_dead`` when
    the scores are all equal (OpenRLHF's advantage is then zero), otherwise ``near_tie`` (a
    mean near an end of the range means almost every member sits at that end). A rejected
    group, or one with a missing score (OpenRLHF skips its rule there), is returned
    unchanged.

    .. versionadded:: 0.2.0
    """
    if not decision.admitted or not scores:
        return decision
    present = [score for score in scores if score is not None]
    if len(present) < len(scores) or keeps_mean(present, low, high):
        return decision
    failed = (*decision.failed_checks, CHECK_MEAN_RANGE)
    reason = primary_reason((), failed, dead=len(set(present)) == 1)
    return attrs.evolve(decision, reason=reason, failed_checks=failed)
