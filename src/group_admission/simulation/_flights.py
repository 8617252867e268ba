"""
Groups generating at once: launched, finishing in order, and aborted or carried at the end.

The event strategies (slime's waves, streaming launches) share this bookkeeping. A group
finishes when its longest member does, each member producing one token per decoding
step. At the end of a step the groups still in flight are either aborted, counting the
tokens they produced (:func:`partial_tokens`), or, with partial rollout (slime's
``--partial-rollout``), carried into the next step, where they resume where they
stopped. A step counts the tokens decoded in it, so a carried group's tokens are split
between the steps that produced them and the run's total is what was decoded.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence

import attrs
import numpy as np
import numpy.typing as npt

from .._decision import BatchAdmissionResult, GroupAdmissionDecision
from .._reasons import ADMITTED_CODE
from ._results import StepOutcome, StepTally, StopReason
from ._stream import GroupBatch

__all__ = ["Flight", "InFlight", "partial_tokens"]


def partial_tokens(tokens: npt.NDArray[np.int64], elapsed: float) -> int:
    """
    Tokens a group produced in ``elapsed`` decoding steps: each member one per step, up to its length.

    The simulator's accounting of an aborted group, for slime's waves and streaming alike.
    """
    return int(np.minimum(tokens, int(elapsed)).sum())


@attrs.frozen(kw_only=True)
class Flight:
    """
    One group in flight.

    Attributes:
        batch: The group (a one-row :class:`GroupBatch`).
        result: The policy's verdicts on the batch it was launched in.
        row: Its row in ``result``.
        start: When it started, on the current step's clock (a group carried from an
            earlier step started before the step did: it resumes where it stopped).
        spent: Tokens it produced in earlier steps.
        wave: The launch it came in within the step (``-1``: carried from an earlier step).
        age: Steps it was carried across (each one a policy update it spans).
    """

    batch: GroupBatch
    result: BatchAdmissionResult
    row: int
    start: float
    spent: int = 0
    wave: int = 0
    age: int = 0

    @property
    def finish(self) -> float:
        """When it finishes, on the current step's clock."""
        return self.start + float(self.batch.durations()[0])

    @property
    def code(self) -> int:
        """The policy's reason code (``ADMITTED_CODE`` when admitted)."""
        return int(self.result.reason_codes[self.row])

    @property
    def decision(self) -> GroupAdmissionDecision:
        """The policy's decision."""
        return self.result.decision(self.row)

    @property
    def resumed(self) -> bool:
        """Whether it started in an earlier step."""
        return self.wave < 0


@attrs.frozen(kw_only=True)
class Closed:
    """
    What ending a step did to the groups still in flight.

    Attributes:
        aborted_groups: Groups aborted (none when they are carried).
        unfinished_tokens: Tokens the groups still in flight produced in this step.
        carried: The groups carried into the next step.
    """

    aborted_groups: int
    unfinished_tokens: int
    carried: tuple[Flight, ...]


class InFlight:
    """
    The groups in flight during one step, in the order they finish (ties: launch order).

    Attributes:
        finished: The groups finished so far, in order.
    """

    def __init__(self) -> None:
        self._events: list[tuple[float, int, Flight]] = []
        self._order = itertools.count()
        self.finished: list[Flight] = []

    def __len__(self) -> int:
        return len(self._events)

    def _push(self, flight: Flight) -> None:
        heapq.heappush(self._events, (flight.finish, next(self._order), flight))

    def resume(self, carried: Sequence[Flight], clock: float) -> None:
        """Resume groups carried from an earlier step at ``clock``, where they stopped."""
        for flight in carried:
            self._push(attrs.evolve(flight, start=clock + flight.start))

    def launch(self, batch: GroupBatch, result: BatchAdmissionResult, clock: float, wave: int) -> None:
        """Start every group of ``batch`` at ``clock``, as launch number ``wave`` of the step."""
        for row in range(len(batch)):
            group = batch.select(slice(row, row + 1))
            self._push(Flight(batch=group, result=result, row=row, start=clock, wave=wave))

    def pop_next(self) -> tuple[float, list[Flight]]:
        """The next instant a group finishes, and every group that finishes then."""
        clock = self._events[0][0]
        done = []
        while self._events and self._events[0][0] == clock:
            done.append(heapq.heappop(self._events)[2])
        self.finished.extend(done)
        return clock, done

    def close(self, clock: float, *, carry: bool) -> Closed:
        """
        End the step at ``clock``: abort the groups still in flight, or carry them.

        A carried group's ``start`` is then relative to its resumption (:meth:`resume`).
        """
        flights = [flight for _, _, flight in sorted(self._events)]
        self._events.clear()
        produced = [partial_tokens(f.batch.tokens[0], clock - f.start) - f.spent for f in flights]
        if carry:
            carried = tuple(
                attrs.evolve(f, start=f.start - clock, spent=f.spent + tokens, wave=-1, age=f.age + 1)
                for f, tokens in zip(flights, produced, strict=True)
            )
            return Closed(aborted_groups=0, unfinished_tokens=sum(produced), carried=carried)
        return Closed(aborted_groups=len(flights), unfinished_tokens=sum(produced), carried=())

    def first_round(self) -> tuple[int, int]:
        """Finished groups of the step's first launch (and those resumed), and how many were admitted."""
        first = [f for f in self.finished if f.wave <= 0]
        return len(first), sum(f.code == ADMITTED_CODE for f in first)

    def tally_finished(self, tally: StepTally) -> None:
        """Count the finished groups in ``tally`` (tokens: what they produced in this step)."""
        if not self.finished:
            return
        batch = GroupBatch.concat([f.batch for f in self.finished])
        codes = np.array([f.code for f in self.finished], dtype=np.int8)
        tokens = int(batch.tokens.sum()) - sum(f.spent for f in self.finished)
        tally.add_codes(batch, codes, new_round=False, tokens=tokens)

    def end_step(
        self,
        clock: float,
        *,
        carry: bool,
        group_size: int,
        target: int,
        delivered: tuple[int, int],
        short_stop: StopReason,
        rounds: int,
        resumed: Sequence[int],
        surplus: int = 0,
    ) -> tuple[StepOutcome, tuple[Flight, ...]]:
        """
        Close the step at ``clock`` (see :meth:`close`) and count it: its outcome, and the groups carried.

        ``delivered`` is (groups delivered, of them admitted); a step short of ``target``
        stops with ``short_stop``; ``resumed`` holds the age of each delivered group that
        began in an earlier step.
        """
        closed = self.close(clock, carry=carry)
        tally = StepTally(group_size)
        self.tally_finished(tally)
        kept, informative = delivered
        short = kept < target
        outcome = tally.outcome(
            target_groups=target,
            delivered_groups=kept,
            delivered_informative=informative,
            surplus_groups=surplus,
            stop=short_stop if short else "target_met",
            exhausted_slots=target - informative if short else 0,
            aborted_groups=closed.aborted_groups,
            unfinished_tokens=closed.unfinished_tokens,
            carried_groups=len(closed.carried),
            resumed=resumed,
            rounds=rounds,
            first_round=self.first_round(),
            time=clock,
        )
        return outcome, closed.carried
