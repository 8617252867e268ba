"""The session state travels with verl's checkpoint and comes back on resume."""

from __future__ import annotations

import json
import types

import pytest

pytest.importorskip(
    "verl.trainer.ppo.v1.replay_buffer", reason="needs verl==0.9.1 and TransferQueue (run .ci/verl)"
)

from doubles.verl_rollout import FakeRollout, dapo_member, make_sampler
from group_admission.adapters.verl import STATE_FILE, AdmissionCheckpointCallback

N = 4
TARGET = 2
SETTINGS = {
    "policy": {"min_reward_std": 1e-6, "gate_on": ["acc"]},
    "budget": {"max_extra_groups": 20, "max_resample_rounds": 4},
}


def half_alive(index: int):
    if index % 2 == 0:
        return [dapo_member(float(i % 2)) for i in range(N)]
    return [dapo_member(0.0) for _ in range(N)]


def _train_step(tq, sampler, rollout, global_steps: int) -> dict:
    rollout.submit(TARGET)
    _batch, metrics = sampler.sample(global_steps=global_steps, partition_id="train", batch_size=TARGET)
    tq.kv_clear(keys=list((tq.kv_list("train") or {}).get("train", {})), partition_id="train")
    return metrics


def test_on_save_writes_the_state_and_a_resumed_sampler_reads_it(tq, tmp_path) -> None:
    """on_save writes global_step_<N>/group_admission_state.json; step N+1 after a restart loads it."""
    rollout = FakeRollout(tq, half_alive)
    sampler = make_sampler(rollout.refill, checkpoint_dir=str(tmp_path), **SETTINGS)
    before = _train_step(tq, sampler, rollout, global_steps=1)
    folder = tmp_path / "global_step_1"

    AdmissionCheckpointCallback(config=None).on_save(
        trainer=types.SimpleNamespace(replay_buffer=sampler), global_step=1, checkpoint_dir=str(folder)
    )
    saved = json.loads((folder / STATE_FILE).read_text())
    resumed = make_sampler(rollout.refill, checkpoint_dir=str(tmp_path), **SETTINGS)
    after = _train_step(tq, resumed, rollout, global_steps=2)

    assert sampler.session.state_dict() == saved
    key = "group_admission/total/candidate_group_count"
    assert before[key] + after["group_admission/generated_groups"] == after[key]


def test_no_checkpoint_dir_starts_fresh(tq, tmp_path) -> None:
    """Without checkpoint_dir the sampler never reads a state, even at a late step."""
    rollout = FakeRollout(tq, half_alive)
    sampler = make_sampler(rollout.refill, **SETTINGS)

    metrics = _train_step(tq, sampler, rollout, global_steps=7)

    key = "group_admission/total/candidate_group_count"
    assert metrics["group_admission/generated_groups"] == metrics[key]


def test_on_save_ignores_other_replay_buffers(tmp_path) -> None:
    """A trainer running verl's own buffer gets no admission file."""
    AdmissionCheckpointCallback(config=None).on_save(
        trainer=types.SimpleNamespace(replay_buffer=object()), global_step=1, checkpoint_dir=str(tmp_path)
    )

    assert not (tmp_path / STATE_FILE).exists()


def test_a_state_file_with_a_key_written_twice_is_refused(tmp_path) -> None:
    from group_admission import AdmissionSession, CheckpointError
    from group_admission.adapters.verl._checkpoint_state import (
        load_session_state,
        save_session_state,
    )

    state = AdmissionSession().state_dict()
    path = save_session_state(str(tmp_path / "global_step_3"), state)
    assert state == load_session_state(str(tmp_path), 3)
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text[:-1] + ', "streak": {"rollout_failed": 1}}')  # a second "streak"

    with pytest.raises(CheckpointError, match="appears twice"):
        load_session_state(str(tmp_path), 3)
