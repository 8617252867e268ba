"""TRL's real ``AsyncGRPOTrainer`` and ``RolloutQueueDataset``, with the admission worker, on a CPU."""

from __future__ import annotations

import json
import queue
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from trl_async_doubles import NoWeightSync, StandInLoop, accuracy, prompts

from group_admission import AdmissionStream
from group_admission.adapters.trl_async import STATE_FILE, AdmissionAsyncGRPOTrainer, StaleDrops

ADMISSION = {
    "preset": "recommended",
    "history": None,
    "stream": {"window_groups": 2},
}


def sample(group_id: int, version: int) -> Any:
    from trl.experimental.async_grpo.async_rollout_worker import RolloutSample

    ids = np.array([1, 2, 3])
    return RolloutSample(
        prompt=[],
        completion=[],
        input_ids=ids,
        completion_mask=np.array([0, 1, 1]),
        old_log_probs=np.zeros(3, dtype=np.float32),
        advantage=1.0,
        model_version=version,
        group_id=group_id,
        metrics={},
    )


def test_each_stale_drop_trl_makes_is_counted_per_sample_and_group() -> None:
    from accelerate.state import PartialState
    from trl.experimental.async_grpo.async_grpo_trainer import RolloutQueueDataset

    PartialState()  # TRL's logger needs it, as in the trainer
    channel: queue.Queue[Any] = queue.Queue()
    versions = {0: 0, 1: 2, 2: 1, 3: 3}  # group -> the version that generated it
    for group, version in versions.items():
        for _ in range(2):
            channel.put(sample(group, version))
    metrics: dict[str, list[float]] = defaultdict(list)
    dataset = RolloutQueueDataset(channel, lambda: 3, lambda _s: None, 60.0, metrics, max_staleness=1)
    drops = StaleDrops(dataset.queue, metrics)
    dataset.queue = drops
    items = iter(dataset)
    yielded = [next(items)["group_id"] for _ in range(4)]
    channel.put(sample(9, 3))  # one more read settles whether the last sample was dropped
    next(items)

    assert yielded == [1, 1, 3, 3]  # TRL's own rule: versions 0 and 1 are more than 1 behind 3
    assert drops.samples == len(metrics["sample/dropped_stale_total"]) == 4
    assert drops.groups == 2
    assert drops.qsize() == 0  # the queue's own methods pass through


def trainer(model: str, tokenizer: Any, output: Path, **config: Any) -> AdmissionAsyncGRPOTrainer:
    from trl.experimental.async_grpo import AsyncGRPOConfig
    from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker

    class Worker(AsyncRolloutWorker):  # type: ignore[misc]
        _loop_cls = StandInLoop

    dataset = prompts(["dead", "mixed", "solved", "mixed"] * 2)
    args = AsyncGRPOConfig(
        output_dir=str(output),
        per_device_train_batch_size=8,
        num_generations=4,
        token_budget=0,
        report_to=[],
        logging_steps=1,
        max_completion_length=4,
        use_cpu=True,
        bf16=False,
        dtype="float32",
        **config,
    )
    worker = Worker(
        model_name="tiny",
        dataset=dataset,
        reward_funcs=[accuracy],
        processing_class=tokenizer,
        eos_token_ids=[tokenizer.eos_token_id],
        num_generations=4,
        max_inflight_tasks=8,
        queue_maxsize=64,
        max_tokens=4,
    )
    return AdmissionAsyncGRPOTrainer(
        model=model,
        reward_funcs=[accuracy],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_worker=worker,
        weight_transfer=NoWeightSync(),
        admission=ADMISSION,
    )


def summed(history: list[dict[str, Any]], key: str) -> float:
    return sum(entry.get(key, 0.0) for entry in history)


@pytest.mark.timeout(300)
def test_the_trainer_trains_on_admitted_groups_counts_stale_drops_and_checkpoints(
    tiny_model: str, tokenizer: Any, tmp_path: Path
) -> None:
    run = trainer(tiny_model, tokenizer, tmp_path, max_steps=4, max_staleness=1, save_steps=2)
    run.train()
    history = run.state.log_history

    judged = summed(history, "group_admission/candidate_group_count_total")
    kept = summed(history, "group_admission/admitted_group_count_total") + summed(
        history, "group_admission/fallback_admitted_group_count_total"
    )
    assert judged > kept > 0
    assert (
        summed(history, "group_admission/exact_dead_group_count_total") > 0
    )  # dead groups judged, not trained
    # Ours and TRL's own count of its stale drops agree, and stale groups were kept groups.
    stale = summed(history, "group_admission/stale_samples_total")
    assert stale == summed(history, "sample/dropped_stale_total") > 0
    assert summed(history, "group_admission/stale_groups_total") <= kept
    assert len(run._trained_groups) <= kept
    saved = json.loads((tmp_path / "checkpoint-2" / STATE_FILE).read_text())
    restored = AdmissionStream.from_mapping(ADMISSION, group_size=4)
    restored.load_state_dict(saved)
    assert restored.state_dict() == saved

    resumed = trainer(tiny_model, tokenizer, tmp_path, max_steps=5, max_staleness=1, save_steps=100)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    handed = resumed.rollout_worker._loop_kwargs["admission_state"]
    assert handed == json.loads((tmp_path / "checkpoint-4" / STATE_FILE).read_text())
    assert resumed.state.global_step == 5


def test_a_bad_setting_is_named_before_any_worker_starts(
    tiny_model: str, tokenizer: Any, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="'on_exhausted' must be one of"):
        AdmissionAsyncGRPOTrainer(model=tiny_model, admission={"stream": {"on_exhausted": "stop"}})
