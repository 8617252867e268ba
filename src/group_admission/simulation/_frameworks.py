"""
The resampling loops of slime, verl's DAPO recipe and ROLL, with the policy as filter.

The loops follow the reference notes on each framework. slime and ROLL run as small
event simulations: a group finishes when its longest member does (one token per time
unit per member), so the response-length model decides the order in which groups
arrive, which is what slime's drop rule depends on.
"""

from __future__ import annotations

import heapq
from typing import ClassVar

import attrs
import numpy as np
import numpy.typing as npt

from .._host_rules.slime import should_drop
from .._reasons import ADMITTED_CODE, RejectionReason
from .._validation import check_bool, check_ge, int_field
from ._flights import Flight, InFlight
from ._limits import check_step_samples
from ._models import SimulationConfig
from ._results import StepOutcome, StepTally
from ._strategies import AnyConfig, StrategyBase, check_name, validate_fields
from ._stream import GroupBatch, StepContext

__all__ = ["DapoDynamicSampling", "RollResampling", "SlimeWaves"]


@attrs.frozen(kw_only=True)
class SlimeWaves(StrategyBase):
    """
    slime's over-sampling waves (``generate_rollout_async``) with a dynamic filter.

    The target is ``rollout_batch_size`` (the simulation's ``target_groups``). While
    ``remaining_batch_size`` (submitted minus dropped groups) is below the target, a
    full wave of ``over_sampling_batch_size`` fresh groups is submitted. Finished groups
    are handled in the order they finish: a group the policy admits is kept; a rejected
    one goes through slime's drop rule (``group_admission._host_rules.slime.should_drop``)
    with ``keep_when_insufficient`` set for reward rejections in fallback mode (never for
    failed rollouts). Kept groups beyond the target that finish at the same instant are
    discarded; groups still in flight when the target is reached are aborted (or, with
    ``partial_rollout``, buffered for the next step). slime has no cap on waves: the
    simulation's safety limit ends such a step.

    Args:
        over_sampling_batch_size: Groups per wave (``None``: the target, slime's
            default); must be at least the target.
        keep_when_insufficient: The fallback filter (``check_reward_nonzero_std_with_fallback``)
            instead of the strict one.
        partial_rollout: slime's ``--partial-rollout``: the groups still in flight at the
            target go back to the buffer instead of being thrown away, and the next
            step's waves take them first; they resume where they stopped.
        name: The label in results.

    .. versionadded:: 0.1.0
    """

    kind: ClassVar[str] = "slime"
    over_sampling_batch_size: int | None = int_field(None, check_ge(1), optional=True)
    keep_when_insufficient: bool = attrs.field(default=False, validator=check_bool)
    partial_rollout: bool = attrs.field(default=False, validator=check_bool)
    name: str = attrs.field(validator=check_name)

    @name.default
    def _default_name(self) -> str:
        validate_fields(self, "over_sampling_batch_size", "keep_when_insufficient", "partial_rollout")
        mode = "fallback" if self.keep_when_insufficient else "strict"
        size = "" if self.over_sampling_batch_size is None else f",{self.over_sampling_batch_size}"
        partial = ",partial" if self.partial_rollout else ""
        return f"slime({mode}{size}{partial})"

    def check(self, config: SimulationConfig) -> None:
        """Slime asserts ``over_sampling_batch_size >= rollout_batch_size``; its waves fit a step."""
        size = self.over_sampling_batch_size
        if size is not None and size < config.target_groups:
            msg = (
                f"'over_sampling_batch_size' must be >= target_groups ({config.target_groups}), "
                f"as slime asserts (got {size})"
            )
            raise ValueError(msg)
        if size is not None:
            fields = {"over_sampling_batch_size": size, "group_size": config.group_size}
            check_step_samples(fields, config.safety_max_rounds)

    def run_step(self, context: StepContext) -> StepOutcome:
        """Submit waves and filter finished groups until ``target`` groups are kept."""
        target = context.target_groups
        wave_size = self.over_sampling_batch_size or target
        buffer: list[Flight] = list(context.memory.pop("buffer", ()))
        flights = InFlight()
        waves = remaining = kept = informative = surplus = 0
        resumed: list[int] = []  # the age of each delivered group that resumed
        clock = 0.0
        safety = False
        while kept < target:
            while remaining < target and not safety:
                if waves >= context.safety_max_rounds:
                    safety = True
                    break
                # A wave takes groups back from the partial-rollout buffer first.
                flights.resume(buffer[:wave_size], clock)
                fresh = wave_size - len(buffer[:wave_size])
                del buffer[:wave_size]
                if fresh:
                    batch = context.take(fresh)
                    flights.launch(batch, context.judge(batch), clock, waves)
                waves += 1
                remaining += wave_size
            if not flights:
                break
            # Groups that finish at the same instant arrive in one asyncio.wait batch,
            # which slime handles whole before it looks at remaining_batch_size again.
            clock, done = flights.pop_next()
            for flight in done:
                kept, informative, remaining, surplus, delivered = self._finish(
                    flight.code, kept, informative, remaining, surplus, target
                )
                if delivered and flight.resumed:
                    resumed.append(flight.age)
        # Only the safety limit can leave the step short: every other path refills.
        outcome, carried = flights.end_step(
            clock,
            carry=self.partial_rollout,
            group_size=context.group_size,
            target=target,
            delivered=(kept, informative),
            short_stop="safety_limit",
            rounds=waves,
            resumed=resumed,
            surplus=surplus,
        )
        if carried or buffer:
            context.memory["buffer"] = (*buffer, *carried)
        return outcome

    def _finish(
        self, code: int, kept: int, informative: int, remaining: int, surplus: int, target: int
    ) -> tuple[int, int, int, int, bool]:
        """Slime's handling of one finished group; the last item says whether it was delivered."""
        admitted = code == ADMITTED_CODE
        fallback = self.keep_when_insufficient and code != RejectionReason.EXTERNAL.code
        if should_drop(
            admitted, keep_when_insufficient=fallback, remaining_batch_size=remaining, target_data_size=target
        ):
            return kept, informative, remaining - 1, surplus, False
        if kept < target:
            return kept + 1, informative + admitted, remaining, surplus, True
        return kept, informative, remaining, surplus + 1, False  # kept beyond the target: discarded


@attrs.frozen(kw_only=True)
class DapoDynamicSampling(StrategyBase):
    """
    verl's DAPO dynamic sampling (``algorithm.filter_groups``).

    Each generation batch draws ``gen_batch_size`` fresh groups; groups the policy admits
    are kept (DAPO keeps ``std > 0``, and every single-member group). Once at least
    ``train_batch_size`` (the target) groups are kept, the batch is trimmed to the target
    and the surplus discarded. When the target is still short after
    ``max_num_gen_batches`` batches, verl raises ``ValueError`` and training stops: here
    the step is reported with ``stop="max_num_gen_batches"`` (an error step) and delivers
    nothing. ``max_num_gen_batches = 0`` means no limit; the simulation's safety limit
    then ends a step that never fills (also delivering nothing, as DAPO never trains on
    a short batch).

    Args:
        gen_batch_size: Groups per generation batch (``None``: the target, the recipe's
            default).
        max_num_gen_batches: Generation batches allowed per step (0: unlimited).
        name: The label in results.

    .. versionadded:: 0.1.0
    """

    kind: ClassVar[str] = "dapo"
    gen_batch_size: int | None = int_field(None, check_ge(1), optional=True)
    max_num_gen_batches: int = int_field(0, check_ge(0))
    name: str = attrs.field(validator=check_name)

    @name.default
    def _default_name(self) -> str:
        validate_fields(self, "gen_batch_size", "max_num_gen_batches")
        size = "" if self.gen_batch_size is None else f"gen={self.gen_batch_size},"
        return f"dapo({size}max={self.max_num_gen_batches})"

    def check(self, config: SimulationConfig) -> None:
        """The generation batches up to the safety limit fit a step."""
        if self.gen_batch_size is not None:
            fields = {"gen_batch_size": self.gen_batch_size, "group_size": config.group_size}
            check_step_samples(fields, config.safety_max_rounds)

    def run_step(self, context: StepContext) -> StepOutcome:
        """Draw generation batches until the target is kept, the limit raises, or the safety limit."""
        target = context.target_groups
        size = self.gen_batch_size or target
        tally = StepTally(context.group_size)
        keeps, admits = [], []
        kept = 0
        while True:
            batch = context.take(size)
            result = context.judge(batch)
            tally.add(batch, result)
            keep = result.admitted if context.group_size > 1 else np.ones(size, dtype=bool)
            keeps.append(keep)
            admits.append(result.admitted)
            kept += int(keep.sum())
            if kept >= target:
                first = np.flatnonzero(np.concatenate(keeps))[:target]
                informative = int(np.concatenate(admits)[first].sum())
                return tally.outcome(
                    target_groups=target,
                    delivered_groups=target,
                    delivered_informative=informative,
                    surplus_groups=kept - target,
                    stop="target_met",
                )
            if 0 < self.max_num_gen_batches <= tally.rounds:
                stop = "max_num_gen_batches"
                break
            if tally.rounds >= context.safety_max_rounds:
                stop = "safety_limit"
                break
        return tally.outcome(
            target_groups=target,
            delivered_groups=0,
            delivered_informative=0,
            stop=stop,  # type: ignore[arg-type]
            exhausted_slots=target,
        )


@attrs.frozen(kw_only=True)
class RollResampling(AnyConfig):
    """
    ROLL's resample-until-full loop (RLVR ``query_filter`` path), with no cap.

    ``target`` prompts run at once. A finished group the policy admits fills its slot;
    a rejected one is dropped and its slot starts a fresh prompt at once, so the step
    never has more than ``target`` groups running or admitted. It ends when every slot
    is filled. Rounds are the longest chain of prompts one slot went through. ROLL has
    no cap: a slot that reaches the simulation's safety limit gives up and the step ends
    short (a real run would hang).

    Args:
        name: The label in results.

    .. versionadded:: 0.1.0
    """

    kind: ClassVar[str] = "roll"
    name: str = attrs.field(default="roll", validator=check_name)

    def run_step(self, context: StepContext) -> StepOutcome:
        """Run ``target`` slots, replacing each rejected group with a fresh prompt."""
        target = context.target_groups
        batches: list[GroupBatch] = []
        codes: list[npt.NDArray[np.int8]] = []
        flat_codes: list[int] = []
        flat_durations: list[int] = []

        def start(clock: float, depth: int) -> tuple[float, int, int]:
            """Start the next prompt of the stream; return its (finish time, index, depth)."""
            index = len(started)
            if index == len(flat_codes):
                # Judge the stream in chunks; only the groups started are counted.
                batch = context.take(target)
                batches.append(batch)
                codes.append(context.judge(batch).reason_codes)
                flat_codes.extend(codes[-1].tolist())
                flat_durations.extend(batch.durations().tolist())
            started.append(index)
            return clock + flat_durations[index], index, depth

        started: list[int] = []
        events = [start(0.0, 1) for _ in range(target)]
        heapq.heapify(events)
        admitted = deepest = 0
        clock = 0.0
        safety = False
        while events:
            clock, index, depth = heapq.heappop(events)
            deepest = max(deepest, depth)
            if flat_codes[index] == ADMITTED_CODE:
                admitted += 1
            elif depth >= context.safety_max_rounds:
                safety = True
            else:
                heapq.heappush(events, start(clock, depth + 1))
        used = len(started)
        drawn = GroupBatch.concat(batches).select(slice(0, used))
        tally = StepTally(context.group_size)
        tally.add_codes(drawn, np.concatenate(codes)[:used])
        first = np.concatenate(codes)[:target]
        short = target - admitted
        return tally.outcome(
            target_groups=target,
            delivered_groups=admitted,
            delivered_informative=admitted,
            stop="safety_limit" if safety else "target_met",
            exhausted_slots=short,
            rounds=deepest,
            first_round=(target, int((first == ADMITTED_CODE).sum())),
            time=clock,
        )
