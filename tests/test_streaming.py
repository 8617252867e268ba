"""Streaming plans, round plans sized by per-prompt probabilities, and the session's methods for both."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from group_admission import (
    AdmissionSession,
    GroupAdmissionPolicy,
    PromptHistory,
    SamplingBudgetConfig,
    SamplingBudgetController,
    SamplingBudgetState,
    StepLifecycleError,
    binomial_groups_needed,
    plan_prompts,
    plan_stream,
    prompts_needed,
)

POLICY = {"min_reward_std": 1e-6}
LIVE, DEAD = [1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]


def _state(
    admitted: int = 0, rejected: int = 0, rate: float | None = 0.5, tokens: int = 0
) -> SamplingBudgetState:
    groups = admitted + rejected
    return SamplingBudgetState(
        sampling_rounds=1 if groups else 0,
        generated_groups=groups,
        generated_samples=4 * groups,
        generated_tokens=tokens,
        admitted_groups=admitted,
        rejected_groups=rejected,
        effective_rate_ema=rate,
    )


def _controller(**fields: Any) -> SamplingBudgetController:
    return SamplingBudgetController(SamplingBudgetConfig(**{"max_extra_groups": 100, **fields}))


class TestPlanStream:
    def test_the_first_launch_is_the_confidence_bound_on_the_carried_rate(self) -> None:
        plan = plan_stream(
            _controller(), _state(), target_groups=16, in_flight=0, num_generations=4, confidence=0.99
        )

        assert binomial_groups_needed(16, 0.5, 0.99) == plan.launch == plan.requested_groups
        assert (0, False, ()) == (plan.abort, plan.exhausted, plan.limited_by)

    def test_without_a_carried_rate_it_launches_the_target(self) -> None:
        plan = plan_stream(_controller(), _state(rate=None), target_groups=16, in_flight=0, num_generations=4)

        assert 16 == plan.launch

    def test_finished_groups_move_the_rate(self) -> None:
        plan = plan_stream(_controller(), _state(2, 6), target_groups=16, in_flight=20, num_generations=4)

        # The carried 0.5 counts as 16 groups beside the 8 finished (2 admitted).
        assert math.isclose((2 + 8) / 24, plan.effective_rate)

    def test_meeting_the_target_aborts_everything_in_flight(self) -> None:
        plan = plan_stream(_controller(), _state(16, 3), target_groups=16, in_flight=7, num_generations=4)

        assert (0, 7, 0) == (plan.launch, plan.abort, plan.in_flight)
        assert ("target_met",) == plan.limited_by

    def test_it_tops_up_only_when_the_groups_in_flight_probably_fall_short(self) -> None:
        controller, state = _controller(), _state(4, 4)
        rate = plan_stream(controller, state, target_groups=16, in_flight=0, num_generations=4).effective_rate
        barely = binomial_groups_needed(12, rate, 0.5)
        full = binomial_groups_needed(12, rate, 0.9)

        waiting = plan_stream(controller, state, target_groups=16, in_flight=barely, num_generations=4)
        short = plan_stream(controller, state, target_groups=16, in_flight=barely - 1, num_generations=4)
        assert 0 == waiting.launch
        assert full - (barely - 1) == short.launch

    def test_the_extra_group_cap_counts_groups_in_flight(self) -> None:
        controller = _controller(max_extra_groups=4)
        plan = plan_stream(controller, _state(2, 6), target_groups=16, in_flight=10, num_generations=4)

        assert 16 + 4 - 8 - 10 == plan.launch
        assert ("extra_group_budget",) == plan.limited_by

    def test_the_token_cap_uses_the_observed_tokens_per_group(self) -> None:
        controller = _controller(max_total_tokens=1000)
        plan = plan_stream(
            controller, _state(2, 2, tokens=400), target_groups=16, in_flight=2, num_generations=4
        )

        assert 4 == plan.launch  # 100 tokens a group: 400 finished and 200 in flight leave room for 4
        assert ("token_budget",) == plan.limited_by

    def test_nothing_in_flight_and_no_room_is_exhausted(self) -> None:
        controller = _controller(max_extra_groups=0)
        plan = plan_stream(controller, _state(3, 13), target_groups=16, in_flight=0, num_generations=4)

        assert plan.exhausted
        assert 0 == plan.launch

    def test_racing_sizes_the_launch_for_more_admitted_groups_than_places(self) -> None:
        controller = _controller()
        plain = plan_stream(controller, _state(), target_groups=16, in_flight=0, num_generations=4)
        raced = plan_stream(controller, _state(), target_groups=16, in_flight=0, num_generations=4, race=1.5)

        assert binomial_groups_needed(24, 0.5, 0.9) == raced.launch > plain.launch
        # Racing changes the launch, not when the step tops up or aborts.
        assert (
            plan_stream(
                controller, _state(16), target_groups=16, in_flight=9, num_generations=4, race=2
            ).abort
            == 9
        )

    def test_the_round_caps_do_not_apply_to_a_streaming_step(self) -> None:
        controller = _controller(max_resample_rounds=0, max_extra_groups_per_round=1)
        plan = plan_stream(controller, _state(3, 5), target_groups=16, in_flight=0, num_generations=4)

        assert plan.launch > 1

    @pytest.mark.parametrize(
        ("fields", "error", "message"),
        [
            ({"controller": None}, TypeError, "'controller' must be a SamplingBudgetController"),
            ({"state": {}}, TypeError, "'state' must be a SamplingBudgetState"),
            ({"in_flight": -1}, ValueError, "'in_flight' must be >= 0"),
            ({"target_groups": 2.0}, TypeError, "'target_groups' must be an integer"),
            ({"num_generations": 0}, ValueError, "'num_generations' must be >= 1"),
            ({"confidence": 1.0}, ValueError, "'confidence' must be in \\(0, 1\\)"),
            ({"top_up_below": "half"}, TypeError, "'top_up_below' must be a number"),
            ({"race": 0.5}, ValueError, "'race' must be a finite number >= 1 \\(got 0.5\\)"),
            ({"race": float("inf")}, ValueError, "'race' must be a finite number >= 1"),
            ({"race": True}, TypeError, "'race' must be a number >= 1 \\(got True\\)"),
        ],
    )
    def test_bad_input_names_the_argument(
        self, fields: dict[str, Any], error: type[Exception], message: str
    ) -> None:
        arguments: dict[str, Any] = {
            "controller": _controller(),
            "state": _state(),
            "target_groups": 4,
            "in_flight": 0,
            "num_generations": 4,
            **fields,
        }
        controller, state = arguments.pop("controller"), arguments.pop("state")
        with pytest.raises(error, match=message):
            plan_stream(controller, state, **arguments)

    @given(st.integers(0, 20), st.integers(0, 20), st.integers(0, 40), st.integers(1, 24), st.integers(0, 30))
    def test_plans_never_break_the_caps(
        self, admitted: int, rejected: int, flying: int, target: int, extra: int
    ) -> None:
        controller = _controller(max_extra_groups=extra)
        plan = plan_stream(
            controller, _state(admitted, rejected), target_groups=target, in_flight=flying, num_generations=4
        )

        generated = admitted + rejected + flying + plan.launch
        assert plan.launch == 0 or generated <= target + extra
        assert plan.abort in (0, flying)
        assert plan.abort == (flying if admitted >= target else 0)


class TestPromptsNeeded:
    def test_expected_mode_sums_probabilities(self) -> None:
        assert 4 == prompts_needed([0.5, 0.5, 0.5, 0.5, 0.5], 2)
        assert 3 == prompts_needed([0.9, 0.1, 1.0], 2)
        assert 0 == prompts_needed([0.5], 0)

    def test_too_few_prompts_gives_them_all(self) -> None:
        assert 2 == prompts_needed([0.5, 0.5], 3, 0.9)
        assert 2 == prompts_needed([0.5, 0.5], 3)

    @given(st.integers(1, 12), st.sampled_from([0.2, 0.5, 0.77, 0.95]), st.sampled_from([0.6, 0.9, 0.99]))
    def test_equal_probabilities_match_the_binomial_bound(
        self, remaining: int, rate: float, confidence: float
    ) -> None:
        needed = binomial_groups_needed(remaining, rate, confidence)

        assert needed == prompts_needed([rate] * (needed + 5), remaining, confidence)

    def test_better_prompts_need_fewer_groups(self) -> None:
        mixed = [0.95] * 10 + [0.2] * 40

        assert prompts_needed(mixed, 8, 0.9) < prompts_needed([0.4] * 50, 8, 0.9)


def _history(**fields: Any) -> PromptHistory:
    return PromptHistory({"group_size": 4, "prior": (0.5, 0.5), "exploration": 0.0, **fields})


def _dead_history() -> PromptHistory:
    """Prompts 0-9 always all-wrong, 10-19 always split, for six steps."""
    history = _history()
    policy = GroupAdmissionPolicy(POLICY)
    for step in range(6):
        for prompt in range(20):
            history.observe(prompt, policy.evaluate(DEAD if prompt < 10 else LIVE), step=step)
    return history


class TestPlanPrompts:
    def test_skips_the_dead_and_sizes_the_round_by_the_rest(self) -> None:
        history = _dead_history()
        controller = _controller(mode="confidence", confidence=0.9)
        plan = plan_prompts(
            controller,
            _state(rate=None),
            history,
            list(range(20)),
            step=6,
            target_groups=4,
            num_generations=4,
        )

        assert tuple(range(10)) == plan.skipped
        assert set(plan.generate) <= set(range(10, 20))
        needed = prompts_needed(history.pick(list(range(10, 20)), step=6).informative_probabilities, 4, 0.9)
        assert needed == len(plan.generate) == plan.requested_groups
        assert plan.generate + plan.deferred == tuple(range(10, 20))
        assert math.isclose(sum(plan.informative_probabilities), plan.expected_informative)
        assert math.isclose(float(np.mean(plan.informative_probabilities)), plan.effective_rate)

    def test_a_round_that_generates_nothing_assumed_no_rate(self) -> None:
        plan = plan_prompts(
            _controller(),
            _state(4, 0),
            _history(),
            list(range(20)),
            step=0,
            target_groups=4,
            num_generations=4,
        )

        assert ((), 0.0, 0.0) == (plan.generate, plan.expected_informative, plan.effective_rate)

    def test_the_caps_cut_the_round(self) -> None:
        controller = _controller(max_extra_groups=0, max_resample_rounds=1)
        plan = plan_prompts(
            controller, _state(1, 1), _history(), list(range(20)), step=0, target_groups=4, num_generations=4
        )

        assert 2 == len(plan.generate)
        assert ("extra_group_budget",) == plan.limited_by

    def test_a_met_target_or_spent_rounds_generate_nothing(self) -> None:
        controller = _controller(max_resample_rounds=0)
        met = plan_prompts(
            controller, _state(4), _history(), [1, 2], step=0, target_groups=4, num_generations=4
        )
        spent = plan_prompts(
            controller, _state(1, 1), _history(), [1, 2], step=0, target_groups=4, num_generations=4
        )

        assert ((), (1, 2), ("target_met",), False) == (
            met.generate,
            met.deferred,
            met.limited_by,
            met.exhausted,
        )
        assert ((), ("resample_round_budget",), True) == (spent.generate, spent.limited_by, spent.exhausted)

    def test_bad_arguments_are_named(self) -> None:
        with pytest.raises(TypeError, match="'history' must be a PromptHistory"):
            plan_prompts(_controller(), _state(), {}, [1], step=0, target_groups=1, num_generations=4)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="'target_groups' must be >= 0"):
            plan_prompts(
                _controller(), _state(), _history(), [1], step=0, target_groups=-1, num_generations=4
            )


class TestSession:
    def _session(self, **budget: Any) -> AdmissionSession:
        return AdmissionSession(POLICY, budget={"max_extra_groups": 32, **budget})

    def test_stream_plan_counts_the_groups_judged_this_step(self) -> None:
        session = self._session()
        session.begin_step(4)
        first = session.stream_plan(0, num_generations=4)
        session.judge_batch(np.array([LIVE, LIVE, DEAD]))
        later = session.stream_plan(first.launch - 3, num_generations=4)

        assert 4 == first.launch  # no carried rate: the target
        assert 2 == later.remaining_target_groups
        assert later.effective_rate < 1.0
        assert later.launch > 0

    def test_stream_plan_aborts_at_the_target_and_a_step_is_one_round(self) -> None:
        session = self._session()
        session.begin_step(2)
        session.judge_batch(np.array([LIVE, DEAD, LIVE]))

        assert 5 == session.stream_plan(5, num_generations=4).abort
        report = session.end_step()
        assert 1 == report.sampling_rounds
        assert 3 == report.generated_groups

    def test_pick_prompts_sizes_each_round_by_the_history(self) -> None:
        session = self._session(max_resample_rounds=3, mode="confidence")
        history = _dead_history()
        for _ in range(6):
            session.begin_step(4)
            session.end_step()
        session.begin_step(4)
        plan = session.pick_prompts(history, list(range(20)), num_generations=4)
        verdicts = session.judge_batch(np.array([LIVE] * len(plan.generate)))
        history.observe_batch(plan.generate, verdicts.result, step=session.step)
        done = session.pick_prompts(history, list(plan.deferred), num_generations=4)

        assert tuple(range(10)) == plan.skipped
        assert 0 < len(plan.generate) <= 10
        assert ("target_met",) == done.limited_by

    def test_both_need_an_open_step(self) -> None:
        session = self._session()
        with pytest.raises(StepLifecycleError, match="before stream_plan"):
            session.stream_plan(0)
        with pytest.raises(StepLifecycleError, match="before pick_prompts"):
            session.pick_prompts(_history(), [1])
