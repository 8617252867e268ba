"""OpenRLHF's keep rule (``_host_rules.openrlhf``) and how it amends the policy's decision."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from group_admission import AdmissionSession, GroupAdmissionPolicy
from group_admission._host_rules.openrlhf import CHECK_MEAN_RANGE, amend_by_mean_range, keeps_mean

NO_GATES = GroupAdmissionPolicy({})


@pytest.mark.parametrize(
    ("scores", "low", "high", "kept"),
    [
        ([0.0, 1.0], 0.0, 1.0, True),
        ([0.5] * 4, 0.0, 1.0, True),  # a tie inside the range: OpenRLHF keeps it
        ([0.0, 0.0], 0.0, 1.0, False),  # the ends are excluded
        ([1.0, 1.0], 0.0, 1.0, False),
        ([0.2, 0.2], 0.2, 0.8, False),
        ([0.9, 1.0], 0.2, 0.8, False),
        ([math.nan, 1.0], 0.0, 1.0, False),  # a NaN mean fails both comparisons
    ],
)
def test_keeps_mean_is_strict(scores: list[float], low: float, high: float, kept: bool) -> None:
    assert keeps_mean(scores, low, high) is kept


def test_a_dropped_tie_is_exact_dead_and_a_dropped_spread_is_a_near_tie() -> None:
    tie = amend_by_mean_range(NO_GATES.evaluate([1.0, 1.0]), [1.0, 1.0], 0.0, 1.0)
    edge = amend_by_mean_range(NO_GATES.evaluate([0.9, 1.0]), [0.9, 1.0], 0.2, 0.8)

    assert (tie.primary_rejection_reason, tie.failed_checks) == ("exact_dead", (CHECK_MEAN_RANGE,))
    assert (edge.primary_rejection_reason, edge.failed_checks) == ("near_tie", (CHECK_MEAN_RANGE,))


def test_missing_scores_and_policy_rejections_are_left_alone() -> None:
    admitted = NO_GATES.evaluate([0.0, 1.0])
    rejected = GroupAdmissionPolicy({"min_reward_std": 1e-6}).evaluate([1.0, 1.0])

    assert amend_by_mean_range(admitted, [None, 1.0], 0.0, 0.5) is admitted
    assert amend_by_mean_range(admitted, [], 0.0, 0.5) is admitted
    assert amend_by_mean_range(rejected, [1.0, 1.0], 0.0, 1.0) is rejected


@given(
    scores=st.lists(st.floats(-2, 2, allow_nan=False), min_size=1, max_size=8),
    bounds=st.tuples(st.floats(-2, 2), st.floats(-2, 2)).filter(lambda b: b[0] < b[1]),
)
def test_the_amended_decision_admits_exactly_what_openrlhf_keeps(scores: list[float], bounds: tuple) -> None:
    """With no gate of ours, admitted after the amendment <=> OpenRLHF's rule keeps the group."""
    decision = amend_by_mean_range(NO_GATES.evaluate(scores), scores, *bounds)

    assert decision.admitted is keeps_mean(scores, *bounds)
    assert decision.admitted or CHECK_MEAN_RANGE in decision.failed_checks


@pytest.mark.parametrize("scores", [[0.9, 1.0], [1.0, 1.0]])
def test_a_session_that_recorded_a_range_rejection_restores(scores: list[float]) -> None:
    """The rule's check is a reward check: its rejection counts as one, so the counts conserve and restore."""
    session = AdmissionSession()
    amended = amend_by_mean_range(NO_GATES.evaluate(scores), scores, 0.2, 0.8)
    session.record(amended)
    restored = AdmissionSession()

    restored.load_state_dict(session.state_dict())

    assert amended.reward_rejected
    assert (1, 1) == (restored.stats.reward_rejected, restored.stats.rejected)
    assert session.stats == restored.stats
