"""
The bench's summary, and the tables and plot published in ``docs/evidence.md``.

Per task and arm: final accuracy, paired intervals, tokens-to-target, what the trained
groups were.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cookbook.stats import paired

__all__ = [
    "GAIN_SHARE",
    "format_tables",
    "ratio",
    "runs_from_summary",
    "summarise_task",
    "tokens_to_reach",
    "verdict",
    "write_plot",
]


def tokens_to_reach(curve: Sequence[Mapping[str, float]], target: float) -> int | None:
    """
    The generated tokens at which ``curve`` first reaches ``target`` accuracy (``None``: never).

    Interpolated linearly between the evaluations that bracket it.
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


#: The efficiency target: this share of plain's gain over the warm start, seed by seed.
GAIN_SHARE = 0.9


def ratio(
    values: Sequence[float | None], reference: Sequence[float | None], bounds: Sequence[float]
) -> dict[str, Any]:
    """
    The paired ratio ``values / reference`` over the seeds where the reference reached its target.

    The geometric mean and the 95% t interval of the mean log ratio.

    A run that never reached the target is counted at its lower bound (``bounds``: the tokens
    it generated, which it would have exceeded), so the ratio is never flattered by dropping
    the runs that did worst; ``censored`` says how many were.
    """
    logs, censored = [], 0
    for value, ref, bound in zip(values, reference, bounds, strict=True):
        if ref is None or ref <= 0:
            continue
        censored += value is None
        logs.append(math.log(max(bound if value is None else value, 1.0) / ref))
    result: dict[str, Any] = {"ratio": None, "ci95_low": None, "ci95_high": None}
    if logs:
        stats = paired(logs)
        result = {
            "ratio": math.exp(stats["mean"] or 0.0),
            **{
                key: None if (end := stats[key]) is None else math.exp(end)
                for key in ("ci95_low", "ci95_high")
            },
        }
    return result | {"seeds": len(logs), "censored": censored}


def _gain_targets(reference: Sequence[Mapping[str, Any]]) -> dict[int, float | None]:
    """Per seed, the accuracy at ``GAIN_SHARE`` of an arm's gain over the warm start (``None``: no gain)."""
    return {
        r["seed"]: r["start_accuracy"] + GAIN_SHARE * (r["final_accuracy"] - r["start_accuracy"])
        if r["final_accuracy"] > r["start_accuracy"]
        else None
        for r in reference
    }


def _share(counts: Sequence[Mapping[str, int]], part: str, whole: str) -> float | None:
    total = sum(c[whole] for c in counts)
    return sum(c[part] for c in counts) / total if total else None


def _tokens_to(run: Mapping[str, Any], target: float | None) -> int | None:
    return None if target is None else tokens_to_reach(run["curve"], target)


def _arm_summary(
    runs: list[dict[str, Any]],
    targets: Mapping[str, float | None],
    gain_targets: Mapping[str, Mapping[int, float | None]],
) -> dict[str, Any]:
    counts = [r["counts"] for r in runs]
    resumed = sum(c["trained_resumed"] for c in counts)
    return {
        "seeds": [r["seed"] for r in runs],
        **{
            f"tokens_to_90pct_{name}_gain": [_tokens_to(r, seeds.get(r["seed"])) for r in runs]
            for name, seeds in gain_targets.items()
        },
        "final_accuracy": [r["final_accuracy"] for r in runs],
        "generated_tokens": [r["generated_tokens"] for r in runs],
        **{
            f"tokens_to_{name}_final": [
                None if target is None else tokens_to_reach(r["curve"], target) for r in runs
            ]
            for name, target in targets.items()
        },
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


# The secondary comparisons of the hypotheses beyond the columns against plain and zero_std_total.
PAIRS = (
    ("gated_resample", "gated"),
    ("gated_resample_history", "gated_resample"),
    ("greso", "gated_resample_history"),
    ("greso", "gated_resample"),
    ("streaming_partial", "gated_resample"),
    # The per-token hypotheses (P3, P5), named before the run.
    ("gated_target", "gated"),
    ("gated_sqrt", "gated"),
    ("gated_sqrt", "gated_target"),
    ("recommended", "gated_target"),
    ("recommended", "outcome_only"),
)


def _differences(runs: Sequence[Mapping[str, Any]], reference: Sequence[Mapping[str, Any]]) -> list[float]:
    """Final accuracy minus the reference's, seed by seed (the seeds both ran)."""
    finals = {r["seed"]: r["final_accuracy"] for r in reference}
    return [r["final_accuracy"] - finals[r["seed"]] for r in runs if r["seed"] in finals]


def verdict(stats: Mapping[str, float | None]) -> str:
    """The decision rule: higher or lower when the 95% interval excludes 0, else no measurable difference."""
    low, high = stats["ci95_low"], stats["ci95_high"]
    if low is not None and low > 0:
        return "higher"
    if high is not None and high < 0:
        return "lower"
    return "no measurable difference"


def runs_from_summary(task: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    """The per-run records a task summary was built from (to summarise a published report again)."""
    runs = []
    for arm, s in task["arms"].items():
        for i, seed in enumerate(s["seeds"]):
            runs.append(
                {
                    "arm": arm,
                    "task": name,
                    "seed": seed,
                    "start_accuracy": task["start_accuracy"],
                    "final_accuracy": s["final_accuracy"][i],
                    "final_step_share": s["final_step_share"][i],
                    "generated_tokens": s["generated_tokens"][i],
                    "curve": [{"tokens": t, "accuracy": a} for t, a in s["curves"][i]],
                    "counts": s["counts"][i],
                    "wall_s": s["wall_s"][i],
                    "cpu_s": s["cpu_s"][i],
                }
            )
    return runs


def summarise_task(runs: list[dict[str, Any]], arms: Sequence[str]) -> dict[str, Any]:
    """Every arm of one task: the issue's keys, paired differences to plain and zero_std_total, and more."""
    by_arm = {arm: sorted((r for r in runs if r["arm"] == arm), key=lambda r: r["seed"]) for arm in arms}
    by_arm = {arm: rs for arm, rs in by_arm.items() if rs}
    # Tokens-to-target: the tokens each run needs to reach the mean final accuracy of plain
    # (the target) and of outcome_only (the reference arm).
    targets = {
        name: float(np.mean([r["final_accuracy"] for r in by_arm[name]])) if name in by_arm else None
        for name in ("plain", "outcome_only")
    }
    gain_targets = {name: _gain_targets(by_arm.get(name, [])) for name in ("plain", "outcome_only")}
    summary = {arm: _arm_summary(rs, targets, gain_targets) for arm, rs in by_arm.items()}
    # Efficiency is measured against plain's gain, or outcome_only's where plain loses (conflict).
    efficiency = "plain" if "plain" in by_arm and _mean_gain(by_arm["plain"]) > 0 else "outcome_only"
    column = f"tokens_to_90pct_{efficiency}_gain"
    for against, key in ((efficiency, "ratio_to_reference_90pct"), ("oracle_skip", "ratio_to_oracle_90pct")):
        if against in summary:
            _add_ratios(summary, against, key, column)
    for reference in ("plain", "zero_std_total"):
        if reference not in by_arm:
            continue
        for arm, rs in by_arm.items():
            diffs = _differences(rs, by_arm[reference]) if arm != reference else []
            summary[arm][f"vs_{reference}"] = paired(diffs) if diffs else None
    pairs = {
        f"{a} - {b}": paired(_differences(by_arm[a], by_arm[b]))
        for a, b in PAIRS
        if a in by_arm and b in by_arm and _differences(by_arm[a], by_arm[b])
    }
    first = next(iter(by_arm.values()))[0]
    return {
        "pairs": pairs,
        "start_accuracy": first["start_accuracy"],
        "plain_final_mean": targets["plain"],
        "outcome_only_final_mean": targets["outcome_only"],
        "efficiency_reference": efficiency,
        "arms": summary,
    }


def _mean_gain(runs: Sequence[Mapping[str, Any]]) -> float:
    return float(np.mean([r["final_accuracy"] - r["start_accuracy"] for r in runs]))


def _add_ratios(summary: dict[str, dict[str, Any]], reference: str, key: str, column: str) -> None:
    """Each arm's paired ratio of ``column`` (tokens to a target) to ``reference``'s, on shared seeds."""
    ref = dict(zip(summary[reference]["seeds"], summary[reference][column], strict=True))
    for arm, s in summary.items():
        own = dict(zip(s["seeds"], s[column], strict=True))
        spent = dict(zip(s["seeds"], s["generated_tokens"], strict=True))
        seeds = [seed for seed in s["seeds"] if seed in ref]
        values, bounds = [own[x] for x in seeds], [spent[x] for x in seeds]
        s[key] = None if arm == reference else ratio(values, [ref[x] for x in seeds], bounds)


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


def _tokens_to_target(values: Sequence[int | None], below_start: bool = False) -> str:
    if below_start:
        return "- (below the warm start)"
    reached = [v for v in values if v is not None]
    if not reached:
        return f"never (0/{len(values)})"
    return f"{np.mean(reached) / 1000:.1f}k ({len(reached)}/{len(values)})"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _ratio_cell(stats: Mapping[str, Any] | None) -> str:
    if not stats or stats["ratio"] is None:
        return "-"
    text = f"{stats['ratio']:.2f}x"
    if stats["ci95_low"] is not None:
        text += f" ({stats['ci95_low']:.2f} to {stats['ci95_high']:.2f})"
    text += f", {stats['seeds']} seeds"
    return text + (f", {stats['censored']} never reached" if stats["censored"] else "")


def _efficiency_row(arm: str, s: Mapping[str, Any], reference: str) -> str:
    cells = [
        arm,
        _tokens_to_target(s[f"tokens_to_90pct_{reference}_gain"]),
        _ratio_cell(s.get("ratio_to_reference_90pct")),
        _ratio_cell(s.get("ratio_to_oracle_90pct")),
        f"{np.mean(s['generated_tokens']) / 1000:.1f}k",
    ]
    return "| " + " | ".join(cells) + " |"


def _accuracy_row(arm: str, s: Mapping[str, Any], plain_below_start: bool) -> str:
    finals = np.asarray(s["final_accuracy"])
    spread = f"{finals.mean():.3f} ± {finals.std(ddof=1) if len(finals) > 1 else 0.0:.3f}"
    cells = [
        arm,
        spread,
        _interval(s["gain_over_start"]),
        _interval(s.get("vs_plain")),
        _interval(s.get("vs_zero_std_total")),
        _tokens_to_target(s["tokens_to_plain_final"], plain_below_start),
        _tokens_to_target(s["tokens_to_outcome_only_final"]),
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
        plain_mean = task.get("plain_final_mean")
        below = plain_mean is not None and plain_mean <= task["start_accuracy"]
        reference = task.get("efficiency_reference", "plain")
        lines += [
            f"### {name}: held-out greedy accuracy ({task['heldout_size']} problems), "
            f"warm start {task['start_accuracy']:.3f}",
            "",
            "| arm | final accuracy | gain over warm start (95% CI) | vs plain (paired 95% CI) "
            "| vs zero_std_total (paired 95% CI) | tokens to plain's final | tokens to outcome_only's final "
            "| greedy step share |",
            "|---|---|---|---|---|---|---|---|",
            *(_accuracy_row(arm, s, below) for arm, s in arms.items()),
            "",
            f"| arm | tokens to {GAIN_SHARE:.0%} of {reference}'s gain "
            f"| ratio to {reference} (paired 95% CI) "
            "| ratio to oracle_skip (paired 95% CI) | tokens generated |",
            "|---|---|---|---|---|",
            *(_efficiency_row(arm, s, reference) for arm, s in arms.items()),
            "",
            "| arm | trained groups: dead | phantom | wrongly skipped | resumed (age, updates spanned) "
            "| steps | updates | trained groups | surplus | tokens trained on | s/run wall (CPU) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            *(_training_row(arm, s) for arm, s in arms.items()),
            "",
            "| comparison (final accuracy) | difference (paired 95% CI) | reading |",
            "|---|---|---|",
            *(f"| {pair} | {_interval(stats)} | {verdict(stats)} |" for pair, stats in task["pairs"].items()),
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
