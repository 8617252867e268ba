"""group_admission_metrics and AdmissionStats."""

from __future__ import annotations

import json
import math
import socket
import sys

import pytest

from group_admission import (
    AdmissionStats,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    group_admission_metrics,
)

POLICY = GroupAdmissionPolicy(
    GroupAdmissionConfig(min_reward_std=1e-6, min_reward_range=0.05, max_mean_pairwise_similarity=0.7)
)
SAME = ["the answer is four", "the answer is four"]
DIFF = ["we add two and two", "carry the one then stop"]


def round_of_decisions() -> list:
    return [
        POLICY.evaluate([0, 1], DIFF),  # admitted
        POLICY.evaluate([1, 1], DIFF),  # exact_dead
        POLICY.evaluate([0.5, 0.51], DIFF),  # near_tie
        POLICY.evaluate([0, 1], SAME),  # redundant
        POLICY.evaluate([1, 1], SAME),  # exact_dead, also near-duplicate
        POLICY.evaluate([math.nan, 1], DIFF),  # external
        POLICY.evaluate([0, 1], DIFF, external_reasons=["stale"]),  # external
    ]


def test_metrics_are_raw_counts_with_one_derived_rate() -> None:
    metrics = group_admission_metrics(round_of_decisions())

    assert {
        "candidate_group_count": 7,
        "admitted_group_count": 1,
        "rejected_group_count": 6,
        "effective_group_rate": 1 / 7,
        "reward_rejected_group_count": 3,
        "near_duplicate_rejected_group_count": 2,
        "externally_rejected_group_count": 2,
        "exact_dead_group_count": 2,
        "near_tie_group_count": 1,
        "redundant_group_count": 1,
        "fallback_admitted_group_count": 0,
    } == metrics


def test_metrics_of_nothing_are_zeros() -> None:
    metrics = group_admission_metrics([])

    assert 0.0 == metrics["effective_group_rate"]
    assert all(value == 0 for value in metrics.values())


def test_batch_results_count_like_their_decisions() -> None:
    import numpy as np

    rewards = np.array([[0, 1], [1, 1], [0.5, 0.51], [np.nan, 0]])
    batch = POLICY.evaluate_batch(rewards, [DIFF] * 4)

    assert group_admission_metrics(batch.decisions()) == group_admission_metrics(batch)


def test_stats_count_external_details_and_fallbacks() -> None:
    stats = AdmissionStats()
    decisions = round_of_decisions()
    stats.add_many(decisions[:5])
    stats.add(decisions[5])
    stats.add(decisions[6], fallback_admitted=True)
    stats.record_fallback(2)

    assert {"non_finite_reward": 1, "stale": 1} == stats.external_details
    assert 3 == stats.fallback_admitted
    assert 6 == stats.rejected
    assert 3 == stats.metrics()["fallback_admitted_group_count"]


def test_merge_sums_and_leaves_the_operands_alone() -> None:
    left, right = AdmissionStats(), AdmissionStats()
    left.add_many(round_of_decisions())
    right.add_many(round_of_decisions()[:2])

    total = left + right

    assert 9 == total.candidates
    assert 7 == left.candidates
    assert 2 == right.candidates


def test_to_dict_is_json_safe_and_round_trips() -> None:
    stats = AdmissionStats()
    stats.add_many(round_of_decisions())

    restored = AdmissionStats.from_dict(json.loads(json.dumps(stats.to_dict())))

    assert stats == restored
    assert stats.metrics() == restored.metrics()


def test_reset_returns_the_snapshot_and_zeroes() -> None:
    stats = AdmissionStats()
    stats.add_many(round_of_decisions())

    snapshot = stats.reset()

    assert 7 == snapshot["counts"]["candidates"]
    assert 0 == stats.candidates
    assert {} == stats.external_details


def test_stats_are_unhashable_and_readable() -> None:
    stats = AdmissionStats()

    with pytest.raises(TypeError):
        hash(stats)
    assert "AdmissionStats(candidates=0" in repr(stats)
    with pytest.raises(AttributeError):
        stats.nope


def test_all_reduce_without_a_process_group_is_a_clear_error() -> None:
    pytest.importorskip("torch")

    with pytest.raises(RuntimeError, match=r"needs an initialised torch\.distributed process group"):
        AdmissionStats().all_reduce()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rank_main(rank: int, world: int, port: int, queue: object) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        policy = GroupAdmissionPolicy(GroupAdmissionConfig(min_reward_std=1e-6))
        stats = AdmissionStats()
        # Rank 0 sees one admitted and one stale group; rank 1 two exact-dead groups and a NaN.
        if rank == 0:
            stats.add_many([policy.evaluate([0, 1]), policy.evaluate([0, 1], external_reasons=["stale"])])
        else:
            stats.add_many([policy.evaluate([1, 1]), policy.evaluate([0, 0]), policy.evaluate([math.nan, 1])])
        queue.put((rank, stats.all_reduce().to_dict()))  # type: ignore[attr-defined]
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_all_reduce_sums_across_two_gloo_processes() -> None:
    torch = pytest.importorskip("torch")
    mp = torch.multiprocessing.get_context("spawn")
    queue = mp.Queue()
    port = _free_port()
    procs = [mp.Process(target=_rank_main, args=(rank, 2, port, queue)) for rank in range(2)]
    for proc in procs:
        proc.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)

    assert [0, 0] == [proc.exitcode for proc in procs]
    assert results[0] == results[1]
    counts = results[0]["counts"]
    assert (5, 1, 2, 2) == (
        counts["candidates"],
        counts["admitted"],
        counts["exact_dead"],
        counts["external"],
    )
    assert {"stale": 1, "non_finite_reward": 1} == results[0]["external_details"]


if sys.platform == "win32":  # pragma: no cover
    pytestmark = pytest.mark.skip("gloo over tcp is not set up for Windows here")
