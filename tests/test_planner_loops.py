"""
Every documented planning loop ends, within the caps, on any stream of groups.

The loop of every planner is ``while not plan.done`` (``plan``, ``stream_plan``,
``pick_prompts``), and a host that launches one group at a time launches while
``can_launch``. Each loop below is the one the docs show, driven on random budgets, targets
and streams: every group dead, every group unusable (``external``), every candidate
skipped, too few candidates, caps that bind at once, and random pass rates. Each must end
within a bound fixed by the caps (a hang fails the bound, never the test run), never
generate beyond the caps, and end either at the target or with a plan that says why not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from group_admission import AdmissionSession, PromptHistory, StepReport

POLICY = {"min_reward_std": 1e-6}
TOKENS_PER_SAMPLE = 5
STREAMS = ("dead", "external", "live", "random")


@st.composite
def budgets(draw: st.DrawFn) -> dict[str, Any]:
    """A random budget: each cap absent, tight (0 included) or loose."""
    optional = st.none() | st.integers(0, 120)
    return {
        "max_extra_groups": draw(st.integers(0, 12)),
        "max_extra_groups_per_round": draw(st.none() | st.integers(0, 6)),
        "max_resample_rounds": draw(st.integers(0, 4)),
        "max_total_samples": draw(optional),
        "max_total_tokens": draw(st.none() | st.integers(0, 600)),
        "mode": draw(st.sampled_from(["expected", "confidence"])),
        "min_effective_rate": draw(st.sampled_from([0.01, 0.05, 0.5])),
    }


class Groups:
    """A stream of finished groups of one kind, drawn from a seeded generator."""

    def __init__(self, kind: str, size: int, seed: int) -> None:
        self.kind, self.size = kind, size
        self.rng = np.random.default_rng(seed)

    def next(self) -> list[float | None]:
        if self.kind == "dead":
            return [0.0] * self.size
        if self.kind == "external":
            return [None] * self.size
        if self.kind == "live":
            return [1.0, 0.0] * (self.size // 2) + [1.0] * (self.size % 2)
        rate = self.rng.random()
        return (self.rng.random(self.size) < rate).astype(float).tolist()

    def batch(self, count: int) -> list[list[float | None]]:
        return [self.next() for _ in range(count)]


def _bound(budget: dict[str, Any], target: int) -> int:
    """Groups no step may exceed: the target plus the extra groups the budget allows."""
    return target + budget["max_extra_groups"]


def _check_report(report: StepReport, budget: dict[str, Any], target: int, size: int) -> None:
    assert report.generated_groups <= _bound(budget, target)
    if budget["max_total_samples"] is not None:
        assert report.generated_samples <= max(budget["max_total_samples"], 0)
    if budget["max_total_tokens"] is not None:  # a hard cap: every loop passes the tokens per group
        assert report.generated_tokens <= budget["max_total_tokens"]
    assert report.generated_samples == report.generated_groups * size


def _session(budget: dict[str, Any], target: int) -> AdmissionSession:
    session = AdmissionSession(POLICY, budget=budget)
    session.begin_step(target_groups=target)
    return session


# -- the round planner: while not plan.done, one round per plan -------------------------------------
def round_loop(session: AdmissionSession, groups: Groups, limit: int) -> tuple[Any, int]:
    """The loop of docs/session.md and docs/budget.md; ``limit`` turns a hang into a failure."""
    per_group = groups.size * TOKENS_PER_SAMPLE
    plan = session.plan(groups.size, estimated_tokens_per_group=per_group)
    rounds = 0
    while not plan.done:
        rounds += 1
        assert rounds <= limit, "the documented round loop did not end"
        assert plan.extra_groups > 0  # a plan that is not done always asks for groups
        session.judge_batch(groups.batch(plan.extra_groups), generated_tokens=plan.extra_groups * per_group)
        plan = session.plan(groups.size, estimated_tokens_per_group=per_group)
    return plan, rounds


@settings(max_examples=150, deadline=None)
@given(
    budget=budgets(),
    target=st.integers(0, 10),
    size=st.integers(2, 4),
    kind=st.sampled_from(STREAMS),
    seed=st.integers(0, 2**16),
)
def test_the_round_loop_ends_within_its_rounds(
    budget: dict[str, Any], target: int, size: int, kind: str, seed: int
) -> None:
    session = _session(budget, target)
    plan, rounds = round_loop(session, Groups(kind, size, seed), budget["max_resample_rounds"] + 1)
    report = session.end_step()

    assert rounds <= budget["max_resample_rounds"] + 1
    _check_report(report, budget, target, size)
    assert report.kept_groups >= target or (plan.exhausted and report.exhausted)
    assert not plan.out_of_candidates


# -- the streaming planner: launch, one finishes, plan again --------------------------------------
def stream_loop(session: AdmissionSession, groups: Groups, limit: int) -> tuple[Any, int, int]:
    """The loop of docs/planning.md (``Streaming plans``)."""
    per_group = groups.size * TOKENS_PER_SAMPLE
    in_flight = finished = 0
    plan = session.stream_plan(in_flight, num_generations=groups.size, estimated_tokens_per_group=per_group)
    while not plan.done:
        assert finished <= limit, "the documented streaming loop did not end"
        in_flight += plan.launch  # the host launches plan.launch groups
        assert in_flight > 0  # a plan that is not done has something in flight or to launch
        session.judge(groups.next(), generated_tokens=per_group)  # ...and one finishes
        in_flight -= 1
        finished += 1
        plan = session.stream_plan(
            in_flight, num_generations=groups.size, estimated_tokens_per_group=per_group
        )
    return plan, in_flight, finished


@settings(max_examples=150, deadline=None)
@given(
    budget=budgets(),
    target=st.integers(0, 10),
    size=st.integers(2, 4),
    kind=st.sampled_from(STREAMS),
    seed=st.integers(0, 2**16),
)
def test_the_streaming_loop_ends_within_the_extra_groups(
    budget: dict[str, Any], target: int, size: int, kind: str, seed: int
) -> None:
    session = _session(budget, target)
    plan, in_flight, finished = stream_loop(session, Groups(kind, size, seed), _bound(budget, target))
    report = session.end_step()

    assert finished == report.generated_groups <= _bound(budget, target)
    _check_report(report, budget, target, size)
    assert plan.abort == (in_flight if plan.remaining_target_groups == 0 else 0)
    assert report.kept_groups >= target or (plan.exhausted and in_flight == 0 and report.exhausted)


# -- the per-prompt planner: pick, generate, observe, pick again ------------------------------------
def prompt_loop(
    session: AdmissionSession, history: PromptHistory, queue: list[int], groups: Groups, limit: int
) -> tuple[Any, int]:
    """The loop of docs/planning.md (``Rounds sized for the prompts chosen``)."""
    per_group = groups.size * TOKENS_PER_SAMPLE
    offer = 12

    def pick() -> Any:
        return session.pick_prompts(
            history, queue[:offer], num_generations=groups.size, estimated_tokens_per_group=per_group
        )

    plan, rounds = pick(), 0
    while not plan.done:
        rounds += 1
        assert rounds <= limit, "the documented pick_prompts loop did not end"
        assert plan.generate  # a plan that is not done always names prompts to generate
        verdicts = session.judge_batch(
            groups.batch(len(plan.generate)), generated_tokens=len(plan.generate) * per_group
        )
        history.observe_batch(plan.generate, verdicts.result, step=session.step)
        queue[:] = list(plan.deferred) + queue[offer:]  # skipped prompts are used up
        plan = pick()
    return plan, rounds


CANDIDATES = ("plenty", "few", "none", "all skipped")


def _history(candidates: str, size: int, seed: int) -> PromptHistory:
    if candidates != "all skipped":
        return PromptHistory({"group_size": size, "seed": seed})
    # Nothing is informative enough to keep, and nothing is explored: every prompt is skipped.
    return PromptHistory({"group_size": size, "seed": seed, "skip_below": 1.0, "exploration": 0.0})


@settings(max_examples=150, deadline=None)
@given(
    budget=budgets(),
    target=st.integers(0, 10),
    size=st.integers(2, 4),
    kind=st.sampled_from(STREAMS),
    candidates=st.sampled_from(CANDIDATES),
    seed=st.integers(0, 2**16),
)
def test_the_pick_prompts_loop_ends_when_the_candidates_do(
    budget: dict[str, Any], target: int, size: int, kind: str, candidates: str, seed: int
) -> None:
    count = {"plenty": 200, "few": 3, "none": 0, "all skipped": 40}[candidates]
    session, history, queue = _session(budget, target), _history(candidates, size, seed), list(range(count))
    rounds_allowed = budget["max_resample_rounds"] + 1
    plan, rounds = prompt_loop(session, history, queue, Groups(kind, size, seed), rounds_allowed)
    report = session.end_step()

    assert rounds <= rounds_allowed
    _check_report(report, budget, target, size)
    met = report.kept_groups >= target
    assert met or plan.exhausted or plan.out_of_candidates
    if plan.out_of_candidates:  # the step ran out of prompts, not of budget
        assert (False, False, False) == (met, plan.exhausted, report.exhausted)
        assert () == plan.generate
        assert not queue[:12] or len(plan.skipped) == len(queue[:12])
    if candidates in ("none", "all skipped") and target:
        assert (0, True) == (report.generated_groups, plan.out_of_candidates or plan.exhausted)


# -- one group at a time: launch while can_launch, judge each as it finishes -------------------------
def launch_loop(session: AdmissionSession, groups: Groups, target: int, limit: int) -> int:
    """docs/session.md's loop with groups finishing: launch while the caps allow, until the target."""
    per_group = groups.size * TOKENS_PER_SAMPLE
    in_flight = kept = finished = 0
    while True:
        while kept < target and session.can_launch(
            in_flight=in_flight, num_generations=groups.size, estimated_tokens_per_group=per_group
        ):
            in_flight += 1
            assert in_flight <= limit, "the documented can_launch loop did not end"
        if not in_flight:
            return finished
        kept += session.judge(groups.next(), generated_tokens=per_group).keep
        in_flight -= 1
        finished += 1
        assert finished <= limit, "the documented can_launch loop did not end"


@settings(max_examples=150, deadline=None)
@given(
    budget=budgets(),
    target=st.integers(0, 10),
    size=st.integers(2, 4),
    kind=st.sampled_from(STREAMS),
    seed=st.integers(0, 2**16),
)
def test_the_can_launch_loop_ends_within_the_extra_groups(
    budget: dict[str, Any], target: int, size: int, kind: str, seed: int
) -> None:
    session = _session(budget, target)
    finished = launch_loop(session, Groups(kind, size, seed), target, _bound(budget, target))
    report = session.end_step()

    assert finished == report.generated_groups
    _check_report(report, budget, target, size)


# -- the rule behind it: a plan with nothing to do is done, and says why --------------------------
@pytest.mark.parametrize(
    ("offered", "config"),
    [
        (list, {}),
        (lambda: list(range(10)), {"skip_below": 1.0, "exploration": 0.0}),
        (lambda: iter(()), {}),
    ],
    ids=["no candidate", "every candidate skipped", "an empty generator"],
)
def test_a_prompt_plan_with_no_candidate_left_is_done_and_not_exhausted(
    offered: Callable[[], Any], config: dict[str, Any]
) -> None:
    session = _session({"max_extra_groups": 8, "max_resample_rounds": 2}, 4)
    plan = session.pick_prompts(PromptHistory({"group_size": 4, **config}), offered(), num_generations=4)
    report = session.end_step()

    assert (True, True, False, ()) == (plan.done, plan.out_of_candidates, plan.exhausted, plan.generate)
    assert plan.to_dict()["out_of_candidates"]
    assert (4, False, 0) == (report.short_groups, report.exhausted, report.generated_groups)


def test_a_plan_the_caps_stop_is_exhausted_not_out_of_candidates() -> None:
    session = _session({"max_extra_groups": 0}, 2)
    session.judge_batch([[0.0] * 4, [0.0] * 4])
    plan = session.pick_prompts(PromptHistory({"group_size": 4}), list(range(5)), num_generations=4)

    assert (True, True, False) == (plan.done, plan.exhausted, plan.out_of_candidates)
    assert not session.plan(4).out_of_candidates
    assert not session.stream_plan(0, num_generations=4).out_of_candidates
