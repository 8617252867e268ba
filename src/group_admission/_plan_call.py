"""
The step's last planning call, so that ``end_step`` reports on the plan the host followed.

A short step's report says whether the budget was exhausted and which caps bound it. Only
the planner the host called knows that, with the arguments it was given: a streaming step
has no rounds to spend, and a hard token cap depends on the host's
``estimated_tokens_per_group``. The session records the last call (its planner and its
arguments, plain data that a checkpoint keeps) and asks it again at the end of the step:
nothing judged since gives the very plan the host last got; groups judged since give that
planner's plan on the step's final counts, with nothing left in flight.
"""

from __future__ import annotations

import numbers
from typing import Any, Literal

import attrs

from ._budget import SamplingBudgetController, SamplingBudgetState
from ._planning import check_tokens_per_group
from ._plans import PlanBase
from ._streaming import check_race, plan_stream
from ._validation import (
    as_float,
    as_int,
    check_ge,
    check_int,
    check_one_of,
    check_optional,
    check_probability,
    field_check,
    int_field,
)

__all__ = ["PlanCall"]


def _as_number(value: float) -> float:
    """A numpy scalar as a plain (JSON) number; an integer stays one: the token cap is exact."""
    return as_int(value) if isinstance(value, numbers.Integral) else as_float(value)


@attrs.frozen(kw_only=True)
class PlanCall:
    """
    One planning call of a step: which planner, with which arguments, after how many groups.

    ``kind`` is ``"round"`` for :meth:`AdmissionSession.plan`, ``can_launch`` and
    ``pick_prompts`` (rounds under the round caps) and ``"stream"`` for ``stream_plan``.
    ``judged`` is the step's judged groups when the call was made. The other fields are
    the call's arguments as given (``None``: the planner's default).
    """

    kind: Literal["round", "stream"] = attrs.field(validator=check_one_of(("round", "stream")))
    judged: int = attrs.field(converter=as_int, validator=(check_int, check_ge(0)))
    num_generations: int | None = int_field(None, check_ge(1), optional=True)
    estimated_tokens_per_group: float | None = attrs.field(
        default=None,
        converter=attrs.converters.optional(_as_number),
        validator=lambda _call, _field, value: check_tokens_per_group(value),
    )
    in_flight: int = int_field(0, check_ge(0))
    # The streaming knobs take plan_stream's own checks: one message whichever path a host takes.
    confidence: float | None = attrs.field(
        default=None,
        converter=attrs.converters.optional(as_float),
        validator=check_optional(field_check(check_probability)),
    )
    top_up_below: float = attrs.field(
        default=0.5, converter=as_float, validator=field_check(check_probability)
    )
    race: float = attrs.field(default=1.0, converter=as_float, validator=field_check(check_race))

    def to_dict(self) -> dict[str, Any]:
        """The call as plain JSON types."""
        return attrs.asdict(self)

    def replay(
        self,
        controller: SamplingBudgetController,
        state: SamplingBudgetState,
        *,
        target_groups: int,
        num_generations: int,
        judged: int,
    ) -> PlanBase:
        """
        The plan this call gives on ``state``, the step's counts once ``judged`` groups are judged.

        A round call plans on the folded state; a streaming call on the step's one round in
        progress, and with nothing in flight once groups were judged after it (the step is
        over: what was not judged is aborted or carried to the next step).
        """
        if self.kind == "round":
            return controller.plan_resampling(
                state,
                target_groups=target_groups,
                num_generations=num_generations,
                estimated_tokens_per_group=self.estimated_tokens_per_group,
            )
        return plan_stream(
            controller,
            state,
            target_groups=target_groups,
            in_flight=self.in_flight if judged == self.judged else 0,
            num_generations=num_generations,
            confidence=self.confidence,
            top_up_below=self.top_up_below,
            race=self.race,
            estimated_tokens_per_group=self.estimated_tokens_per_group,
        )
