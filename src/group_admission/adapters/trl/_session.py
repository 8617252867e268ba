"""
A private stand-in for the core's planned ``group_admission.AdmissionSession``.

The TRL adapter is written against the planned session API only (``begin_step``,
``judge_batch``, ``plan``, ``end_step``, ``stats``, ``state_dict``). Until the core ships
it, this module composes the existing policy, budget controller and statistics into that
API; it holds no gate rule or budget arithmetic of its own. Delete it when the core's
session lands.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from ..._batch import BatchAdmissionResult
from ..._budget import ResamplePlan, SamplingBudgetConfig, SamplingBudgetController, SamplingBudgetState
from ..._config import GroupAdmissionConfig
from ..._metrics import AdmissionStats
from ..._policy import GroupAdmissionPolicy

__all__ = ["AdmissionSession", "BatchVerdict", "StepReport"]


@attrs.frozen(kw_only=True, eq=False)
class BatchVerdict:
    """The verdict on G groups: which to keep, and the policy's full result."""

    keep: npt.NDArray[np.bool_]
    result: BatchAdmissionResult
    fallback_admitted: int = 0


@attrs.frozen(kw_only=True)
class StepReport:
    """What one step generated and admitted, against its target."""

    target_groups: int
    admitted_groups: int
    generated_groups: int
    generated_samples: int
    rounds: int
    exhausted: bool
    surplus_groups: int


class AdmissionSession:
    """Policy + budget controller + statistics behind one step-oriented API."""

    def __init__(
        self,
        policy: GroupAdmissionPolicy | GroupAdmissionConfig | Mapping[str, Any] | None = None,
        budget: SamplingBudgetController | SamplingBudgetConfig | Mapping[str, Any] | None = None,
    ) -> None:
        self.policy = policy if isinstance(policy, GroupAdmissionPolicy) else GroupAdmissionPolicy(policy)
        # No budget is a controller whose default caps allow no extra group: masking only.
        self.controller = (
            budget if isinstance(budget, SamplingBudgetController) else SamplingBudgetController(budget)
        )
        self.stats = AdmissionStats()
        self._state = SamplingBudgetState()
        self._round = AdmissionStats()
        self._round_tokens = 0
        self._target = 0
        self._exhausted = False

    def begin_step(self, target_groups: int) -> None:
        """Start a step: fresh budget state, the rate estimate carried over."""
        self._state = self.controller.new_state(carry_rate_from=self._state)
        self._round = AdmissionStats()
        self._round_tokens = 0
        self._target = target_groups
        self._exhausted = False

    def judge_batch(
        self,
        rewards: Any,
        completions: Sequence[Sequence[str | None]] | None = None,
        *,
        rollout_ids: Any = None,
        group_keys: Sequence[Hashable] | None = None,
        generated_tokens: int = 0,
    ) -> BatchVerdict:
        """Judge G groups and count them in the statistics and the pending round."""
        result = self.policy.evaluate_batch(
            rewards, completions, rollout_ids=rollout_ids, group_keys=group_keys
        )
        self.stats.add_many(result)
        self._round.add_many(result)
        self._round_tokens += generated_tokens
        return BatchVerdict(keep=result.admitted.copy(), result=result)

    def plan(self, *, num_generations: int) -> ResamplePlan:
        """Fold the groups judged since the last plan into the state as one round, then plan."""
        if self._round.candidates:
            self.controller.observe_round(
                self._state, self._round, num_generations=num_generations, generated_tokens=self._round_tokens
            )
            self._round = AdmissionStats()
            self._round_tokens = 0
        plan = self.controller.plan_resampling(
            self._state, target_groups=self._target, num_generations=num_generations
        )
        self._exhausted = plan.exhausted
        return plan

    def end_step(self) -> StepReport:
        """Close the step and report it."""
        state = self._state
        return StepReport(
            target_groups=self._target,
            admitted_groups=state.admitted_groups,
            generated_groups=state.generated_groups,
            generated_samples=state.generated_samples,
            rounds=state.sampling_rounds,
            exhausted=self._exhausted,
            surplus_groups=max(0, state.admitted_groups - self._target),
        )

    def state_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot of the statistics and the budget state."""
        return {"stats": self.stats.to_dict(), "budget_state": self._state.to_dict()}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output."""
        self.stats = AdmissionStats.from_dict(data["stats"])
        self._state = SamplingBudgetState.from_dict(data["budget_state"])
