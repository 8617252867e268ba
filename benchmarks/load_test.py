"""Load test: a million groups through evaluate_batch, 200,000 evaluate calls from 8 threads.

Checks that every count comes out exact under load (one ``AdmissionStats`` and one
``AdmissionSession`` shared by all threads), and reports throughput and peak memory. Not a
test: run it on an otherwise idle machine with

    OMP_NUM_THREADS=1 python -m benchmarks.load_test [--groups 1000000] [--calls 200000]

and it writes benchmarks/results/load_test.json. Each phase runs twice: once timed, once
under ``tracemalloc`` for the peak of Python allocations (numpy's included), which slows it.
``ru_maxrss`` is the process's peak resident set after the phase's timed run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from group_admission import AdmissionSession, AdmissionStats, GroupAdmissionConfig, GroupAdmissionPolicy

RESULTS = Path(__file__).parent / "results" / "load_test.json"
CONFIG = GroupAdmissionConfig(min_reward_std=1e-6, min_reward_range=0.05)
MEMBERS = 8
THREADS = 8
# One group of each outcome; group i gets KINDS[i % 4], so the expected counts are known.
KINDS: list[tuple[str, list[float]]] = [
    ("admitted", [0.0, 1.0] * (MEMBERS // 2)),
    ("exact_dead", [1.0] * MEMBERS),
    ("near_tie", [0.5] * (MEMBERS - 1) + [0.51]),
    ("external", [math.nan] + [0.0] * (MEMBERS - 1)),
]


def expected_counts(groups: int) -> dict[str, int]:
    """The counts that judging ``groups`` groups of the KINDS cycle must produce."""
    counts = {kind: len(range(index, groups, len(KINDS))) for index, (kind, _) in enumerate(KINDS)}
    return {
        "candidates": groups,
        "admitted": counts["admitted"],
        "external": counts["external"],
        "exact_dead": counts["exact_dead"],
        "near_tie": counts["near_tie"],
        "redundant": 0,
        "reward_rejected": counts["exact_dead"] + counts["near_tie"],
        "near_duplicate_rejected": 0,
        "fallback_admitted": 0,
    }


def check(stats: AdmissionStats, groups: int, what: str) -> None:
    """Fail loudly unless ``stats`` holds exactly the counts of ``groups`` judged groups."""
    got, counts = stats.to_dict(), expected_counts(groups)
    want = {"counts": counts, "external_details": {"non_finite_reward": counts["external"]}}
    if got != want:
        msg = f"{what}: counts are not exact:\n  got  {got}\n  want {want}"
        raise SystemExit(msg)
    stats.check_conservation()


def batch_phase(groups: int) -> dict[str, Any]:
    """Judge ``groups`` groups in one evaluate_batch call and count them."""
    rewards = np.tile(np.array([values for _, values in KINDS]), (groups // len(KINDS) + 1, 1))[:groups]
    policy, stats = GroupAdmissionPolicy(CONFIG), AdmissionStats()
    start = time.perf_counter()
    result = policy.evaluate_batch(rewards)
    stats.add_many(result)
    seconds = time.perf_counter() - start
    check(stats, groups, "evaluate_batch")
    return {"groups": groups, "members": MEMBERS, "seconds": seconds, "groups_per_second": groups / seconds}


def threaded_phase(calls: int, judge: Callable[[int], int]) -> tuple[float, int]:
    """Run ``calls`` judgements split over THREADS threads; return the wall time and their sum."""
    share = [len(range(t, calls, THREADS)) for t in range(THREADS)]
    barrier = threading.Barrier(THREADS + 1)
    errors: list[BaseException] = []
    totals = [0] * THREADS  # one slot per thread: no shared counter outside the library

    def worker(thread: int, first: int, count: int) -> None:
        barrier.wait()
        try:
            totals[thread] = sum(judge(i) for i in range(first, first + count))
        except BaseException as exc:  # reported after the join
            errors.append(exc)

    starts = [sum(share[:t]) for t in range(THREADS)]
    threads = [threading.Thread(target=worker, args=(t, starts[t], share[t])) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    if errors:
        raise errors[0]
    return seconds, sum(totals)


def stats_phase(calls: int) -> dict[str, Any]:
    """``calls`` evaluate calls from THREADS threads, counted into one AdmissionStats."""
    policy, stats = GroupAdmissionPolicy(CONFIG), AdmissionStats()
    groups = [values for _, values in KINDS]

    def judge(i: int) -> int:
        stats.add(policy.evaluate(groups[i % len(KINDS)], group_key=i))
        return 1

    seconds, judged = threaded_phase(calls, judge)
    if judged != calls:
        msg = f"AdmissionStats: {judged} calls made, {calls} planned"
        raise SystemExit(msg)
    check(stats, calls, "AdmissionStats")
    return {"calls": calls, "threads": THREADS, "seconds": seconds, "calls_per_second": calls / seconds}


def session_phase(calls: int) -> dict[str, Any]:
    """``calls`` AdmissionSession.judge calls from THREADS threads into one session."""
    session = AdmissionSession(CONFIG)
    groups = [values for _, values in KINDS]

    def judge(i: int) -> int:
        return int(session.judge(groups[i % len(KINDS)], group_key=i).keep)

    seconds, kept = threaded_phase(calls, judge)
    check(session.stats, calls, "AdmissionSession")
    if kept != expected_counts(calls)["admitted"]:
        msg = f"AdmissionSession: {kept} groups kept, {expected_counts(calls)['admitted']} admitted"
        raise SystemExit(msg)
    return {"calls": calls, "threads": THREADS, "seconds": seconds, "calls_per_second": calls / seconds}


def peak_rss_mb() -> float:
    """The process's peak resident set so far (``ru_maxrss`` is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def measured(phases: dict[str, tuple[Callable[[int], dict[str, Any]], int]]) -> dict[str, Any]:
    """
    Run every phase timed, then every phase again under tracemalloc for its allocation peak.

    The timed runs come first so that tracemalloc's own bookkeeping never inflates the
    resident-set figures (``ru_maxrss`` only grows).
    """
    results: dict[str, Any] = {}
    for name, (phase, size) in phases.items():
        results[name] = phase(size)
        results[name]["peak_rss_mb_after"] = peak_rss_mb()
    for name, (phase, size) in phases.items():
        tracemalloc.start()
        phase(size)
        results[name]["tracemalloc_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return results


def main() -> None:
    """Run the three phases, print a table and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1_000_000, help="groups through evaluate_batch")
    parser.add_argument("--calls", type=int, default=200_000, help="evaluate calls from 8 threads")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    results = measured(
        {
            "evaluate_batch": (batch_phase, args.groups),
            "threads_into_admission_stats": (stats_phase, args.calls),
            "threads_into_admission_session": (session_phase, args.calls),
        }
    )
    results |= {
        "counts_exact": True,
        "machine": {
            "python": platform.python_version(),
            "processor": platform.machine(),
            "numpy": np.__version__,
            "cpus": os.cpu_count(),
            "load_average_1m_before": load_before,
        },
    }
    header = ("phase", "size", "seconds", "per second", "tracemalloc MB", "max RSS MB")
    print("{:34} {:>9} {:>8} {:>12} {:>15} {:>11}".format(*header))
    for name in ("evaluate_batch", "threads_into_admission_stats", "threads_into_admission_session"):
        row = results[name]
        size = row.get("groups", row.get("calls"))
        rate = row.get("groups_per_second", row.get("calls_per_second"))
        print(
            f"{name:34} {size:>9,} {row['seconds']:>8.2f} {rate:>12,.0f} "
            f"{row['tracemalloc_peak_mb']:>15.2f} {row['peak_rss_mb_after']:>11.1f}"
        )
    print("every count exact")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
