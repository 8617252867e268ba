"""Two processes (gloo, CPU): every rank takes the same decisions and masks its own rows."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from group_admission import PromptHistoryConfig
from group_admission._history import prompt_key, uniform_draw

SCRIPT = Path(__file__).parent / "two_process_run.py"


def free_port() -> int:
    """A port no other process holds now (a fixed one clashes with a second run on the machine)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_two_ranks(tiny_model: str, tmp_path: Path, mode: str) -> list[dict[str, Any]]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(free_port()),
    ]
    completed = subprocess.run(
        [*command, str(SCRIPT), tiny_model, str(tmp_path), mode],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.slow
def test_two_ranks_agree_on_every_decision(tiny_model: str, tmp_path: Path) -> None:
    ranks = run_two_ranks(tiny_model, tmp_path, "plain")

    assert [rank["world"] for rank in ranks] == [2, 2]
    assert ranks[0]["verdicts"] == ranks[1]["verdicts"]
    assert ranks[0]["stats"] == ranks[1]["stats"]
    for step, verdict in enumerate(ranks[0]["verdicts"]):
        # 4 rows per rank, 2 groups of 4 in all: group g lives on rank g.
        assert [ranks[r]["local"][step]["rows_with_tokens"] > 0 for r in range(2)] == verdict
        total = sum(ranks[r]["local"][step]["local_tokens"] for r in range(2))
        assert ranks[0]["local"][step]["num_items_in_batch"] == total


@pytest.mark.slow
def test_two_ranks_pick_the_same_main_batches_through_the_history(tiny_model: str, tmp_path: Path) -> None:
    ranks = run_two_ranks(tiny_model, tmp_path, "history")

    assert ranks[0]["judged"] == ranks[1]["judged"]
    assert ranks[0]["history"] == ranks[1]["history"]
    assert ranks[0]["skipped"] == ranks[1]["skipped"]
    assert sum(ranks[0]["skipped"]) > 0
    dead = set(range(0, 64, 2))
    exploration = PromptHistoryConfig(group_size=4).exploration
    for step, prompts in ranks[0]["judged"].items():
        assert len(prompts) == 2  # 2 ranks x 4 rows = 2 groups of 4: every batch whole
        if int(step) == 0:
            continue  # step 0 picks before the seeded evidence counts
        for prompt in prompts:
            floor = uniform_draw(0, prompt_key(prompt), int(step)) < exploration
            assert prompt not in dead or floor, (step, prompt)
