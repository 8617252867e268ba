"""Each strategy's defining behaviour, on settings whose outcome is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from group_admission import AdmissionSession, GroupAdmissionConfig, GroupAdmissionPolicy, SamplingBudgetConfig
from group_admission.simulation import (
    DEFAULT_POLICY,
    BinaryTaskModel,
    CompositeTaskModel,
    ControllerResampling,
    DapoDynamicSampling,
    GroupBatch,
    NoFiltering,
    Oracle,
    PerTaskRetry,
    RagenTopP,
    RollResampling,
    SimulationConfig,
    SlimeWaves,
    StepContext,
    StepOutcome,
    StrategyResult,
    StreamingLaunches,
    ragen_top_p,
    simulate,
)
from group_admission.simulation._stream import GroupStream

#: Every task has pass rate ~0: every group is all-wrong, hence exact_dead.
DEAD = BinaryTaskModel(alpha=0.001, beta=1000)
#: A huge shaping spread: every group has spread, hence admitted.
LIVE = CompositeTaskModel(alpha=1, beta=1, shaping_spread=1.0)


def run(strategy: object, **config: object) -> StrategyResult:
    settings: dict[str, object] = {"steps": 5, "group_size": 4, "target_groups": 16}
    settings.update(config)
    return simulate(SimulationConfig(**settings), strategies=[strategy]).results[0]  # type: ignore[arg-type]


class TestSlimeWaves:
    def test_fallback_drops_exactly_the_over_sampling_surplus(self) -> None:
        # remaining starts at 32: the first 16 rejections are dropped, then rejected
        # groups are kept (remaining <= 16), so no second wave is needed.
        slime = SlimeWaves(over_sampling_batch_size=32, keep_when_insufficient=True)
        result = run(slime, tasks=DEAD, lengths={"cv": 0})
        for outcome in result.outcomes:
            assert (1, 32, 16, 16, 0) == (
                outcome.rounds,
                outcome.generated_groups,
                outcome.discarded_groups,
                outcome.delivered_groups,
                outcome.delivered_informative,
            )
            assert "target_met" == outcome.stop
        assert 16 * 5 == result.uninformative_delivered

    def test_strict_drops_everything_and_waves_until_the_safety_limit(self) -> None:
        result = run(SlimeWaves(over_sampling_batch_size=32), tasks=DEAD, safety_max_rounds=3)
        for outcome in result.outcomes:
            assert (3, 96, 96, 0) == (
                outcome.rounds,
                outcome.generated_groups,
                outcome.discarded_groups,
                outcome.delivered_groups,
            )
            assert "safety_limit" == outcome.stop
        assert 5 == result.safety_limit_hits
        assert 1.0 == result.budget_exhaustion_rate

    def test_fallback_is_a_no_op_without_over_sampling(self) -> None:
        result = run(SlimeWaves(keep_when_insufficient=True), tasks=DEAD)
        assert 0 == result.discarded_groups
        assert 16 * 5 == result.delivered_groups
        assert 1.0 == result.sampling_cost_multiplier

    def test_failed_rollouts_are_never_kept_by_the_fallback(self) -> None:
        slime = SlimeWaves(over_sampling_batch_size=32, keep_when_insufficient=True)
        clean = run(slime, tasks=DEAD, steps=10)
        failing = run(slime, tasks=DEAD, steps=10, failure_rate=0.5)
        assert 1.0 == clean.rounds_per_step
        # Failures are always dropped, so remaining falls below the target and a second wave opens.
        assert failing.max_rounds_per_step >= 2
        assert failing.rejected["external"] <= failing.discarded_groups
        assert 16 * 10 == failing.delivered_groups

    def test_strict_keeps_only_informative_groups_and_aborts_stragglers(self) -> None:
        result = run(SlimeWaves(over_sampling_batch_size=32), tasks=BinaryTaskModel(), lengths={"cv": 0.5})
        assert result.delivered_groups == result.delivered_informative == 16 * 5
        assert result.aborted_groups > 0
        for outcome in result.outcomes:
            assert 0 == outcome.generated_groups % 32
            assert outcome.aborted_groups + outcome.completed_groups == outcome.generated_groups

    def test_over_sampling_below_the_target_is_rejected_like_slime_asserts(self) -> None:
        with pytest.raises(ValueError, match="'over_sampling_batch_size' must be >= target_groups \\(16\\)"):
            run(SlimeWaves(over_sampling_batch_size=8))


class TestDapoDynamicSampling:
    def test_exceeding_max_num_gen_batches_is_an_error_step(self) -> None:
        result = run(DapoDynamicSampling(max_num_gen_batches=3), tasks=DEAD)
        assert 5 == result.error_steps
        assert 0 == result.delivered_groups
        assert 1.0 == result.budget_exhaustion_rate
        for outcome in result.outcomes:
            assert (3, 48, "max_num_gen_batches") == (outcome.rounds, outcome.generated_groups, outcome.stop)

    def test_unlimited_batches_stop_at_the_safety_limit(self) -> None:
        result = run(DapoDynamicSampling(), tasks=DEAD, safety_max_rounds=4)
        assert (0, 5) == (result.error_steps, result.safety_limit_hits)
        assert 4.0 == result.rounds_per_step

    def test_kept_groups_are_trimmed_to_the_target(self) -> None:
        result = run(DapoDynamicSampling(gen_batch_size=40), tasks=LIVE)
        for outcome in result.outcomes:
            assert (1, 40, 16, 24, 24) == (
                outcome.rounds,
                outcome.generated_groups,
                outcome.delivered_informative,
                outcome.discarded_groups,
                outcome.surplus_groups,
            )

    def test_single_member_groups_are_always_kept(self) -> None:
        result = run(DapoDynamicSampling(max_num_gen_batches=1), group_size=1)
        assert 0 == result.error_steps
        assert 16 * 5 == result.delivered_groups
        assert 0 == result.delivered_informative  # the policy's std gate rejects them all


class TestRollAndOracle:
    def test_roll_spends_exactly_the_oracle_groups_on_every_step(self) -> None:
        config = SimulationConfig(
            steps=12, group_size=4, target_groups=10, tasks=BinaryTaskModel(alpha=0.6, beta=1)
        )
        result = simulate(config, strategies=[RollResampling(), Oracle()])
        roll, oracle = result.results
        for left, right in zip(roll.outcomes, oracle.outcomes, strict=True):
            assert left.generated_groups == right.generated_groups
            assert left.delivered_informative == right.delivered_informative == 10
        assert roll.rounds_per_step >= 1

    def test_roll_hangs_on_dead_tasks_until_the_safety_limit(self) -> None:
        result = run(RollResampling(), tasks=DEAD, safety_max_rounds=5)
        assert 5 == result.safety_limit_hits
        assert 5 == result.max_rounds_per_step

    def test_oracle_is_a_lower_bound_at_equal_yield(self) -> None:
        config = SimulationConfig(
            steps=15, group_size=4, target_groups=12, tasks=BinaryTaskModel(alpha=0.5, beta=0.8)
        )
        budget = SamplingBudgetConfig(max_extra_groups=40, max_resample_rounds=5)
        strategies = [
            SlimeWaves(over_sampling_batch_size=24),
            SlimeWaves(over_sampling_batch_size=24, keep_when_insufficient=True),
            DapoDynamicSampling(),
            RollResampling(),
            ControllerResampling(budget=budget, mode="expected"),
            ControllerResampling(budget=budget, mode="confidence"),
            Oracle(),
        ]
        result = simulate(config, strategies=strategies)
        oracle = result.result("oracle")
        compared = 0
        for other in result.results[:-1]:
            for mine, best in zip(other.outcomes, oracle.outcomes, strict=True):
                if mine.delivered_informative >= best.delivered_informative:
                    assert mine.generated_groups >= best.generated_groups, other.name
                    compared += 1
        assert compared > 60


class TestControllerResampling:
    @pytest.mark.parametrize(
        "budget",
        [
            {"max_extra_groups": 5, "max_resample_rounds": 1},
            {"max_extra_groups": 30, "max_resample_rounds": 3, "max_extra_groups_per_round": 4},
            {"max_extra_groups": 50, "max_resample_rounds": 4, "max_total_samples": 16 * 4 + 20},
            {"max_extra_groups": 50, "max_resample_rounds": 4, "max_total_tokens": 16 * 4 * 100 + 1000},
            {"max_extra_groups": 50, "max_resample_rounds": 4, "mode": "confidence"},
        ],
    )
    def test_never_exceeds_its_caps(self, budget: dict[str, int]) -> None:
        config = SamplingBudgetConfig(**budget)  # type: ignore[arg-type]
        result = run(
            ControllerResampling(budget=config),
            tasks=BinaryTaskModel(alpha=0.4, beta=1),
            lengths={"mean_tokens": 100, "cv": 0},
            steps=12,
        )
        for outcome in result.outcomes:
            assert outcome.generated_groups <= 16 + config.max_extra_groups
            assert outcome.rounds <= 1 + config.max_resample_rounds
            if config.max_extra_groups_per_round is not None:
                assert (
                    outcome.generated_groups
                    <= 16 + config.max_extra_groups_per_round * config.max_resample_rounds
                )
            if config.max_total_samples is not None:
                assert outcome.generated_samples <= config.max_total_samples
            if config.max_total_tokens is not None:
                assert outcome.generated_tokens <= config.max_total_tokens
            if outcome.stop == "budget_exhausted":
                assert outcome.exhausted_slots == 16 - outcome.delivered_informative > 0

    def test_a_small_budget_is_exhausted_and_reported(self) -> None:
        result = run(
            ControllerResampling(budget={"max_extra_groups": 2, "max_resample_rounds": 1}),
            tasks=BinaryTaskModel(alpha=0.2, beta=1),
        )
        assert result.exhausted_steps > 0
        assert result.budget_exhaustion_rate == pytest.approx(1 - result.final_informative_rate)

    def test_confidence_mode_needs_fewer_rounds_than_expected_mode(self) -> None:
        budget = SamplingBudgetConfig(max_extra_groups=64, max_resample_rounds=6)
        config = SimulationConfig(
            steps=40, group_size=8, target_groups=16, tasks=BinaryTaskModel(alpha=0.5, beta=0.5)
        )
        expected, confidence = simulate(
            config,
            strategies=[
                ControllerResampling(budget=budget, mode="expected"),
                ControllerResampling(budget=budget, mode="confidence"),
            ],
        ).results
        assert confidence.rounds_per_step < expected.rounds_per_step
        assert confidence.generated_groups >= expected.generated_groups
        assert confidence.final_informative_rate == expected.final_informative_rate == 1.0

    def test_carry_rate_plans_the_first_round_from_the_last_step(self) -> None:
        budget = SamplingBudgetConfig(max_extra_groups=64, max_resample_rounds=4)
        result = run(
            ControllerResampling(budget=budget, carry_rate=True),
            tasks=BinaryTaskModel(alpha=0.5, beta=0.5),
            steps=6,
        )
        first, *later = result.outcomes
        assert 16 == first.first_round_groups
        assert all(outcome.first_round_groups > 16 for outcome in later)

    @pytest.mark.parametrize("carry_rate", [False, True])
    def test_each_step_is_an_admission_session_step(self, carry_rate: bool) -> None:
        config = SimulationConfig(
            steps=4, group_size=4, target_groups=8, tasks=BinaryTaskModel(alpha=0.5, beta=0.5)
        )
        budget = SamplingBudgetConfig(max_extra_groups=12, max_resample_rounds=3)
        strategy = ControllerResampling(budget=budget, carry_rate=carry_rate)
        outcomes = simulate(config, strategies=[strategy]).results[0].outcomes
        session = AdmissionSession(DEFAULT_POLICY, budget=budget)
        for step, outcome in enumerate(outcomes):
            # The loop of docs/session.md, run by hand on the same stream.
            stream, drawn, count = GroupStream(config, step), 0, 8
            if not carry_rate:
                session = AdmissionSession(DEFAULT_POLICY, budget=budget)
            session.begin_step(8)
            if step and carry_rate:
                count = session.plan(num_generations=4).extra_groups
            while count:
                batch = stream.groups(drawn, count)
                drawn += count
                session.judge_batch(batch.rewards, generated_tokens=int(batch.tokens.sum()))
                count = session.plan(num_generations=4).extra_groups
            report = session.end_step()

            assert (
                report.generated_groups,
                report.generated_tokens,
                report.sampling_rounds,
                report.trained_groups,
                report.surplus_groups,
                report.short_groups,
            ) == (
                outcome.generated_groups,
                outcome.generated_tokens,
                outcome.rounds,
                outcome.delivered_groups,
                outcome.surplus_groups,
                outcome.exhausted_slots,
            )

    def test_admitted_groups_beyond_the_target_are_surplus(self) -> None:
        # A plan asks for remaining / rate groups, so a lucky round admits more than it needs.
        result = run(
            ControllerResampling(budget={"max_extra_groups": 64, "max_resample_rounds": 4}),
            tasks=BinaryTaskModel(alpha=0.5, beta=0.5),
            steps=20,
        )
        assert result.surplus_groups > 0
        for outcome in result.outcomes:
            assert outcome.delivered_groups == min(16, outcome.admitted_groups)
            assert outcome.surplus_groups == max(0, outcome.admitted_groups - 16)

    def test_default_budget_scales_with_the_target(self) -> None:
        strategy = ControllerResampling(mode="confidence")
        assert SamplingBudgetConfig(max_extra_groups=20, max_resample_rounds=3, mode="confidence") == (
            strategy.effective_budget(10)
        )
        assert "controller(confidence)" == strategy.name


#: Caps no dead step exhausts for thousands of rounds: only the safety limit stops it.
ENDLESS = {"max_extra_groups": 10**5, "max_extra_groups_per_round": 16, "max_resample_rounds": 10**6}


class TestSafetyLimitBoundsEveryStrategy:
    @pytest.mark.parametrize(
        "strategy",
        [
            ControllerResampling(budget=ENDLESS),
            PerTaskRetry(budget={**ENDLESS, "max_extra_groups_per_round": 1}),
            StreamingLaunches(budget=ENDLESS),
        ],
        ids=lambda strategy: strategy.kind,
    )
    def test_a_budget_allowing_endless_rounds_stops_at_the_safety_limit(self, strategy: object) -> None:
        """It ran a hundred thousand rounds a step (a hang from the CLI); now five, counted."""
        result = run(strategy, tasks=DEAD, steps=2, safety_max_rounds=5)

        assert 5 == result.max_rounds_per_step
        assert 2 == result.safety_limit_hits
        for outcome in result.outcomes:
            assert "safety_limit" == outcome.stop
            assert outcome.exhausted_slots == 16 - outcome.delivered_informative


class TestPerTaskRetry:
    def test_pull_request_caps_retry_each_rejected_task_with_two_groups_once(self) -> None:
        result = run(PerTaskRetry(), tasks=BinaryTaskModel(alpha=0.5, beta=0.5), group_size=3, steps=8)
        for outcome in result.outcomes:
            rejected = 16 - outcome.first_round_admitted
            assert 16 + 2 * rejected == outcome.generated_groups
            assert (2 if rejected else 1) == outcome.rounds
            assert outcome.exhausted_slots == 16 - outcome.delivered_informative
        assert 0 < result.recovery_rate < 1  # type: ignore[operator]

    def test_a_sample_cap_limits_each_task(self) -> None:
        strategy = PerTaskRetry(
            budget={"max_extra_groups": 2, "max_resample_rounds": 1, "max_total_samples": 6}
        )
        result = run(strategy, tasks=BinaryTaskModel(alpha=0.5, beta=0.5), group_size=3)
        for outcome in result.outcomes:
            assert 16 + (16 - outcome.first_round_admitted) == outcome.generated_groups

    def test_a_zero_rate_spends_the_group_cap_in_one_round(self) -> None:
        strategy = PerTaskRetry(budget={"max_extra_groups": 3, "max_resample_rounds": 3})
        result = run(strategy, tasks=DEAD, group_size=3)
        for outcome in result.outcomes:
            # Every group fails: the rate estimate is 0, so the first retry round asks for
            # the whole cap of 3 groups; after it the cap is spent.
            assert 16 * 4 == outcome.generated_groups
            assert 16 == outcome.exhausted_slots

    def test_a_second_admitted_group_of_a_task_is_surplus(self) -> None:
        result = run(PerTaskRetry(), tasks=BinaryTaskModel(alpha=0.5, beta=0.5), group_size=3, steps=8)
        assert result.surplus_groups > 0
        for outcome in result.outcomes:
            retried = outcome.generated_groups - 16
            recovered = outcome.delivered_informative - outcome.first_round_admitted
            assert outcome.surplus_groups == outcome.admitted_groups - outcome.delivered_informative
            assert recovered + outcome.surplus_groups <= retried

    def test_no_resample_round_means_no_retry(self) -> None:
        result = run(PerTaskRetry(budget={"max_extra_groups": 2}), tasks=BinaryTaskModel(alpha=0.5, beta=0.5))
        assert 1.0 == result.sampling_cost_multiplier
        assert result.final_informative_rate == result.initial_informative_rate


class TestRagenTopP:
    @pytest.mark.parametrize(
        ("scores", "top_p", "include_zero", "expected"),
        [
            ([4, 3, 2, 1], 0.6, True, [0, 1]),  # RAGEN's own test cases
            ([3, 1, 1, 0], 0.9, False, [0, 1, 2]),
            ([0, 0, 0], 0.5, True, []),  # threshold <= 0: nothing selected, the step is empty
            ([2, 0, 1], 1.0, True, [0, 1, 2]),
            ([2, 0, 1], 1.0, False, [0, 2]),
            ([1] * 10, 0.55, True, list(range(6))),  # ceil(5.5 - 0.01) of equal scores
        ],
    )
    def test_selection_matches_ragen(
        self, scores: list[float], top_p: float, include_zero: bool, expected: list[int]
    ) -> None:
        selected = ragen_top_p(np.array(scores, dtype=float), top_p=top_p, include_zero=include_zero)
        assert expected == sorted(selected.tolist())

    @given(
        st.lists(st.floats(0, 5, allow_nan=False), min_size=1, max_size=30),
        st.floats(0.05, 0.99),
    )
    def test_selection_is_the_shortest_prefix_reaching_the_share(
        self, values: list[float], top_p: float
    ) -> None:
        scores = np.array(values)
        selected = ragen_top_p(scores, top_p=top_p)
        threshold = top_p * scores.sum() - 0.01
        if len(selected) == 0:
            assert threshold <= 0 or scores.sum() == 0
            return
        chosen = scores[selected].tolist()
        # Summed left to right, as the walk does.
        assert sum(chosen) >= threshold
        assert sum(chosen[:-1]) < threshold
        assert min(chosen) >= np.delete(scores, selected).max(initial=0.0)

    def test_strategy_keeps_a_top_p_share_and_never_resamples(self) -> None:
        result = run(RagenTopP(top_p=0.5), tasks=BinaryTaskModel(), steps=6)
        assert 1.0 == result.sampling_cost_multiplier
        for outcome in result.outcomes:
            # Equal-ish stds: about half the informative groups, never more than the target.
            assert 0 < outcome.delivered_groups <= math.ceil(0.5 * outcome.first_round_admitted) + 1
        assert result.final_informative_rate < result.initial_informative_rate  # type: ignore[operator]

    def test_top_p_one_keeps_every_group(self) -> None:
        result = run(RagenTopP(top_p=1.0), tasks=DEAD)
        assert 16 * 5 == result.delivered_groups


def test_no_filtering_trains_on_everything() -> None:
    result = run(NoFiltering(), tasks=BinaryTaskModel(alpha=0.5, beta=0.5))
    assert 16 * 5 == result.delivered_groups
    assert result.delivered_informative == result.admitted_groups
    assert result.final_informative_rate == result.initial_informative_rate


def test_strategies_use_the_given_policy() -> None:
    loose = simulate(
        SimulationConfig(steps=3, tasks=LIVE, group_size=4),
        policy={"min_reward_std": 1e-6},
        strategies=["no_filtering"],
    )
    strict = simulate(
        SimulationConfig(steps=3, tasks=LIVE, group_size=4),
        policy=GroupAdmissionConfig(min_reward_std=100.0),
        strategies=["no_filtering"],
    )
    assert loose.results[0].admitted_groups == 48
    assert strict.results[0].admitted_groups == 0
    assert strict.results[0].rejected["near_tie"] == 48


class _FixedStream(GroupStream):
    """A stream that serves hand-made groups: 'L' live (admitted) or 'D' dead, with durations."""

    def __init__(self, kinds: str, durations: list[int]) -> None:
        rewards = np.array([[0.0, 1.0] if kind == "L" else [0.0, 0.0] for kind in kinds])
        self.batch = GroupBatch(
            tasks=np.full((len(kinds), 1), 0.5),
            rewards={"outcome": rewards},
            tokens=np.repeat(np.array(durations)[:, None], 2, axis=1),
            failed=np.zeros(len(kinds), dtype=bool),
        )

    def groups(self, start: int, count: int) -> GroupBatch:
        return self.batch.select(slice(start, start + count))


def slime_step(strategy: SlimeWaves, kinds: str, durations: list[int]) -> StepOutcome:
    config = SimulationConfig(group_size=2, target_groups=2, steps=1)
    stream = _FixedStream(kinds, durations)
    policy = GroupAdmissionPolicy({"min_reward_std": 1e-6})
    return strategy.run_step(StepContext(config, policy, stream, 0, {}))


class TestSlimeByHand:
    # Wave 1 (t=0): D(1) D(2) D(3) L(4); wave 2 would start at t=3: L(1) D(1) D(5) D(5).
    KINDS, DURATIONS = "DDDLLDDD", [1, 2, 3, 4, 1, 1, 5, 5]

    def test_fallback_keeps_the_third_rejection_once_remaining_reaches_the_target(self) -> None:
        # remaining 4 -> 3 -> 2 (drops); at t=3 remaining == target, so the dead group is
        # kept by the fallback; at t=4 the live group fills the batch. No second wave.
        step = slime_step(SlimeWaves(over_sampling_batch_size=4, keep_when_insufficient=True), *self._args())
        assert (1, 4, 0, 2, 1, 2) == (
            step.rounds,
            step.generated_groups,
            step.aborted_groups,
            step.delivered_groups,
            step.delivered_informative,
            step.discarded_groups,
        )
        assert 4.0 == step.generation_time

    def test_strict_opens_a_second_full_wave_and_aborts_its_stragglers(self) -> None:
        # The third drop leaves remaining = 1 < 2: a full wave of 4 starts at t=3. At t=4
        # the last group of wave 1 and the first of wave 2 (both live) finish together and
        # fill the batch; wave 2's D(1) finished at t=4 too and is dropped, D(5) D(5) abort.
        step = slime_step(SlimeWaves(over_sampling_batch_size=4), *self._args())
        assert (2, 8, 2, 2, 2, 4) == (
            step.rounds,
            step.generated_groups,
            step.aborted_groups,
            step.delivered_groups,
            step.delivered_informative,
            step.discarded_groups,
        )
        # Tokens: 2 members x (1 + 2 + 3 + 4 + 1 + 1) finished, and the aborted D(5)s ran 1 step each.
        assert 2 * 12 + 2 * 2 * 1 == step.generated_tokens
        assert 4.0 == step.generation_time

    def _args(self) -> tuple[str, list[int]]:
        return self.KINDS, self.DURATIONS
