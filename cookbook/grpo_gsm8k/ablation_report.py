"""
What the ablation shows: its summary, table and plot.

Per-arm means and spreads over seeds, paired differences from plain GRPO, the markdown
table, and the plot of held-out accuracy against generated samples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cookbook.stats import paired, spread

__all__ = ["format_table", "summarise_arms", "write_plot"]

BASELINE = "grpo"
#: The run fields an arm reports the mean of.
_MEANS = (
    "samples",
    "tokens",
    "steps",
    "updates",
    "groups_trained",
    "surplus",
    "prompts_skipped",
    "wall_s",
    "cpu_s",
)


def _paired(values: Sequence[float]) -> dict[str, float | None]:
    """The spread of paired differences with the 95% t interval of their mean (``None`` from one pair)."""
    return dict(spread(values)) | paired(values)


def _share(run: Mapping[str, Any], key: str) -> float:
    return run[key] / run["groups_trained"] if run["groups_trained"] else 0.0


def _curve(runs: Sequence[Mapping[str, Any]], every: int) -> list[dict[str, float]]:
    """Held-out accuracy at each checkpoint (multiples of ``every`` samples), over seeds."""
    points: dict[int, list[Mapping[str, float]]] = {}
    for run in runs:
        for point in run["eval_curve"]:
            points.setdefault(int(point["samples"]) // every, []).append(point)
    return [
        {
            "checkpoint": k * every,
            "samples": float(np.mean([p["samples"] for p in found])),
            "runs": len(found),
            **{f"accuracy_{key}": value for key, value in spread([p["accuracy"] for p in found]).items()},
        }
        for k, found in sorted(points.items())
    ]


def summarise_arms(
    runs: Sequence[Mapping[str, Any]], arms: Sequence[str], every: int
) -> list[dict[str, Any]]:
    """Per arm: accuracy after the budget, its paired gain over plain GRPO, reward, shares, cost."""
    baseline = {r["seed"]: r["accuracy_after"] for r in runs if r["arm"] == BASELINE}
    summaries = []
    for arm in arms:
        mine = [r for r in runs if r["arm"] == arm]
        if not mine:
            continue
        paired = [r["accuracy_after"] - baseline[r["seed"]] for r in mine if r["seed"] in baseline]
        summaries.append(
            {
                "arm": arm,
                "runs": len(mine),
                "accuracy_before": mine[0]["accuracy_before"],
                "accuracy_after": spread([r["accuracy_after"] for r in mine]),
                "gain_over_grpo": _paired(paired) if paired and arm != BASELINE else None,
                "accuracy_curve_mean": spread([r["accuracy_curve_mean"] for r in mine]),
                "reward_late": spread([r["reward_late"] for r in mine]),
                "train_accuracy_late": spread([r["train_accuracy_late"] for r in mine]),
                "dead_share": spread([_share(r, "trained_dead") for r in mine]),
                "phantom_share": spread([_share(r, "trained_phantom") for r in mine]),
                "phantom_wrong_share": spread([_share(r, "trained_phantom_wrong") for r in mine]),
                "completion_tokens_late": spread([r["completion_tokens_late"] for r in mine]),
                "informative_trained": float(
                    np.mean([r["groups_trained"] - r["trained_dead"] - r["trained_phantom"] for r in mine])
                ),
                **{key: float(np.mean([r[key] for r in mine])) for key in _MEANS},
                "curve": _curve(mine, every),
            }
        )
    return summaries


def _pm(stats: Mapping[str, float], scale: float = 1.0, digits: int = 3) -> str:
    return f"{scale * stats['mean']:.{digits}f} ± {scale * stats['std']:.{digits}f}"


def _gain(arm: Mapping[str, Any]) -> str:
    gain = arm["gain_over_grpo"]
    if gain is None:
        return "—"
    interval = "" if gain["ci95_low"] is None else f" ({gain['ci95_low']:+.3f} to {gain['ci95_high']:+.3f})"
    return f"{gain['mean']:+.3f}{interval}"


def format_table(report: Mapping[str, Any]) -> str:
    """Two markdown tables of the arms, what they learned and what they spent (mean ± std over seeds)."""
    setup = report["setup"]
    labels = {arm["name"]: arm["label"] for arm in setup["arms"]}
    lines = [
        f"{len(setup['seeds'])} seeds per arm, {setup['samples_per_run']} generated samples per run, "
        f"held-out greedy accuracy on {setup['held_out']['problems']} problems (mean ± std over seeds)",
        "",
        "| arm | held-out acc. at the end | gain over plain GRPO (paired, 95% CI) "
        "| held-out acc., mean of checkpoints | train reward, last quarter | train acc., last quarter "
        "| completion tokens, last quarter |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {labels[arm['arm']]} | {_pm(arm['accuracy_after'])} | {_gain(arm)} "
        f"| {_pm(arm['accuracy_curve_mean'])} | {_pm(arm['reward_late'])} "
        f"| {_pm(arm['train_accuracy_late'])} | {_pm(arm['completion_tokens_late'], digits=2)} |"
        for arm in report["arms"]
    ]
    lines += [
        "",
        "| arm | trained groups: dead | phantom | informative (mean) | steps | optimizer updates "
        "| surplus discarded | prompts skipped | s/run wall (CPU) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {labels[arm['arm']]} | {_pm(arm['dead_share'], 100, 1)}% | {_pm(arm['phantom_share'], 100, 1)}% "
        f"| {arm['informative_trained']:.1f} | {arm['steps']:.1f} | {arm['updates']:.1f} "
        f"| {arm['surplus']:.1f} | {arm['prompts_skipped']:.1f} | {arm['wall_s']:.0f} ({arm['cpu_s']:.0f}) |"
        for arm in report["arms"]
    ]
    timing = report["timing"]
    before = report["arms"][0]["accuracy_before"] if report["arms"] else math.nan
    lines += [
        "",
        f"held-out accuracy before training: {before:.3f}; whole ablation: {timing['wall_s']:.0f} s wall, "
        f"{timing['cpu_s']:.0f} s CPU",
    ]
    return "\n".join(lines)


def write_plot(report: Mapping[str, Any], path: str | Path) -> Path:
    """Held-out accuracy (mean ± std over seeds) and training reward against generated samples."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cookbook.grpo_gsm8k.report import save_samples_figure

    labels = {arm["name"]: arm["label"] for arm in report["setup"]["arms"]}
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for arm in report["arms"]:
        curve = arm["curve"]
        x = [p["samples"] for p in curve]
        mean = np.array([p["accuracy_mean"] for p in curve])
        std = np.array([p["accuracy_std"] for p in curve])
        (line,) = left.plot(x, mean, marker="o", label=labels[arm["arm"]])
        left.fill_between(x, mean - std, mean + std, color=line.get_color(), alpha=0.15)
        setup = report["setup"]
        x_reward, reward = _binned_reward(
            report["runs"], arm["arm"], setup["eval_every_samples"], setup["samples_per_run"]
        )
        right.plot(x_reward, reward, marker=".", color=line.get_color(), label=labels[arm["arm"]])
    seeds = len(report["setup"]["seeds"])
    left.set_title(
        f"held-out greedy accuracy ({report['setup']['held_out']['problems']} problems), "
        f"mean ± std of {seeds} seeds",
        fontsize=10,
    )
    right.set_title("training reward of fresh samples (accuracy + brevity), binned", fontsize=10)
    return save_samples_figure(figure, (left, right), path)


def _binned_reward(
    runs: Sequence[Mapping[str, Any]], arm: str, every: int, budget: int
) -> tuple[list[float], list[float]]:
    """Mean training reward per bin of ``every`` samples (the overshoot of the last step in the last bin)."""
    last = max(0, budget // every - 1)
    bins: dict[int, list[tuple[float, float]]] = {}
    for run in runs:
        if run["arm"] == arm:
            for samples, reward, _ in run["reward_curve"]:
                bins.setdefault(min(last, (int(samples) - 1) // every), []).append((samples, reward))
    keys = sorted(bins)
    return [float(np.mean([x for x, _ in bins[k]])) for k in keys], [
        float(np.mean([y for _, y in bins[k]])) for k in keys
    ]
