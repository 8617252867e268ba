"""cookbook/pool.py: the one pool runner of both GRPO harnesses (the ablation and the learning bench)."""

from __future__ import annotations

from typing import Any

import pytest

from cookbook.pool import cpu_seconds, run_pool


def _half_of_even(job: int) -> dict[str, Any] | None:
    return {"job": job, "half": {"value": job // 2}} if job % 2 == 0 else None


def test_in_process_every_result_in_order_and_a_left_out_job_neither_kept_nor_counted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    results = run_pool(_half_of_even, [4, 3, 8, 5, 2], 1, "{job:>2} -> {half[value]}")

    assert [2, 4, 1] == [r["half"]["value"] for r in results]
    assert ["[1/5]  4 -> 2", "[2/5]  8 -> 4", "[3/5]  2 -> 1"] == capsys.readouterr().out.splitlines()


@pytest.mark.slow
def test_spawned_workers_return_every_result_and_their_cpu_time_is_counted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = cpu_seconds()
    jobs = [{"seed": seed} for seed in (3, 1, 2, 5)]
    results = run_pool(dict, jobs, 2, "seed {seed}")

    assert [1, 2, 3, 5] == sorted(r["seed"] for r in results)
    lines = capsys.readouterr().out.splitlines()
    assert [f"[{k}/4]" for k in range(1, 5)] == [line.split()[0] for line in lines]
    assert sorted(lines[k].split(" ", 1)[1] for k in range(4)) == [f"seed {s}" for s in (1, 2, 3, 5)]
    assert cpu_seconds() >= before
