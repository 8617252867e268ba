"""
Streaming plans: how many groups to keep in flight, and when to abort the rest.

Hosts that launch groups asynchronously and can abort what is in flight (slime, ROLL,
verl's asynchronous buffer, TRL's asynchronous trainer) need no rounds: they keep enough
groups in flight that the target is met with the planned confidence, top up as groups
finish, and abort whatever is still running once the target is met. A round-by-round plan
generates fewer groups but waits for each round; a fixed over-sized wave (slime's 2x) is
fast but generates groups it does not need. Sizing the in-flight count from the
confidence bound on the current rate estimate sits between the two.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from ._budget import BudgetLimit, SamplingBudgetController, SamplingBudgetState, budget_caps
from ._planning import binomial_groups_needed
from ._validation import check_count, describe

__all__ = ["StreamPlan", "plan_stream"]


@attrs.frozen(kw_only=True)
class StreamPlan:
    """
    What a streaming host does now: launch more groups, abort the ones in flight, or wait.

    Attributes:
        launch: Groups to launch now.
        abort: Groups in flight to abort now: all of them once the target is met (abort
            the most recently launched first when a host aborts fewer), else 0.
        in_flight: Groups in flight after the launches and aborts.
        remaining_target_groups: Admitted groups still missing from the target.
        effective_rate: The admission rate the plan assumed (floored at
            ``min_effective_rate``).
        exhausted: The target is not met, nothing is in flight and no cap leaves room for
            another group: train on what there is, skip the step, or fail, but not wait.
        limited_by: ``("target_met",)``, or every cap that cut the launches.
        requested_groups: The in-flight count the confidence bound asked for, before caps.

    .. versionadded:: 0.2.0
    """

    launch: int
    abort: int
    in_flight: int
    remaining_target_groups: int
    effective_rate: float
    exhausted: bool
    limited_by: tuple[BudgetLimit, ...] = ()
    requested_groups: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot."""
        data = attrs.asdict(self)
        data["limited_by"] = list(self.limited_by)
        return data


def _check_confidence(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        msg = f"'{name}' must be a number in (0, 1) (got {describe(value)})"
        raise TypeError(msg)
    if not 0 < value < 1:
        msg = f"'{name}' must be in (0, 1) (got {value!r})"
        raise ValueError(msg)


def _check_race(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        msg = f"'race' must be a number >= 1 (got {describe(value)})"
        raise TypeError(msg)
    if not 1.0 <= value < math.inf:
        msg = f"'race' must be a finite number >= 1 (got {value!r})"
        raise ValueError(msg)


def _check_objects(controller: object, state: object) -> None:
    if not isinstance(controller, SamplingBudgetController):
        msg = f"'controller' must be a SamplingBudgetController (got {describe(controller)})"
        raise TypeError(msg)
    if not isinstance(state, SamplingBudgetState):
        msg = f"'state' must be a SamplingBudgetState (got {describe(state)})"
        raise TypeError(msg)


def stream_rate(state: SamplingBudgetState, prior_groups: int, floor: float) -> float:
    """
    The step's admission rate: the carried estimate, worth ``prior_groups`` groups, plus what finished.

    Without a carried estimate the prior is 1 (the round planner's optimism: a first
    step launches its target and learns from what comes back).
    """
    carried = 1.0 if state.effective_rate_ema is None else state.effective_rate_ema
    weight = max(1, prior_groups)
    rate = (state.admitted_groups + weight * carried) / (state.generated_groups + weight)
    return max(floor, rate)


def plan_stream(
    controller: SamplingBudgetController,
    state: SamplingBudgetState,
    *,
    target_groups: int,
    in_flight: int,
    num_generations: int,
    confidence: float | None = None,
    top_up_below: float = 0.5,
    race: float = 1.0,
    estimated_tokens_per_group: float | None = None,
) -> StreamPlan:
    """
    Plan a streaming step: launch, abort, or wait, under the controller's caps.

    Args:
        controller: The caps (``max_extra_groups``, ``max_total_samples``,
            ``max_total_tokens``; a streaming step is one round, so the round caps do
            not apply) and the rate floor.
        state: The step's budget state holding the groups finished so far; its
            ``effective_rate_ema`` is the rate carried from earlier steps.
            :meth:`AdmissionSession.stream_plan` keeps it for you.
        target_groups: Admitted groups the step needs.
        in_flight: Groups launched and not finished (nor aborted).
        num_generations: Samples per group.
        confidence: The probability that the groups in flight meet the target
            (default: the controller's ``confidence``). Higher is faster and costs more
            groups.
        top_up_below: Launch more only when the probability that the groups in flight
            meet the target has fallen below this, then launch up to ``confidence``. A
            group launched late rarely finishes before the step ends, so topping up at
            every rejection mostly generates groups that get aborted.
        race: Admitted groups to race for each place still open, at least 1. The step
            ends when the target-th admitted group finishes, so racing more of them
            ends it at an earlier finisher: faster, at the cost of the groups still in
            flight at the end (aborted tokens, or resumed groups with partial rollout).
            The launch is sized for ``ceil(race x remaining)`` admitted groups with
            ``confidence``.
        estimated_tokens_per_group: An upper bound of tokens per group for the token cap
            (default: the observed mean).

    The plan is deterministic: the same counts give the same plan.

    .. versionadded:: 0.2.0
    """
    _check_objects(controller, state)
    target = check_count(target_groups, "target_groups")
    flying = check_count(in_flight, "in_flight")
    size = check_count(num_generations, "num_generations", 1)
    config = controller.config
    confidence = config.confidence if confidence is None else confidence
    _check_confidence(confidence, "confidence")
    _check_confidence(top_up_below, "top_up_below")
    _check_race(race)
    remaining = max(0, target - state.admitted_groups)
    rate = stream_rate(state, target, config.min_effective_rate)
    if remaining == 0:
        return StreamPlan(
            launch=0,
            abort=flying,
            in_flight=0,
            remaining_target_groups=0,
            effective_rate=rate,
            exhausted=False,
            limited_by=("target_met",),
        )
    raced = math.ceil(race * remaining - 1e-9)  # 1e-9: 1.5 x 2 is 3, not 4 after rounding
    requested = max(remaining, binomial_groups_needed(raced, min(rate, 1.0), confidence))
    enough = flying >= binomial_groups_needed(remaining, min(rate, 1.0), top_up_below)
    wanted = 0 if enough else max(0, requested - flying)
    caps = _caps(controller, state, target, flying, size, estimated_tokens_per_group)
    launch = min([wanted, *caps.values()])
    limited_by: tuple[BudgetLimit, ...] = tuple(
        name for name, cap in caps.items() if wanted and cap == launch and cap <= wanted
    )
    return StreamPlan(
        launch=launch,
        abort=0,
        in_flight=flying + launch,
        remaining_target_groups=remaining,
        effective_rate=rate,
        exhausted=flying + launch == 0,
        limited_by=limited_by,
        requested_groups=requested,
    )


def _caps(
    controller: SamplingBudgetController,
    state: SamplingBudgetState,
    target: int,
    in_flight: int,
    num_generations: int,
    estimated_tokens_per_group: float | None,
) -> dict[BudgetLimit, int]:
    """The controller's caps on more groups, counting the groups in flight as generated."""
    per_group = estimated_tokens_per_group
    if per_group is None and state.generated_groups and state.generated_tokens:
        per_group = state.generated_tokens / state.generated_groups
    view = attrs.evolve(
        state,
        generated_groups=state.generated_groups + in_flight,
        generated_samples=state.generated_samples + in_flight * num_generations,
        generated_tokens=state.generated_tokens + (math.ceil(in_flight * per_group) if per_group else 0),
    )
    caps = budget_caps(controller.config, view, target, num_generations, per_group)
    caps.pop("per_round_group_budget", None)
    return caps
