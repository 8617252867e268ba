"""cookbook/pool.py: the one pool runner of both GRPO harnesses (the ablation and the learning bench)."""

from __future__ import annotations

import pytest

from cookbook.pool import cpu_seconds, run_pool


def _half_of_even(job: int) -> int | None:
    return job // 2 if job % 2 == 0 else None


def test_in_process_every_result_in_order_and_a_left_out_job_neither_kept_nor_counted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    results = run_pool(_half_of_even, [4, 3, 8, 5, 2], 1, lambda r: f"half {r}")

    assert [2, 4, 1] == results
    assert ["[1/5] half 2", "[2/5] half 4", "[3/5] half 1"] == capsys.readouterr().out.splitlines()


@pytest.mark.slow
def test_spawned_workers_return_every_result_and_their_cpu_time_is_counted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = cpu_seconds()
    results = run_pool(abs, [-3, -1, -2, -5], 2, str)

    assert [1, 2, 3, 5] == sorted(results)
    lines = capsys.readouterr().out.splitlines()
    assert [f"[{k}/4]" for k in range(1, 5)] == [line.split()[0] for line in lines]
    assert cpu_seconds() >= before
