"""
Interim stand-in for the core's ``AdmissionSession``, until ``core: AdmissionSession`` lands.

It implements exactly the planned public API by delegating to
:class:`GroupAdmissionPolicy` and :class:`SamplingBudgetController`, so the adapter can be
written and tested against it now. Delete this module when the core session is merged.
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
from ..._decision import GroupAdmissionDecision
from ..._loading import coerce_config
from ..._metrics import AdmissionStats
from ..._policy import GroupAdmissionPolicy

__all__ = ["AdmissionSession", "AdmissionVerdict", "BatchVerdict", "StepReport"]


@attrs.frozen(kw_only=True)
class AdmissionVerdict:
    """The verdict on one group."""

    keep: bool
    decision: GroupAdmissionDecision
    fallback_admitted: bool = False


@attrs.frozen(kw_only=True)
class BatchVerdict:
    """The verdicts on a batch of groups."""

    keep: npt.NDArray[np.bool_]
    result: BatchAdmissionResult
    fallback_admitted: int = 0


@attrs.frozen(kw_only=True)
class StepReport:
    """What one step generated and admitted."""

    target_groups: int
    admitted_groups: int
    generated_groups: int
    generated_samples: int
    rounds: int
    exhausted: bool
    surplus_groups: int


class AdmissionSession:
    """Policy, budget and statistics of one training run (interim implementation)."""

    def __init__(self, policy: Any = None, budget: Any = None, limits: Any = None) -> None:
        self._policy = policy if isinstance(policy, GroupAdmissionPolicy) else GroupAdmissionPolicy(policy)
        self._budget = (
            budget
            if isinstance(budget, SamplingBudgetController)
            else SamplingBudgetController(coerce_config(SamplingBudgetConfig, budget))
        )
        if limits is not None:
            msg = "the interim AdmissionSession does not support 'limits'"
            raise ValueError(msg)
        self._stats = AdmissionStats()
        self._state = SamplingBudgetState()
        self._target = 0
        self._pending: list[GroupAdmissionDecision] = []
        self._pending_tokens = 0
        self._last_plan: ResamplePlan | None = None

    @property
    def policy_config(self) -> GroupAdmissionConfig:
        """The policy's thresholds."""
        return self._policy.config

    @property
    def stats(self) -> AdmissionStats:
        """Cumulative admission counts over every step."""
        return self._stats

    def begin_step(self, target_groups: int) -> None:
        """Start a step that needs ``target_groups`` admitted groups."""
        self._state = self._budget.new_state(carry_rate_from=self._state)
        self._target = target_groups
        self._pending, self._pending_tokens, self._last_plan = [], 0, None

    def judge_batch(
        self,
        rewards: Any,
        completions: Any = None,
        *,
        rollout_ids: Any = None,
        group_keys: Sequence[Hashable] | None = None,
        generated_tokens: int = 0,
    ) -> BatchVerdict:
        """Judge ``G`` groups at once."""
        result = self._policy.evaluate_batch(
            rewards, completions, rollout_ids=rollout_ids, group_keys=group_keys
        )
        decisions = result.decisions()
        self._stats.add_many(decisions)
        self._pending.extend(decisions)
        self._pending_tokens += generated_tokens
        return BatchVerdict(keep=result.admitted.copy(), result=result)

    def judge(
        self,
        rewards: Any,
        completions: Any = None,
        *,
        external_reasons: Sequence[str] | str = (),
        rollout_ids: Sequence[Hashable] | None = None,
        group_key: Hashable | None = None,
    ) -> AdmissionVerdict:
        """Judge one group."""
        decision = self._policy.evaluate(
            rewards,
            completions,
            external_reasons=external_reasons,
            rollout_ids=rollout_ids,
            group_key=group_key,
        )
        self._stats.add(decision)
        self._pending.append(decision)
        return AdmissionVerdict(keep=decision.admitted, decision=decision)

    def plan(self, *, num_generations: int) -> ResamplePlan:
        """Fold the groups judged since the last plan into one round, then plan the next."""
        if self._pending:
            self._budget.observe_round(
                self._state,
                self._pending,
                num_generations=num_generations,
                generated_tokens=self._pending_tokens,
            )
            self._pending, self._pending_tokens = [], 0
        self._last_plan = self._budget.plan_resampling(
            self._state, target_groups=self._target, num_generations=num_generations
        )
        return self._last_plan

    def can_launch(self, groups: int = 1, *, num_generations: int) -> bool:
        """Whether the caps leave room for ``groups`` more groups."""
        plan = self._budget.plan_resampling(
            self._state, target_groups=self._target, num_generations=num_generations
        )
        return plan.extra_groups >= groups

    def end_step(self) -> StepReport:
        """Close the step and report it."""
        state = self._state
        admitted = state.admitted_groups
        exhausted = bool(self._last_plan is not None and self._last_plan.exhausted)
        return StepReport(
            target_groups=self._target,
            admitted_groups=admitted,
            generated_groups=state.generated_groups,
            generated_samples=state.generated_samples,
            rounds=state.sampling_rounds,
            exhausted=exhausted,
            surplus_groups=max(0, admitted - self._target),
        )

    def state_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot of the statistics and the budget state."""
        return {"stats": self._stats.to_dict(), "budget_state": self._state.to_dict()}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output."""
        self._stats = AdmissionStats.from_dict(data["stats"])
        self._state = SamplingBudgetState.from_dict(data["budget_state"])
