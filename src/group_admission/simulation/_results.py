"""
What a strategy did in one step (``StepOutcome``) and over a run (``StrategyResult``).

The metric definitions follow the experiment section of the twinkle pull request and are
written out in ``docs/simulation.md``; every ratio is a ratio of summed counts, so
results over many steps (or many seeds) merge without averaging averages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs
import numpy as np

from .._batch import BatchAdmissionResult
from .._reasons import ADMITTED_CODE, REASONS_BY_CODE, RejectionReason
from ._stream import GroupBatch

__all__ = ["REJECTION_KEYS", "StepOutcome", "StepTally", "StopReason", "StrategyResult", "summarize"]

#: Why a step ended.
StopReason = Literal["target_met", "no_resampling", "budget_exhausted", "max_num_gen_batches", "safety_limit"]
#: The primary rejection reasons, in precedence order (the order of their codes).
REJECTION_KEYS = tuple(reason.value for reason in RejectionReason)
#: Stops that leave target slots unfilled because a limit was reached.
_LIMIT_STOPS = frozenset({"budget_exhausted", "max_num_gen_batches", "safety_limit"})


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


@attrs.frozen(kw_only=True)
class StepOutcome:
    """
    The counts of one strategy in one step. Counts conserve; violations raise.

    Attributes:
        target_groups: Groups the step wanted (for the per-task strategy: tasks).
        first_round_groups: Completed groups of the first round (wave, generation batch).
        first_round_admitted: Of those, the groups the policy admitted.
        rounds: Generation rounds (waves, generation batches, chain depth for ROLL).
        generated_groups: Groups generated, including aborted ones.
        generated_samples: Samples generated (``generated_groups x group size``).
        generated_tokens: Tokens generated (aborted groups count what they produced).
        aborted_groups: Groups still in flight when the step ended (slime).
        admitted_groups: Completed groups the policy admitted.
        rejected: Completed groups the policy rejected, by primary reason.
        delivered_groups: Groups handed to training (at most the target).
        delivered_informative: Delivered groups the policy admitted.
        surplus_groups: Completed groups the strategy kept beyond the target and
            discarded (a step trains on at most the target, as DAPO and slime do).
        exhausted_slots: Target slots left without an informative group because a limit
            (budget, ``max_num_gen_batches``, safety limit) stopped the step.
        stop: Why the step ended.
        generation_time: Wall-clock time of the step's generation, in token steps, when
            every group of a round runs in parallel (a round lasts as long as its longest
            response; slime and ROLL: the time of the last event).

    .. versionadded:: 0.1.0
    """

    target_groups: int
    first_round_groups: int
    first_round_admitted: int
    rounds: int
    generated_groups: int
    generated_samples: int
    generated_tokens: int
    aborted_groups: int = 0
    admitted_groups: int
    rejected: Mapping[str, int]
    delivered_groups: int
    delivered_informative: int
    surplus_groups: int = 0
    exhausted_slots: int = 0
    stop: StopReason
    generation_time: float = 0.0

    def __attrs_post_init__(self) -> None:
        problems = []
        if set(self.rejected) != set(REJECTION_KEYS):
            problems.append(f"rejected keys {sorted(self.rejected)}")
        completed = self.generated_groups - self.aborted_groups
        if completed != self.admitted_groups + sum(self.rejected.values()):
            problems.append("completed != admitted + rejected")
        if not 0 <= self.first_round_admitted <= self.first_round_groups <= completed:
            problems.append("first round exceeds the completed groups")
        if not 0 <= self.delivered_informative <= min(self.delivered_groups, self.admitted_groups):
            problems.append("delivered_informative exceeds delivered or admitted groups")
        if not self.delivered_groups <= min(self.target_groups, completed):
            problems.append("delivered_groups exceeds the target or the completed groups")
        if not 0 <= self.surplus_groups <= completed - self.delivered_groups:
            problems.append("surplus_groups exceeds the completed groups not delivered")
        if not 0 <= self.exhausted_slots <= self.target_groups - self.delivered_informative:
            problems.append("exhausted_slots exceeds the unfilled slots")
        if self.exhausted_slots and self.stop not in _LIMIT_STOPS:
            problems.append(f"exhausted_slots without a limit stop ({self.stop!r})")
        if problems:
            msg = f"inconsistent StepOutcome ({'; '.join(problems)}): {self!r}"
            raise ValueError(msg)

    @property
    def completed_groups(self) -> int:
        """Groups generated to the end (and judged)."""
        return self.generated_groups - self.aborted_groups

    @property
    def discarded_groups(self) -> int:
        """Completed groups not handed to training: dropped, trimmed, surplus, unselected."""
        return self.completed_groups - self.delivered_groups

    @property
    def initial_shortfall(self) -> int:
        """Target slots the first round left without an admitted group."""
        return max(0, self.target_groups - self.first_round_admitted)

    @property
    def recovered(self) -> int:
        """Slots of the initial shortfall that later rounds filled with informative groups."""
        return max(0, self.delivered_informative - min(self.target_groups, self.first_round_admitted))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot."""
        data = attrs.asdict(self)
        data["rejected"] = dict(self.rejected)
        return data


class StepTally:
    """
    A mutable accumulator a strategy fills while it runs one step.

    .. versionadded:: 0.1.0
    """

    def __init__(self, group_size: int) -> None:
        self.group_size = group_size
        self.rounds = 0
        self.groups = 0
        self.tokens = 0
        self.admitted = 0
        self.reasons = np.zeros(len(REASONS_BY_CODE), dtype=np.int64)
        self.first_groups: int | None = None
        self.first_admitted = 0
        self.time = 0.0

    def add(self, batch: GroupBatch, result: BatchAdmissionResult, *, new_round: bool = True) -> None:
        """Count a completed batch and its decisions (the first call is the first round)."""
        self.add_codes(batch, result.reason_codes, new_round=new_round)

    def add_codes(self, batch: GroupBatch, codes: Any, *, new_round: bool = True) -> None:
        """Count completed groups given their reason codes (``ADMITTED_CODE`` = admitted)."""
        counts = np.bincount(np.asarray(codes, dtype=np.int64), minlength=len(self.reasons))
        self.reasons += counts
        admitted = int(counts[ADMITTED_CODE])
        self.admitted += admitted
        self.groups += len(batch)
        self.tokens += int(batch.tokens.sum())
        if new_round:
            self.rounds += 1
            if len(batch):
                self.time += float(batch.durations().max())
        if self.first_groups is None:
            self.first_groups, self.first_admitted = len(batch), admitted

    def outcome(
        self,
        *,
        target_groups: int,
        delivered_groups: int,
        delivered_informative: int,
        stop: StopReason,
        surplus_groups: int = 0,
        exhausted_slots: int = 0,
        aborted_groups: int = 0,
        aborted_tokens: int = 0,
        rounds: int | None = None,
        first_round: tuple[int, int] | None = None,
        time: float | None = None,
    ) -> StepOutcome:
        """Freeze the tally into a :class:`StepOutcome`."""
        first_groups, first_admitted = first_round or (self.first_groups or 0, self.first_admitted)
        generated = self.groups + aborted_groups
        return StepOutcome(
            target_groups=target_groups,
            first_round_groups=first_groups,
            first_round_admitted=first_admitted,
            rounds=self.rounds if rounds is None else rounds,
            generated_groups=generated,
            generated_samples=generated * self.group_size,
            generated_tokens=self.tokens + aborted_tokens,
            aborted_groups=aborted_groups,
            admitted_groups=self.admitted,
            rejected={reason.value: int(self.reasons[reason.code]) for reason in RejectionReason},
            delivered_groups=delivered_groups,
            delivered_informative=delivered_informative,
            surplus_groups=surplus_groups,
            exhausted_slots=exhausted_slots,
            stop=stop,
            generation_time=self.time if time is None else time,
        )


@attrs.frozen(kw_only=True)
class StrategyResult:
    """
    One strategy's figures over a run. Ratios are of counts summed over steps.

    Attributes:
        name: The strategy's name.
        kind: The strategy's kind (``slime``, ``controller``...).
        steps: Steps simulated.
        target_groups: Target slots over all steps.
        initial_informative_rate: Admitted / completed groups of every step's first round.
        final_informative_rate: Informative groups delivered to training / target slots.
        recovery_rate: Slots of the first rounds' shortfall filled later / that shortfall
            (``None`` when the first rounds left no shortfall).
        sampling_cost_multiplier: Generated groups / target slots.
        budget_exhaustion_rate: Slots left uninformative because a limit stopped the
            step / target slots.
        rounds_per_step: Mean rounds per step.
        max_rounds_per_step: Most rounds in one step.
        time_per_step: Mean generation time per step, in token steps (see
            :attr:`StepOutcome.generation_time`).
        generated_groups, generated_samples, generated_tokens: Totals, aborted included.
        aborted_groups: Groups aborted in flight (slime).
        discarded_groups: Completed groups not delivered (dropped, trimmed, surplus).
        surplus_groups: Of those, groups kept beyond the target and discarded.
        delivered_groups: Groups delivered to training.
        delivered_informative: Of those, groups the policy admitted.
        admitted_groups: Completed groups the policy admitted.
        rejected: Completed groups the policy rejected, by primary reason.
        exhausted_steps: Steps stopped by the budget with slots unfilled.
        error_steps: Steps that would have raised (DAPO's ``max_num_gen_batches``).
        safety_limit_hits: Steps stopped by the simulator's safety limit.
        outcomes: Every step's :class:`StepOutcome` (not part of :meth:`to_dict` unless asked).

    .. versionadded:: 0.1.0
    """

    name: str
    kind: str
    steps: int
    target_groups: int
    initial_informative_rate: float | None
    final_informative_rate: float
    recovery_rate: float | None
    sampling_cost_multiplier: float
    budget_exhaustion_rate: float
    rounds_per_step: float
    max_rounds_per_step: int
    time_per_step: float
    generated_groups: int
    generated_samples: int
    generated_tokens: int
    aborted_groups: int
    discarded_groups: int
    surplus_groups: int
    delivered_groups: int
    delivered_informative: int
    admitted_groups: int
    rejected: Mapping[str, int]
    exhausted_steps: int
    error_steps: int
    safety_limit_hits: int
    outcomes: tuple[StepOutcome, ...] = attrs.field(default=(), repr=False, eq=False)

    @property
    def uninformative_delivered(self) -> int:
        """Delivered groups the policy rejects (slime's fallback, no filtering, RAGEN)."""
        return self.delivered_groups - self.delivered_informative

    def to_dict(self, *, include_steps: bool = False) -> dict[str, Any]:
        """A JSON-safe snapshot; ``include_steps`` adds every step's outcome."""
        data = attrs.asdict(self, filter=lambda attribute, _value: attribute.name != "outcomes")
        data["rejected"] = dict(self.rejected)
        data["uninformative_delivered"] = self.uninformative_delivered
        if include_steps:
            data["outcomes"] = [outcome.to_dict() for outcome in self.outcomes]
        return data


def summarize(name: str, kind: str, outcomes: Sequence[StepOutcome]) -> StrategyResult:
    """
    Aggregate step outcomes into a :class:`StrategyResult` (ratios of summed counts).

    Raises:
        ValueError: ``outcomes`` is empty.

    .. versionadded:: 0.1.0
    """
    if not outcomes:
        msg = "'outcomes' must hold at least one step (got 0)"
        raise ValueError(msg)
    target = sum(o.target_groups for o in outcomes)
    shortfall = sum(o.initial_shortfall for o in outcomes)
    rounds = [o.rounds for o in outcomes]
    rejected = {key: sum(o.rejected[key] for o in outcomes) for key in REJECTION_KEYS}
    return StrategyResult(
        name=name,
        kind=kind,
        steps=len(outcomes),
        target_groups=target,
        initial_informative_rate=_ratio(
            sum(o.first_round_admitted for o in outcomes), sum(o.first_round_groups for o in outcomes)
        ),
        final_informative_rate=sum(o.delivered_informative for o in outcomes) / target,
        recovery_rate=_ratio(sum(o.recovered for o in outcomes), shortfall),
        sampling_cost_multiplier=sum(o.generated_groups for o in outcomes) / target,
        budget_exhaustion_rate=sum(o.exhausted_slots for o in outcomes) / target,
        rounds_per_step=sum(rounds) / len(rounds),
        max_rounds_per_step=max(rounds),
        time_per_step=sum(o.generation_time for o in outcomes) / len(outcomes),
        generated_groups=sum(o.generated_groups for o in outcomes),
        generated_samples=sum(o.generated_samples for o in outcomes),
        generated_tokens=sum(o.generated_tokens for o in outcomes),
        aborted_groups=sum(o.aborted_groups for o in outcomes),
        discarded_groups=sum(o.discarded_groups for o in outcomes),
        surplus_groups=sum(o.surplus_groups for o in outcomes),
        delivered_groups=sum(o.delivered_groups for o in outcomes),
        delivered_informative=sum(o.delivered_informative for o in outcomes),
        admitted_groups=sum(o.admitted_groups for o in outcomes),
        rejected=rejected,
        exhausted_steps=sum(o.stop == "budget_exhausted" and o.exhausted_slots > 0 for o in outcomes),
        error_steps=sum(o.stop == "max_num_gen_batches" for o in outcomes),
        safety_limit_hits=sum(o.stop == "safety_limit" for o in outcomes),
        outcomes=tuple(outcomes),
    )
