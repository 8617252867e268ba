"""
The four planners share one skeleton: the same checks, the same stops, plans that say when they are done.

``plan``, ``stream_plan``, ``pick_prompts`` (the session's) and ``plan_prompts`` (the layer
below) must refuse the same bad arguments the same way, cope with any integer count, and
end the loop their docs show.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import pytest

from group_admission import (
    AdmissionSession,
    PromptHistory,
    ResamplePlan,
    SamplingBudgetController,
    SamplingBudgetState,
    StreamPlan,
    plan_prompts,
    plan_stream,
)
from group_admission._plans import PlanBase

POLICY = {"min_reward_std": 1e-6}
LIVE, DEAD = [1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]
BUDGET = {"max_extra_groups": 16, "max_resample_rounds": 2}
HUGE = 10**400


def _session(target: int = 4) -> AdmissionSession:
    session = AdmissionSession(POLICY, budget=BUDGET)
    session.begin_step(target)
    return session


def _history() -> PromptHistory:
    return PromptHistory({"group_size": 4})


def _plan(target: int, **arguments: Any) -> Any:
    return _session(target).plan(**arguments)


def _stream_plan(target: int, in_flight: int = 0, **arguments: Any) -> Any:
    return _session(target).stream_plan(in_flight, **arguments)


def _pick_prompts(target: int, **arguments: Any) -> Any:
    return _session(target).pick_prompts(_history(), list(range(8)), **arguments)


def _plan_prompts(target: int, num_generations: Any = 4, **arguments: Any) -> Any:
    controller = SamplingBudgetController(BUDGET)
    return plan_prompts(
        controller,
        SamplingBudgetState(),
        _history(),
        list(range(8)),
        step=0,
        target_groups=target,
        num_generations=num_generations,
        **arguments,
    )


PLANNERS: dict[str, Callable[..., Any]] = {
    "plan": _plan,
    "stream_plan": _stream_plan,
    "pick_prompts": _pick_prompts,
    "plan_prompts": _plan_prompts,
}

BAD = [
    (
        {"estimated_tokens_per_group": 0},
        ValueError,
        "'estimated_tokens_per_group' must be a finite number > 0 (got 0)",
    ),
    (
        {"estimated_tokens_per_group": -1},
        ValueError,
        "'estimated_tokens_per_group' must be a finite number > 0 (got -1)",
    ),
    (
        {"estimated_tokens_per_group": float("inf")},
        ValueError,
        "'estimated_tokens_per_group' must be a finite number > 0 (got inf)",
    ),
    (
        {"estimated_tokens_per_group": True},
        TypeError,
        "'estimated_tokens_per_group' must be a real number (got True)",
    ),
    ({"num_generations": 0}, ValueError, "'num_generations' must be >= 1 (got 0)"),
    ({"num_generations": True}, TypeError, "'num_generations' must be an integer (got True)"),
    ({"num_generations": 2.0}, TypeError, "'num_generations' must be an integer (got 2.0)"),
]


@pytest.mark.parametrize("planner", list(PLANNERS))
@pytest.mark.parametrize(("arguments", "error", "message"), BAD, ids=[str(row[0]) for row in BAD])
def test_every_planner_refuses_the_same_bad_arguments_alike(
    planner: str, arguments: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        PLANNERS[planner](4, **arguments)


STREAM_BAD = [
    ({"race": 0.5}, ValueError, "'race' must be a finite number >= 1 (got 0.5)"),
    ({"race": HUGE}, ValueError, "'race' must be a finite number >= 1 (got 1000"),
    ({"race": float("nan")}, ValueError, "'race' must be a finite number >= 1 (got nan)"),
    ({"race": "2"}, TypeError, "'race' must be a number >= 1 (got '2')"),
    ({"top_up_below": 1.0}, ValueError, "'top_up_below' must be in (0, 1) (got 1.0)"),
    ({"confidence": None, "top_up_below": None}, TypeError, "'top_up_below' must be a number in (0, 1)"),
]
STREAM_BAD_IDS = ["race 0.5", "race huge", "race nan", "race str", "top_up_below 1", "top_up_below None"]


@pytest.mark.parametrize(("arguments", "error", "message"), STREAM_BAD, ids=STREAM_BAD_IDS)
def test_both_streaming_planners_refuse_the_same_bad_knobs_alike(
    arguments: dict[str, Any], error: type[Exception], message: str
) -> None:
    layer_below = SamplingBudgetController(BUDGET), SamplingBudgetState()
    with pytest.raises(error, match=re.escape(message)):
        plan_stream(*layer_below, target_groups=4, in_flight=0, num_generations=4, **arguments)
    with pytest.raises(error, match=re.escape(message)):
        _stream_plan(4, **arguments)


@pytest.mark.parametrize("planner", list(PLANNERS))
def test_every_planner_copes_with_a_target_beyond_the_float_range(planner: str) -> None:
    plan = PLANNERS[planner](HUGE, num_generations=4)

    assert HUGE == plan.remaining_target_groups
    assert not plan.done
    assert plan.limited_by in ((), ("extra_group_budget",))


def test_a_stream_plan_copes_with_groups_in_flight_beyond_the_float_range() -> None:
    plan = _stream_plan(4, HUGE, num_generations=4, estimated_tokens_per_group=0.5)

    assert (0, HUGE, False) == (plan.launch, plan.in_flight, plan.exhausted)
    capped = plan_stream(
        SamplingBudgetController({"max_extra_groups": HUGE, "max_total_tokens": 10**6}),
        SamplingBudgetState(),
        target_groups=HUGE,
        in_flight=HUGE // 2,
        num_generations=4,
        estimated_tokens_per_group=1.5,
    )
    # The tokens in flight alone exceed the cap: nothing more is launched, nor exhausted.
    assert (0, ("token_budget",), False) == (capped.launch, capped.limited_by, capped.exhausted)


NUMPY_ARGUMENTS = {"num_generations": np.int64(4), "estimated_tokens_per_group": np.float32(1.5)}
PLAIN_ARGUMENTS = {"num_generations": 4, "estimated_tokens_per_group": 1.5}
NUMPY_KNOBS = {"confidence": np.float64(0.9), "top_up_below": np.float32(0.5), "race": np.float32(1.5)}


@pytest.mark.parametrize("planner", list(PLANNERS))
def test_every_planner_takes_numpy_scalars_as_the_numbers_they_hold(planner: str) -> None:
    knobs = {k: float(v) for k, v in NUMPY_KNOBS.items()} if planner == "stream_plan" else {}
    numpy_knobs = NUMPY_KNOBS if planner == "stream_plan" else {}

    assert PLANNERS[planner](4, **PLAIN_ARGUMENTS, **knobs) == PLANNERS[planner](
        4, **NUMPY_ARGUMENTS, **numpy_knobs
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.plan(np.int64(4), estimated_tokens_per_group=np.int64(100)),
        lambda s: s.can_launch(np.int64(1), in_flight=np.int64(2), num_generations=np.int64(4)),
        lambda s: s.stream_plan(np.int64(2), num_generations=np.uint8(4), **NUMPY_KNOBS),
        lambda s: s.stream_plan(estimated_tokens_per_group=np.float32(1.5)),
        lambda s: s.pick_prompts(_history(), [1, 2], num_generations=np.int32(4)),
    ],
    ids=["plan", "can_launch", "stream_plan", "stream_plan tokens", "pick_prompts"],
)
def test_a_state_after_numpy_arguments_is_plain_json(call: Callable[[AdmissionSession], Any]) -> None:
    session = _session(4)
    session.judge(LIVE)
    call(session)
    state = session.state_dict()
    restored = _session(0)
    restored.load_state_dict(json.loads(json.dumps(state)))

    assert state == restored.state_dict()
    assert session.end_step() == restored.end_step()


@pytest.mark.parametrize(
    ("arguments", "error"),
    [({"num_generations": 0}, ValueError), ({"estimated_tokens_per_group": "many"}, TypeError)],
)
def test_a_pick_prompts_refused_for_its_arguments_leaves_the_round_in_progress_open(
    arguments: dict[str, Any], error: type[Exception]
) -> None:
    session = _session(4)
    session.judge(LIVE)
    budget, before = session.budget_state, session.state_dict()

    with pytest.raises(error):
        session.pick_prompts(_history(), [1, 2], **arguments)
    assert budget == session.budget_state
    assert before == session.state_dict()


@pytest.mark.parametrize("planner", ["plan_prompts", "pick_prompts"])
def test_prompt_plans_for_a_huge_target_take_every_candidate_at_once(planner: str) -> None:
    plan = PLANNERS[planner](10**6, num_generations=4)

    assert 8 == len(plan.generate) == plan.requested_groups


def test_every_plan_shares_one_base_and_says_when_it_is_done() -> None:
    session = _session(1)
    first = session.plan(num_generations=4)
    session.judge(LIVE)
    met = session.plan(num_generations=4)
    streaming = session.stream_plan(3, num_generations=4)

    assert all(isinstance(p, PlanBase) for p in (first, met, streaming))
    assert not first.done
    assert met.done
    assert streaming.done
    assert {"remaining_target_groups", "exhausted", "limited_by", "requested_groups"} <= set(met.to_dict())
    assert ["target_met"] == met.to_dict()["limited_by"] == streaming.to_dict()["limited_by"]
    assert isinstance(met, ResamplePlan)
    assert isinstance(streaming, StreamPlan)
    assert {f.name for f in attrs.fields(PlanBase)} <= {f.name for f in attrs.fields(StreamPlan)}


def _documented_streaming_loop(
    session: AdmissionSession, finish: Callable[[], list[float]]
) -> tuple[Any, int]:
    """The loop of docs/planning.md, with a bound that turns a hang into a failure."""
    in_flight = 0
    plan = session.stream_plan(in_flight, num_generations=4, confidence=0.99)
    for _ in range(10_000):
        if plan.done:
            return plan, in_flight
        in_flight += plan.launch  # the host launches plan.launch groups
        session.judge(finish())  # ...and one finishes
        in_flight -= 1
        plan = session.stream_plan(in_flight, num_generations=4, confidence=0.99)
    raise AssertionError("the documented streaming loop never ended")


def test_the_documented_streaming_loop_ends_when_every_group_is_admitted() -> None:
    session = AdmissionSession(POLICY, budget={"max_extra_groups": 16})
    session.begin_step(target_groups=8)
    plan, in_flight = _documented_streaming_loop(session, lambda: LIVE)
    report = session.end_step()

    assert (0, 0, 0) == (in_flight, plan.abort, plan.in_flight)
    assert ("target_met",) == plan.limited_by
    assert (8, 8) == (report.kept_groups, report.generated_groups)


def test_the_documented_streaming_loop_ends_when_the_budget_runs_out() -> None:
    session = AdmissionSession(POLICY, budget={"max_extra_groups": 4})
    session.begin_step(target_groups=8)
    plan, in_flight = _documented_streaming_loop(session, lambda: DEAD)
    report = session.end_step()

    assert (0, True) == (in_flight, plan.exhausted)
    assert report.exhausted
    assert 12 == report.generated_groups


def test_the_documented_streaming_loop_ends_on_random_steps() -> None:
    rng = np.random.default_rng(0)
    session = AdmissionSession(POLICY, budget={"max_extra_groups": 16})
    for _ in range(20):
        session.begin_step(target_groups=8)
        plan, _ = _documented_streaming_loop(
            session, lambda: (rng.random(4) < rng.random()).astype(float).tolist()
        )
        report = session.end_step()
        assert report.kept_groups == 8 or plan.exhausted


# -- prompt ids: read once, at the door, in canonical form ---------------------------------------
def _trained_history() -> PromptHistory:
    history = PromptHistory({"group_size": 4, "prior": (0.5, 0.5), "skip_below": 0.3, "exploration": 0.3})
    for step in range(3):
        history.observe_batch(
            list(range(0, 40, 2)), [AdmissionSession(POLICY).judge(DEAD).decision] * 20, step=step
        )
    return history


@pytest.mark.parametrize(
    "ids",
    [
        lambda: (prompt for prompt in range(40)),
        lambda: iter(range(40)),
        lambda: np.arange(40),
        lambda: np.arange(40, dtype=np.uint16),
        lambda: [np.int32(prompt) for prompt in range(40)],
    ],
    ids=["generator", "iterator", "int64 array", "uint16 array", "numpy scalars"],
)
def test_every_door_reads_prompt_ids_once_and_returns_plain_ints(ids: Callable[[], Any]) -> None:
    expected = _trained_history().pick(list(range(40)), step=3)
    picks = _trained_history().pick(ids(), step=3)
    session = _session(8)
    plan = session.pick_prompts(_trained_history(), ids())
    layer_below = plan_prompts(
        SamplingBudgetController(BUDGET),
        SamplingBudgetState(),
        _trained_history(),
        ids(),
        step=3,
        target_groups=8,
        num_generations=4,
    )

    assert expected == picks
    assert 0 < len(picks.skipped) < 20
    assert all(type(prompt) is int for prompt in (*picks.picked, *picks.skipped))
    assert set(plan.generate + plan.deferred + plan.skipped) == set(range(40))
    assert all(type(prompt) is int for prompt in (*layer_below.generate, *layer_below.skipped))


def test_a_refused_pick_prompts_leaves_the_round_in_progress_open() -> None:
    session = _session(4)
    session.judge(LIVE)
    before = session.state_dict()

    with pytest.raises(TypeError, match=re.escape("'prompt_ids[1]' must be a str or an int (got None)")):
        session.pick_prompts(_history(), [1, None])
    assert before == session.state_dict()
