"""
Malformed trajectories through verl 0.9.1's replay buffer and TransferQueue: each group ``external``.

A step of three groups, written to a real TransferQueue as verl's agent loop writes them
(``doubles.verl_rollout``); the middle group is malformed: a gated value that is missing, not
a number, not finite or beyond the float range, a reward verl trains on (``rm_scores``, float32)
that is not finite while the gated value is fine (a float beyond float32 raises in verl's own
reward manager when it writes the score), or no trajectory at all. The group must be
rejected as ``external`` with its reason, counted, and left out of the batch verl trains on.
verl groups trajectories by ``uid`` and handles groups of any size, so a group with a failed
session is judged on the sessions that wrote (``test_sampling.py``), not here.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip(
    "verl.trainer.ppo.v1.replay_buffer", reason="needs verl==0.9.1 and TransferQueue (run .ci/verl)"
)

from doubles.verl_rollout import FakeRollout, dapo_member, make_sampler

N = 4
GATED = {"min_reward_std": 1e-6, "gate_on": ["acc"]}


def _member(acc: Any, score: Any = None) -> tuple[dict[str, Any], Any]:
    info, reward = dapo_member(1.0 if acc == 1.0 else 0.0)
    return {**info, "acc": acc}, reward if score is None else score


#: name, the odd member of the middle group, the policy, the reasons the group may be counted with.
ROWS: list[tuple[str, Any, dict[str, Any], set[str]]] = [
    ("gated None", _member(None), GATED, {"missing_reward"}),
    ("gated NaN", _member(math.nan), GATED, {"non_finite_reward"}),
    ("gated inf", _member(-math.inf), GATED, {"non_finite_reward"}),
    ("gated text", _member("1"), GATED, {"non_numeric_reward", "missing_reward"}),
    ("gated list", _member([1.0, 0.0]), GATED, {"non_scalar_reward", "non_numeric_reward", "missing_reward"}),
    ("gated mapping", _member({"acc": 1.0}), GATED, {"dict_reward_without_key", "missing_reward"}),
    ("trained reward inf", _member(1.0, -math.inf), GATED, {"unsummable_reward"}),
    ("trained reward NaN", _member(1.0, math.nan), GATED, {"unsummable_reward"}),
    ("the reward itself NaN", _member(1.0, math.nan), {"min_reward_std": 1e-6}, {"non_finite_reward"}),
    ("the reward itself inf", _member(1.0, math.inf), {"min_reward_std": 1e-6}, {"non_finite_reward"}),
    ("no trajectory", None, GATED, {"no_trajectories", "missing_reward"}),
]


def _stream(odd: Any) -> Any:
    def stream(index: int) -> list[Any]:
        if index != 1:
            return [dapo_member(float(i % 2)) for i in range(N)]
        if odd is None:
            return [None] * N  # every session failed: nothing written
        return [odd, *(dapo_member(float(i % 2)) for i in range(1, N))]

    return stream


@pytest.mark.parametrize(("name", "odd", "policy", "reasons"), ROWS, ids=[row[0] for row in ROWS])
def test_a_malformed_group_is_external_counted_and_left_out_of_the_batch(
    tq: Any, name: str, odd: Any, policy: dict[str, Any], reasons: set[str]
) -> None:
    rollout = FakeRollout(tq, _stream(odd))
    sampler = make_sampler(rollout.refill, policy=policy, num_generations=N)
    rollout.submit(3)

    batch, metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=3)

    stats = sampler.session.step_stats
    assert (3, 1, 2) == (stats.candidates, stats.external, stats.admitted), name
    assert stats.external_details
    assert set(stats.external_details) <= reasons
    assert 1 == metrics["group_admission/short_groups"]
    assert not any(key.split("_")[0] == rollout.uids[1] for key in batch.keys)
    assert 2 * N == len(batch.keys)
