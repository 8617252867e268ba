"""Fixtures of the cookbook tests: the demo's own tiny policy and problems, built once per session."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COOKBOOK = REPO / "cookbook"
DEMO_CONFIG = COOKBOOK / "grpo_gsm8k" / "offline" / "config.yaml"
PIN = COOKBOOK / "grpo_gsm8k" / "offline" / "pin.sh"


def pinned_environment() -> dict[str, str]:
    """This process's environment with the demo's pinned CPU code paths (the line run_demo.sh sources)."""
    (line,) = [text for text in PIN.read_text().splitlines() if text.startswith("export ")]
    pinned = dict(re.findall(r"(\w+)=(\S+)", line))
    return {**os.environ, **pinned, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "MPLBACKEND": "Agg"}


@pytest.fixture(scope="session")
def demo_assets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """
    The embedded default's problems and warm-started tiny policy, built offline as run_demo.sh
    builds them: in a process of their own, on the pinned code paths (~50 s of CPU).
    """
    cache = tmp_path_factory.mktemp("demo")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "cookbook.grpo_gsm8k.offline.prepare_demo",
            "--cache-dir",
            str(cache),
        ],
        cwd=REPO,
        env=pinned_environment(),
        check=True,
        capture_output=True,
        timeout=280,
    )
    return cache / "gsm8k-easy", cache / "tiny-qwen2"


@pytest.fixture
def demo_args(demo_assets: tuple[Path, Path], tmp_path: Path) -> list[str]:
    """Flags that run the embedded default on the session's assets, quietly, into tmp_path."""
    data, model = demo_assets
    return [
        "--config",
        str(DEMO_CONFIG),
        "--model",
        str(model),
        "--dataset",
        str(data),
        "--output-dir",
        str(tmp_path / "run"),
        "--no-progress",
        "--no-plot",
        "--eval-problems",
        "0",
        "--baseline",
        "null",
    ]
