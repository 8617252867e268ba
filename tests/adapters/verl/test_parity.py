"""Parity with verl's built-in DAPO filter, and the phantom groups it keeps, on the same trajectories."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip(
    "verl.trainer.ppo.v1.replay_buffer", reason="needs verl==0.9.1 and TransferQueue (run .ci/verl)"
)

import torch
import verl

from doubles.verl_rollout import FakeRollout, dapo_member, make_builtin, make_sampler

N = 8
VERL_CONFIG = Path(verl.__file__).parent / "trainer" / "config"


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
    """The groups verl's own sync buffer would sample: every terminal group it does not evict."""
    builtin = make_builtin(lambda k: k, metric, train_batch_size=len(uids))
    builtin._sync_metadata_from_transfer_queue()
    reasons = builtin._terminal_eviction_reasons(1, "train")
    return builtin._sampleable_terminal_keys("train", reasons)


def _adapter_verdicts(tq, metric: str, uids: list[str]) -> dict:
    sampler = make_sampler(lambda k: k, policy={"min_reward_std": 1e-9, "gate_on": [metric]})
    sampler._sync_metadata_from_transfer_queue()
    return sampler.judge_terminal_groups("train", set(uids))


def _adapter_kept(tq, metric: str, uids: list[str]) -> set[str]:
    return {uid for uid, verdict in _adapter_verdicts(tq, metric, uids).items() if verdict.keep}


def _reasons(verdicts: dict, uids) -> set[str]:
    return {verdicts[uid].decision.reason.value for uid in uids}


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


class _CharTokenizer:
    """The one tokenizer call DAPORewardManager makes, without a model download: ids are code points."""

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(int(i)) for i in ids)


MAX_RESPONSE = 64
OVERLONG_BUFFER = 32


@pytest.fixture(scope="module")
def dapo_reward_manager():
    """verl's own DAPO reward manager (math_dapo scoring, overlong penalty logged), from verl's config."""
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.reward import load_reward_manager

    overrides = [
        "reward.reward_manager.name=dapo",
        f"+reward.reward_kwargs.max_resp_len={MAX_RESPONSE}",
        "+reward.reward_kwargs.overlong_buffer_cfg.enable=true",
        f"+reward.reward_kwargs.overlong_buffer_cfg.len={OVERLONG_BUFFER}",
        "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0",
        "+reward.reward_kwargs.overlong_buffer_cfg.log=true",
    ]
    with initialize_config_dir(config_dir=str(VERL_CONFIG), version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides)
    return load_reward_manager(config, _CharTokenizer())


def _scored(manager, response: str, ground_truth: str):
    """One member as verl's agent loop stores it: the manager's reward_extra_info and reward_score."""
    from verl import DataProto

    ids = torch.tensor([ord(ch) for ch in response], dtype=torch.int64)
    prompt = torch.tensor([1, 2], dtype=torch.int64)
    item = DataProto.from_dict(
        tensors={
            "prompts": prompt[None],
            "responses": ids[None],
            "attention_mask": torch.ones(1, len(prompt) + len(ids), dtype=torch.int64),
        },
        non_tensors={
            "data_source": np.array(["math_dapo"], dtype=object),
            "reward_model": np.array([{"ground_truth": ground_truth}], dtype=object),
        },
    )
    result = manager.loop.run_until_complete(manager.run_single(item))
    return result["reward_extra_info"], result["reward_score"]


def test_phantom_groups_survive_verl_on_reward_not_on_score(tq, dapo_reward_manager) -> None:
    """
    With verl's DAPORewardManager, an all-wrong group whose answers run into the overlong buffer.

    reward_extra_info.score is math_dapo's -1 for every member (the penalty is not in it), so
    verl filtering on score drops the group; the reward (rm_scores) adds the penalty, so verl
    filtering on reward, its default metric, keeps it. The adapter gated on acc rejects it.
    """
    lengths = [20, 40, 50, 60]  # the last three exceed max_resp_len - buffer = 32 by 8, 18, 28

    def stream(index: int):
        if index % 2 == 0:  # phantom: every answer wrong, the overlong penalty differs
            return [_scored(dapo_reward_manager, "x" * n + "Answer: 5", "4") for n in lengths]
        answers = ["4", "5", "4", "5"]  # real signal, with the same lengths
        return [
            _scored(dapo_reward_manager, "x" * n + f"Answer: {a}", "4")
            for n, a in zip(lengths, answers, strict=True)
        ]

    rollout = FakeRollout(tq, stream)
    rollout.submit(6)
    phantom, informative = set(rollout.uids[0::2]), set(rollout.uids[1::2])
    info, reward = stream(0)[-1]

    assert -1.0 == info["score"]  # math_dapo's wrong answer, without the penalty
    assert float(info["overlong_reward"]) < 0.0
    assert float(reward) == pytest.approx(info["score"] + float(info["overlong_reward"]))
    assert informative == _builtin_kept(tq, "score", rollout.uids)
    assert phantom | informative == _builtin_kept(tq, "reward", rollout.uids)
    assert phantom | informative == _adapter_kept(tq, "reward", rollout.uids)  # parity on reward
    verdicts = _adapter_verdicts(tq, "acc", rollout.uids)
    assert informative == {uid for uid, verdict in verdicts.items() if verdict.keep}
    assert {"exact_dead"} == _reasons(verdicts, phantom)


def test_identical_decimal_rewards_verl_keeps_from_rounding(tq) -> None:
    """Deliberate difference: np.std of identical 0.1s is 1.4e-17, so verl keeps the dead group."""
    rollout = FakeRollout(tq, lambda index: [({"score": 0.1}, 0.1) for _ in range(3)])
    rollout.submit(1)

    assert 0.0 < np.std([0.1, 0.1, 0.1]) < 1e-16
    assert set(rollout.uids) == _builtin_kept(tq, "score", rollout.uids)
    assert {"exact_dead"} == _reasons(_adapter_verdicts(tq, "score", rollout.uids), rollout.uids)


def test_rubric_sums_verl_keeps_from_rounding(tq) -> None:
    """
    Deliberate difference: a rubric sum 0.1 + 0.2 against a plain 0.3 differs only in the last bit.

    verl keeps the group on the float64 component (std 3.9e-17 != 0); the policy rejects it as a
    near tie at min_reward_std=1e-9. In float32 rm_scores both are 0.3f, so on reward both drop it.
    """
    rubric = [0.1 + 0.2, 0.1 + 0.2, 0.3, 0.3]  # the same grade, added up or written at once
    rollout = FakeRollout(tq, lambda index: [({"score": value}, value) for value in rubric])
    rollout.submit(1)
    (uid,) = rollout.uids
    verdicts = _adapter_verdicts(tq, "score", rollout.uids)

    assert 0.0 < np.std(rubric) < 1e-16
    assert {uid} == _builtin_kept(tq, "score", rollout.uids)
    assert "near_tie" == verdicts[uid].decision.reason.value
    assert set() == _builtin_kept(tq, "reward", rollout.uids)
    assert {"exact_dead"} == _reasons(_adapter_verdicts(tq, "reward", rollout.uids), rollout.uids)


def _verl_advantages(tq, uid: str) -> torch.Tensor:
    """verl's GRPO advantages for the trajectories it would train of group ``uid`` (its own function)."""
    from verl import DataProto
    from verl.trainer.ppo.core_algos import AdvantageEstimator
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    keys = sorted(key for key in tq.kv_list("train")["train"] if key.startswith(f"{uid}_"))
    scores = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=["rm_scores"])["rm_scores"]
    rewards = torch.stack(list(scores))
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": torch.ones_like(rewards)},
        non_tensors={"uid": np.array([uid] * len(keys), dtype=object)},
    )
    out = compute_advantage_for_multi_trajectories(
        data, batch_keys=keys, adv_estimator=AdvantageEstimator.GRPO, num_repeat=4
    )
    return out.batch["advantages"]


def test_failed_group_with_agreeing_survivors_verl_keeps_we_reject(tq) -> None:
    """
    Deliberate difference: verl filters only finished groups and trains a failure group as it is.

    Its GRPO advantage covers the surviving sessions only, so survivors that agree train on zero
    advantage: the adapter rejects that group as exact_dead, and keeps one whose survivors disagree.
    """
    groups = [
        [dapo_member(1.0), dapo_member(1.0), None, dapo_member(1.0)],  # failure, survivors agree
        [dapo_member(1.0), dapo_member(0.0), None, dapo_member(1.0)],  # failure, survivors disagree
        [dapo_member(1.0) for _ in range(4)],  # finished and dead: both filter it
    ]
    rollout = FakeRollout(tq, lambda index: groups[index])
    rollout.submit(3)
    agree, disagree, dead = rollout.uids
    verdicts = _adapter_verdicts(tq, "acc", rollout.uids)

    assert {agree, disagree} == _builtin_kept(tq, "acc", rollout.uids)
    assert {disagree} == {uid for uid, verdict in verdicts.items() if verdict.keep}
    assert {"exact_dead"} == _reasons(verdicts, [agree, dead])
    assert 3 == verdicts[agree].decision.group_size  # judged on what verl would train
    assert torch.all(_verl_advantages(tq, agree) == 0)
    assert torch.any(_verl_advantages(tq, disagree) != 0)


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
