"""
Strategies without an event loop: no filtering, RAGEN, controller, per-task retry, oracle.

Every strategy judges groups with the real policy (through ``StepContext.judge``) and
plans with the real :class:`SamplingBudgetController`; none re-implements a gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import attrs
import numpy as np

from .._budget import SamplingBudgetConfig, SamplingBudgetController, SamplingBudgetState
from .._host_rules.ragen import ragen_top_p
from .._validation import as_float, check_finite, check_ge, check_range, check_real, describe
from ._models import SimulationConfig
from ._results import StepOutcome, StepTally
from ._stream import StepContext

__all__ = [
    "ControllerResampling",
    "NoFiltering",
    "Oracle",
    "PerTaskRetry",
    "RagenTopP",
    "Strategy",
    "check_bool",
    "check_name",
    "ragen_top_p",
    "strategy_dict",
    "to_budget",
]


@runtime_checkable
class Strategy(Protocol):
    """
    What the simulator needs from a strategy.

    ``kind`` names the strategy family, ``name`` this configured instance (unique within
    one simulation). :meth:`check` rejects a strategy that cannot run on ``config``
    before anything is simulated; :meth:`run_step` simulates one step.

    .. versionadded:: 0.1.0
    """

    kind: ClassVar[str]

    @property
    def name(self) -> str:
        """The strategy's label in tables and results."""
        ...

    def check(self, config: SimulationConfig) -> None:
        """Raise ``ValueError`` if the strategy cannot run on ``config``."""
        ...

    def run_step(self, context: StepContext) -> StepOutcome:
        """Simulate one step."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The strategy's settings, with its ``kind``."""
        ...


def check_name(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require a non-empty string."""
    if not isinstance(value, str) or not value:
        msg = f"'{attribute.name}' must be a non-empty string (got {describe(value)})"
        raise TypeError(msg)


def check_bool(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require a bool."""
    if not isinstance(value, bool):
        msg = f"'{attribute.name}' must be true or false (got {describe(value)})"
        raise TypeError(msg)


def to_budget(value: Any) -> Any:
    """Convert a mapping to a :class:`SamplingBudgetConfig`; leave anything else to the validator."""
    return SamplingBudgetConfig.from_mapping(value) if isinstance(value, Mapping) else value


def _check_budget(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, SamplingBudgetConfig):
        msg = f"'{attribute.name}' must be a SamplingBudgetConfig or a mapping (got {describe(value)})"
        raise TypeError(msg)


def strategy_dict(strategy: Any) -> dict[str, Any]:
    """A strategy's attrs fields as a dict (nested configs as dicts), with its ``kind``."""
    data: dict[str, Any] = {"kind": strategy.kind}
    for field in attrs.fields(type(strategy)):
        value = getattr(strategy, field.name)
        data[field.name] = value.to_dict() if hasattr(value, "to_dict") else value
    return data


@attrs.frozen(kw_only=True)
class NoFiltering:
    """
    Generate the target and train on every group, informative or not.

    .. versionadded:: 0.1.0
    """

    kind: ClassVar[str] = "no_filtering"
    name: str = attrs.field(default="no_filtering", validator=check_name)

    def check(self, config: SimulationConfig) -> None:
        """Runs on any config."""

    def run_step(self, context: StepContext) -> StepOutcome:
        """Generate ``target`` groups and deliver them all."""
        tally = StepTally(context.group_size)
        batch = context.take(context.target_groups)
        tally.add(batch, context.judge(batch))
        return tally.outcome(
            target_groups=context.target_groups,
            delivered_groups=len(batch),
            delivered_informative=tally.admitted,
            stop="no_resampling",
        )

    def to_dict(self) -> dict[str, Any]:
        """The settings, with the ``kind``."""
        return strategy_dict(self)


@attrs.frozen(kw_only=True)
class RagenTopP:
    """
    RAGEN's rollout filter: generate the target once, keep the top-p share by reward std.

    The score of a group is the sample standard deviation (``ddof=1``, as RAGEN's
    ``torch.std``) of its total reward (the sum of all components); a single-member
    group scores 0. Selection is :func:`ragen_top_p`. There is no resampling: a step
    trains on the selected groups, possibly none.

    Args:
        top_p: Share of the summed std to keep, in ``(0, 1]`` (1 keeps every group).
        include_zero: Whether zero-std groups stay candidates.
        selection_eps: RAGEN's ``selection_eps``, subtracted from the threshold.
        name: The label in results.

    .. versionadded:: 0.1.0
    """

    kind: ClassVar[str] = "ragen"
    top_p: float = attrs.field(
        default=0.9,
        converter=as_float,
        validator=(check_real, check_finite, check_range(0, 1, low_open=True)),
    )
    include_zero: bool = attrs.field(default=True, validator=check_bool)
    selection_eps: float = attrs.field(
        default=0.01, converter=as_float, validator=(check_real, check_finite, check_ge(0))
    )
    name: str = attrs.field(validator=check_name)

    @name.default
    def _default_name(self) -> str:
        return f"ragen(top_p={self.top_p:g})"

    def check(self, config: SimulationConfig) -> None:
        """Runs on any config."""

    def run_step(self, context: StepContext) -> StepOutcome:
        """Generate ``target`` groups and deliver RAGEN's selection."""
        tally = StepTally(context.group_size)
        batch = context.take(context.target_groups)
        result = context.judge(batch)
        tally.add(batch, result)
        # RAGEN's torch.std is the sample std; one member has no spread to rank.
        single = context.group_size == 1
        scores = np.zeros(len(batch)) if single else batch.total_rewards().std(axis=1, ddof=1)
        selected = ragen_top_p(
            scores, top_p=self.top_p, include_zero=self.include_zero, selection_eps=self.selection_eps
        )
        return tally.outcome(
            target_groups=context.target_groups,
            delivered_groups=len(selected),
            delivered_informative=int(result.admitted[selected].sum()),
            stop="no_resampling",
        )

    def to_dict(self) -> dict[str, Any]:
        """The settings, with the ``kind``."""
        return strategy_dict(self)


def _check_mode(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in (None, "expected", "confidence"):
        msg = f"'{attribute.name}' must be 'expected', 'confidence' or None (got {describe(value)})"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class ControllerResampling:
    """
    This SDK's :class:`SamplingBudgetController`, step by step.

    Each step generates the target, judges it, then asks the controller for a plan and
    generates the planned groups of fresh tasks, until the target is met or the plan is
    exhausted. Admitted groups beyond the target are discarded.

    Args:
        budget: The caps. ``None`` uses ``max_extra_groups = 2 x target_groups`` (the
            most slime's default waves generate) and ``max_resample_rounds = 3``, other
            fields at their defaults.
        mode: Overrides ``budget.mode`` when set (``"expected"`` or ``"confidence"``).
        carry_rate: Start each step from the previous step's rate estimate
            (``new_state(carry_rate_from=...)``), and plan the first round with it
            instead of generating exactly the target.
        name: The label in results.

    .. versionadded:: 0.1.0
    """

    kind: ClassVar[str] = "controller"
    budget: SamplingBudgetConfig | None = attrs.field(
        default=None, converter=to_budget, validator=_check_budget
    )
    mode: Literal["expected", "confidence"] | None = attrs.field(default=None, validator=_check_mode)
    carry_rate: bool = attrs.field(default=False, validator=check_bool)
    name: str = attrs.field(validator=check_name)

    @name.default
    def _default_name(self) -> str:
        mode = self.mode or (self.budget.mode if self.budget is not None else "expected")
        return f"controller({mode}{',carry' if self.carry_rate else ''})"

    def effective_budget(self, target_groups: int) -> SamplingBudgetConfig:
        """The caps used for a step with this target."""
        budget = self.budget or SamplingBudgetConfig(
            max_extra_groups=2 * target_groups, max_resample_rounds=3
        )
        return budget if self.mode is None else attrs.evolve(budget, mode=self.mode)

    def check(self, config: SimulationConfig) -> None:
        """Runs on any config."""

    def run_step(self, context: StepContext) -> StepOutcome:
        """Generate the target, then the controller's plans, until met or exhausted."""
        target, size = context.target_groups, context.group_size
        controller = SamplingBudgetController(self.effective_budget(target))
        previous: SamplingBudgetState | None = context.memory.get("state") if self.carry_rate else None
        state = controller.new_state(carry_rate_from=previous)
        count = target
        if state.effective_rate_ema is not None:
            count = controller.plan_resampling(state, target_groups=target, num_generations=size).extra_groups
            count = count or target
        tally = StepTally(size)
        while True:
            batch = context.take(count)
            result = context.judge(batch)
            tally.add(batch, result)
            controller.observe_round(
                state, result, num_generations=size, generated_tokens=int(batch.tokens.sum())
            )
            plan = controller.plan_resampling(state, target_groups=target, num_generations=size)
            if plan.extra_groups == 0:
                break
            count = plan.extra_groups
        context.memory["state"] = state
        delivered = min(tally.admitted, target)
        short = plan.remaining_target_groups > 0
        return tally.outcome(
            target_groups=target,
            delivered_groups=delivered,
            delivered_informative=delivered,
            stop="budget_exhausted" if short else "target_met",
            exhausted_slots=target - delivered if short else 0,
        )

    def to_dict(self) -> dict[str, Any]:
        """The settings, with the ``kind``."""
        return strategy_dict(self)


def _pull_request_budget() -> SamplingBudgetConfig:
    return SamplingBudgetConfig(max_extra_groups=2, max_resample_rounds=1)


@attrs.frozen(kw_only=True)
class PerTaskRetry:
    """
    The twinkle pull request's bounded per-task retry.

    Each step judges one group of each of ``target_groups`` tasks. Every rejected task
    gets its own :class:`SamplingBudgetController` state with ``target_groups=1`` and
    is retried with new groups *of the same task* as the plan allows (at most
    ``max_extra_groups`` extra groups over at most ``max_resample_rounds`` rounds, within
    the per-task sample and token caps). A task counts once: a second admitted group of
    the same task is surplus. Retries of all tasks in one round are generated together.

    Args:
        budget: The per-task caps; the default is the pull request's experiment (2 extra
            groups, 1 resample round).
        name: The label in results.

    .. versionadded:: 0.1.0
    """

    kind: ClassVar[str] = "per_task_retry"
    budget: SamplingBudgetConfig = attrs.field(
        factory=_pull_request_budget, converter=to_budget, validator=_check_budget
    )
    name: str = attrs.field(default="per_task_retry", validator=check_name)

    def check(self, config: SimulationConfig) -> None:
        """Runs on any config."""

    def run_step(self, context: StepContext) -> StepOutcome:
        """Judge one group per task, then retry the rejected tasks within their caps."""
        target, size = context.target_groups, context.group_size
        controller = SamplingBudgetController(self.budget)
        tally = StepTally(size)
        batch = context.take(target)
        result = context.judge(batch)
        tally.add(batch, result)
        states: dict[int, SamplingBudgetState] = {}
        for task in np.flatnonzero(~result.admitted).tolist():
            states[task] = controller.new_state()
            controller.observe_round(
                states[task],
                [result.decision(task)],
                num_generations=size,
                generated_tokens=int(batch.tokens[task].sum()),
            )
        pending, exhausted = list(states), 0
        while pending:
            wanted: list[tuple[int, int]] = []
            for task in pending:
                plan = controller.plan_resampling(states[task], target_groups=1, num_generations=size)
                if plan.extra_groups:
                    wanted.append((task, plan.extra_groups))
                elif plan.exhausted:
                    exhausted += 1
            if not wanted:
                break
            owners = np.repeat([task for task, _ in wanted], [count for _, count in wanted])
            retry = context.retry(batch.tasks[owners])
            retried = context.judge(retry)
            tally.add(retry, retried)
            for task, _ in wanted:
                rows = np.flatnonzero(owners == task).tolist()
                controller.observe_round(
                    states[task],
                    [retried.decision(row) for row in rows],
                    num_generations=size,
                    generated_tokens=int(retry.tokens[rows].sum()),
                )
            pending = [task for task, _ in wanted if states[task].admitted_groups == 0]
        informative = int(result.admitted.sum()) + sum(state.admitted_groups > 0 for state in states.values())
        return tally.outcome(
            target_groups=target,
            delivered_groups=informative,
            delivered_informative=informative,
            stop="budget_exhausted" if exhausted else "target_met",
            exhausted_slots=exhausted,
        )

    def to_dict(self) -> dict[str, Any]:
        """The settings, with the ``kind``."""
        return strategy_dict(self)


@attrs.frozen(kw_only=True)
class Oracle:
    """
    The lower bound on groups for a strategy that trains on the tasks it draws.

    It knows every task's true pass rate, so it knows the true probability that each
    upcoming group is admitted, but not the outcomes. It generates in replacement waves:
    first the target, then exactly one new group per missing admitted group. It never
    generates a group after the target is met, so its count is the position of the
    target-th admitted group in the step's stream: no strategy that draws fresh tasks
    from the same stream can deliver as many informative groups with fewer. Knowing the
    rates cannot lower that count: a rate is a probability, not an outcome, and skipping
    low-rate tasks would change which tasks the model trains on.

    Args:
        name: The label in results.

    .. versionadded:: 0.1.0
    """

    kind: ClassVar[str] = "oracle"
    name: str = attrs.field(default="oracle", validator=check_name)

    def check(self, config: SimulationConfig) -> None:
        """Runs on any config."""

    def run_step(self, context: StepContext) -> StepOutcome:
        """Generate waves of exactly the missing count until the target is met."""
        tally = StepTally(context.group_size)
        missing = context.target_groups
        while missing and tally.rounds < context.safety_max_rounds:
            batch = context.take(missing)
            result = context.judge(batch)
            tally.add(batch, result)
            missing -= int(result.admitted.sum())
        delivered = context.target_groups - missing
        return tally.outcome(
            target_groups=context.target_groups,
            delivered_groups=delivered,
            delivered_informative=delivered,
            stop="safety_limit" if missing else "target_met",
            exhausted_slots=missing,
        )

    def to_dict(self) -> dict[str, Any]:
        """The settings, with the ``kind``."""
        return strategy_dict(self)
