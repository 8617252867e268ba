"""What a run shows: the legend of the step line, the step line itself, and the labelled curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cookbook.grpo_gsm8k.report import curves_figure, format_legend, format_step

ROOT = Path(__file__).resolve().parents[2]


def record(
    step: int, *, exact_dead: int = 0, near_tie: int = 0, phantom: int = 0, surplus: int = 0
) -> dict[str, Any]:
    """A step record with the keys the line and the plot read."""
    return {
        "step": step,
        "reward": 0.5 + step / 100,
        "accuracy": 0.25,
        "informative_before": 0.5,
        "informative_after": 1.0,
        "trained": 8,
        "target": 8,
        "surplus": surplus,
        "rejections": {"exact_dead": exact_dead, "near_tie": near_tie, "redundant": 0, "external": 0},
        "phantom_rejected": phantom,
        "cost": 1.5,
        "rounds": 2,
        "exhausted": step % 2 == 0,
        "seconds": {"generation": 0.2, "reward": 0.01, "admission": 0.002, "training": 0.3, "step": 0.5},
        "admission_share": 0.004,
    }


def test_the_phantom_count_stands_beside_exact_dead_and_only_there() -> None:
    line = format_step(record(1, exact_dead=7, near_tie=1, phantom=6, surplus=1))
    assert "(8/8 +1 surplus)" in line
    assert "| rejected exact_dead 7 (phantom 6) near_tie 1 |" in line

    assert "| rejected near_tie 2 |" in format_step(record(2, near_tie=2))  # no exact_dead, no phantom
    assert "| rejected none |" in format_step(record(3))


def test_the_legend_defines_every_word_of_the_step_line() -> None:
    legend = format_legend(8, 8, 0.5)
    line = format_step(record(1, exact_dead=7, phantom=6, surplus=1))
    words = [
        "reward",
        "acc",
        "informative",
        "surplus",
        "rejected",
        "exact_dead",
        "phantom",
        "cost",
        "round(s)",
        "exhausted",
        "gen",
        "adm",
        "train",
    ]
    for word in words:
        assert word in line, word  # the line uses it...
        assert word in legend, word  # ...and the legend, printed once, defines it
    assert "target: 8 informative groups of 8 samples" in legend
    assert "0.5 x brevity" in legend


def test_the_cookbook_shows_the_legend_as_the_run_prints_it() -> None:
    page = (ROOT / "docs" / "cookbook.md").read_text(encoding="utf-8")
    assert format_legend(8, 8, 0.5) + "\nstep    1 |" in page


def test_the_curves_plot_the_held_out_checkpoints_and_label_every_axis() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    steps = [record(i, exact_dead=i % 3, phantom=i % 2) for i in range(1, 11)]
    curve = [{"step": 0, "samples": 0, "accuracy": 0.36}, {"step": 10, "samples": 640, "accuracy": 0.48}]
    figure = curves_figure(steps, curve)
    try:
        axes = figure.get_axes()
        assert 6 == len(axes)
        for axis in axes:
            assert axis.get_xlabel() == "step", axis.get_title()
            assert axis.get_ylabel(), axis.get_title()
        held_out = [
            line for axis in axes for line in axis.get_lines() if line.get_label().startswith("held-out")
        ]
        assert 1 == len(held_out)
        assert list(held_out[0].get_xdata()) == [0, 10]
        assert list(held_out[0].get_ydata()) == [0.36, 0.48]
    finally:
        plt.close(figure)
