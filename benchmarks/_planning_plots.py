"""The figures of ``bench_planning.py``: the streaming frontier and the prompt pool."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_streaming(settings: dict[str, list[dict[str, Any]]], path: Path) -> None:
    """The streaming section's figure: each setting's frontier (top) and partial rollout's price (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, grid = pyplot.subplots(2, len(settings), figsize=(5.5 * len(settings), 8.5))
    try:
        for axis, (label, rows) in zip(grid[0], settings.items(), strict=True):
            _frontier(axis, label, rows)
        for axis, (label, rows) in zip(grid[1], settings.items(), strict=True):
            _partial_rollout(axis, label, rows)
        figure.suptitle(
            "streaming plans: the goal is the lower-left corner of the dashed lines (top); "
            "carried groups were partly generated before the last update (bottom)"
        )
        figure.tight_layout()
        figure.savefig(path, dpi=100)
    finally:
        pyplot.close(figure)


def _frontier(axis: Any, label: str, rows: list[dict[str, Any]]) -> None:
    """Tokens against time, both relative, for every streaming setting and the baselines."""
    for partial, style in ((False, "o-"), (True, "^-")):
        curve = [
            r
            for r in rows
            if r["name"].startswith("streaming")
            and ("partial" in r["name"]) == partial
            and "race" not in r["name"]
        ]
        axis.plot(
            [r["time_vs_slime"]["unlimited"] for r in curve],
            [r["tokens_vs_oracle"] for r in curve],
            style,
            label="streaming, partial rollout" if partial else "streaming",
        )
        for row in curve:
            name = row["name"].removeprefix("streaming(").split(",")[0].rstrip(")")
            axis.annotate(name, (row["time_vs_slime"]["unlimited"], row["tokens_vs_oracle"]), fontsize=7)
    for row in rows:
        if "race" in row["name"]:
            point = (row["time_vs_slime"]["unlimited"], row["tokens_vs_oracle"])
            axis.plot(*point, "*", label=row["name"])
        if not row["name"].startswith("streaming"):
            axis.plot(row["time_vs_slime"]["unlimited"], row["tokens_vs_oracle"], "s", label=row["name"])
    axis.axvline(1.05, color="grey", lw=0.8, ls="--")
    axis.axhline(1.10, color="grey", lw=0.8, ls="--")
    axis.set_xscale("log")
    axis.set_xlabel("step time / slime's (log; unlimited parallel generation)")
    axis.set_ylabel("generated tokens / oracle's")
    axis.set_title(label, fontsize=10)
    axis.legend(fontsize=7)


def _partial_rollout(axis: Any, label: str, rows: list[dict[str, Any]]) -> None:
    """The share of trained groups that resumed against time, per engine, for partial rollout."""
    carried = [r for r in rows if "partial" in r["name"]]
    for engine, style in (("unlimited", "^"), ("h=256", "v")):
        axis.plot(
            [r["time_vs_slime"][engine] for r in carried],
            [100 * r["resumed_share"] for r in carried],
            style,
            label=f"engine {engine}",
        )
    for row in carried:
        axis.annotate(
            row["name"].replace("streaming(", "").replace(",partial", "").rstrip(")"),
            (row["time_vs_slime"]["unlimited"], 100 * row["resumed_share"]),
            fontsize=7,
        )
    axis.axvline(1.05, color="grey", lw=0.8, ls="--")
    axis.set_xlabel("step time / slime's (without partial rollout)")
    axis.set_ylabel("groups trained on that resumed (%)")
    axis.set_title(f"the price of partial rollout: {label}", fontsize=10)
    axis.legend(fontsize=7)


def plot_pool(label: str, result: Any, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, (left, right) = pyplot.subplots(1, 2, figsize=(13, 4.8))
    try:
        curves = (
            ("history", "o-", "history"),
            ("model", "d--", "pool model's posterior (bound for any history)"),
            ("oracle", "^-", "oracle (true pass rates)"),
            ("greso", "s", "GRESO"),
        )
        for prefix, style, name in curves:
            chosen = [
                r for r in result.results if r.name.startswith(prefix) and r.name != "history(restored)"
            ]
            chosen.sort(key=lambda r: r.wrongly_skipped_share or 0)
            left.plot(
                [100 * (r.wrongly_skipped_share or 0) for r in chosen],
                [r.groups_per_informative for r in chosen],
                style,
                label=name,
            )
        controller = result.result("controller").groups_per_informative
        left.axhline(controller, color="black", lw=0.8, label="controller alone")
        left.axhline(0.7 * controller, color="grey", lw=0.8, ls="--", label="0.70x controller")
        left.axvline(10, color="grey", lw=0.8, ls=":")
        left.set_xlabel("skipped prompts that would have been informative (%)")
        left.set_ylabel("generated groups per informative trained group")
        left.set_title(f"skipping before generation ({label})", fontsize=10)
        left.legend(fontsize=8)
        names = ("controller", "greso", "history", "oracle(skip<0.1)")
        labels = list(result.result("controller").by_difficulty)
        width = 0.2
        for offset, name in enumerate(names):
            r = result.result(name)
            shares = [r.by_difficulty[b]["trained"] / r.trained_groups for b in labels]
            right.bar([i + (offset - 1.5) * width for i in range(len(labels))], shares, width, label=name)
        right.set_xticks(range(len(labels)), labels, fontsize=8)
        right.set_ylabel("share of the informative groups trained on")
        right.set_title("what the model trains on, by true pass rate when met", fontsize=10)
        right.legend(fontsize=8)
        figure.tight_layout()
        figure.savefig(path, dpi=100)
    finally:
        pyplot.close(figure)
