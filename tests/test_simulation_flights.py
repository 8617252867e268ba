"""Partial rollout (carried groups resume where they stopped) and the engine model (load slows decoding)."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from group_admission import GroupAdmissionPolicy
from group_admission.simulation import (
    BinaryTaskModel,
    EngineModel,
    SimulationConfig,
    SlimeWaves,
    StreamingLaunches,
    simulate,
)
from group_admission.simulation._flights import InFlight
from group_admission.simulation._results import StepOutcome, StepTally
from group_admission.simulation._stream import GroupBatch, GroupStream, StepContext

POLICY = GroupAdmissionPolicy({"min_reward_std": 1e-6})


def _batch(kinds: str, durations: list[int]) -> GroupBatch:
    """Groups of two members: 'L' live (admitted) or 'D' dead, each member ``duration`` tokens long."""
    rewards = np.array([[0.0, 1.0] if kind == "L" else [0.0, 0.0] for kind in kinds])
    return GroupBatch(
        tasks=np.full((len(kinds), 1), 0.5),
        rewards={"outcome": rewards},
        tokens=np.repeat(np.array(durations, dtype=np.int64)[:, None], 2, axis=1),
        failed=np.zeros(len(kinds), dtype=bool),
    )


class _FixedStream:
    def __init__(self, kinds: str, durations: list[int]) -> None:
        self.batch = _batch(kinds, durations)

    def groups(self, start: int, count: int) -> GroupBatch:
        return self.batch.select(slice(start, start + count))


def _step(strategy: Any, kinds: str, durations: list[int], memory: dict[str, Any], step: int) -> StepOutcome:
    config = SimulationConfig(group_size=2, target_groups=2, steps=2)
    context = StepContext(config, POLICY, _FixedStream(kinds, durations), step, memory)  # type: ignore[arg-type]
    outcome: StepOutcome = strategy.run_step(context)
    return outcome


class TestInFlight:
    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(st.tuples(st.integers(1, 50), st.integers(1, 50)), min_size=1, max_size=8),
        st.integers(0, 60),
        st.integers(0, 30),
    )
    def test_carried_tokens_are_split_between_steps_and_sum_to_the_groups(
        self, lengths: list[tuple[int, int]], end: int, late: int
    ) -> None:
        tokens = np.array(lengths, dtype=np.int64)
        batch = GroupBatch(
            tasks=np.full((len(tokens), 1), 0.5),
            rewards={"outcome": np.zeros(tokens.shape)},
            tokens=tokens,
            failed=np.zeros(len(tokens), dtype=bool),
        )
        first = InFlight()
        first.launch(batch, POLICY.evaluate_batch(batch.rewards), 0.0, 0)
        while first and first.pop_next()[0] < end:
            pass
        clock = max([end, *(f.finish for f in first.finished)])
        closed = first.close(float(clock), carry=True)
        before = StepTally(2)
        first.tally_finished(before)

        second = InFlight()
        second.resume(closed.carried, float(late))
        while second:
            second.pop_next()
        after = StepTally(2)
        second.tally_finished(after)

        assert 0 == closed.aborted_groups
        assert len(batch) == len(first.finished) + len(second.finished)
        assert all(f.resumed for f in second.finished)
        assert int(tokens.sum()) == before.tokens + closed.unfinished_tokens + after.tokens
        # A resumed group runs what it had left: its length less the steps it ran before.
        for flight in second.finished:
            assert flight.finish == late + int(flight.batch.tokens.max()) - clock

    def test_aborting_counts_only_what_was_produced(self) -> None:
        flights = InFlight()
        flights.launch(_batch("DL", [3, 10]), POLICY.evaluate_batch(_batch("DL", [3, 10]).rewards), 0.0, 0)
        clock, done = flights.pop_next()
        closed = flights.close(clock, carry=False)

        assert (3.0, 1) == (clock, len(done))
        assert (1, 2 * 3, ()) == (closed.aborted_groups, closed.unfinished_tokens, closed.carried)


class TestSlimePartialRollout:
    # Step 0 as in the by-hand strict test: D(1) D(2) D(3) L(4), then a second wave at t=3
    # of L(1) D(1) D(5) D(5); at t=4 the target is met with D(5) D(5) still running.
    KINDS, DURATIONS = "DDDLLDDD", [1, 2, 3, 4, 1, 1, 5, 5]

    def test_stragglers_go_to_the_buffer_and_resume_first_next_step(self) -> None:
        memory: dict[str, Any] = {}
        slime = SlimeWaves(over_sampling_batch_size=4, partial_rollout=True)
        step0 = _step(slime, self.KINDS, self.DURATIONS, memory, 0)

        assert (0, 2, 6) == (step0.aborted_groups, step0.carried_groups, step0.generated_groups)
        assert 2 * 12 + 2 * 2 * 1 == step0.generated_tokens  # the carried D(5)s ran one step
        # Step 1's wave: the two buffered D(5)s (4 steps left) and two fresh L(10)s.
        step1 = _step(slime, "LL", [10, 10], memory, 1)
        assert (1, 4, 2, 0, 0) == (
            step1.rounds,
            step1.generated_groups,
            step1.delivered_informative,
            step1.resumed_groups,
            step1.carried_groups,
        )
        assert 2 * 2 * 4 + 2 * 2 * 10 == step1.generated_tokens
        assert 10.0 == step1.generation_time
        assert "buffer" not in memory

    def test_a_resumed_live_group_is_delivered_and_counted_as_resumed(self) -> None:
        memory: dict[str, Any] = {}
        slime = SlimeWaves(over_sampling_batch_size=4, partial_rollout=True)
        _step(slime, "DDDLLDLL", [1, 2, 3, 4, 1, 1, 5, 5], memory, 0)
        step1 = _step(slime, "DD", [10, 10], memory, 1)

        # The buffered live groups finish at t=4 and fill the batch; the fresh ones are
        # buffered in turn.
        assert (2, 2, 0, 2, 4.0) == (
            step1.delivered_informative,
            step1.resumed_groups,
            step1.aborted_groups,
            step1.carried_groups,
            step1.generation_time,
        )
        assert (2, 1) == (step1.resumed_steps, step1.oldest_resumed)  # one update each
        # Step 2 resumes step 1's fresh D(10)s; two fresh L(1)s fill the batch first, so the
        # D(10)s are carried again and none of them is delivered.
        step2 = _step(slime, "LL", [1, 1], memory, 2)
        assert (0, 0, 2) == (step2.resumed_groups, step2.oldest_resumed, step2.carried_groups)
        assert all(flight.age == 2 for flight in memory["buffer"])


class TestStreamingPartialRollout:
    CONFIG = SimulationConfig(
        tasks=BinaryTaskModel(alpha=1.0, beta=1.0), group_size=8, target_groups=16, steps=40, seed=3
    )

    def test_carrying_instead_of_aborting_saves_tokens_and_delivers_the_target(self) -> None:
        strategies = [
            StreamingLaunches(confidence=0.99, name="abort"),
            StreamingLaunches(confidence=0.99, partial_rollout=True, name="carry"),
        ]
        result = simulate(self.CONFIG, strategies=strategies)
        abort, carry = result.result("abort"), result.result("carry")

        assert 1.0 == abort.final_informative_rate == carry.final_informative_rate
        assert abort.aborted_groups > 0 == carry.aborted_groups
        assert carry.carried_groups > 0
        assert 0 < carry.resumed_groups < carry.delivered_groups
        assert carry.resumed_groups <= carry.resumed_steps <= carry.resumed_groups * carry.oldest_resumed
        assert (0, 0) == (abort.resumed_steps, abort.oldest_resumed)
        assert carry.generated_tokens < 0.9 * abort.generated_tokens

    def test_racing_more_groups_is_faster_and_trains_on_more_resumed_ones(self) -> None:
        strategies = [
            StreamingLaunches(confidence=0.9, partial_rollout=True, name="plain"),
            StreamingLaunches(confidence=0.9, race=2.0, partial_rollout=True, name="raced"),
        ]
        result = simulate(self.CONFIG, strategies=strategies)
        plain, raced = result.result("plain"), result.result("raced")

        assert raced.time_per_step < plain.time_per_step
        assert raced.resumed_groups > plain.resumed_groups
        assert raced.generated_tokens < 1.1 * plain.generated_tokens  # carried, not thrown away
        with pytest.raises(ValueError, match="'race' must be >= 1"):
            StreamingLaunches(race=0.5)

    @pytest.mark.parametrize(
        "strategy", [StreamingLaunches(partial_rollout=True), SlimeWaves(partial_rollout=True)]
    )
    def test_every_fresh_group_is_completed_or_carried_exactly_once(self, strategy: Any) -> None:
        memory: dict[str, Any] = {}
        carried_before = 0
        for step in range(12):
            context = StepContext(self.CONFIG, POLICY, GroupStream(self.CONFIG, step), step, memory)
            outcome = strategy.run_step(context)
            assert 0 == outcome.aborted_groups
            assert context.drawn == outcome.completed_groups + outcome.carried_groups - carried_before
            carried_before = outcome.carried_groups


class TestEngineModel:
    def test_time_is_decoding_steps_plus_tokens_over_the_half_speed_load(self) -> None:
        assert 100.0 == EngineModel().wall_time(100.0, 5000)
        assert 150.0 == EngineModel(half_speed_sequences=100).wall_time(100.0, 5000)

    def test_it_changes_time_only_and_slows_big_waves_more(self) -> None:
        base = SimulationConfig(group_size=4, target_groups=8, steps=10, seed=1)
        loaded = attrs.evolve(base, engine=EngineModel(half_speed_sequences=64))
        strategies = [SlimeWaves(over_sampling_batch_size=32), StreamingLaunches(confidence=0.9)]
        free, busy = simulate(base, strategies=strategies), simulate(loaded, strategies=strategies)

        for a, b in zip(free.results, busy.results, strict=True):
            assert (a.generated_tokens, a.delivered_groups) == (b.generated_tokens, b.delivered_groups)
            assert b.time_per_step == pytest.approx(a.time_per_step + a.generated_tokens / a.steps / 64)
        pairs = zip(free.results, busy.results, strict=True)
        slowdown = [b.time_per_step / a.time_per_step for a, b in pairs]
        assert slowdown[0] > slowdown[1]  # slime decodes more at once

    @pytest.mark.parametrize(
        ("value", "error", "message"),
        [
            (0, ValueError, "'half_speed_sequences' must be >= 1 (got 0)"),
            (1.5, TypeError, "'half_speed_sequences' must be an integer (got 1.5)"),
            ("64", TypeError, "'half_speed_sequences' must be an integer"),
        ],
    )
    def test_bad_input_names_the_field(self, value: object, error: type[Exception], message: str) -> None:
        with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
            EngineModel(half_speed_sequences=value)  # type: ignore[arg-type]
        with pytest.raises(error, match="half_speed_sequences"):
            SimulationConfig(engine={"half_speed_sequences": value})

    def test_a_config_round_trips_through_its_dict(self) -> None:
        config = SimulationConfig(engine={"half_speed_sequences": 256})
        assert config == SimulationConfig.from_mapping(config.to_dict())
        with pytest.raises(TypeError, match="'engine' must be an EngineModel or a mapping"):
            SimulationConfig(engine=256)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="'partial_rollout' must be"):
            SlimeWaves(partial_rollout="yes")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="'partial_rollout' must be"):
            StreamingLaunches(partial_rollout=1)  # type: ignore[arg-type]
