"""The TRL recipe (cookbook/trl_grpo_gsm8k) runs end to end offline, as docs/adapters/trl.md says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_the_trl_recipe_trains_two_steps_offline_with_admission_metrics(tmp_path: Path) -> None:
    # Run by name from a scratch folder (where the demo's assets are built): the root on the path.
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cookbook.trl_grpo_gsm8k.train",
            "--steps",
            "2",
            "--batch-size",
            "16",
            "--output-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=280,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "'group_admission/informative_rate_before'" in out.stdout
    stats = re.search(r"AdmissionStats\(candidates=(\d+), admitted=(\d+)", out.stdout)
    assert stats is not None
    # Two steps of two groups each, plus whatever resampling the budget allowed (at most 4 extra per step).
    assert 4 <= int(stats.group(1)) <= 12
