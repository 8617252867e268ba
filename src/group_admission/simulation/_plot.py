"""A PNG of the simulation: cost and yield, and rounds per step (needs matplotlib)."""

from __future__ import annotations

import os

from .._loading import require_extra
from ._simulate import SimulationResult

__all__ = ["plot_result"]


def plot_result(result: SimulationResult, path: str | os.PathLike[str]) -> None:
    """
    Write a PNG: each strategy's cost multiplier (with its final informative rate) and rounds.

    Args:
        result: What :func:`simulate` returned.
        path: Where to write the PNG.

    Raises:
        ImportError: matplotlib is not installed (with the ``pip install`` line).

    .. versionadded:: 0.1.0
    """
    matplotlib = require_extra("matplotlib", "plot", "Plotting simulation results")
    matplotlib.use("Agg")  # never open a window: this is a file writer
    pyplot = require_extra("matplotlib.pyplot", "plot", "Plotting simulation results")
    names = [r.name for r in result.results]
    figure, (left, right) = pyplot.subplots(1, 2, figsize=(12, 0.45 * len(names) + 1.8), sharey=True)
    try:
        costs = [r.sampling_cost_multiplier for r in result.results]
        left.barh(names, costs)
        for row, r in enumerate(result.results):
            left.annotate(
                f" final {r.final_informative_rate:.3f}", (costs[row], row), va="center", fontsize=8
            )
        left.set_xlim(0, max(costs) * 1.35)
        left.set_xlabel("sampling cost multiplier (generated groups / target)")
        left.set_title("cost, and the final informative rate it buys")
        left.invert_yaxis()
        right.barh(names, [r.rounds_per_step for r in result.results])
        right.set_xlabel("rounds per step (mean)")
        right.set_title("rounds")
        config = result.config
        figure.suptitle(
            f"{config.tasks.kind} tasks, groups of {config.group_size}, target {config.target_groups}, "
            f"{config.steps} steps, seed {config.seed}"
        )
        figure.tight_layout()
        figure.savefig(os.fspath(path), dpi=110)
    finally:
        pyplot.close(figure)
