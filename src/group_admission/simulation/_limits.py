"""
The largest simulation the simulator accepts: every loop it runs is bounded by these.

A run has at most :data:`MAX_STEPS` steps; a step at most ``safety_max_rounds`` rounds
(at most :data:`MAX_ROUNDS`) and at most :data:`MAX_STEP_SAMPLES` samples, counting every
round it may run before its safety limit or its budget ends it. Settings beyond them are
refused before anything is simulated, naming the fields, so an absurd value
(``--target-groups 10**30``) is one line of error, not a hang or a crash out of memory.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from .._budget import SamplingBudgetConfig
from .._validation import describe

__all__ = [
    "MAX_POOL_SAMPLES",
    "MAX_RESPONSE_TOKENS",
    "MAX_ROUNDS",
    "MAX_STEPS",
    "MAX_STEP_SAMPLES",
    "MAX_TARGET_SAMPLES",
    "check_at_most",
    "check_budget_samples",
    "check_samples",
    "check_step_samples",
]

#: The longest response a simulation accepts, in tokens (mean or cut).
MAX_RESPONSE_TOKENS = 10_000_000
#: The most steps one simulation runs.
MAX_STEPS = 100_000
#: The most rounds (waves, generation batches, launches) one simulated step runs.
MAX_ROUNDS = 10_000
#: The most samples a step's target holds (``target_groups x group_size``).
MAX_TARGET_SAMPLES = 1_000_000
#: The most samples a simulated step may draw: every round it may run (``safety_max_rounds``
#: slime waves, DAPO batches, oracle or ROLL refills), or all its budget lets it generate.
MAX_STEP_SAMPLES = 100_000_000
#: The most samples a prompt pool draws per step (a group of every prompt, ``size x group_size``).
MAX_POOL_SAMPLES = 10_000_000


def check_at_most(bound: int, unit: str, why: str) -> Any:
    """An attrs validator requiring ``value <= bound`` (``None`` passes), with the reason."""

    def _check(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None and value > bound:
            msg = f"'{attribute.name}' must be <= {bound} {unit}, {why} (got {describe(value)})"
            raise ValueError(msg)

    return _check


def check_samples(fields: dict[str, int], bound: int, why: str) -> None:
    """Require the product of the ``fields`` values to be ``<= bound``; the message names them."""
    if math.prod(fields.values()) > bound:
        names = " x ".join(f"'{name}'" for name in fields)
        got = " x ".join(describe(value) for value in fields.values())
        msg = f"{names} must be <= {bound} samples, {why} (got {got})"
        raise ValueError(msg)


def check_step_samples(fields: dict[str, int], safety_max_rounds: int) -> None:
    """Require one round's ``fields`` times ``safety_max_rounds`` to fit :data:`MAX_STEP_SAMPLES`."""
    why = "the most a simulated step draws before its safety limit ends it"
    check_samples({**fields, "safety_max_rounds": safety_max_rounds}, MAX_STEP_SAMPLES, why)


def check_budget_samples(
    budget: SamplingBudgetConfig, target: int, group_size: int, *, name: str, tasks: int = 1
) -> None:
    """
    Require that ``budget`` lets a step generate at most :data:`MAX_STEP_SAMPLES` samples.

    A step generates at most ``target + max_extra_groups`` groups (for each of ``tasks``
    tasks that run a step of their own), and at most ``max_total_samples`` samples.
    """
    samples = tasks * (target + budget.max_extra_groups) * group_size
    if budget.max_total_samples is not None:
        samples = min(samples, tasks * budget.max_total_samples)
    if samples > MAX_STEP_SAMPLES:
        msg = (
            f"the budget of strategy {name!r} lets a simulated step generate {samples} samples "
            f"('max_extra_groups' {budget.max_extra_groups} beyond the target of {target} "
            f"group(s) of {group_size}); a simulated step draws at most {MAX_STEP_SAMPLES} "
            "samples: lower 'max_extra_groups' or set 'max_total_samples'"
        )
        raise ValueError(msg)
