"""Behaviour of GroupAdmissionPolicy.evaluate, pinned from the seed documents and the issue."""

from __future__ import annotations

import math

import numpy as np
import pytest
import structlog
from structlog.testing import capture_logs

from group_admission import (
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    RejectionReason,
)


def policy(**fields: object) -> GroupAdmissionPolicy:
    return GroupAdmissionPolicy(GroupAdmissionConfig(**fields))  # type: ignore[arg-type]


class TestSeedBehaviour:
    def test_default_policy_admits_identical_rewards(self) -> None:
        decision = GroupAdmissionPolicy().evaluate([1, 1, 1])

        assert decision.admitted
        assert decision.reason is None
        assert () == decision.failed_checks

    def test_default_policy_admits_a_single_member(self) -> None:
        assert GroupAdmissionPolicy().evaluate([0.3]).admitted

    def test_range_gate_calls_a_sub_resolution_spread_a_near_tie(self) -> None:
        decision = policy(min_reward_range=0.02).evaluate([0.5, 0.5, 0.51])

        assert RejectionReason.NEAR_TIE == decision.reason
        assert ("reward_range_below_threshold",) == decision.failed_checks

    def test_range_gate_boundary_passes_despite_float_rounding(self) -> None:
        # 0.12 - 0.1 == 0.019999999999999997 in binary floating point.
        assert 0.12 - 0.1 < 0.02
        assert policy(min_reward_range=0.02).evaluate([0.1, 0.1, 0.12]).admitted

    @pytest.mark.parametrize(
        "rewards",
        [[0.0, 1.0], [1.0, 1.0, 0.0, 1.0], [0.0] * 7 + [1.0], [0.2, 0.4, 0.4, 0.4]],
    )
    def test_std_gate_alone_keeps_every_group_slime_and_dapo_keep(self, rewards: list[float]) -> None:
        slime_keeps = float(np.std(rewards, ddof=1)) > 1e-6
        dapo_keeps = float(np.std(rewards)) > 0

        assert slime_keeps == dapo_keeps == policy(min_reward_std=1e-6).evaluate(rewards).admitted

    @pytest.mark.parametrize("rewards", [[1.0] * 8, [0.0] * 8, [0.5] * 4])
    def test_std_gate_alone_drops_every_group_slime_and_dapo_drop(self, rewards: list[float]) -> None:
        decision = policy(min_reward_std=1e-6).evaluate(rewards)

        assert RejectionReason.EXACT_DEAD == decision.reason
        assert 0.0 == decision.reward_std

    @pytest.mark.parametrize("value", [0.25, 0.1])
    def test_float32_constant_groups_are_exact_dead_not_float_noise(self, value: float) -> None:
        rewards = np.full(16, value, dtype=np.float32)

        decision = policy(min_reward_std=1e-6, min_reward_range=0.02).evaluate(rewards)

        assert RejectionReason.EXACT_DEAD == decision.reason
        assert 0.0 == decision.reward_std == decision.reward_range

    def test_identical_float64_thirds_report_exact_zero_std(self) -> None:
        # The mean of [0.1] * 3 rounds to 0.10000000000000002; the std must still be 0.
        decision = policy(min_reward_std=1e-6).evaluate([0.1, 0.1, 0.1])

        assert 0.0 == decision.reward_std
        assert 0.1 == decision.reward_mean

    def test_gate_on_accuracy_ignores_the_shaping_spread_of_an_all_wrong_group(self) -> None:
        rewards = {"accuracy": [0, 0, 0, 0], "brevity": [0.9, 0.1, 0.5, 0.3]}

        gated = policy(min_reward_std=1e-6, gate_on=["accuracy"]).evaluate(rewards)
        summed = policy(min_reward_std=1e-6).evaluate(rewards)

        assert RejectionReason.EXACT_DEAD == gated.reason
        assert summed.admitted  # the phantom gradient the gate exists to prevent


class TestReasons:
    def test_exact_dead_wins_over_redundant(self) -> None:
        decision = policy(min_reward_std=1e-6, max_mean_pairwise_similarity=0.5).evaluate(
            [1, 1], completions=["same words here", "same words here"]
        )

        assert RejectionReason.EXACT_DEAD == decision.reason
        expected = ("reward_std_below_threshold", "mean_pairwise_similarity_above_threshold")
        assert expected == decision.failed_checks
        assert decision.reward_rejected
        assert decision.near_duplicate_rejected

    def test_redundant_when_only_the_similarity_check_fails(self) -> None:
        decision = policy(max_mean_pairwise_similarity=0.5).evaluate(
            [1, 0], completions=["the cat sat on the mat", "The cat sat on the mat."]
        )

        assert RejectionReason.REDUNDANT == decision.reason
        assert not decision.reward_rejected
        # Trigrams: 4 shared, plus ("the", "mat", ".") in the second text only.
        assert decision.mean_pairwise_similarity == pytest.approx(4 / 5)

    def test_the_similarity_gate_uses_the_mean_not_one_duplicate_pair(self) -> None:
        texts = ["alpha beta gamma delta", "alpha beta gamma delta", "one two three four", "w x y z"]

        decision = policy(max_mean_pairwise_similarity=0.3).evaluate([0, 1, 0, 1], completions=texts)

        assert decision.admitted
        assert 1.0 == decision.max_pairwise_similarity
        assert decision.mean_pairwise_similarity == pytest.approx(1 / 6)

    def test_external_reason_wins_and_every_failed_check_is_listed(self) -> None:
        decision = policy(min_reward_range=0.5, min_nontrivial_advantages=3).evaluate(
            [0.0, 0.1, 0.2], external_reasons=["stale_policy"]
        )

        assert RejectionReason.EXTERNAL == decision.reason
        assert ("stale_policy",) == decision.external_reasons
        assert (
            "stale_policy",
            "reward_range_below_threshold",
            "insufficient_nontrivial_advantages",
        ) == decision.failed_checks

    def test_a_bare_string_is_one_external_reason_and_duplicates_collapse(self) -> None:
        assert ("timeout",) == GroupAdmissionPolicy().evaluate(
            [0, 1], external_reasons="timeout"
        ).external_reasons
        again = GroupAdmissionPolicy().evaluate([0, 1], external_reasons=["a", "b", "a"])
        assert ("a", "b") == again.external_reasons

    def test_near_tie_from_the_nontrivial_advantage_gate(self) -> None:
        decision = policy(min_nontrivial_advantages=2, advantage_tolerance=0.05).evaluate(
            [0.0, 0.0, 0.0, 0.3]
        )

        # Deviations: 0.075, 0.075, 0.075, 0.225: all four exceed 0.05, so it passes ...
        assert decision.admitted
        # ... while a single outlier above a wide tolerance leaves one non-trivial member.
        tight = policy(min_nontrivial_advantages=2, advantage_tolerance=0.1).evaluate([0.0, 0.0, 0.0, 0.3])
        assert RejectionReason.NEAR_TIE == tight.reason
        assert 1 == tight.nontrivial_advantage_count

    def test_single_member_is_exact_dead_when_a_reward_gate_is_on(self) -> None:
        assert RejectionReason.EXACT_DEAD == policy(min_nontrivial_advantages=1).evaluate([0.7]).reason


class TestDataProblems:
    @pytest.mark.parametrize(
        ("rewards", "detail"),
        [
            ([1.0, math.nan, 0.0], "non_finite_reward"),
            ([1.0, math.inf, 0.0], "non_finite_reward"),
            ([1.0, None, 0.0], "missing_reward"),
            (np.array([1.0, np.nan]), "non_finite_reward"),
            ({"accuracy": [1, 0], "format": [None, 1]}, "missing_reward"),
        ],
    )
    def test_bad_values_reject_the_group_as_external_without_raising(
        self, rewards: object, detail: str
    ) -> None:
        decision = policy(min_reward_std=1e-6).evaluate(rewards)

        assert RejectionReason.EXTERNAL == decision.reason
        assert (detail,) == decision.external_reasons
        assert math.isnan(decision.reward_std)

    def test_none_and_nan_together_report_both(self) -> None:
        decision = GroupAdmissionPolicy().evaluate([None, math.nan, 1.0])

        assert ("missing_reward", "non_finite_reward") == decision.external_reasons

    def test_only_the_gated_components_data_problems_reject(self) -> None:
        # A component outside gate_on may be None (or NaN) for members it does not apply to.
        ungated = {"accuracy": [0, 1], "brevity": [0.5, math.nan], "format": [None, 1.0]}
        gated = {"accuracy": [0, math.nan], "brevity": [0.5, 0.5]}

        assert policy(gate_on=["accuracy"]).evaluate(ungated).admitted
        assert ("non_finite_reward",) == policy(gate_on=["accuracy"]).evaluate(gated).external_reasons
        assert ("missing_reward", "non_finite_reward") == GroupAdmissionPolicy().evaluate(
            ungated
        ).external_reasons

    def test_missing_completion_with_the_redundancy_gate_is_external(self) -> None:
        decision = policy(max_mean_pairwise_similarity=0.9).evaluate([0, 1], completions=["a b c", None])

        assert ("missing_completion",) == decision.external_reasons

    def test_missing_completion_is_ignored_when_the_gate_is_off(self) -> None:
        assert GroupAdmissionPolicy().evaluate([0, 1], completions=["a", None]).admitted


class TestRollouts:
    def test_segments_of_one_rollout_count_once(self) -> None:
        decision = policy(min_reward_std=1e-6).evaluate([1, 1, 1, 0], rollout_ids=["a", "a", "a", "b"])

        assert 4 == decision.group_size
        assert 2 == decision.unique_rollouts
        assert 0.5 == decision.reward_mean

    def test_one_rollout_with_many_segments_is_exact_dead(self) -> None:
        decision = policy(min_reward_std=1e-6).evaluate([1, 1, 1], rollout_ids=[7, 7, 7])

        assert RejectionReason.EXACT_DEAD == decision.reason

    def test_segments_that_disagree_make_the_group_external(self) -> None:
        decision = GroupAdmissionPolicy().evaluate([1, 0, 1], rollout_ids=["a", "a", "b"])

        assert ("inconsistent_rollout_rewards",) == decision.external_reasons

    def test_none_ids_are_separate_rollouts(self) -> None:
        assert 3 == GroupAdmissionPolicy().evaluate([1, 1, 1], rollout_ids=[None, None, None]).unique_rollouts

    def test_segment_completions_are_joined_per_rollout(self) -> None:
        seen: list[tuple[str, str]] = []

        def scorer(a: str, b: str) -> float:
            seen.append((a, b))
            return 0.0

        GroupAdmissionPolicy(GroupAdmissionConfig(max_mean_pairwise_similarity=0.5), scorer=scorer).evaluate(
            [0, 0, 1], completions=["first", "second", "other"], rollout_ids=[1, 1, 2]
        )

        assert [("first\nsecond", "other")] == seen


class TestInputs:
    def test_numpy_torch_and_list_inputs_give_the_same_decision(self) -> None:
        torch = pytest.importorskip("torch")
        values = [0.0, 0.25, 0.5, 1.0]
        p = policy(min_reward_std=0.1)

        as_list = p.evaluate(values).to_dict()

        assert as_list == p.evaluate(np.array(values, dtype=np.float32)).to_dict()
        assert as_list == p.evaluate(torch.tensor(values, dtype=torch.bfloat16)).to_dict()
        assert as_list == p.evaluate(tuple(values)).to_dict()
        assert as_list == p.evaluate(iter(values)).to_dict()

    def test_numpy_and_bool_scalars_are_numbers(self) -> None:
        decision = GroupAdmissionPolicy().evaluate([np.float32(1), np.int64(0), True])

        assert 2 / 3 == pytest.approx(decision.reward_mean)

    def test_a_mapping_config_is_accepted(self) -> None:
        assert GroupAdmissionPolicy({"min_reward_std": 0.1}).config == GroupAdmissionConfig(
            min_reward_std=0.1
        )

    def test_group_key_is_carried_into_the_decision(self) -> None:
        assert "prompt-7" == GroupAdmissionPolicy().evaluate([0, 1], group_key="prompt-7").group_key


class TestDecision:
    def test_to_dict_is_json_safe(self) -> None:
        import json

        original = policy(min_reward_std=1e-6).evaluate([1.0, math.nan], group_key="g")

        data = json.loads(json.dumps(original.to_dict(), allow_nan=False))

        assert data["group_key"] == "g"
        assert data["reason"] == "external"
        assert data["reward_std"] is None

    def test_pull_request_aliases(self) -> None:
        decision = policy(min_reward_range=1.0).evaluate([0, 0.5])

        assert "near_tie" == decision.primary_rejection_reason
        with pytest.warns(DeprecationWarning, match="use failed_checks"):
            assert decision.failed_checks == decision.reasons
        assert decision.reason == "near_tie"  # the enum compares equal to its value

    def test_a_batch_results_reasons_are_its_primary_reasons_under_a_deprecated_name(self) -> None:
        result = policy(min_reward_std=1e-6).evaluate_batch([[0, 1], [1, 1]])

        with pytest.warns(DeprecationWarning, match=r"use primary_reasons "):
            assert [None, "exact_dead"] == result.reasons() == result.primary_reasons.tolist()


class TestLogging:
    def test_rejections_are_logged_with_reason_and_statistics(self) -> None:
        logger = structlog.get_logger("test")
        p = GroupAdmissionPolicy(GroupAdmissionConfig(min_reward_std=1e-6), logger=logger)

        with capture_logs() as logs:
            p.evaluate([1, 1], group_key="q1")
            p.evaluate([0, 1], group_key="q2")

        assert 1 == len(logs)
        assert "group_rejected" == logs[0]["event"]
        assert "exact_dead" == logs[0]["reason"]
        assert "q1" == logs[0]["group_key"]
        assert 0.0 == logs[0]["reward_std"]

    def test_the_default_policy_logs_nothing(self) -> None:
        with capture_logs() as logs:
            policy(min_reward_std=1e-6).evaluate([1, 1])

        assert [] == logs


def test_evaluate_batch_accepts_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    rewards = np.array([[0.0, 1.0, 1.0], [0.5, 0.5, 0.5], [0.2, 0.21, 0.2]])
    p = policy(min_reward_std=1e-6, min_reward_range=0.05)

    from_numpy = p.evaluate_batch(rewards)
    from_torch = p.evaluate_batch(torch.tensor(rewards, dtype=torch.float32))

    assert ["exact_dead", "near_tie"] == from_numpy.primary_reasons.tolist()[1:]
    assert from_numpy.primary_reasons.tolist() == from_torch.primary_reasons.tolist()


def test_a_list_of_tensors_and_fractions_are_rewards_too() -> None:
    torch = pytest.importorskip("torch")
    from fractions import Fraction

    p = policy(min_reward_std=1e-6)
    rows = [[0.0, 1.0, 1.0], [0.5, 0.5, 0.5]]

    from_tensors = p.evaluate_batch([torch.tensor(row) for row in rows])

    assert [p.evaluate(row).to_dict() for row in rows] == [d.to_dict() for d in from_tensors]
    assert p.evaluate([Fraction(1, 2), Fraction(1, 4)]).reward_mean == 0.375


def test_torch_rollout_ids_keep_their_integer_dtype() -> None:
    torch = pytest.importorskip("torch")
    big = 2**53  # float64 cannot tell big from big + 1
    ids = torch.tensor([[big, big + 1, big]], dtype=torch.int64)
    p = policy(min_reward_std=1e-6)

    batch = p.evaluate_batch([[0.0, 1.0, 0.0]], rollout_ids=ids).decision(0)
    single = p.evaluate([0.0, 1.0, 0.0], rollout_ids=ids[0])

    assert 2 == batch.unique_rollouts
    assert batch.to_dict() == single.to_dict()


def test_rejections_log_through_a_stdlib_logger(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    p = GroupAdmissionPolicy(GroupAdmissionConfig(min_reward_std=1e-6), logger=logging.getLogger("ga.test"))

    with caplog.at_level(logging.INFO, logger="ga.test"):
        p.evaluate([1, 1], group_key="q1")
        p.evaluate([0, 1], group_key="q2")
        p.evaluate_batch([[2, 2], [0, 1]], group_keys=["q3", "q4"])

    assert ["q1", "q3"] == [record.group_admission["group_key"] for record in caplog.records]
    assert all(record.getMessage().startswith("group_rejected {") for record in caplog.records)
    assert "exact_dead" == caplog.records[0].group_admission["reason"]
