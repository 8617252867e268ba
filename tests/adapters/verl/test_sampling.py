"""A training step through `AdmissionReplayBuffer.sample`: refill by the plan, bounded, with metrics."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip(
    "verl.trainer.ppo.v1.replay_buffer", reason="needs verl==0.9.1 and TransferQueue (run .ci/verl)"
)

from verl.trainer.ppo.v1.utils import MetricsAggregator

from doubles.verl_rollout import FakeRollout, dapo_member, make_builtin, make_sampler
from group_admission import BudgetExhaustedError

N = 4
TARGET = 4
BUDGET = {"max_extra_groups": 6, "max_resample_rounds": 2}


def all_dead(index: int):
    """Every answer wrong (an all-hard stream); the overlong penalty still varies."""
    return [dapo_member(0.0, -0.25 * (i % 2)) for i in range(N)]


def every_third_alive(index: int):
    if index % 3 == 0:
        return [dapo_member(float(i % 2)) for i in range(N)]
    return [dapo_member(1.0) for _ in range(N)]  # all right: no signal


def _step(tq, stream, **kwargs):
    rollout = FakeRollout(tq, stream)
    sampler = make_sampler(rollout.refill, policy={"min_reward_std": 1e-6, "gate_on": ["acc"]}, **kwargs)
    rollout.submit(TARGET)  # verl's prepare_step dispatches one train batch before sampling
    return rollout, sampler


def test_all_dead_stream_stops_within_the_caps(tq) -> None:
    """An all-hard stream ends after target + max_extra_groups groups and max_resample_rounds refills."""
    rollout, sampler = _step(tq, all_dead, budget=BUDGET)

    with pytest.raises(BudgetExhaustedError, match="kept 0 of 4 target groups") as caught:
        sampler.sample(global_steps=1, partition_id="train", batch_size=TARGET)

    assert rollout.prompts <= TARGET + BUDGET["max_extra_groups"]
    assert len(rollout.refills) <= BUDGET["max_resample_rounds"]
    assert "Nothing was kept" in str(caught.value)
    assert sampler.last_report.exhausted
    assert {} == {k: v for k, v in (tq.kv_list() or {}).items() if v}  # nothing left behind


def test_verl_builtin_refill_has_no_cap_on_the_same_stream(tq) -> None:
    """verl's own sync DAPO buffer keeps refilling an all-dead stream (stopped here after 25 refills)."""
    rollout = FakeRollout(tq, all_dead)

    class StopError(Exception):
        pass

    def refill(count: int) -> int:
        if len(rollout.refills) >= 25:
            raise StopError
        return rollout.refill(count)

    builtin = make_builtin(refill, "acc", train_batch_size=TARGET)
    rollout.submit(TARGET)
    result: list[BaseException] = []
    worker = threading.Thread(target=lambda: _capture(result, builtin.sample, 1, "train", TARGET))
    worker.start()
    worker.join(timeout=120)

    assert not worker.is_alive()
    assert isinstance(result[0], StopError)
    assert len(rollout.refills) == 25


def _capture(out: list[BaseException], fn, *args) -> None:
    try:
        fn(*args)
    except BaseException as exc:  # the test inspects what stopped the loop
        out.append(exc)


def test_short_step_trains_on_what_it_has(tq) -> None:
    """When the caps bind first, the step returns the admitted groups and reports exhaustion."""
    rollout, sampler = _step(tq, every_third_alive, budget={"max_extra_groups": 4, "max_resample_rounds": 1})

    batch, metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=TARGET)

    admitted = metrics["group_admission/admitted_groups"]
    assert 0 < admitted < TARGET
    assert admitted * N == len(batch.keys)
    assert 1 == metrics["group_admission/exhausted"]
    assert rollout.prompts <= TARGET + 4
    assert len(rollout.refills) <= 1


def test_short_step_raises_when_asked(tq) -> None:
    """on_exhausted: raise stops the run with the counts instead of training short."""
    _rollout, sampler = _step(
        tq, every_third_alive, budget={"max_extra_groups": 4, "max_resample_rounds": 1}, on_exhausted="raise"
    )

    with pytest.raises(BudgetExhaustedError, match="on_exhausted is 'raise'"):
        sampler.sample(global_steps=1, partition_id="train", batch_size=TARGET)


def test_a_failed_refill_closes_the_step(tq) -> None:
    """A refill that raises (verl's dataloader, its rollout) leaves no step open for the next sample."""
    rollout, sampler = _step(tq, every_third_alive, budget=BUDGET)

    def refill(count: int) -> int:
        raise RuntimeError("dataloader down")

    sampler.refill_fn = refill
    with pytest.raises(RuntimeError, match="dataloader down"):
        sampler.sample(global_steps=1, partition_id="train", batch_size=TARGET)

    assert not sampler.session.step_open  # ended in a finally
    assert sampler.session.stats.candidates == TARGET  # round 0 stays counted
    assert rollout.refills == []
    sampler.session.begin_step(TARGET)  # what verl's next sample() does first


def test_refill_reaches_the_target_and_discards_surplus(tq) -> None:
    """A generous budget refills until the target is met; the batch holds exactly the target."""
    rollout, sampler = _step(tq, every_third_alive, budget={"max_extra_groups": 40, "max_resample_rounds": 5})

    batch, metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=TARGET)

    assert TARGET * N == len(batch.keys)
    assert 0 == metrics["group_admission/exhausted"]
    assert metrics["group_admission/sampling_rounds"] == 1 + len(rollout.refills)
    assert metrics["group_admission/generated_groups"] == rollout.prompts
    # The step keys are StepReport.metrics(): the one step vocabulary (TRL and the cookbook log it too).
    report = sampler.last_report.metrics(prefix="group_admission/")
    assert report == {key: metrics[key] for key in report}
    assert metrics["group_admission/admitted_groups"] >= metrics["group_admission/trained_groups"] == TARGET
    selected = {key.split("_")[0] for key in batch.keys}
    assert all(rollout.uids.index(uid) % 3 == 0 for uid in selected)


def test_metrics_reach_verl_step_metrics(tq) -> None:
    """sample()'s metrics survive verl's MetricsAggregator exactly as PPOTrainer.step feeds them."""
    _rollout, sampler = _step(
        tq, every_third_alive, budget={"max_extra_groups": 40, "max_resample_rounds": 5}
    )
    batch, sample_metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=TARGET)
    iter_metrics: dict = {}
    iter_metrics.update(sample_metrics)  # PPOTrainer._step_once: metrics.update(off_policy_metrics)

    aggregator = MetricsAggregator()
    aggregator.add_step_metrics(iter_metrics, sample_count=len(batch.keys))
    step_metrics = aggregator.get_aggregated_metrics()

    for key in (
        "group_admission/target_groups",
        "group_admission/admitted_groups",
        "group_admission/generated_groups",
        "group_admission/sampling_rounds",
        "group_admission/exhausted",
        "group_admission/step/exact_dead_group_count",
        "group_admission/total/admitted_group_count",
    ):
        assert sample_metrics[key] == step_metrics[key], key
    assert TARGET == step_metrics["group_admission/target_groups"]


def test_validation_uses_verl_sampling(tq) -> None:
    """The val partition goes through verl's own sample: every terminal group, no admission."""
    rollout = FakeRollout(tq, all_dead)
    sampler = make_sampler(rollout.refill, policy={"min_reward_std": 1e-6, "gate_on": ["acc"]})
    rollout.submit(2)
    # Move the two groups to the val partition, as verl's validation would put them.
    data = tq.kv_list("train")["train"]
    keys = list(data)
    values = tq.kv_batch_get(keys=[k for k in keys if "_" in k], partition_id="train")
    tq.kv_batch_put(
        keys=[k for k in keys if "_" in k],
        partition_id="val",
        fields=values,
        tags=[data[k] for k in keys if "_" in k],
    )
    tq.kv_batch_put(
        keys=[k for k in keys if "_" not in k],
        partition_id="val",
        tags=[data[k] for k in keys if "_" not in k],
    )

    batch, metrics = sampler.sample(global_steps=1, partition_id="val", batch_size=2)

    assert 2 * N == len(batch.keys)
    assert not any(key.startswith("group_admission/") for key in metrics)


def lost_whole(*lost: int):
    """Groups whose every session failed at the stream indices ``lost``; the others have signal."""

    def stream(index: int):
        if index in lost:
            return [None] * N
        return [dapo_member(float(i % 2)) for i in range(N)]

    return stream


@pytest.mark.parametrize("num_generations", [N, None])
def test_whole_group_failures_count_what_was_launched(tq, num_generations) -> None:
    """12 groups x 4 written and 2 groups lost whole: 14 x 4 = 56 samples ran, not 50 (nor 48)."""
    rollout, sampler = _step(tq, lost_whole(3, 9), num_generations=num_generations)
    rollout.submit(14 - TARGET)  # the step's first round: 14 prompts

    batch, metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=14)

    assert 14 == metrics["group_admission/generated_groups"]
    assert 14 * N == metrics["group_admission/generated_samples"]
    assert 12 * N * 3 == metrics["group_admission/generated_tokens"]  # the written responses only
    assert 12 == metrics["group_admission/admitted_groups"]
    assert 2 == metrics["group_admission/step/externally_rejected_group_count"]
    assert 2 == sampler.session.step_stats.external_details["no_trajectories"]
    lost = {rollout.uids[3], rollout.uids[9]}
    assert not any(key.split("_")[0] in lost for key in batch.keys)


def test_the_sample_cap_is_charged_for_whole_failed_groups(tq) -> None:
    """max_total_samples=60 after 56 run: one refill of 4, so the run never passes the cap."""
    budget = {"max_extra_groups": 10, "max_resample_rounds": 2, "max_total_samples": 60}
    rollout, sampler = _step(tq, lost_whole(3, 9), budget=budget, num_generations=N)
    rollout.submit(14 - TARGET)

    _batch, metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=14)

    assert [1] == rollout.refills  # charged 50 (the old count), it refilled 2: 64 samples ran
    assert 60 == metrics["group_admission/generated_samples"] == rollout.prompts * N
    assert 1 == metrics["group_admission/limited_by/sample_budget"]
    assert 13 == metrics["group_admission/admitted_groups"]


def test_partly_failed_and_multi_output_groups_count_sessions(tq) -> None:
    """A failure group is charged every session launched; a session's outputs count one sample."""
    groups = [
        [dapo_member(1.0), dapo_member(0.0), None, dapo_member(1.0)],  # one session failed
        [dapo_member(float(i % 2)) for i in range(N)],
    ]
    rollout = FakeRollout(tq, lambda index: groups[index], outputs=2)
    sampler = make_sampler(
        rollout.refill, policy={"min_reward_std": 1e-6, "gate_on": ["acc"]}, num_generations=N
    )
    rollout.submit(2)

    batch, metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=2)

    assert 2 * N == metrics["group_admission/generated_samples"]
    assert (3 + N) * 2 * 3 == metrics["group_admission/generated_tokens"]  # 2 outputs of 3 tokens each
    assert (3 + N) * 2 == len(batch.keys)


def test_drop_limits_force_rejected_groups_through(tq) -> None:
    """With limits.max_rejected_groups=0 the session keeps gate rejections as fallbacks: no refill."""
    rollout, sampler = _step(tq, all_dead, budget=BUDGET, limits={"max_rejected_groups": 0})

    batch, metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=TARGET)

    assert TARGET * N == len(batch.keys)
    assert [] == rollout.refills
    assert 0 == metrics["group_admission/admitted_groups"]
    assert TARGET == metrics["group_admission/kept_groups"]
    assert TARGET == metrics["group_admission/step/fallback_admitted_group_count"]
