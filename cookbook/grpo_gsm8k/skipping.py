"""
Prompt skipping: a problem stream that asks a ``PromptHistory`` which prompts to generate.

The stream is also a :class:`~grpo_gsm8k.recipe.StepObserver`: it records every judged group
in the history, so a prompt that was all-wrong or all-right on its earlier visits is
probably skipped when the pool comes round to it again, before any sample is spent on it.
The recipe itself is unchanged; only where its prompts come from is.
"""

from __future__ import annotations

from collections.abc import Sequence

from cookbook.grpo_gsm8k.data import Problem
from cookbook.grpo_gsm8k.recipe import StepObserver
from cookbook.grpo_gsm8k.rollout import Group, ProblemStream
from group_admission import BatchAdmissionVerdict, PromptHistory, ResamplePlan, StepReport

__all__ = ["SkippingStream"]


class SkippingStream(ProblemStream, StepObserver):
    """
    The pool, reshuffled every epoch, minus the prompts ``history`` skips at the current step.

    A prompt's id is its question. A skipped prompt is used up for its epoch; if a whole
    epoch's worth of prompts in a row is skipped, the stream hands out what comes next
    unjudged rather than loop. ``skipped`` counts the prompts skipped so far.
    """

    def __init__(self, problems: Sequence[Problem], seed: int, history: PromptHistory) -> None:
        super().__init__(problems, seed)
        self.history = history
        self.step = 0
        self.skipped = 0
        self._pool = len(problems)

    def take(self, count: int) -> list[Problem]:
        """The next ``count`` problems the history does not skip."""
        picked: list[Problem] = []
        scanned = 0
        while len(picked) < count:
            candidates = super().take(count - len(picked))
            scanned += len(candidates)
            if scanned > self._pool + count:
                return picked + candidates
            kept = set(self.history.pick([p.question for p in candidates], step=self.step).picked)
            chosen = [p for p in candidates if p.question in kept]
            self.skipped += len(candidates) - len(chosen)
            picked += chosen
        return picked

    def round_judged(
        self, groups: Sequence[Group], verdicts: BatchAdmissionVerdict, plan: ResamplePlan
    ) -> None:
        """Let the history observe the judged groups."""
        self.history.observe_batch([g.problem.question for g in groups], verdicts.result, step=self.step)

    def step_ended(self, report: StepReport, trained: Sequence[Group]) -> None:
        """Count the step."""
        self.step += 1  # a step's observations count from the next step on
