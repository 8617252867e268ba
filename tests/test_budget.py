"""SamplingBudgetController: plan semantics, hard caps (stateful), monotonicity, golden traces."""

from __future__ import annotations

import json
import math
import os
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from group_admission import (
    AdmissionStats,
    CheckpointError,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    ResamplePlan,
    SamplingBudgetConfig,
    SamplingBudgetController,
    SamplingBudgetState,
    binomial_groups_needed,
)

POLICY = GroupAdmissionPolicy(GroupAdmissionConfig(min_reward_std=1e-6))
GOOD = POLICY.evaluate([0.0, 1.0])
DEAD = POLICY.evaluate([1.0, 1.0])
GOLDEN = Path(__file__).parent / "data" / "golden"


def decisions(admitted: int, rejected: int) -> list:
    return [GOOD] * admitted + [DEAD] * rejected


def counts(admitted: int, rejected: int) -> dict[str, int]:
    """The keyword counts of a round with ``admitted`` and ``rejected`` groups."""
    return {"groups": admitted + rejected, "admitted": admitted}


def controller(**fields: Any) -> SamplingBudgetController:
    return SamplingBudgetController(SamplingBudgetConfig(**fields))


class TestPlans:
    def test_the_default_budget_disables_resampling(self) -> None:
        ctl = controller()
        state = ctl.new_state()
        ctl.observe_round(state, **counts(2, 2), num_generations=4)

        plan = ctl.plan_resampling(state, target_groups=4, num_generations=4)

        assert (
            ResamplePlan(
                extra_groups=0,
                remaining_target_groups=2,
                effective_rate=0.5,
                exhausted=True,
                limited_by=("resample_round_budget",),
            )
            == plan
        )

    def test_target_met_is_not_exhaustion(self) -> None:
        ctl = controller(max_extra_groups=4, max_resample_rounds=1)
        state = ctl.new_state()
        ctl.observe_round(state, **counts(4, 0), num_generations=4)

        plan = ctl.plan_resampling(state, target_groups=4, num_generations=4)

        assert (0, False, ("target_met",)) == (plan.extra_groups, plan.exhausted, plan.limited_by)

    def test_expected_mode_asks_remaining_over_rate(self) -> None:
        ctl = controller(max_extra_groups=100, max_resample_rounds=3)
        state = ctl.new_state()
        ctl.observe_round(state, **counts(6, 4), num_generations=8)

        plan = ctl.plan_resampling(state, target_groups=10, num_generations=8)

        assert 0.6 == plan.effective_rate
        assert math.ceil(4 / 0.6) == plan.extra_groups == plan.requested_groups
        assert () == plan.limited_by

    def test_the_rate_is_floored(self) -> None:
        ctl = controller(max_extra_groups=1000, max_resample_rounds=3, min_effective_rate=0.1)
        state = ctl.new_state()
        ctl.observe_round(state, **counts(0, 10), num_generations=8)

        plan = ctl.plan_resampling(state, target_groups=10, num_generations=8)

        assert (0.1, 100) == (plan.effective_rate, plan.extra_groups)

    def test_the_ema_starts_at_the_first_round_then_moves_by_alpha(self) -> None:
        ctl = controller(effective_rate_ema_alpha=0.25)
        state = ctl.new_state()
        ctl.observe_round(state, **counts(1, 3), num_generations=2)
        first = state.effective_rate_ema
        ctl.observe_round(state, **counts(1, 0), num_generations=2)

        assert 0.25 == first
        assert 0.25 * 1.0 + 0.75 * 0.25 == state.effective_rate_ema

    def test_a_round_without_groups_leaves_the_rate_alone(self) -> None:
        ctl = controller()
        state = ctl.new_state()
        ctl.observe_round(state, groups=0, admitted=0, num_generations=2)

        assert (1, None) == (state.sampling_rounds, state.effective_rate_ema)

    def test_caps_bind_at_group_granularity_and_are_all_named(self) -> None:
        ctl = controller(
            max_extra_groups=10,
            max_extra_groups_per_round=5,
            max_resample_rounds=2,
            max_total_samples=10 * 3 + 5 * 3 + 2,
            max_total_tokens=10 * 100 + 5 * 100 + 99,
        )
        state = ctl.new_state()
        ctl.observe_round(state, **counts(2, 8), num_generations=3, generated_tokens=1000)

        plan = ctl.plan_resampling(state, target_groups=10, num_generations=3)

        # 17 samples and 599 tokens of room are 5 groups each; the per-round cap is 5 too.
        assert 5 == plan.extra_groups
        assert ("per_round_group_budget", "sample_budget", "token_budget") == plan.limited_by
        assert 40 == plan.requested_groups

    def test_the_extra_group_budget_counts_every_generated_group(self) -> None:
        ctl = controller(max_extra_groups=3, max_resample_rounds=5)
        state = ctl.new_state()
        ctl.observe_round(state, **counts(1, 9), num_generations=2)

        plan = ctl.plan_resampling(state, target_groups=10, num_generations=2)

        assert (3, ("extra_group_budget",)) == (plan.extra_groups, plan.limited_by)

    def test_an_explicit_token_estimate_wins_over_the_observed_average(self) -> None:
        ctl = controller(max_extra_groups=50, max_resample_rounds=2, max_total_tokens=2000)
        state = ctl.new_state()
        ctl.observe_round(state, **counts(5, 5), num_generations=2, generated_tokens=1000)

        observed = ctl.plan_resampling(state, target_groups=10, num_generations=2)
        estimated = ctl.plan_resampling(
            state, target_groups=10, num_generations=2, estimated_tokens_per_group=250
        )

        assert (10, 4) == (observed.extra_groups, estimated.extra_groups)

    def test_exhaustion_by_a_cap_is_explicit(self) -> None:
        ctl = controller(max_extra_groups=10, max_resample_rounds=3, max_total_samples=20)
        state = ctl.new_state()
        ctl.observe_round(state, **counts(0, 10), num_generations=2)

        plan = ctl.plan_resampling(state, target_groups=10, num_generations=2)

        assert (0, True, ("sample_budget",)) == (plan.extra_groups, plan.exhausted, plan.limited_by)

    def test_planning_before_any_round_asks_for_the_target(self) -> None:
        ctl = controller(max_total_samples=12)
        plan = ctl.plan_resampling(ctl.new_state(), target_groups=8, num_generations=2)

        assert (6, ("sample_budget",)) == (plan.extra_groups, plan.limited_by)

    def test_decisions_stats_and_batch_results_still_count_but_are_deprecated(self) -> None:
        import numpy as np

        ctl = controller()
        from_counts, from_stats, from_batch, from_list = (ctl.new_state() for _ in range(4))
        stats = AdmissionStats()
        stats.add_many(decisions(3, 1))
        ctl.observe_round(from_counts, **counts(3, 1), num_generations=2)
        with pytest.warns(DeprecationWarning, match="pass groups= and admitted="):
            ctl.observe_round(from_stats, stats, num_generations=2)
        with pytest.warns(DeprecationWarning, match="pass groups= and admitted="):
            ctl.observe_round(
                from_batch, POLICY.evaluate_batch(np.array([[0, 1]] * 3 + [[1, 1]])), num_generations=2
            )
        with pytest.warns(DeprecationWarning, match="pass groups= and admitted="):
            ctl.observe_round(from_list, decisions(3, 1), num_generations=2)

        assert from_stats == from_batch == from_list == from_counts
        assert (4, 8, 3, 1) == (
            from_stats.generated_groups,
            from_stats.generated_samples,
            from_stats.admitted_groups,
            from_stats.rejected_groups,
        )

    def test_new_state_can_carry_the_rate_across_steps(self) -> None:
        ctl = controller()
        old = ctl.new_state()
        ctl.observe_round(old, **counts(1, 1), num_generations=2)

        assert SamplingBudgetState(effective_rate_ema=0.5) == ctl.new_state(carry_rate_from=old)


class TestDeterminismAndCheckpoints:
    def test_a_restored_state_plans_exactly_what_the_original_would(self) -> None:
        ctl = controller(max_extra_groups=20, max_resample_rounds=3, max_total_tokens=5000, mode="confidence")
        state = ctl.new_state()
        ctl.observe_round(state, **counts(3, 7), num_generations=4, generated_tokens=1234)

        restored = SamplingBudgetState.from_dict(json.loads(json.dumps(state.to_dict())))
        twin = SamplingBudgetController(SamplingBudgetConfig.from_mapping(ctl.config.to_dict()))

        assert ctl.plan_resampling(state, target_groups=10, num_generations=4) == twin.plan_resampling(
            restored, target_groups=10, num_generations=4
        )

    def test_planning_never_changes_the_state(self) -> None:
        ctl = controller(max_extra_groups=20, max_resample_rounds=3)
        state = ctl.new_state()
        ctl.observe_round(state, **counts(3, 7), num_generations=4)
        before = state.to_dict()

        first = ctl.plan_resampling(state, target_groups=10, num_generations=4)
        second = ctl.plan_resampling(state, target_groups=10, num_generations=4)

        assert first == second
        assert before == state.to_dict()


class TestBinomial:
    @pytest.mark.parametrize(
        ("remaining", "rate", "confidence"),
        [(1, 0.5, 0.9), (5, 0.3, 0.9), (3, 0.8, 0.5), (10, 0.05, 0.99), (4, 1.0, 0.9)],
    )
    def test_smallest_n_reaching_the_confidence(self, remaining: int, rate: float, confidence: float) -> None:
        def tail(n: int) -> float:
            return sum(math.comb(n, k) * rate**k * (1 - rate) ** (n - k) for k in range(remaining, n + 1))

        n = binomial_groups_needed(remaining, rate, confidence)

        assert tail(n) >= confidence - 1e-12
        assert n == remaining or tail(n - 1) < confidence

    def test_nothing_remaining_needs_nothing(self) -> None:
        assert 0 == binomial_groups_needed(0, 0.3, 0.9)


@given(
    admitted=st.integers(0, 40),
    rejected=st.integers(0, 40),
    target=st.integers(0, 60),
    extra=st.integers(0, 80),
    per_round=st.one_of(st.none(), st.integers(0, 30)),
    samples=st.one_of(st.none(), st.integers(0, 2000)),
    bump=st.integers(1, 50),
)
def test_a_larger_budget_never_plans_fewer_groups(
    admitted: int,
    rejected: int,
    target: int,
    extra: int,
    per_round: int | None,
    samples: int | None,
    bump: int,
) -> None:
    small = {
        "max_extra_groups": extra,
        "max_extra_groups_per_round": per_round,
        "max_resample_rounds": 2,
        "max_total_samples": samples,
    }
    large = {
        "max_extra_groups": extra + bump,
        "max_resample_rounds": 3,
        "max_extra_groups_per_round": None if per_round is None else per_round + bump,
        "max_total_samples": None if samples is None else samples + bump * 8,
    }
    state = SamplingBudgetState()
    SamplingBudgetController().observe_round(state, **counts(admitted, rejected), num_generations=8)

    few = controller(**small).plan_resampling(state, target_groups=target, num_generations=8)
    many = controller(**large).plan_resampling(state, target_groups=target, num_generations=8)

    assert many.extra_groups >= few.extra_groups


@given(
    admitted=st.integers(0, 40),
    rejected=st.integers(0, 40),
    target=st.integers(0, 60),
    extra=st.integers(0, 200),
    confidence=st.floats(0.01, 0.99),
    floor=st.floats(0.01, 1.0),
)
def test_confidence_mode_never_plans_fewer_than_expected_mode(
    admitted: int, rejected: int, target: int, extra: int, confidence: float, floor: float
) -> None:
    state = SamplingBudgetState()
    SamplingBudgetController().observe_round(state, **counts(admitted, rejected), num_generations=4)
    common = {"max_extra_groups": extra, "max_resample_rounds": 2, "min_effective_rate": floor}

    expected = controller(**common).plan_resampling(state, target_groups=target, num_generations=4)
    confident = controller(**common, mode="confidence", confidence=confidence).plan_resampling(
        state, target_groups=target, num_generations=4
    )

    assert confident.extra_groups >= expected.extra_groups


class BudgetMachine(RuleBasedStateMachine):
    """A caller that follows every plan, whatever the admission outcomes and token counts."""

    @initialize(
        extra=st.integers(0, 40),
        per_round=st.one_of(st.none(), st.integers(1, 20)),
        rounds=st.integers(0, 4),
        samples=st.one_of(st.none(), st.integers(0, 600)),
        tokens=st.one_of(st.none(), st.integers(0, 40_000)),
        mode=st.sampled_from(["expected", "confidence"]),
        alpha=st.floats(0.05, 1.0),
        goal=st.integers(1, 24),
        generations=st.integers(1, 8),
        tokens_per_group=st.integers(1, 800),
    )
    def setup(
        self,
        extra: int,
        per_round: int | None,
        rounds: int,
        samples: int | None,
        tokens: int | None,
        mode: str,
        alpha: float,
        goal: int,
        generations: int,
        tokens_per_group: int,
    ) -> None:
        self.config = SamplingBudgetConfig(
            max_extra_groups=extra,
            max_extra_groups_per_round=per_round,
            max_resample_rounds=rounds,
            max_total_samples=samples,
            max_total_tokens=tokens,
            mode=mode,
            effective_rate_ema_alpha=alpha,
        )
        self.ctl = SamplingBudgetController(self.config)
        self.state = self.ctl.new_state()
        self.target, self.generations, self.bound = goal, generations, tokens_per_group

    def _plan(self) -> ResamplePlan:
        return self.ctl.plan_resampling(
            self.state,
            target_groups=self.target,
            num_generations=self.generations,
            estimated_tokens_per_group=self.bound,
        )

    @rule(data=st.data())
    def generate_what_the_plan_says(self, data: st.DataObject) -> None:
        plan = self._plan()
        groups = plan.extra_groups
        if not groups:
            return  # done or exhausted: a caller that follows the plan stops here
        admitted = data.draw(st.integers(0, groups), label="admitted")
        tokens = data.draw(st.integers(0, groups * self.bound), label="tokens")
        self.ctl.observe_round(
            self.state,
            **counts(admitted, groups - admitted),
            num_generations=self.generations,
            generated_tokens=tokens,
        )

    @invariant()
    def hard_caps_hold(self) -> None:
        state, config = self.state, self.config
        assert state.generated_groups <= self.target + config.max_extra_groups
        assert state.resample_rounds <= config.max_resample_rounds
        if config.max_total_samples is not None:
            assert state.generated_samples <= config.max_total_samples
        if config.max_total_tokens is not None:
            assert state.generated_tokens <= config.max_total_tokens

    @invariant()
    def the_plan_is_consistent(self) -> None:
        plan = self._plan()
        assert plan.extra_groups >= 0
        assert plan.exhausted == (plan.extra_groups == 0 and plan.remaining_target_groups > 0)
        if plan.remaining_target_groups == 0:
            assert ("target_met",) == plan.limited_by
        if self.config.max_extra_groups_per_round is not None:
            assert plan.extra_groups <= self.config.max_extra_groups_per_round


TestBudgetMachine = BudgetMachine.TestCase


def test_a_reject_everything_policy_ends_in_explicit_exhaustion() -> None:
    ctl = controller(max_extra_groups=1000, max_resample_rounds=4)
    state = ctl.new_state()
    ctl.observe_round(state, **counts(0, 8), num_generations=4)
    rounds = 1
    while (plan := ctl.plan_resampling(state, target_groups=8, num_generations=4)).extra_groups:
        ctl.observe_round(state, **counts(0, plan.extra_groups), num_generations=4)
        rounds += 1

    assert 5 == rounds
    assert plan.exhausted
    assert ("resample_round_budget",) == plan.limited_by


# -- golden traces ----------------------------------------------------------------------
SCENARIOS: dict[str, dict[str, Any]] = {
    "expected_binary": {
        "config": {"max_extra_groups": 16, "max_resample_rounds": 3},
        "target": 16,
        "generations": 8,
        "tokens_per_group": None,
        "admit_rate": [0.5, 0.7, 0.2, 0.9],
    },
    "confidence_binary": {
        "config": {"max_extra_groups": 16, "max_resample_rounds": 3, "mode": "confidence"},
        "target": 16,
        "generations": 8,
        "tokens_per_group": None,
        "admit_rate": [0.5, 0.7, 0.2, 0.9],
    },
    "token_capped": {
        "config": {
            "max_extra_groups": 50,
            "max_resample_rounds": 5,
            "max_total_tokens": 9000,
            "max_extra_groups_per_round": 6,
        },
        "target": 10,
        "generations": 3,
        "tokens_per_group": 300,
        "admit_rate": [0.3, 0.3, 0.3, 0.3, 0.3, 0.3],
    },
    "pr_experiment_task": {
        "config": {
            "max_extra_groups": 2,
            "max_resample_rounds": 1,
            "max_total_samples": 9,
            "max_total_tokens": 30000,
        },
        "target": 1,
        "generations": 3,
        "tokens_per_group": 3000,
        "admit_rate": [0.0, 0.0],
    },
}


def trace(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    ctl = SamplingBudgetController(scenario["config"])
    state = ctl.new_state()
    rows = []
    groups = scenario["target"]
    for rate in scenario["admit_rate"]:
        admitted = math.floor(groups * rate)
        tokens = groups * (scenario["tokens_per_group"] or 0)
        ctl.observe_round(
            state,
            **counts(admitted, groups - admitted),
            num_generations=scenario["generations"],
            generated_tokens=tokens,
        )
        plan = ctl.plan_resampling(
            state,
            target_groups=scenario["target"],
            num_generations=scenario["generations"],
            estimated_tokens_per_group=scenario["tokens_per_group"],
        )
        rows.append({"admitted": admitted, "state": state.to_dict(), "plan": plan.to_dict()})
        groups = plan.extra_groups
        if not groups:
            break
    return rows


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_golden_trace(name: str) -> None:
    path = GOLDEN / f"budget_{name}.json"
    actual = trace(SCENARIOS[name])
    if os.environ.get("GA_REGENERATE_GOLDEN") == "1":  # pragma: no cover - maintenance switch
        path.write_text(json.dumps(actual, indent=1) + "\n")

    assert json.loads(path.read_text()) == actual


# -- checkpoints: every reachable state round-trips; a corruption is refused --------------
_rounds = st.lists(
    st.tuples(
        st.integers(0, 6),  # admitted
        st.integers(0, 6),  # rejected
        st.one_of(st.none(), st.integers(0, 10)),  # extra samples beyond one per group
        st.integers(0, 500),  # tokens
    ),
    max_size=5,
)
_STATE_KEYS = tuple(SamplingBudgetState().to_dict())


def _reachable_state(
    carried: list[tuple[int, int, int | None, int]], rounds: list[Any]
) -> SamplingBudgetState:
    ctl = controller(effective_rate_ema_alpha=0.3)
    previous = ctl.new_state()
    for admitted, rejected, _, tokens in carried:
        ctl.observe_round(previous, **counts(admitted, rejected), num_generations=2, generated_tokens=tokens)
    state = ctl.new_state(carry_rate_from=previous)
    for admitted, rejected, extra, tokens in rounds:
        if extra is None:
            ctl.observe_round(state, **counts(admitted, rejected), num_generations=3, generated_tokens=tokens)
        else:
            samples = admitted + rejected + extra
            ctl.observe_round(
                state, **counts(admitted, rejected), generated_samples=samples, generated_tokens=tokens
            )
    return state


def _consistent(data: dict[str, Any]) -> bool:
    """The documented relations of a budget state, restated independently of the library."""
    if set(data) != set(_STATE_KEYS):
        return False
    counts = {key: value for key, value in data.items() if key != "effective_rate_ema"}
    if not all(type(value) is int and value >= 0 for value in counts.values()):
        return False
    ema = data["effective_rate_ema"]
    if ema is not None and (type(ema) is not float or not 0.0 <= ema <= 1.0):  # a float, as written
        return False
    return (
        data["admitted_groups"] + data["rejected_groups"] == data["generated_groups"]
        and data["generated_samples"] >= data["generated_groups"]
        and (data["sampling_rounds"] > 0 or not (data["generated_samples"] or data["generated_tokens"]))
        and (ema is not None or data["generated_groups"] == 0)
    )


@given(carried=_rounds, rounds=_rounds)
def test_every_reachable_state_round_trips_through_json(carried: list[Any], rounds: list[Any]) -> None:
    state = _reachable_state(carried, rounds)

    assert _consistent(state.to_dict())
    assert state == SamplingBudgetState.from_dict(json.loads(json.dumps(state.to_dict())))


@given(carried=_rounds, rounds=_rounds, key=st.sampled_from([*_STATE_KEYS, "extra_key"]), data=st.data())
def test_a_corrupted_state_restores_exactly_or_is_refused(
    carried: list[Any], rounds: list[Any], key: str, data: st.DataObject
) -> None:
    state = _reachable_state(carried, rounds).to_dict()
    old = state.get(key)
    neighbours = [old - 1, old + 1] if type(old) is int else [0, 1]
    value = data.draw(
        st.one_of(
            st.sampled_from(neighbours),
            st.sampled_from([None, True, 1.0, 0.5, 1.5, math.nan, "3", [], 2**70]),
            st.integers(-2, 40),
        )
    )
    if data.draw(st.booleans(), label="delete") and key in state:
        del state[key]
    else:
        state[key] = value

    if _consistent(state):
        assert state == SamplingBudgetState.from_dict(state).to_dict()
    else:
        with pytest.raises(CheckpointError):
            SamplingBudgetState.from_dict(state)


# -- planning is bounded for every legal input ----------------------------------------------
@pytest.mark.timeout(5)  # a hang guard, not a performance assertion
@pytest.mark.parametrize("target", [16, 10**6])
def test_confidence_planning_with_a_tiny_rate_floor_returns_at_once(target: int) -> None:
    ctl = controller(
        max_extra_groups=10**12, max_resample_rounds=3, min_effective_rate=1e-9, mode="confidence"
    )
    state = ctl.new_state()
    ctl.observe_round(state, **counts(0, 8), num_generations=4)

    plan = ctl.plan_resampling(state, target_groups=target, num_generations=4)

    cap = target + 10**12 - 8
    assert target / 1e-9 <= plan.requested_groups
    assert min(plan.requested_groups, cap) == plan.extra_groups
    assert (("extra_group_budget",) if plan.requested_groups >= cap else ()) == plan.limited_by


@pytest.mark.timeout(5)
def test_huge_caps_and_a_tiny_token_estimate_do_not_overflow() -> None:
    ctl = controller(
        max_extra_groups=10**400, max_resample_rounds=1, max_total_tokens=10**400, max_total_samples=10**400
    )
    state = ctl.new_state()
    ctl.observe_round(state, **counts(0, 4), num_generations=2, generated_tokens=7)

    plan = ctl.plan_resampling(
        state, target_groups=10**300, num_generations=2, estimated_tokens_per_group=1e-300
    )
    fits = ctl.can_generate(
        state, 10**200, target_groups=8, num_generations=2, estimated_tokens_per_group=1e-300
    )

    assert plan.extra_groups == plan.requested_groups == math.ceil(Fraction(10**300) / Fraction(0.05))
    assert () == plan.limited_by
    assert fits


def test_the_token_cap_is_exact_for_huge_budgets() -> None:
    ctl = controller(max_extra_groups=10**30, max_resample_rounds=1, max_total_tokens=3 * 10**25 + 2)
    state = ctl.new_state()
    ctl.observe_round(state, **counts(0, 1), num_generations=1, generated_tokens=2)

    plan = ctl.plan_resampling(state, target_groups=10**29, num_generations=1, estimated_tokens_per_group=3)

    assert 10**25 == plan.extra_groups
    assert ("token_budget",) == plan.limited_by


def _exact_tail(n: int, rate: float, remaining: int) -> float:
    """P[Binomial(n, rate) >= remaining], term by term (in log space, so that large n stay finite)."""
    log_p, log_q = math.log(rate), math.log1p(-rate)
    head = math.lgamma(n + 1)
    return math.fsum(
        math.exp(head - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q)
        for k in range(remaining, n + 1)
    )


@given(
    remaining=st.integers(1, 40),
    rate=st.sampled_from([0.05, 0.1, 0.3, 0.5, 0.77, 0.95]),
    confidence=st.sampled_from([0.01, 0.3, 0.5, 0.9, 0.99, 0.999]),
)
def test_small_targets_get_the_exact_smallest_n(remaining: int, rate: float, confidence: float) -> None:
    n = binomial_groups_needed(remaining, rate, confidence)

    assert _exact_tail(n, rate, remaining) >= confidence - 1e-12
    assert n == remaining or _exact_tail(n - 1, rate, remaining) < confidence + 1e-12


def test_numpy_integers_are_counts_and_stay_plain_ints() -> None:
    np = pytest.importorskip("numpy")
    ctl = controller(max_extra_groups=8, max_resample_rounds=2)
    state = ctl.new_state()

    ctl.observe_round(state, **counts(1, 3), num_generations=np.int64(2), generated_tokens=np.int32(40))
    plan = ctl.plan_resampling(state, target_groups=np.int64(4), num_generations=np.int64(2))

    assert json.loads(json.dumps(state.to_dict())) == state.to_dict()
    assert json.loads(json.dumps(plan.to_dict())) == plan.to_dict()
    assert {int} == {type(v) for k, v in state.to_dict().items() if k != "effective_rate_ema"}
    assert binomial_groups_needed(np.int64(3), np.float32(0.5), 0.9) == binomial_groups_needed(3, 0.5, 0.9)


def test_a_state_built_from_numpy_scalars_holds_plain_numbers() -> None:
    np = pytest.importorskip("numpy")
    state = SamplingBudgetState(
        sampling_rounds=np.int64(1), generated_groups=np.uint8(2), admitted_groups=np.int32(1),
        rejected_groups=1, generated_samples=np.int64(8), effective_rate_ema=np.float32(0.5),
    )  # fmt: skip

    assert json.loads(json.dumps(state.to_dict())) == state.to_dict()
    assert {int} == {type(v) for k, v in state.to_dict().items() if k != "effective_rate_ema"}
    assert type(state.effective_rate_ema) is float


def test_a_saved_rate_that_would_not_write_back_as_saved_is_refused() -> None:
    saved = {**SamplingBudgetState(generated_groups=1, admitted_groups=1, generated_samples=1).to_dict()}
    saved.update(sampling_rounds=1, effective_rate_ema=1)

    with pytest.raises(CheckpointError, match=re.escape("'effective_rate_ema' must be a float (got 1)")):
        SamplingBudgetState.from_dict(saved)
    assert 1.0 == SamplingBudgetState.from_dict({**saved, "effective_rate_ema": 1.0}).effective_rate_ema


@pytest.mark.parametrize("remaining", [70, 150, 400, 1500])
@pytest.mark.parametrize("rate", [0.02, 0.05, 0.3, 0.5, 0.8])
def test_large_targets_stay_close_to_the_exact_smallest_n(remaining: int, rate: float) -> None:
    from group_admission._planning import _exact

    for confidence in (0.01, 0.5, 0.9, 0.999999):
        exact = _exact(remaining, rate, confidence)

        assert abs(binomial_groups_needed(remaining, rate, confidence) - exact) <= 1
