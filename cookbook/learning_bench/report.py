"""
The bench's summary: per task and arm, final accuracy, paired intervals, tokens-to-target,
what the trained groups were, and the tables and plot published in ``docs/evidence.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["format_tables", "paired", "summarise_task", "t95", "tokens_to_reach", "write_plot"]

# Two-sided 95% quantiles of Student's t by degrees of freedom (no scipy here).
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145)


def t95(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom (1.96 past 14)."""
    if df < 1:
        return math.nan
    return _T95[df - 1] if df <= len(_T95) else 1.96 + 2.5 / df


def paired(values: Sequence[float]) -> dict[str, float | None]:
    """Mean and sample std of (paired) values with the 95% t interval of the mean (``None`` from one)."""
    array = np.asarray(values, dtype=float)
    mean = float(array.mean())
    if len(array) < 2:
        return {"mean": mean, "std": 0.0, "ci95_low": None, "ci95_high": None}
    std = float(array.std(ddof=1))
    half = t95(len(array) - 1) * std / math.sqrt(len(array))
    return {"mean": mean, "std": std, "ci95_low": mean - half, "ci95_high": mean + half}


def tokens_to_reach(curve: Sequence[Mapping[str, float]], target: float) -> int | None:
    """
    The generated tokens at which ``curve`` first reaches ``target`` accuracy, interpolated
    linearly between the evaluations that bracket it (``None``: never reached).
    """
    previous = None
    for point in curve:
        if point["accuracy"] >= target:
            if previous is None or point["accuracy"] == previous["accuracy"]:
                return int(point["tokens"])
            share = (target - previous["accuracy"]) / (point["accuracy"] - previous["accuracy"])
            return round(previous["tokens"] + share * (point["tokens"] - previous["tokens"]))
        previous = point
    return None


def _share(counts: Sequence[Mapping[str, int]], part: str, whole: str) -> float | None:
    total = sum(c[whole] for c in counts)
    return sum(c[part] for c in counts) / total if total else None


def _arm_summary(runs: list[dict[str, Any]], plain_final: float | None) -> dict[str, Any]:
    counts = [r["counts"] for r in runs]
    resumed = sum(c["trained_resumed"] for c in counts)
    return {
        "seeds": [r["seed"] for r in runs],
        "final_accuracy": [r["final_accuracy"] for r in runs],
        "generated_tokens": [r["generated_tokens"] for r in runs],
        "tokens_to_plain_final": [
            None if plain_final is None else tokens_to_reach(r["curve"], plain_final) for r in runs
        ],
        "final_step_share": [r["final_step_share"] for r in runs],
        "gain_over_start": paired([r["final_accuracy"] - r["start_accuracy"] for r in runs]),
        "curves": [[[p["tokens"], p["accuracy"]] for p in r["curve"]] for r in runs],
        "dead_share": _share(counts, "trained_dead", "trained"),
        "phantom_share": _share(counts, "trained_phantom", "trained"),
        "wrongly_skipped_share": _share(counts, "skipped_informative", "skipped"),
        "skipped_per_run": float(np.mean([c["skipped"] for c in counts])),
        "resumed_share": _share(counts, "trained_resumed", "trained"),
        "resumed_age_steps": sum(c["resumed_age_steps"] for c in counts) / resumed if resumed else None,
        "resumed_updates_spanned": sum(c["resumed_updates_spanned"] for c in counts) / resumed
        if resumed
        else None,
        "oldest_resumed": max(c["oldest_resumed"] for c in counts),
        "stale_token_share": _share(counts, "stale_trained_tokens", "trained_tokens"),
        "trained_token_share": _share(counts, "trained_tokens", "tokens"),
        "updates": float(np.mean([c["updates"] for c in counts])),
        "steps": float(np.mean([c["steps"] for c in counts])),
        "trained_groups": float(np.mean([c["trained"] for c in counts])),
        "surplus_groups": float(np.mean([c["surplus"] for c in counts])),
        "wall_s": [r["wall_s"] for r in runs],
        "cpu_s": [r["cpu_s"] for r in runs],
        "counts": counts,
    }


def summarise_task(runs: list[dict[str, Any]], arms: Sequence[str]) -> dict[str, Any]:
    """Every arm of one task: the issue's keys, paired differences to plain and zero_std_total, and more."""
    by_arm = {arm: sorted((r for r in runs if r["arm"] == arm), key=lambda r: r["seed"]) for arm in arms}
    by_arm = {arm: rs for arm, rs in by_arm.items() if rs}
    plain = by_arm.get("plain")
    plain_final = float(np.mean([r["final_accuracy"] for r in plain])) if plain else None
    summary = {arm: _arm_summary(rs, plain_final) for arm, rs in by_arm.items()}
    for reference in ("plain", "zero_std_total"):
        if reference not in by_arm:
            continue
        finals = {r["seed"]: r["final_accuracy"] for r in by_arm[reference]}
        for arm, rs in by_arm.items():
            diffs = [r["final_accuracy"] - finals[r["seed"]] for r in rs if r["seed"] in finals]
            summary[arm][f"vs_{reference}"] = paired(diffs) if diffs else None
    first = next(iter(by_arm.values()))[0]
    return {
        "start_accuracy": first["start_accuracy"],
        "plain_final_mean": plain_final,
        "arms": summary,
    }


def _fmt(value: float | None, digits: int = 3, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _interval(stats: Mapping[str, float | None] | None) -> str:
    if not stats:
        return "-"
    if stats["ci95_low"] is None:
        return _fmt(stats["mean"], signed=True)
    mean, low, high = (_fmt(stats[key], signed=True) for key in ("mean", "ci95_low", "ci95_high"))
    return f"{mean} ({low} to {high})"


def _tokens_to_target(values: Sequence[int | None]) -> str:
    reached = [v for v in values if v is not None]
    if not reached:
        return f"never (0/{len(values)})"
    return f"{np.mean(reached) / 1000:.1f}k ({len(reached)}/{len(values)})"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _accuracy_row(arm: str, s: Mapping[str, Any]) -> str:
    finals = np.asarray(s["final_accuracy"])
    spread = f"{finals.mean():.3f} ± {finals.std(ddof=1) if len(finals) > 1 else 0.0:.3f}"
    cells = [
        arm,
        spread,
        _interval(s["gain_over_start"]),
        _interval(s.get("vs_plain")),
        _interval(s.get("vs_zero_std_total")),
        _tokens_to_target(s["tokens_to_plain_final"]),
        f"{np.mean(s['final_step_share']):.2f}",
    ]
    return "| " + " | ".join(cells) + " |"


def _training_row(arm: str, s: Mapping[str, Any]) -> str:
    resumed = _pct(s["resumed_share"])
    if s["resumed_age_steps"] is not None:
        resumed += f" ({s['resumed_age_steps']:.2f}, {s['resumed_updates_spanned']:.2f})"
    skipped = _pct(s["wrongly_skipped_share"])
    if s["skipped_per_run"]:
        skipped += f" of {s['skipped_per_run']:.0f}"
    cells = [
        arm,
        _pct(s["dead_share"]),
        _pct(s["phantom_share"]),
        skipped,
        resumed,
        *(f"{s[key]:.0f}" for key in ("steps", "updates", "trained_groups", "surplus_groups")),
        _pct(s["trained_token_share"]),
        f"{np.mean(s['wall_s']):.0f} ({np.mean(s['cpu_s']):.0f})",
    ]
    return "| " + " | ".join(cells) + " |"


def format_tables(report: Mapping[str, Any]) -> str:
    """Two markdown tables per task: accuracy and efficiency, then what each arm trained on."""
    lines: list[str] = []
    for name, task in report["tasks"].items():
        arms = task["arms"]
        lines += [
            f"### {name}: held-out greedy accuracy ({task['heldout_size']} problems), "
            f"warm start {task['start_accuracy']:.3f}",
            "",
            "| arm | final accuracy | gain over warm start (95% CI) | vs plain (paired 95% CI) "
            "| vs zero_std_total (paired 95% CI) | tokens to plain's final | greedy step share |",
            "|---|---|---|---|---|---|---|",
            *(_accuracy_row(arm, s) for arm, s in arms.items()),
            "",
            "| arm | trained groups: dead | phantom | wrongly skipped | resumed (age, updates spanned) "
            "| steps | updates | trained groups | surplus | tokens trained on | s/run wall (CPU) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            *(_training_row(arm, s) for arm, s in arms.items()),
            "",
        ]
    return "\n".join(lines)


def write_plot(report: Mapping[str, Any], path: Path) -> None:
    """Held-out accuracy against generated tokens, mean and seed range per arm, one panel per task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = report["tasks"]
    figure, axes = plt.subplots(1, len(tasks), figsize=(6.5 * len(tasks), 4.5), squeeze=False)
    for axis, (name, task) in zip(axes[0], tasks.items(), strict=True):
        for arm, summary in task["arms"].items():
            curves = summary["curves"]
            grid = np.linspace(0, min(c[-1][0] for c in curves), 60)
            values = np.array([np.interp(grid, [p[0] for p in c], [p[1] for p in c]) for c in curves])
            (line,) = axis.plot(grid / 1000, values.mean(axis=0), label=arm, linewidth=1.5)
            axis.fill_between(
                grid / 1000, values.min(axis=0), values.max(axis=0), color=line.get_color(), alpha=0.12
            )
        axis.set_title(f"{name} (warm start {task['start_accuracy']:.3f})")
        axis.set_xlabel("generated tokens (thousands)")
        axis.set_ylabel("held-out greedy accuracy")
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="best")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
