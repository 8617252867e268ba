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
from fractions import Fraction

import attrs

from ._budget import SamplingBudgetController, SamplingBudgetState, budget_caps, check_planner
from ._planning import binomial_groups_needed
from ._plans import BudgetLimit, PlanBase, size_plan
from ._validation import check_probability, describe, is_finite, is_real

__all__ = ["StreamPlan", "check_race", "plan_stream", "stream_rate"]


@attrs.frozen(kw_only=True)
class StreamPlan(PlanBase):
    """
    What a streaming host does now: launch more groups, abort the ones in flight, or wait.

    Loop ``while not plan.done``: the plan is done once the target is met (abort what
    ``abort`` names, if anything) or the budget is exhausted; until then launch ``launch``
    groups (possibly none: wait for one in flight to finish) and plan again.

    Attributes:
        launch: Groups to launch now.
        abort: Groups in flight to abort now: all of them once the target is met (abort
            the most recently launched first when a host aborts fewer), else 0.
        in_flight: Groups in flight after the launches and aborts.
        effective_rate: The admission rate the plan assumed (floored at
            ``min_effective_rate``).
        remaining_target_groups, exhausted, out_of_candidates, limited_by,
            requested_groups, done: As in every plan (``exhausted``: nothing is in
            flight either; ``requested_groups``: the in-flight count the confidence
            bound asked for, before caps; never out of candidates).

    .. versionadded:: 0.2.0
    """

    launch: int
    abort: int
    in_flight: int
    effective_rate: float


def check_race(value: object, name: str = "race") -> float:
    """
    Return ``value`` as a ``float`` if it is a finite real number >= 1 (``race``).

    Raises:
        TypeError: not a real number (a bool is not one), naming ``name``.
        ValueError: below 1, not finite (NaN, or an int beyond the float range), naming ``name``.
    """
    if not is_real(value):
        msg = f"'{name}' must be a number >= 1 (got {describe(value)})"
        raise TypeError(msg)
    if not (is_finite(value) and value >= 1):  # type: ignore[operator]  # is_real checked it
        msg = f"'{name}' must be a finite number >= 1 (got {describe(value)})"
        raise ValueError(msg)
    return float(value)  # type: ignore[arg-type]


def stream_rate(state: SamplingBudgetState, prior_groups: int, floor: float) -> float:
    """
    The step's admission rate: the carried estimate, worth ``prior_groups`` groups, plus what finished.

    Without a carried estimate the prior is 1 (the round planner's optimism: a first
    step launches its target and learns from what comes back).
    """
    carried = 1.0 if state.effective_rate_ema is None else state.effective_rate_ema
    weight = max(1, prior_groups)
    try:
        rate = (state.admitted_groups + weight * carried) / (state.generated_groups + weight)
    except OverflowError:  # a count beyond the float range: the same ratio, in exact arithmetic
        exact = (state.admitted_groups + weight * Fraction(carried)) / (state.generated_groups + weight)
        rate = float(exact)
    return max(floor, rate)


def _ratio(numerator: int, denominator: int) -> float:
    """``numerator / denominator`` as a float, or exactly as a fraction beyond the float range."""
    try:
        return numerator / denominator
    except OverflowError:
        return Fraction(numerator, denominator)  # type: ignore[return-value]  # a Real, used as one


def _raced(race: float, remaining: int) -> int:
    """``ceil(race x remaining)``, with the float product's rounding forgiven (1.1 x 10 is 11)."""
    if remaining < 2**53:
        return math.ceil(race * remaining - 1e-9)  # 1e-9: 1.5 x 2 is 3, not 4 after rounding
    return math.ceil(Fraction(race) * remaining)


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

    The layer below :meth:`AdmissionSession.stream_plan`, which keeps ``state`` for you.

    Args:
        controller: The caps (a streaming step is one round: no round caps) and rate floor.
        state: The groups finished this step, and the rate carried from earlier steps.
        target_groups: Admitted groups the step needs.
        in_flight: Groups launched and not finished (nor aborted).
        num_generations: Samples per group.
        confidence: The chance that the groups in flight meet the target (default: the
            controller's): higher is faster and costs more.
        top_up_below: Launch more only when that probability has fallen below this (a
            group launched late rarely finishes in time), then up to ``confidence``.
        race: Admitted groups to race for each open place (>= 1): the launch is sized for
            ``ceil(race x remaining)``, which ends the step at an earlier finisher at the
            cost of the groups still in flight at the end.
        estimated_tokens_per_group: An upper bound of tokens per group for the token cap
            (default: the observed mean).

    The plan is deterministic: the same counts give the same plan.

    .. versionadded:: 0.2.0
    """
    target, size, flying = check_planner(
        controller, state, target_groups, num_generations, estimated_tokens_per_group, in_flight
    )
    confidence, top_up_below, race = _knobs(controller, confidence, top_up_below, race)
    remaining = max(0, target - state.admitted_groups)
    rate = stream_rate(state, target, controller.config.min_effective_rate)
    requested = max(remaining, binomial_groups_needed(_raced(race, remaining), min(rate, 1.0), confidence))
    enough = flying >= binomial_groups_needed(remaining, min(rate, 1.0), top_up_below)
    wanted = 0 if enough else max(0, requested - flying)
    caps = _caps(controller, state, target, flying, size, estimated_tokens_per_group)
    sizing = size_plan(remaining, requested, wanted, caps, in_flight=flying)
    met = remaining == 0
    return StreamPlan(
        launch=sizing.granted,
        abort=flying if met else 0,
        in_flight=0 if met else flying + sizing.granted,
        effective_rate=rate,
        **sizing.plan_fields(),
    )


def _knobs(
    controller: SamplingBudgetController, confidence: object, top_up_below: object, race: object
) -> tuple[float, float, float]:
    """The streaming knobs, checked: ``confidence`` (default: the budget's), ``top_up_below``, ``race``."""
    confidence = controller.config.confidence if confidence is None else confidence
    return (
        check_probability(confidence, "confidence"),
        check_probability(top_up_below, "top_up_below"),
        check_race(race),
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
        per_group = _ratio(state.generated_tokens, state.generated_groups)
    flying_tokens = 0
    if per_group:
        try:
            flying_tokens = math.ceil(in_flight * per_group)
        except OverflowError:  # beyond the float range: the same product, in exact arithmetic
            flying_tokens = math.ceil(in_flight * Fraction(per_group))
    view = attrs.evolve(
        state,
        generated_groups=state.generated_groups + in_flight,
        generated_samples=state.generated_samples + in_flight * num_generations,
        generated_tokens=state.generated_tokens + flying_tokens,
    )
    caps = budget_caps(controller.config, view, target, num_generations, per_group)
    caps.pop("per_round_group_budget", None)
    return caps
