"""
The recipe: one step's groups, judged and resampled by an ``AdmissionSession``.

:func:`collect_step` is the loop this cookbook exists to show. Generation, rewards and the
choice of prompts are passed in; timers, weight checksums and logs hang off it as
:class:`StepObserver` objects, so the loop stays the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cookbook.grpo_gsm8k.data import Problem
from cookbook.grpo_gsm8k.rollout import Group, ProblemStream
from group_admission import AdmissionSession, BatchAdmissionVerdict, ResamplePlan, StepReport

__all__ = [
    "Observers",
    "Resample",
    "StepObserver",
    "StepSample",
    "collect_step",
    "fresh_problems",
    "retry_rejected",
]

#: ``resample(count, rejected)``: the prompts of the next round, given how many groups the
#: plan allows and the prompts the last round rejected.
Resample = Callable[[int, Sequence[Problem]], list[Problem]]


class StepObserver:
    """Hooks into :func:`collect_step`; override the ones you need (each is a no-op here)."""

    def round_started(self, problems: Sequence[Problem]) -> None:
        """A round is about to sample ``problems``."""

    def round_generated(self, groups: Sequence[Group]) -> None:
        """The round's completions are generated."""

    def round_scored(self, groups: Sequence[Group]) -> None:
        """The round's rewards are filled in."""

    def round_judged(
        self, groups: Sequence[Group], verdicts: BatchAdmissionVerdict, plan: ResamplePlan
    ) -> None:
        """The session judged the round and planned the next one."""

    def step_ended(self, report: StepReport, trained: Sequence[Group]) -> None:
        """The step is over: what it cost, and the groups it trains on."""


class Observers(StepObserver):
    """Every hook, passed on to each observer in order."""

    def __init__(self, observers: Iterable[StepObserver] = ()) -> None:
        self._observers = list(observers)

    def round_started(self, problems: Sequence[Problem]) -> None:
        """Pass on to every observer."""
        for observer in self._observers:
            observer.round_started(problems)

    def round_generated(self, groups: Sequence[Group]) -> None:
        """Pass on to every observer."""
        for observer in self._observers:
            observer.round_generated(groups)

    def round_scored(self, groups: Sequence[Group]) -> None:
        """Pass on to every observer."""
        for observer in self._observers:
            observer.round_scored(groups)

    def round_judged(
        self, groups: Sequence[Group], verdicts: BatchAdmissionVerdict, plan: ResamplePlan
    ) -> None:
        """Pass on to every observer."""
        for observer in self._observers:
            observer.round_judged(groups, verdicts, plan)

    def step_ended(self, report: StepReport, trained: Sequence[Group]) -> None:
        """Pass on to every observer."""
        for observer in self._observers:
            observer.step_ended(report, trained)


@dataclass
class StepSample:
    """What one step sampled: the groups it trains on (at most the target) and its report."""

    trained: list[Group]
    report: StepReport


def fresh_problems(stream: ProblemStream) -> Resample:
    """Resample with new prompts from ``stream`` (``resample: fresh``)."""
    return lambda count, _rejected: stream.take(count)


def retry_rejected() -> Resample:
    """Resample the rejected prompts again, each at most once per round (``resample: retry``)."""
    queue: list[Problem] = []

    def resample(count: int, rejected: Sequence[Problem]) -> list[Problem]:
        queue.extend(rejected)
        taken, queue[:] = queue[:count], queue[count:]
        return taken

    return resample


def collect_step(
    session: AdmissionSession,
    problems: list[Problem],
    generate: Callable[[Sequence[Problem]], list[Group]],
    score: Callable[[Sequence[Group]], None],
    resample: Resample,
    *,
    num_generations: int,
    tokens_per_group: float,
    observers: Sequence[StepObserver] = (),
) -> StepSample:
    """Sample one step on ``problems``: judge every group, resample as planned, keep the target."""
    watch = Observers(observers)
    session.begin_step(target_groups=len(problems))
    kept: list[Group] = []
    while problems:
        watch.round_started(problems)
        groups = generate(problems)
        watch.round_generated(groups)
        score(groups)  # a scorer that fails marks rewards missing: the group is rejected as external
        watch.round_scored(groups)
        verdicts = session.judge_batch(
            {name: [group.rewards[name] for group in groups] for name in groups[0].rewards},
            [group.texts for group in groups] if session.policy.config.similarity_gate_enabled else None,
            generated_tokens=sum(group.tokens for group in groups),
        )
        kept += [group for group, keep in zip(groups, verdicts.keep, strict=True) if keep]
        # The worst case of tokens per group keeps the token cap hard.
        plan = session.plan(num_generations, estimated_tokens_per_group=tokens_per_group)
        watch.round_judged(groups, verdicts, plan)
        rejected = [group.problem for group, keep in zip(groups, verdicts.keep, strict=True) if not keep]
        problems = resample(plan.extra_groups, rejected)
    report = session.end_step()
    trained = kept[: report.target_groups]  # the surplus is discarded, as DAPO and slime do
    watch.step_ended(report, trained)
    return StepSample(trained=trained, report=report)
