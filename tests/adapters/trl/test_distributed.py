"""Two processes (gloo, CPU): every rank takes the same decisions and masks its own rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent / "two_process_run.py"


@pytest.mark.slow
def test_two_ranks_agree_on_every_decision(tiny_model: str, tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        "29533",
    ]
    completed = subprocess.run(
        [*command, str(SCRIPT), tiny_model, str(tmp_path)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]

    assert [rank["world"] for rank in ranks] == [2, 2]
    assert ranks[0]["verdicts"] == ranks[1]["verdicts"]
    assert ranks[0]["stats"] == ranks[1]["stats"]
    for step, verdict in enumerate(ranks[0]["verdicts"]):
        # 4 rows per rank, 2 groups of 4 in all: group g lives on rank g.
        assert [ranks[r]["local"][step]["rows_with_tokens"] > 0 for r in range(2)] == verdict
        total = sum(ranks[r]["local"][step]["local_tokens"] for r in range(2))
        assert ranks[0]["local"][step]["num_items_in_batch"] == total
