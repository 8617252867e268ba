"""
``StepBook``: the step an ``AdmissionSession`` is in, and the planning calls made in it.

It keeps the step's index, target, budget state and counts, and the round in progress (every
group judged since the last plan), plans as the host asks and remembers that call, so that
``end_step`` reports on the planner the host followed. It is not thread-safe: the session
calls it under its lock; the session's checkpoint (``_session_state``) writes and restores it.
"""

from __future__ import annotations

import attrs

from ._budget import ResamplePlan, SamplingBudgetController, SamplingBudgetState
from ._decision import BatchAdmissionResult, GroupAdmissionDecision
from ._exceptions import StepLifecycleError
from ._loss_scale import LossScale, loss_scale
from ._metrics import AdmissionStats
from ._plan_call import PlanCall
from ._plans import PlanBase
from ._session_types import StepReport
from ._streaming import StreamPlan
from ._tokens import TokenTally
from ._validation import check_count

__all__ = ["StepBook"]


@attrs.define(kw_only=True)
class StepBook:
    """
    The session's step: index, target, budget state, counts, and the round in progress.

    Groups count here only while a step is open; the session counts every group in its
    lifetime counts as well. The round in progress is every group judged since the last
    plan; a plan, ``pick_prompts`` and ``end_step`` fold it into the budget state.
    """

    index: int = -1
    open: bool = False
    target: int = 0
    state: SamplingBudgetState | None = None
    stats: AdmissionStats = attrs.field(factory=AdmissionStats)
    round: AdmissionStats = attrs.field(factory=AdmissionStats)
    round_samples: int = 0
    round_tokens: int = 0
    plan: ResamplePlan | None = None
    #: Tokens charged in the step outside judged groups (its ``generated`` stays 0: the
    #: judged groups' tokens are in the budget state and the round).
    charged: TokenTally = attrs.field(factory=TokenTally)
    #: The step's last planning call, which the report asks again (state key ``step.last_call``).
    call: PlanCall | None = None

    def begin(self, target: int, controller: SamplingBudgetController) -> None:
        """Open the next step with a fresh budget state that keeps the last step's rate."""
        if self.open:
            msg = (
                f"begin_step() while step {self.index} is open: call end_step() first (it returns the report)"
            )
            raise StepLifecycleError(msg)
        self.index += 1
        self.open = True
        self.target = target
        self.state = controller.new_state(carry_rate_from=self.state)
        self.stats, self.round, self.round_samples, self.round_tokens = (
            AdmissionStats(),
            AdmissionStats(),
            0,
            0,
        )
        self.plan = self.call = None
        self.charged = TokenTally()

    def require(self, what: str) -> None:
        """Raise ``StepLifecycleError`` naming the call ``what`` unless a step is open."""
        if not self.open or self.state is None:
            msg = f"call begin_step(target_groups) before {what}()"
            raise StepLifecycleError(msg)

    def count(
        self,
        judged: GroupAdmissionDecision | BatchAdmissionResult,
        samples: int,
        tokens: int,
        *,
        fallback: bool = False,
    ) -> None:
        """Count judged groups in the open step and its round; outside a step, nowhere."""
        if not self.open:
            return
        for stats in (self.stats, self.round):
            if isinstance(judged, BatchAdmissionResult):
                stats.add_many(judged)
            else:
                stats.add(judged, fallback_admitted=fallback)
        self.round_samples += samples
        self.round_tokens += tokens

    def count_fallback(self, count: int) -> None:
        """Count rejected groups the host trained on anyway, in the open step; outside a step, nowhere."""
        if self.open:
            self.stats.record_fallback(count)

    def charge(self, kind: str, tokens: int) -> None:
        """Count tokens decoded outside a judged group in the open step; outside a step, nowhere."""
        if self.open:
            self.charged = self.charged.add(kind, tokens)

    def fold_round(self, controller: SamplingBudgetController) -> SamplingBudgetState:
        """Close the round in progress: fold it into the step's budget state, and return that."""
        state = self.state
        assert state is not None  # for mypy; require() ran first
        if self.round.candidates:
            controller.observe_round(
                state,
                groups=self.round.candidates,
                admitted=self.round.admitted,
                generated_samples=self.round_samples,
                generated_tokens=self.round_tokens,
            )
            self.round, self.round_samples, self.round_tokens = AdmissionStats(), 0, 0
        return state

    def group_size(self, num_generations: int | None) -> int:
        """``num_generations``, or the mean group size seen this step, rounded up (1 before any)."""
        if num_generations is not None:
            return check_count(num_generations, "num_generations", 1)
        assert self.state is not None
        samples = self.state.generated_samples + self.round_samples
        groups = self.state.generated_groups + self.round.candidates
        return max(1, -(-samples // groups)) if groups else 1

    def with_round(self) -> SamplingBudgetState:
        """The step's budget state with the round in progress counted in, without closing it."""
        state, round_ = self.state, self.round
        assert state is not None
        return attrs.evolve(
            state,
            sampling_rounds=state.sampling_rounds + (1 if round_.candidates else 0),
            generated_groups=state.generated_groups + round_.candidates,
            generated_samples=state.generated_samples + self.round_samples,
            generated_tokens=state.generated_tokens + self.round_tokens,
            admitted_groups=state.admitted_groups + round_.admitted,
            rejected_groups=state.rejected_groups + round_.rejected,
        )

    def round_call(self, num_generations: int | None, estimated_tokens_per_group: float | None) -> PlanCall:
        """A round planner's call made now, with the arguments the host gave."""
        return PlanCall(
            kind="round",
            judged=self.stats.candidates,
            num_generations=num_generations,
            estimated_tokens_per_group=estimated_tokens_per_group,
        )

    def run(self, call: PlanCall, controller: SamplingBudgetController) -> PlanBase:
        """
        Plan as ``call`` says and remember it, so that :meth:`end` reports on the same planner.

        A round call closes the round in progress first; a streaming step is one round in
        progress, which its planner sees unfolded.
        """
        state = self.with_round() if call.kind == "stream" else self.fold_round(controller)
        plan = call.replay(
            controller,
            state,
            target_groups=self.target,
            num_generations=self.group_size(call.num_generations),
            judged=self.stats.candidates,
        )
        self.call = call
        return plan

    def plan_round(
        self,
        controller: SamplingBudgetController,
        num_generations: int | None,
        estimated_tokens_per_group: float | None,
    ) -> ResamplePlan:
        """Close the round in progress and plan the next one (``AdmissionSession.plan``)."""
        plan = self.run(self.round_call(num_generations, estimated_tokens_per_group), controller)
        assert isinstance(plan, ResamplePlan)  # a round call plans rounds
        self.plan = plan
        return plan

    def can_launch(
        self,
        controller: SamplingBudgetController,
        wanted: int,
        num_generations: int | None,
        estimated_tokens_per_group: float | None,
    ) -> bool:
        """Whether ``wanted`` groups fit beside the round in progress (``AdmissionSession.can_launch``)."""
        fits = controller.can_generate(
            self.with_round(),
            wanted,
            target_groups=self.target,
            num_generations=self.group_size(num_generations),
            estimated_tokens_per_group=estimated_tokens_per_group,
            new_round=not self.round.candidates,
        )
        self.call = self.round_call(num_generations, estimated_tokens_per_group)
        return fits

    def plan_stream(self, call: PlanCall, controller: SamplingBudgetController) -> StreamPlan:
        """Plan a stream call, the round in progress unfolded (``AdmissionSession.stream_plan``)."""
        plan = self.run(call, controller)
        assert isinstance(plan, StreamPlan)  # a stream call plans streams
        return plan

    def end(self, controller: SamplingBudgetController, scale: LossScale) -> StepReport:
        """
        Fold the last round, close the step, and report what it cost and kept.

        Whether it was exhausted, and what bound it, is what the step's last planning call
        says on the final counts (a step never planned: the round planner's default);
        ``scale`` is the session's loss-scale mode.
        """
        final = self.run(self.call or PlanCall(kind="round", judged=self.stats.candidates), controller)
        state, target = self.fold_round(controller), self.target
        kept = self.stats.admitted + self.stats.fallback_admitted
        self.open, self.call = False, None
        charged = self.charged
        return StepReport(
            step=self.index,
            target_groups=target,
            admitted_groups=state.admitted_groups,
            kept_groups=kept,
            trained_groups=min(kept, target),
            surplus_groups=max(0, kept - target),
            short_groups=max(0, target - kept),
            exhausted=kept < target and final.exhausted,
            generated_groups=state.generated_groups,
            generated_samples=state.generated_samples,
            generated_tokens=state.generated_tokens,
            sampling_rounds=state.sampling_rounds,
            limited_by=final.limited_by,
            aborted_tokens=charged.aborted,
            carried_tokens=charged.carried,
            pilot_tokens=charged.pilot,
            loss_scale=loss_scale(
                scale,
                trained_groups=min(kept, target),
                target_groups=target,
                generated_groups=state.generated_groups,
            ),
        )
