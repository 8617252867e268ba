"""
The cookbook's pool runner, shared by both GRPO harnesses (the ablation and the learning bench).

Every job of a harness, in spawned worker processes or in this one, with a progress line as
each finishes.
"""

from __future__ import annotations

import multiprocessing
import resource
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

__all__ = ["cpu_seconds", "run_pool"]

Job = TypeVar("Job")
Result = TypeVar("Result", bound=Mapping[str, Any])


def run_pool(
    run: Callable[[Job], Result | None],
    jobs: Sequence[Job],
    workers: int,
    progress: str,
) -> list[Result]:
    """
    Every job's result, in the order they finish; each printed as ``[k/n]`` and its line.

    ``progress`` is the line, a :meth:`str.format_map` template filled from the result (a
    mapping: ``"{arm} seed {seed}"``, ``"{counts[steps]} steps"``).

    ``run`` must be a module-level function (the workers are spawned and import it by name);
    it returns ``None`` for a job it left out (such a job is neither kept nor counted). With
    ``workers <= 1`` the jobs run here, in order.
    """
    results: list[Result] = []

    def done(result: Result | None) -> None:
        if result is None:
            return
        results.append(result)
        print(f"[{len(results)}/{len(jobs)}] {progress.format_map(result)}", flush=True)

    if workers <= 1:
        for job in jobs:
            done(run(job))
        return results
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for result in pool.imap_unordered(run, jobs):
            done(result)
        pool.close()  # every worker has finished: reap them, so their CPU time is counted
        pool.join()
    return results


def cpu_seconds() -> float:
    """User + system CPU time of this process and its finished (reaped) workers."""
    own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime
