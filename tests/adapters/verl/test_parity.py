"""Parity with verl's built-in DAPO filter, and the phantom groups it keeps, on the same trajectories."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip(
    "verl.trainer.ppo.v1.replay_buffer", reason="needs verl==0.9.1 and TransferQueue (run .ci/verl)"
)

from doubles.verl_rollout import FakeRollout, dapo_member, make_builtin, make_sampler

N = 8


def _random_stream(seed: int):
    """Binary outcomes with a brevity shaping term; some groups all-right or all-wrong."""
    rng = np.random.default_rng(seed)

    def stream(index: int):
        p = rng.choice([0.0, 0.1, 0.5, 0.9, 1.0])
        acc = (rng.random(N) < p).astype(float)
        kind = index % 3
        if kind == 0:
            shaping = np.zeros(N)  # an unshaped reward
        elif kind == 1:
            shaping = -rng.integers(0, 4, N) / 4.0  # DAPO's overlong penalty: a few levels
        else:
            shaping = -np.full(N, 0.25)  # the same penalty for every member
        return [dapo_member(float(a), float(s)) for a, s in zip(acc, shaping, strict=True)]

    return stream


def _builtin_kept(tq, metric: str, uids: list[str]) -> set[str]:
    """Run verl's own `_dapo_filtered_keys` on the queue: the groups it keeps are the rest."""
    builtin = make_builtin(lambda k: k, metric, train_batch_size=len(uids))
    builtin._sync_metadata_from_transfer_queue()
    filtered, _counts = builtin._dapo_filtered_keys("train")
    return set(uids) - filtered


def _adapter_kept(tq, metric: str, uids: list[str]) -> set[str]:
    sampler = make_sampler(lambda k: k, policy={"min_reward_std": 1e-9, "gate_on": [metric]})
    sampler._sync_metadata_from_transfer_queue()
    verdicts = sampler.judge_terminal_groups("train", set(uids))
    return {uid for uid, verdict in verdicts.items() if verdict.keep}


@pytest.mark.parametrize("metric", ["acc", "score", "reward"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kept_groups_equal_verl_filter(tq, metric: str, seed: int) -> None:
    """With min_reward_std near zero and gate_on the DAPO metric, the kept groups are verl's."""
    rollout = FakeRollout(tq, _random_stream(seed))
    rollout.submit(30)

    builtin = _builtin_kept(tq, metric, rollout.uids)
    ours = _adapter_kept(tq, metric, rollout.uids)

    assert builtin == ours
    assert 0 < len(ours) < len(rollout.uids)  # the stream exercises both outcomes


def test_phantom_groups_rejected_on_outcome_kept_by_verl_on_score(tq) -> None:
    """All-wrong groups whose only spread is the shaping term: verl keeps them on score, we reject."""

    def stream(index: int):
        if index % 2 == 0:  # phantom: every answer wrong, the overlong penalty differs
            return [dapo_member(0.0, -0.25 * (i % 4)) for i in range(N)]
        return [dapo_member(float(i % 2), -0.25 * (i % 4)) for i in range(N)]  # real signal

    rollout = FakeRollout(tq, stream)
    rollout.submit(10)
    phantom = set(rollout.uids[0::2])
    informative = set(rollout.uids[1::2])

    kept_by_verl_on_score = _builtin_kept(tq, "score", rollout.uids)
    sampler = make_sampler(lambda k: k, policy={"min_reward_std": 1e-9, "gate_on": ["acc"]})
    sampler._sync_metadata_from_transfer_queue()
    verdicts = sampler.judge_terminal_groups("train", set(rollout.uids))

    assert phantom | informative == kept_by_verl_on_score
    assert informative == {uid for uid, v in verdicts.items() if v.keep}
    assert {"exact_dead"} == {v.decision.reason.value for uid, v in verdicts.items() if uid in phantom}


def test_identical_decimal_rewards_verl_keeps_from_rounding(tq) -> None:
    """The one known divergence: np.std of identical 0.1s is 1.4e-17, so verl keeps the dead group."""
    rollout = FakeRollout(tq, lambda index: [dapo_member(0.0, 0.1) for _ in range(3)])
    rollout.submit(1)

    assert set(rollout.uids) == _builtin_kept(tq, "score", rollout.uids)
    assert set() == _adapter_kept(tq, "score", rollout.uids)


def test_a_component_the_reward_manager_does_not_write_is_named(tq) -> None:
    """gate_on naming an absent component fails at the first group, listing what is there."""
    from group_admission import ConfigurationError

    rollout = FakeRollout(tq, lambda index: [dapo_member(1.0), dapo_member(0.0)])
    rollout.submit(1)
    sampler = make_sampler(lambda k: k, policy={"min_reward_std": 1e-9, "gate_on": ["accuracy"]})
    sampler._sync_metadata_from_transfer_queue()

    with pytest.raises(ConfigurationError, match=r"'accuracy'.*has: \['acc', 'overlong_reward', 'score'\]"):
        sampler.judge_terminal_groups("train", set(rollout.uids))


def test_outputs_of_one_session_count_once(tq) -> None:
    """A multi-output agent loop's outputs are segments of one rollout: the group has N members."""
    rollout = FakeRollout(tq, lambda index: [dapo_member(float(i % 2)) for i in range(N)], outputs=3)
    rollout.submit(1)
    sampler = make_sampler(lambda k: k, policy={"min_reward_std": 1e-9, "gate_on": ["acc"]})
    sampler._sync_metadata_from_transfer_queue()

    (verdict,) = sampler.judge_terminal_groups("train", set(rollout.uids)).values()

    assert verdict.keep
    assert 3 * N == verdict.decision.group_size
    assert N == verdict.decision.unique_rollouts
    assert set(rollout.uids) == _builtin_kept(tq, "acc", rollout.uids)
