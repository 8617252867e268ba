"""Fixtures of the cookbook tests: the demo's own tiny policy and problems, built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COOKBOOK = REPO / "cookbook"
DEMO_CONFIG = COOKBOOK / "grpo_gsm8k" / "offline" / "config.yaml"
sys.path.insert(0, str(COOKBOOK))  # the recipe is the package grpo_gsm8k under cookbook/


@pytest.fixture(scope="session")
def demo_assets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The embedded default's problems and warm-started tiny policy, built offline (~15 s)."""
    from grpo_gsm8k.offline.prepare_demo import prepare_demo

    return prepare_demo(tmp_path_factory.mktemp("demo"))


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
    ]
