"""The figures docs/planning.md publishes are the ones benchmarks/bench_planning.py wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = json.loads((ROOT / "benchmarks" / "results" / "bench_planning.json").read_text())
PAGE = (ROOT / "docs" / "planning.md").read_text().replace("**", "")  # bold marks the goals met

#: The streaming rows the page's tables quote, by setting.
_SLIME_DEFAULT = (
    "slime+partial",
    "controller",
    "dapo",
    "streaming(0.9)",
    "streaming(0.999)",
    "streaming(0.9,partial)",
    "streaming(0.99,partial)",
    "streaming(0.999,partial)",
)
STREAMING = {
    "slime default, uniform Beta(1,1)": _SLIME_DEFAULT,
    "slime default, polarised Beta(0.5,0.5)": _SLIME_DEFAULT,
    "pull request (50 x groups of 3)": (
        "slime+partial",
        "controller",
        "streaming(0.9)",
        "streaming(0.9999)",
        "streaming(0.999,partial)",
        "streaming(0.9999,partial)",
        "streaming(0.99,race 1.5,partial)",
        "streaming(0.99,race 2,partial)",
    ),
}
#: The pool rows the page's table quotes (the polarised pool).
POOL = ("controller", "greso", "greso(target 0.5)", "history", "history(skip<0.3)", "history(skip<0.6)")


def _row(setting: str, name: str) -> dict[str, Any]:
    row: dict[str, Any] = next(r for r in RESULTS["streaming"][setting]["rows"] if r["name"] == name)
    return row


@pytest.mark.parametrize(
    ("setting", "name"), [(setting, name) for setting, names in STREAMING.items() for name in names]
)
def test_each_streaming_row_quotes_the_run(setting: str, name: str) -> None:
    row = _row(setting, name)
    times = row["time_vs_slime"]
    assert f"{times['unlimited']:.3f} / {times['h=256']:.3f}" in PAGE
    assert f"{row['tokens_vs_oracle']:.3f}" in PAGE


def test_the_goals_the_page_calls_met_are_met_in_the_run() -> None:
    goals = {
        setting: {goal["goal"].split(" (")[-1].rstrip(")"): goal["met"] for goal in data["goals"]}
        for setting, data in RESULTS["streaming"].items()
    }
    assert goals["slime default, uniform Beta(1,1)"]["unlimited"] is True
    assert goals["slime default, polarised Beta(0.5,0.5)"]["unlimited"] is True
    assert goals["pull request (50 x groups of 3)"]["h=256"] is True
    assert goals["pull request (50 x groups of 3)"]["unlimited"] is True  # by racing, as the page says


@pytest.mark.parametrize("name", POOL)
def test_each_pool_row_quotes_the_run(name: str) -> None:
    pool = RESULTS["pool"]["polarised pool (logit std 4)"]["simulation"]["results"]
    row = next(r for r in pool if r["name"] == name)
    assert f"| {row['groups_per_informative']:.3f} |" in PAGE
    if row["wrongly_skipped_share"] is not None:
        assert f"{100 * row['wrongly_skipped_share']:.1f}%" in PAGE


def test_the_bound_the_page_quotes_is_the_runs() -> None:
    for label, data in RESULTS["pool"].items():
        bound = next(goal for goal in data["goals"] if goal["goal"].startswith("bound"))
        figure = bound["detail"].split(": ")[1].split(" groups")[0]
        assert figure in PAGE, label
