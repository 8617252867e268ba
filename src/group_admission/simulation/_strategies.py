"""
Strategies without an event loop: no filtering, RAGEN, controller, per-task retry, oracle.

Every strategy judges groups with the real policy (through ``StepContext.judge``); the
controller and the per-task retry run the real :class:`AdmissionSession`, as a trainer
would. None re-implements a gate or a plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Protocol, TypeVar, runtime_checkable

import attrs
import numpy as np

from .._budget import PLANNING_MODES, SamplingBudgetConfig
from .._host_rules.ragen import ragen_top_p
from .._session import AdmissionSession
from .._validation import (
    check_bool,
    check_ge,
    check_one_of,
    check_optional,
    check_range,
    describe,
    real_field,
)
from ._limits import check_budget_samples
from ._models import SimulationConfig
from ._results import StepOutcome, StepTally, StopReason
from ._stream import StepContext

__all__ = [
    "AnyConfig",
    "ControllerResampling",
    "NoFiltering",
    "Oracle",
    "PerTaskRetry",
    "RagenTopP",
    "Strategy",
    "StrategyBase",
    "StrategyShape",
    "budget_field",
    "check_name",
    "ragen_top_p",
    "to_budget",
    "validate_fields",
]


C_contra = TypeVar("C_contra", contravariant=True)
X_contra = TypeVar("X_contra", contravariant=True)
O_co = TypeVar("O_co", covariant=True)


class StrategyShape(Protocol[C_contra, X_contra, O_co]):
    """
    The shape of every simulator strategy: checked against a config ``C``, run on a step context ``X``.

    ``kind`` names the strategy family, ``name`` this configured instance (unique within
    one simulation). :meth:`check` rejects a strategy that cannot run on ``config``
    before anything is simulated; :meth:`run_step` simulates one step.
    """

    kind: ClassVar[str]

    @property
    def name(self) -> str:
        """The strategy's label in tables and results."""
        ...

    def check(self, config: C_contra) -> None:
        """Raise ``ValueError`` if the strategy cannot run on ``config``."""
        ...

    def run_step(self, context: X_contra) -> O_co:
        """Simulate one step."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The strategy's settings, with its ``kind``."""
        ...


@runtime_checkable
class Strategy(StrategyShape[SimulationConfig, StepContext, StepOutcome], Protocol):
    """
    What :func:`simulate` needs from a strategy: each step on a :class:`StepContext`, returning its outcome.

    .. versionadded:: 0.1.0
    """


def check_name(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require a non-empty string."""
    if not isinstance(value, str) or not value:
        msg = f"'{attribute.name}' must be a non-empty string (got {describe(value)})"
        raise TypeError(msg)


def validate_fields(strategy: Any, *names: str) -> None:
    """
    Run the validators of the fields ``names`` of ``strategy`` now.

    attrs computes a default before it runs any validator, so a default ``name`` built
    from other fields calls this first: a bad field is then reported as such, not as a
    failure to format it.
    """
    for field in attrs.fields(type(strategy)):
        if field.name in names and field.validator is not None:
            field.validator(strategy, field, getattr(strategy, field.name))


def to_budget(value: Any) -> Any:
    """Convert a mapping to a :class:`SamplingBudgetConfig`; leave anything else to the validator."""
    return SamplingBudgetConfig.from_mapping(value) if isinstance(value, Mapping) else value


def _check_budget(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, SamplingBudgetConfig):
        msg = f"'{attribute.name}' must be a SamplingBudgetConfig or a mapping (got {describe(value)})"
        raise TypeError(msg)


def budget_field() -> Any:
    """A strategy's ``budget``: ``None``, a :class:`SamplingBudgetConfig` or a mapping of its fields."""
    return attrs.field(default=None, converter=to_budget, validator=check_optional(_check_budget))


class StrategyBase:
    """What every strategy class shares: :meth:`to_dict` (its attrs fields and its ``kind``)."""

    __slots__ = ()
    kind: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """The settings (the attrs fields, nested configs as dicts), with the ``kind``."""
        data: dict[str, Any] = {"kind": self.kind}
        for field in attrs.fields(type(self)):  # type: ignore[arg-type]  # subclasses are attrs classes
            value = getattr(self, field.name)
            data[field.name] = value.to_dict() if hasattr(value, "to_dict") else value
        return data


class AnyConfig(StrategyBase):
    """A strategy of :func:`simulate` that runs on any :class:`SimulationConfig`."""

    __slots__ = ()

    def check(self, config: SimulationConfig) -> None:
        """Runs on any config."""


@attrs.frozen(kw_only=True)
class NoFiltering(AnyConfig):
    """
    Generate the target and train on every group, informative or not.

    .. versionadded:: 0.1.0
    """

    kind: ClassVar[str] = "no_filtering"
    name: str = attrs.field(default="no_filtering", validator=check_name)

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


@attrs.frozen(kw_only=True)
class RagenTopP(AnyConfig):
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
    top_p: float = real_field(0.9, check_range(0, 1, low_open=True))
    include_zero: bool = attrs.field(default=True, validator=check_bool)
    selection_eps: float = real_field(0.01, check_ge(0))
    name: str = attrs.field(validator=check_name)

    @name.default
    def _default_name(self) -> str:
        validate_fields(self, "top_p")
        return f"ragen(top_p={self.top_p:g})"

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


@attrs.frozen(kw_only=True)
class ControllerResampling(StrategyBase):
    """
    This SDK's :class:`AdmissionSession`, step by step, as a trainer runs it.

    Each step begins a session step with the target, generates the target, judges it in
    the session, then generates the groups of fresh tasks the session plans, until the
    target is met or the plan is exhausted. The step trains on the target: admitted
    groups beyond it are discarded and counted as surplus (``StepReport.surplus_groups``).

    Args:
        budget: The caps. ``None`` uses ``SamplingBudgetConfig.for_target`` (``2 x
            target_groups`` extra groups) with ``max_resample_rounds = 3``, other fields at
            their defaults.
        mode: Overrides ``budget.mode`` when set (``"expected"`` or ``"confidence"``).
        carry_rate: Keep one session for the whole run, so each step starts from the
            previous step's rate estimate, and plan the first round with it instead of
            generating exactly the target. Without it every step runs a fresh session.
        name: The label in results.

    .. versionadded:: 0.1.0
    """

    kind: ClassVar[str] = "controller"
    budget: SamplingBudgetConfig | None = budget_field()
    mode: Literal["expected", "confidence"] | None = attrs.field(
        default=None, validator=check_optional(check_one_of(PLANNING_MODES))
    )
    carry_rate: bool = attrs.field(default=False, validator=check_bool)
    name: str = attrs.field(validator=check_name)

    @name.default
    def _default_name(self) -> str:
        validate_fields(self, "budget", "mode", "carry_rate")
        planned = self.budget.mode if self.budget is not None else "expected"
        return f"controller({self.mode or planned}{',carry' if self.carry_rate else ''})"

    def effective_budget(self, target_groups: int) -> SamplingBudgetConfig:
        """The caps used for a step with this target."""
        budget = self.budget or SamplingBudgetConfig.for_target(target_groups, max_resample_rounds=3)
        return budget if self.mode is None else attrs.evolve(budget, mode=self.mode)

    def check(self, config: SimulationConfig) -> None:
        """Refuse a budget that lets a step generate more than a simulation draws."""
        budget = self.effective_budget(config.target_groups)
        check_budget_samples(budget, config.target_groups, config.group_size, name=self.name)

    def _session(self, context: StepContext) -> AdmissionSession:
        if not self.carry_rate:
            return context.session(self.effective_budget(context.target_groups))
        session: AdmissionSession | None = context.memory.get("session")
        if session is None:
            session = context.memory["session"] = context.session(
                self.effective_budget(context.target_groups)
            )
        return session

    def run_step(self, context: StepContext) -> StepOutcome:
        """Generate the target, then the session's plans, until met or exhausted."""
        target, size = context.target_groups, context.group_size
        session = self._session(context)
        session.begin_step(target)
        count = target
        state = session.budget_state
        if state is not None and state.effective_rate_ema is not None:
            count = session.plan(num_generations=size).extra_groups or target
        tally = StepTally(size)
        while count and tally.rounds < context.safety_max_rounds:
            batch = context.take(count)
            tally.add(batch, context.judge_in(session, batch).result)
            count = session.plan(num_generations=size).extra_groups
        report = session.end_step()
        short: StopReason = "safety_limit" if count else "budget_exhausted"
        return tally.outcome(
            target_groups=target,
            delivered_groups=report.trained_groups,
            delivered_informative=report.trained_groups,
            surplus_groups=report.surplus_groups,
            stop=short if report.short_groups else "target_met",
            exhausted_slots=report.short_groups,
        )


def _pull_request_budget() -> SamplingBudgetConfig:
    return SamplingBudgetConfig(max_extra_groups=2, max_resample_rounds=1)


@attrs.frozen(kw_only=True)
class PerTaskRetry(StrategyBase):
    """
    The twinkle pull request's bounded per-task retry.

    Each step judges one group of each of ``target_groups`` tasks. Every rejected task
    gets its own :class:`AdmissionSession` step with ``target_groups=1`` and is retried
    with new groups *of the same task* as its plan allows (at most ``max_extra_groups``
    extra groups over at most ``max_resample_rounds`` rounds, within the per-task sample
    and token caps). A task counts once: a second admitted group of the same task is
    surplus. Retries of all tasks in one round are generated together.

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
        """Refuse a per-task budget that lets a step generate more than a simulation draws."""
        size = config.group_size
        check_budget_samples(self.budget, 1, size, name=self.name, tasks=config.target_groups)

    def run_step(self, context: StepContext) -> StepOutcome:
        """Judge one group per task, then retry the rejected tasks within their caps."""
        target, size = context.target_groups, context.group_size
        tally = StepTally(size)
        batch = context.take(target)
        result = context.judge(batch)
        tally.add(batch, result)
        sessions: dict[int, AdmissionSession] = {}
        for task in np.flatnonzero(~result.admitted).tolist():
            session = sessions[task] = context.session(self.budget)
            session.begin_step(1)
            session.record(result.decision(task), generated_tokens=int(batch.tokens[task].sum()))
        pending = list(sessions)
        while pending and tally.rounds < context.safety_max_rounds:
            wanted = {task: sessions[task].plan(num_generations=size).extra_groups for task in pending}
            owners = np.repeat(list(wanted), list(wanted.values()))
            if not len(owners):
                break
            retry = context.retry(batch.tasks[owners])
            retried = context.judge(retry)
            tally.add(retry, retried)
            for row, task in enumerate(owners.tolist()):
                tokens = int(retry.tokens[row].sum())
                sessions[task].record(retried.decision(row), generated_tokens=tokens)
            pending = [
                task for task, count in wanted.items() if count and not sessions[task].step_stats.admitted
            ]
        reports = [session.end_step() for session in sessions.values()]
        informative = int(result.admitted.sum()) + sum(report.trained_groups for report in reports)
        exhausted = sum(report.exhausted for report in reports)
        # Tasks still retrying at the safety limit are left short, without their budget spent.
        cut = bool(pending) and tally.rounds >= context.safety_max_rounds
        stop: StopReason = "safety_limit" if cut else "budget_exhausted" if exhausted else "target_met"
        return tally.outcome(
            target_groups=target,
            delivered_groups=informative,
            delivered_informative=informative,
            surplus_groups=sum(report.surplus_groups for report in reports),
            stop=stop,
            exhausted_slots=target - informative if cut else exhausted,
        )


@attrs.frozen(kw_only=True)
class Oracle(AnyConfig):
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
