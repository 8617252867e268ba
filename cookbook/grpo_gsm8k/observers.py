"""
Instrumentation of the recipe, as observers.

A stopwatch per phase, and a log of every round with the checksum of the weights it sampled
from.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cookbook.grpo_gsm8k.data import Problem
from cookbook.grpo_gsm8k.grpo import parameter_checksum
from cookbook.grpo_gsm8k.recipe import StepObserver
from cookbook.grpo_gsm8k.rollout import Group
from group_admission import BatchAdmissionVerdict, RejectionReason, ResamplePlan

__all__ = ["RoundLog", "RoundRecord", "Stopwatch"]


class Stopwatch(StepObserver):
    """Seconds spent in generation, reward and admission (judging and planning) over a step."""

    def __init__(self) -> None:
        self.seconds = {"generation": 0.0, "reward": 0.0, "admission": 0.0}
        self._tick = time.perf_counter()

    def _lap(self, phase: str | None) -> None:
        now = time.perf_counter()
        if phase is not None:
            self.seconds[phase] += now - self._tick
        self._tick = now

    def round_started(self, problems: Sequence[Problem]) -> None:
        """Start timing the round."""
        self._lap(None)

    def round_generated(self, groups: Sequence[Group]) -> None:
        """Charge the time since the last hook to generation."""
        self._lap("generation")

    def round_scored(self, groups: Sequence[Group]) -> None:
        """Charge the time since the last hook to the reward."""
        self._lap("reward")

    def round_judged(
        self, groups: Sequence[Group], verdicts: BatchAdmissionVerdict, plan: ResamplePlan
    ) -> None:
        """Charge the time since the last hook to admission."""
        self._lap("admission")


@dataclass
class RoundRecord:
    """What one sampling round generated and admitted, and the weights it sampled from."""

    groups: int
    admitted: int
    reasons: dict[str, int]
    tokens: int
    checksum: float
    policy_version: int
    plan: dict[str, Any]


class RoundLog(StepObserver):
    """
    Every round of a step: counts, the plan, and a checksum of the weights sampled from.

    Every round of a step must sample from the same weights; the checksums let the tests
    check it. ``phantom`` counts groups rejected as ``exact_dead`` on the gated reward whose
    total reward still has spread: plain GRPO would have trained on them.
    """

    def __init__(self, model: Any, policy_version: int) -> None:
        self._model = model
        self._version = policy_version
        self._checksum = 0.0
        self.rounds: list[RoundRecord] = []
        self.first_round: list[Group] = []
        self.phantom = 0

    def round_started(self, problems: Sequence[Problem]) -> None:
        """Checksum the weights the round samples from."""
        self._checksum = parameter_checksum(self._model)

    def round_judged(
        self, groups: Sequence[Group], verdicts: BatchAdmissionVerdict, plan: ResamplePlan
    ) -> None:
        """Log the round: its groups, verdicts, plan and weights' checksum."""
        reasons = verdicts.result.primary_reasons
        self.phantom += sum(
            reason == RejectionReason.EXACT_DEAD and float(np.std(group.total_reward)) > 0
            for group, reason in zip(groups, reasons, strict=True)
        )
        self.first_round = self.first_round or list(groups)
        self.rounds.append(
            RoundRecord(
                groups=len(groups),
                admitted=int(verdicts.result.admitted.sum()),
                reasons=dict(Counter(reason for reason in reasons if reason is not None)),
                tokens=sum(group.tokens for group in groups),
                checksum=self._checksum,
                policy_version=self._version,
                plan=plan.to_dict(),
            )
        )
