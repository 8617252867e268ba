"""
Time to target and tokens: ``streaming_rollout`` against slime's default waves and the simulator.

The scripted engine serves the simulator's own groups (``simulated_script``: the k-th fresh
group a rollout starts is the k-th group of the simulator's stream for that step), so the
real loops and the simulator's models of them meet the same groups in the same order.
Time is the virtual clock from the rollout's call to its return; tokens are every token
the engine decoded, aborted requests included.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapters.slime.scripted_engine import simulated_script
from adapters.slime.stream_hosts import Host, make_args
from group_admission import GroupAdmissionConfig
from group_admission.simulation import (
    BinaryTaskModel,
    ResponseLengthModel,
    SimulationConfig,
    SlimeWaves,
    StreamingLaunches,
    simulate,
)

STEPS = 8
#: slime's default setting of docs/planning.md: 16 groups of 8, waves of 32, uniform tasks.
CONFIG = SimulationConfig(
    tasks=BinaryTaskModel(alpha=1.0, beta=1.0),
    lengths=ResponseLengthModel(mean_tokens=1024, cv=0.6),
    group_size=8,
    target_groups=16,
    steps=STEPS,
    seed=0,
)
POLICY = {"policy": {"min_reward_std": 1e-6}, "max_consecutive_failed_groups": None}
BUDGET = {"max_extra_groups": 32}
#: slime's own zero-std filter, for its default loop.
SLIME_FILTER = "slime.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std"


def streaming_args(confidence: float, race: float, partial: bool) -> Any:
    return make_args(
        rollout_batch_size=16,
        n_samples_per_prompt=8,
        partial_rollout=partial,
        group_admission=POLICY,
        group_admission_streaming={"budget": BUDGET, "confidence": confidence, "race": race},
    )


def measure(host: Host, args: Any, default: bool = False) -> tuple[float, int]:
    """Mean time per rollout and the tokens decoded over ``STEPS`` rollouts."""
    host.clear()
    engine = host.install_engine(simulated_script(CONFIG), CONFIG.group_size)
    data_source = host.data_source(args)
    elapsed = 0.0
    for rollout_id in range(STEPS):
        start = host.now()
        output = (host.default_rollout if default else host.streaming)(args, rollout_id, data_source)
        elapsed += host.now() - start
        assert CONFIG.target_groups == len(output.samples)
    return elapsed / STEPS, sum(engine.tokens.values())


def simulated(strategy: Any) -> tuple[float, int]:
    result = simulate(CONFIG, policy=GroupAdmissionConfig(min_reward_std=1e-6), strategies=[strategy])
    figures = result.results[0]
    return figures.time_per_step, figures.generated_tokens


@pytest.mark.parametrize(
    ("confidence", "race", "partial"),
    [(0.99, 1.0, False), (0.99, 2.0, True)],
    ids=["streaming(0.99)", "streaming(0.99,race 2,partial)"],
)
def test_the_rollout_function_takes_the_time_and_tokens_the_simulator_predicts(
    slime_host: Host, confidence: float, race: float, partial: bool
) -> None:
    strategy = StreamingLaunches(budget=BUDGET, confidence=confidence, race=race, partial_rollout=partial)

    real = measure(slime_host, streaming_args(confidence, race, partial))

    assert simulated(strategy) == real


def test_streaming_reaches_the_target_sooner_than_slimes_default_waves_at_the_simulators_tokens(
    slime_host: Host,
) -> None:
    if slime_host.name != "slime":
        pytest.skip("slime's default generate_rollout runs only on slime's real tree")
    default_args = make_args(
        rollout_batch_size=16,
        n_samples_per_prompt=8,
        over_sampling_batch_size=32,
        dynamic_sampling_filter_path=SLIME_FILTER,
        group_admission=POLICY,
    )

    slime_time, slime_tokens = measure(slime_host, default_args, default=True)
    ours_time, ours_tokens = measure(slime_host, streaming_args(0.99, 2.0, True))
    predicted_time, predicted_tokens = simulated(
        StreamingLaunches(budget=BUDGET, confidence=0.99, race=2.0, partial_rollout=True)
    )

    # slime's own loop is what the simulator's model of it says, to the token.
    assert simulated(SlimeWaves(over_sampling_batch_size=32)) == (slime_time, slime_tokens)
    assert ours_time < 0.8 * slime_time
    assert ours_tokens <= predicted_tokens
    assert ours_time == predicted_time
    assert ours_tokens < slime_tokens
