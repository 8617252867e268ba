"""group_admission_metrics and AdmissionStats."""

from __future__ import annotations

import copy
import json
import math
import pickle
import socket
import sys
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from group_admission import (
    AdmissionStats,
    CheckpointError,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    RejectionReason,
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
    } == metrics


# The pull request's key set, exactly (twinkle#288's group_admission_metrics).
PR_KEYS = {
    "candidate_group_count",
    "admitted_group_count",
    "rejected_group_count",
    "effective_group_rate",
    "reward_rejected_group_count",
    "near_duplicate_rejected_group_count",
    "externally_rejected_group_count",
    "exact_dead_group_count",
    "near_tie_group_count",
    "redundant_group_count",
}


def test_metrics_have_exactly_the_pull_requests_keys_and_stats_add_the_fallbacks() -> None:
    stats = AdmissionStats()
    stats.add_many(round_of_decisions())

    assert PR_KEYS == set(group_admission_metrics(round_of_decisions()))
    assert PR_KEYS == set(group_admission_metrics([]))
    assert PR_KEYS == set(group_admission_metrics(POLICY.evaluate_batch([[0, 1]], [DIFF])))
    assert PR_KEYS | {"fallback_admitted_group_count"} == set(stats.metrics())


@pytest.mark.parametrize(
    ("reason", "config"),
    [
        ("reward_std_below_threshold", GroupAdmissionConfig()),
        ("insufficient_nontrivial_advantages", GroupAdmissionConfig()),
        ("mean_pairwise_similarity_above_threshold", GroupAdmissionConfig()),
        ("reward_range_below_threshold", GroupAdmissionConfig(min_reward_std=1e-6)),
    ],
)
def test_an_external_reason_named_like_a_check_is_not_that_check(reason: str, config: Any) -> None:
    """twinkle#288: reward_rejected and near_duplicate_rejected read the gates, never the caller's reasons."""
    policy = GroupAdmissionPolicy(config)
    decision = policy.evaluate([0.0, 1.0], external_reasons=[reason])
    merged = policy.evaluate_batch([[0.0, 1.0]], external_reasons=[[reason]], rollout_ids=[["a", "b"]])
    plain = policy.evaluate_batch([[0.0, 1.0]], external_reasons=[[reason]])

    assert "external" == decision.reason
    assert (reason,) == decision.failed_checks == decision.external_reasons
    assert () == decision.gate_checks
    assert not decision.reward_rejected
    assert not decision.near_duplicate_rejected
    for result in (merged, plain):
        assert 0 == result.check_flags[0]
        assert decision.to_dict() == result.decision(0).to_dict()
    for counted in ([decision], merged, plain):
        metrics = group_admission_metrics(counted)
        assert 1 == metrics["externally_rejected_group_count"]
        assert 0 == metrics["reward_rejected_group_count"]
        assert 0 == metrics["near_duplicate_rejected_group_count"]


def test_an_external_group_still_reports_the_gates_it_failed() -> None:
    """As in twinkle#288: the gates run after the caller's reasons and are counted on their own."""
    decision = POLICY.evaluate([1, 1], SAME, external_reasons=["reward_std_below_threshold"])

    assert "external" == decision.reason
    assert decision.gate_checks == decision.failed_checks[1:]
    assert "reward_std_below_threshold" in decision.gate_checks
    assert decision.reward_rejected
    assert decision.near_duplicate_rejected


def test_metrics_of_nothing_are_zeros() -> None:
    metrics = group_admission_metrics([])

    assert 0.0 == metrics["effective_group_rate"]
    assert all(value == 0 for value in metrics.values())


def test_batch_results_count_like_their_decisions() -> None:
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


def test_metrics_are_one_snapshot_even_when_a_thread_counts_between_reads() -> None:
    stats = AdmissionStats()
    decisions = round_of_decisions()
    stats.add_many(decisions)
    real_lock = stats._lock

    class CountsOnRelease:
        """The stats' lock, with another thread's fallback counted the moment it is released."""

        def __enter__(self) -> None:
            real_lock.acquire()

        def __exit__(self, *exc: object) -> None:
            stats._counts["fallback_admitted"] += 1  # what a concurrent record_fallback(1) does
            real_lock.release()

    stats._lock = CountsOnRelease()  # type: ignore[assignment]
    metrics = stats.metrics()

    assert 0 == metrics["fallback_admitted_group_count"]  # the snapshot's, not a later count


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


def test_every_reason_has_its_count_named_after_it() -> None:
    """One count per RejectionReason, read from the counts it names (none hand-written per reason)."""
    given = {reason.value: code for code, reason in enumerate(RejectionReason, start=1)}
    counts = {
        "candidates": sum(given.values()),
        "admitted": 0,
        **given,
        "reward_rejected": given["near_tie"],
        "near_duplicate_rejected": given["redundant"],
        "fallback_admitted": 0,
    }
    stats = AdmissionStats.from_dict({"counts": counts, "external_details": {"stale": given["external"]}})

    assert given == {reason.value: getattr(stats, reason.value) for reason in RejectionReason}
    assert "Groups rejected as ``near_tie``." == AdmissionStats.near_tie.__doc__


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


# -- checkpoints: what the stats write, they read back; a corruption is refused --------
_POLICY = GroupAdmissionPolicy(
    GroupAdmissionConfig(min_reward_std=1e-6, min_reward_range=0.05, max_mean_pairwise_similarity=0.7)
)
_MENU = round_of_decisions()
_REJECTED = [d for d in _MENU if not d.admitted]
_COUNT_KEYS = tuple(AdmissionStats().to_dict()["counts"])
_REASONS = ("external", "exact_dead", "near_tie", "redundant")

_operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, len(_MENU) - 1), st.booleans()),
        st.tuples(st.just("add_many"), st.lists(st.integers(0, len(_MENU) - 1), max_size=5), st.booleans()),
        st.tuples(st.just("batch"), st.lists(st.sampled_from([0, 1, 2, 3]), min_size=1, max_size=5)),
        st.tuples(st.just("fallback"), st.integers(0, 3)),
        st.tuples(st.just("merge"), st.integers(0, len(_MENU) - 1)),
    ),
    max_size=12,
)
_BATCH_ROWS = ([0.0, 1.0], [1.0, 1.0], [0.5, 0.51], [math.nan, 1.0])


def _reachable(operations: list[tuple[Any, ...]]) -> AdmissionStats:
    """Counts built only through the public updates."""
    stats = AdmissionStats()
    for op in operations:
        kind = op[0]
        if kind == "add":
            decision = _MENU[op[1]]
            stats.add(decision, fallback_admitted=op[2] and not decision.admitted)
        elif kind == "add_many":
            picked = [_MENU[i] for i in op[1]]
            fallback = op[2] and all(not d.admitted for d in picked)
            stats.add_many(picked, fallback_admitted=fallback)
        elif kind == "batch":
            stats.add_many(
                _POLICY.evaluate_batch(np.array([_BATCH_ROWS[i] for i in op[1]]), [DIFF] * len(op[1]))
            )
        elif kind == "fallback":
            stats.record_fallback(min(op[1], stats.rejected - stats.fallback_admitted))
        else:
            other = AdmissionStats()
            other.add(_MENU[op[1]])
            stats = stats.merge(other)
    return stats


def _conserves(data: dict[str, Any]) -> bool:
    """The documented relations of a stats snapshot, restated independently of the library."""
    counts, details = data.get("counts"), data.get("external_details", {})
    if (
        set(data) - {"counts", "external_details"}
        or not isinstance(counts, dict)
        or set(counts) != set(_COUNT_KEYS)
    ):
        return False
    if not all(type(v) is int and v >= 0 for v in counts.values()):
        return False
    if not isinstance(details, dict) or not all(
        isinstance(k, str) and type(v) is int and v >= 1 for k, v in details.items()
    ):
        return False
    rejected = sum(counts[reason] for reason in _REASONS)
    total = sum(details.values())
    return (
        counts["candidates"] == counts["admitted"] + rejected
        and counts["near_tie"] <= counts["reward_rejected"] <= rejected  # exact_dead may carry a host check
        and counts["redundant"] <= counts["near_duplicate_rejected"] <= rejected
        and counts["fallback_admitted"] <= rejected
        and total >= counts["external"]
        and (total == 0 or counts["external"] > 0)
    )


_corruption_values = st.one_of(
    st.integers(-2, 12), st.sampled_from([None, True, False, 1.0, "3", [], {}, 2**70])
)


@given(operations=_operations)
def test_reachable_stats_round_trip_through_json_pickle_and_deepcopy(
    operations: list[tuple[Any, ...]],
) -> None:
    stats = _reachable(operations)

    restored = AdmissionStats.from_dict(json.loads(json.dumps(stats.to_dict())))

    assert stats == restored
    assert stats.metrics() == restored.metrics()
    assert stats == pickle.loads(pickle.dumps(stats))
    assert stats == copy.deepcopy(stats)


@given(operations=_operations, data=st.data())
def test_a_corrupted_stats_snapshot_restores_exactly_or_is_refused(
    operations: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    snapshot = _reachable(operations).to_dict()
    section = data.draw(st.sampled_from(["counts", "external_details"]))
    keys = (
        [*sorted(snapshot[section]), "stale", "new_reason"]
        if section == "external_details"
        else list(_COUNT_KEYS)
    )
    key = data.draw(st.sampled_from(keys))
    if data.draw(st.booleans(), label="delete") and key in snapshot[section]:
        del snapshot[section][key]
    else:
        snapshot[section][key] = data.draw(_corruption_values, label="value")

    if _conserves(snapshot):
        assert snapshot == AdmissionStats.from_dict(snapshot).to_dict()
    else:
        with pytest.raises(CheckpointError):
            AdmissionStats.from_dict(snapshot)


def test_a_copy_is_independent_and_keeps_working() -> None:
    stats = AdmissionStats()
    stats.add_many(round_of_decisions())

    twin, clone = copy.deepcopy(stats), pickle.loads(pickle.dumps(stats))
    twin.add(round_of_decisions()[0])
    clone.record_fallback(1)

    assert 7 == stats.candidates
    assert 0 == stats.fallback_admitted
    assert (8, 1) == (twin.candidates, clone.fallback_admitted)


def test_numpy_bools_are_fallback_flags_and_other_values_are_not() -> None:
    stats = AdmissionStats()
    rejected = round_of_decisions()[1]

    stats.add(rejected, fallback_admitted=np.bool_(True))

    assert 1 == stats.fallback_admitted
    for flag in (2, 1, None, "yes", np.int64(1)):
        with pytest.raises(TypeError, match="'fallback_admitted' must be a bool"):
            stats.add(rejected, fallback_admitted=flag)  # type: ignore[arg-type]


def test_rejected_is_never_read_half_updated() -> None:
    admitted = round_of_decisions()[0]
    stats = AdmissionStats()
    seen: list[int] = []
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            stats.add(admitted)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        seen.extend(stats.rejected for _ in range(20_000))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        sys.setswitchinterval(interval)

    assert {0} == set(seen)
