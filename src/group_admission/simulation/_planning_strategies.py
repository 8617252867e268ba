"""
Planning strategies: streaming launches (for ``simulate``) and prompt-pool strategies (for ``simulate_pool``).

Each runs the real :class:`AdmissionSession` (judging, counting, planning) and, where it
skips prompts, the real :class:`PromptHistory`; none re-implements a plan or a gate.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

import attrs
import numpy as np
import numpy.typing as npt

from .._batch import BatchAdmissionResult
from .._budget import SamplingBudgetConfig
from .._history import PromptHistory
from .._history_config import PromptHistoryConfig
from .._prompt_plan import prompts_needed
from .._session import AdmissionSession
from .._validation import as_float, check_finite, check_real, describe
from ._models import SimulationConfig
from ._prompt_pool import PoolContext, PromptPoolConfig
from ._results import StepOutcome, StepTally
from ._stream import GroupBatch, StepContext

__all__ = [
    "HistorySkipping",
    "OracleSkipping",
    "PoolController",
    "PoolStrategy",
    "StreamingLaunches",
    "partial_tokens",
]


def partial_tokens(tokens: npt.NDArray[np.int64], elapsed: float) -> int:
    """
    Tokens a group produced in ``elapsed`` time units: each member one token per unit, up to its length.

    The simulator's accounting of an aborted group, shared with slime's aborted waves.
    """
    return int(np.minimum(tokens, int(elapsed)).sum())


def _check_name(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value:
        msg = f"'{attribute.name}' must be a non-empty string (got {describe(value)})"
        raise TypeError(msg)


def _to_budget(value: Any) -> Any:
    return SamplingBudgetConfig.from_mapping(value) if isinstance(value, Mapping) else value


def _check_budget(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, SamplingBudgetConfig):
        msg = f"'{attribute.name}' must be a SamplingBudgetConfig or a mapping (got {describe(value)})"
        raise TypeError(msg)


def _check_confidence(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not 0.0 < value < 1.0:
        msg = f"'{attribute.name}' must be in (0, 1) (got {value!r})"
        raise ValueError(msg)


def _strategy_dict(strategy: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"kind": strategy.kind}
    for field in attrs.fields(type(strategy)):
        value = getattr(strategy, field.name)
        data[field.name] = value.to_dict() if hasattr(value, "to_dict") else value
    return data


@attrs.frozen(kw_only=True)
class StreamingLaunches:
    """
    A streaming host run by :meth:`AdmissionSession.stream_plan`: launch, top up, abort at the target.

    The step launches what the plan asks for, then, each time groups finish, judges them
    and asks again: it tops the in-flight count back up to the confidence bound on the
    current rate, and aborts whatever is still running once the target is met. Groups
    finish when their longest member does (as in :class:`SlimeWaves`); an aborted group
    counts the tokens it produced (:func:`partial_tokens`, as slime's aborted groups do).
    The session carries its rate estimate from step to step.

    Args:
        budget: The caps. ``None`` allows ``2 x target_groups`` extra groups (the most
            slime's default waves generate).
        confidence: The probability that the groups in flight meet the target; higher
            is faster and generates more.
        name: The label in results.

    .. versionadded:: 0.2.0
    """

    kind: ClassVar[str] = "streaming"
    budget: SamplingBudgetConfig | None = attrs.field(
        default=None, converter=_to_budget, validator=_check_budget
    )
    confidence: float = attrs.field(
        default=0.99, converter=as_float, validator=(check_real, check_finite, _check_confidence)
    )
    name: str = attrs.field(validator=_check_name)

    @name.default
    def _default_name(self) -> str:
        return f"streaming({self.confidence:g})"

    def check(self, config: SimulationConfig) -> None:
        """Runs on any config."""

    def _session(self, context: StepContext) -> AdmissionSession:
        session = context.memory.get("session")
        if session is None:
            budget = self.budget or SamplingBudgetConfig(max_extra_groups=2 * context.target_groups)
            session = context.memory["session"] = AdmissionSession(context.policy, budget=budget)
        assert isinstance(session, AdmissionSession)
        return session

    def run_step(self, context: StepContext) -> StepOutcome:
        """Launch, finish, top up and abort until the target is met or the plan is exhausted."""
        target, size = context.target_groups, context.group_size
        session = self._session(context)
        session.begin_step(target)
        launches: list[tuple[GroupBatch, BatchAdmissionResult, float]] = []
        finished: list[npt.NDArray[np.bool_]] = []
        events: list[tuple[float, int, int, int]] = []
        flying = kept = informative = 0
        clock = 0.0
        order = itertools.count()  # ties finish in launch order
        plan = session.stream_plan(0, num_generations=size, confidence=self.confidence)
        while True:
            if plan.launch and len(launches) < context.safety_max_rounds:
                batch = context.take(plan.launch)
                launches.append((batch, context.judge(batch), clock))
                finished.append(np.zeros(len(batch), dtype=bool))
                for row, duration in enumerate(batch.durations().tolist()):
                    heapq.heappush(events, (clock + duration, next(order), len(launches) - 1, row))
                flying += plan.launch
            if plan.abort or plan.exhausted or not events:
                break
            clock = events[0][0]
            while events and events[0][0] == clock:
                _, _, wave, row = heapq.heappop(events)
                batch, result, _ = launches[wave]
                verdict = session.record(result.decision(row), generated_tokens=int(batch.tokens[row].sum()))
                finished[wave][row] = True
                flying -= 1
                if verdict.keep and kept < target:
                    kept += 1
                    informative += verdict.decision.admitted
            plan = session.stream_plan(flying, num_generations=size, confidence=self.confidence)
        session.end_step()
        return self._outcome(context, launches, finished, clock, kept, informative)

    def _outcome(
        self,
        context: StepContext,
        launches: list[tuple[GroupBatch, BatchAdmissionResult, float]],
        finished: list[npt.NDArray[np.bool_]],
        clock: float,
        kept: int,
        informative: int,
    ) -> StepOutcome:
        tally = StepTally(context.group_size)
        aborted = aborted_tokens = 0
        first = (0, 0)
        for number, ((batch, result, start), done) in enumerate(zip(launches, finished, strict=True)):
            tally.add_codes(batch.select(done), result.reason_codes[done], new_round=False)
            if number == 0:
                first = (int(done.sum()), int(result.admitted[done].sum()))
            for row in np.flatnonzero(~done).tolist():
                aborted += 1
                aborted_tokens += partial_tokens(batch.tokens[row], clock - start)
        short = kept < context.target_groups
        return tally.outcome(
            target_groups=context.target_groups,
            delivered_groups=kept,
            delivered_informative=informative,
            stop="budget_exhausted" if short else "target_met",
            exhausted_slots=context.target_groups - informative if short else 0,
            aborted_groups=aborted,
            aborted_tokens=aborted_tokens,
            rounds=len(launches),
            first_round=first,
            time=clock,
        )

    def to_dict(self) -> dict[str, Any]:
        """The settings, with the ``kind``."""
        return _strategy_dict(self)


@runtime_checkable
class PoolStrategy(Protocol):
    """
    What :func:`simulate_pool` needs from a strategy: one step at a time on a :class:`PoolContext`.

    .. versionadded:: 0.2.0
    """

    kind: ClassVar[str]

    @property
    def name(self) -> str:
        """The strategy's label in tables and results."""
        ...

    def check(self, config: PromptPoolConfig) -> None:
        """Raise ``ValueError`` if the strategy cannot run on ``config``."""
        ...

    def run_step(self, context: PoolContext) -> None:
        """Simulate one step; the context keeps the tally."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The strategy's settings, with its ``kind``."""
        ...


def _pool_budget(budget: SamplingBudgetConfig | None, target: int) -> SamplingBudgetConfig:
    """The default step budget of pool strategies: room to reach the target on a hard pool."""
    return budget or SamplingBudgetConfig(
        max_extra_groups=6 * target, max_resample_rounds=8, mode="confidence", confidence=0.9
    )


def _pool_session(context: PoolContext, budget: SamplingBudgetConfig | None) -> AdmissionSession:
    session = context.memory.get("session")
    if session is None:
        config = _pool_budget(budget, context.target_groups)
        session = context.memory["session"] = AdmissionSession(context.policy, budget=config)
    assert isinstance(session, AdmissionSession)
    return session


@attrs.frozen(kw_only=True)
class PoolController:
    """
    The round controller alone: prompts in epoch order, rounds sized by one batch-wide rate.

    Args:
        budget: The step caps (default: ``6 x target`` extra groups, 8 rounds,
            ``confidence`` mode).
        name: The label in results.

    .. versionadded:: 0.2.0
    """

    kind: ClassVar[str] = "controller"
    budget: SamplingBudgetConfig | None = attrs.field(
        default=None, converter=_to_budget, validator=_check_budget
    )
    name: str = attrs.field(default="controller", validator=_check_name)

    def check(self, config: PromptPoolConfig) -> None:
        """Runs on any pool."""

    def run_step(self, context: PoolContext) -> None:
        """Plan rounds with :meth:`AdmissionSession.plan` until the target is met or exhausted."""
        session = _pool_session(context, self.budget)
        session.begin_step(context.target_groups)
        # The first round uses the rate carried from the last step (the target without one).
        count = session.plan(num_generations=context.group_size).extra_groups
        while count:
            context.generate(context.next_prompts(count), session)
            count = session.plan(num_generations=context.group_size).extra_groups
        session.end_step()

    def to_dict(self) -> dict[str, Any]:
        """The settings, with the ``kind``."""
        return _strategy_dict(self)


def _history_fields(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


def _check_history(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, dict):
        msg = f"'{attribute.name}' must be a mapping of PromptHistoryConfig fields (got {describe(value)})"
        raise TypeError(msg)
    if "group_size" in value:
        msg = f"'{attribute.name}' must not set 'group_size': the pool's group size is used"
        raise ValueError(msg)
    PromptHistoryConfig(group_size=1, **value)  # raises naming the bad field


@attrs.frozen(kw_only=True)
class HistorySkipping:
    """
    A :class:`PromptHistory` picks the prompts; :meth:`AdmissionSession.pick_prompts` sizes each round.

    Candidates come in epoch order; the history skips the likely-dead ones (they are
    used up for this epoch, as GRESO skips them), the plan takes the shortest prefix of
    the rest whose informative probabilities reach the target, and the unused ones go
    back to the front of the queue. Every judged group is observed.

    Args:
        history: :class:`PromptHistoryConfig` fields other than ``group_size`` (e.g.
            ``{"mode": "greso"}`` for GRESO's rule).
        budget: The step caps (default as :class:`PoolController`).
        name: The label in results.

    .. versionadded:: 0.2.0
    """

    kind: ClassVar[str] = "history"
    history: dict[str, Any] = attrs.field(factory=dict, converter=_history_fields, validator=_check_history)
    budget: SamplingBudgetConfig | None = attrs.field(
        default=None, converter=_to_budget, validator=_check_budget
    )
    name: str = attrs.field(validator=_check_name)

    @name.default
    def _default_name(self) -> str:
        return "greso" if self.history.get("mode") == "greso" else "history"

    def check(self, config: PromptPoolConfig) -> None:
        """Runs on any pool."""

    def prompt_history(self, context: PoolContext) -> PromptHistory:
        """The strategy's history (built at the first step, kept in the context's memory)."""
        history = context.memory.get("history")
        if history is None:
            config = PromptHistoryConfig(group_size=context.group_size, **self.history)
            history = context.memory["history"] = PromptHistory(config)
        assert isinstance(history, PromptHistory)
        return history

    def run_step(self, context: PoolContext) -> None:
        """Pick, size, generate and observe rounds until the target is met or exhausted."""
        session = _pool_session(context, self.budget)
        history = self.prompt_history(context)
        session.begin_step(context.target_groups)
        while True:
            plan = self._plan(context, session, history)
            if not plan.generate:
                break
            result = context.generate(list(plan.generate), session)
            history.observe_batch(plan.generate, result, step=session.step)
        session.end_step()

    @staticmethod
    def _plan(context: PoolContext, session: AdmissionSession, history: PromptHistory) -> Any:
        """Offer candidates until the plan stops short of them (or a cap binds); put back the rest."""
        candidates: list[int] = []
        remaining = context.target_groups
        while True:
            candidates += context.next_prompts(max(4 * remaining, context.target_groups))
            plan = session.pick_prompts(history, candidates, num_generations=context.group_size)
            remaining = max(1, plan.remaining_target_groups)
            enough = plan.requested_groups < len(plan.generate) + len(plan.deferred)
            if enough or plan.limited_by or plan.exhausted or len(candidates) > 8 * context.pool.config.size:
                break
        context.skip(list(plan.skipped))
        context.put_back(list(plan.deferred))
        return plan

    def to_dict(self) -> dict[str, Any]:
        """The settings, with the ``kind``."""
        return _strategy_dict(self)


@attrs.frozen(kw_only=True)
class OracleSkipping:
    """
    A reference bound: skips the prompts whose *true* informative probability is below a threshold.

    It knows every prompt's current pass rate (no history can), skips prompts with
    ``1 - p^G - (1 - p)^G < skip_below``, and sizes rounds with the true probabilities
    (:func:`prompts_needed` with the budget's confidence), under the budget's caps.

    Args:
        skip_below: The threshold.
        budget: The step caps (default as :class:`PoolController`).
        name: The label in results.

    .. versionadded:: 0.2.0
    """

    kind: ClassVar[str] = "oracle_skip"
    skip_below: float = attrs.field(default=0.1, converter=as_float, validator=(check_real, check_finite))
    budget: SamplingBudgetConfig | None = attrs.field(
        default=None, converter=_to_budget, validator=_check_budget
    )
    name: str = attrs.field(default="oracle_skip", validator=_check_name)

    def check(self, config: PromptPoolConfig) -> None:
        """Runs on any pool."""

    def run_step(self, context: PoolContext) -> None:
        """Skip by the truth, size by the truth, until the target is met or a cap binds."""
        session = _pool_session(context, self.budget)
        session.begin_step(context.target_groups)
        rates, size = context.rates(), context.group_size
        informative = 1.0 - rates**size - (1.0 - rates) ** size
        confidence = session.controller.config.confidence
        while session.plan(num_generations=size).remaining_target_groups:
            remaining = session.plan(num_generations=size).remaining_target_groups
            kept: list[int] = []
            while prompts_needed(informative[kept].tolist(), remaining, confidence) >= len(kept):
                batch = context.next_prompts(context.target_groups)
                context.skip([p for p in batch if informative[p] < self.skip_below])
                kept += [p for p in batch if informative[p] >= self.skip_below]
            count = prompts_needed(informative[kept].tolist(), remaining, confidence)
            while count and not session.can_launch(count, num_generations=size):
                count -= 1
            context.put_back(kept[count:])
            if not count:
                break
            context.generate(kept[:count], session)
        session.end_step()

    def to_dict(self) -> dict[str, Any]:
        """The settings, with the ``kind``."""
        return _strategy_dict(self)
