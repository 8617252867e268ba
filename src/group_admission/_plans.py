"""
The planner skeleton, written once for the three planners, and what every plan says.

The round planner (:meth:`SamplingBudgetController.plan_resampling`), the streaming planner
(:func:`plan_stream`) and the per-prompt planner (:func:`plan_prompts`) differ only in how
many groups they ask for. Everything else is here: the order of the stops (the target is
met; a round planner's rounds are spent), the cut to the tightest cap with the caps that
bind, when a plan is exhausted or out of candidates, and so when every planner's loop
``while not plan.done`` ends, and the fields every plan carries (:class:`PlanBase`).
Their arguments pass one set of checks, :func:`check_planner` (in ``_budget``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

__all__ = ["BudgetLimit", "PlanBase", "PlanSizing", "size_plan"]

#: Why a plan is what it is: the target is met, or a cap binds.
BudgetLimit = Literal[
    "target_met",
    "resample_round_budget",
    "extra_group_budget",
    "per_round_group_budget",
    "sample_budget",
    "token_budget",
]


@attrs.frozen(kw_only=True)
class PlanBase:
    """
    What every plan says besides its groups: how far the target is, and why not more.

    Attributes:
        remaining_target_groups: Admitted groups still missing from the target.
        exhausted: The target is not met, nothing is in flight and no cap leaves room for
            another group: train on what there is, skip the step, or fail, but not wait.
        out_of_candidates: The target is not met, nothing is in flight and the caps leave
            room, but the planner has nothing to generate: every candidate offered was
            skipped, or none was offered. Offer more candidates, or end the step short.
        limited_by: ``("target_met",)``, ``("resample_round_budget",)``, or every cap that
            cut the request (empty when the request itself was granted).
        requested_groups: What the planner asked for before the caps.

    .. versionadded:: 0.2.0
    """

    remaining_target_groups: int
    exhausted: bool
    out_of_candidates: bool = False
    limited_by: tuple[BudgetLimit, ...] = ()
    requested_groups: int = 0

    @property
    def done(self) -> bool:
        """
        Whether the step generates nothing more: its target is met, or nothing can be generated.

        The loop of every planner is ``while not plan.done``, and it ends: a plan with
        nothing to generate and nothing in flight is done, ``exhausted`` when a cap left no
        room, ``out_of_candidates`` when the planner had nothing to ask for. A streaming
        plan that is done because the target is met may still name groups in flight to
        ``abort``.
        """
        return self.remaining_target_groups == 0 or self.exhausted or self.out_of_candidates

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot (tuples become lists)."""
        return {
            name: list(value) if isinstance(value, tuple) else value
            for name, value in attrs.asdict(self, recurse=False).items()
        }


@attrs.frozen
class PlanSizing:
    """The skeleton's answer: the groups granted, and the fields of :class:`PlanBase`."""

    granted: int
    remaining_target_groups: int
    exhausted: bool
    out_of_candidates: bool
    limited_by: tuple[BudgetLimit, ...]
    requested_groups: int

    def plan_fields(self) -> dict[str, Any]:
        """The keyword arguments of :class:`PlanBase`."""
        return {
            "remaining_target_groups": self.remaining_target_groups,
            "exhausted": self.exhausted,
            "out_of_candidates": self.out_of_candidates,
            "limited_by": self.limited_by,
            "requested_groups": self.requested_groups,
        }


def size_plan(
    remaining: int,
    requested: int,
    wanted: int,
    caps: Mapping[BudgetLimit, int],
    *,
    rounds_spent: bool = False,
    in_flight: int = 0,
) -> PlanSizing:
    """
    The one planner skeleton: stop, or cut the planner's request to the tightest cap.

    Args:
        remaining: Admitted groups still missing from the target.
        requested: What the planner's estimate asked for (reported as ``requested_groups``).
        wanted: The groups it would generate now before the caps (the request, less what
            is in flight for a streaming plan).
        caps: How many more groups each cap allows (:func:`budget_caps`).
        rounds_spent: A round planner has used its last round.
        in_flight: Groups launched and not finished: while any is, a plan is not exhausted.

    A met target stops first (``target_met``, never exhausted), then spent rounds
    (``resample_round_budget``, exhausted). Otherwise the grant is the request cut to the
    tightest cap; a cap binds when the grant was cut to it (a cap equal to the request
    binds too: one more group would break it). With nothing in flight, a plan that grants
    nothing is done: exhausted when a cap leaves no room, else out of candidates (the
    planner wanted nothing: a per-prompt plan whose candidates were all skipped or none).
    """
    if remaining == 0:
        return PlanSizing(0, 0, False, False, ("target_met",), 0)
    if rounds_spent:
        return PlanSizing(0, remaining, True, False, ("resample_round_budget",), 0)
    granted = min([wanted, *caps.values()])
    limited_by = tuple(name for name, cap in caps.items() if wanted and cap == granted and cap <= wanted)
    exhausted = in_flight == 0 and min(caps.values()) == 0
    out_of_candidates = in_flight == 0 and granted == 0 and not exhausted
    return PlanSizing(granted, remaining, exhausted, out_of_candidates, limited_by, requested)
