"""What a run shows: the per-step line, the JSONL log, the PNG plot, the Prometheus endpoint."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from cookbook.grpo_gsm8k.recipe import StepObserver
from group_admission import RejectionReason

if TYPE_CHECKING:
    from cookbook.grpo_gsm8k.config import TrainConfig

__all__ = [
    "JsonlLog",
    "RunResult",
    "StepLines",
    "curves_figure",
    "format_legend",
    "format_step",
    "format_summary",
    "on_a_terminal",
    "plain_output",
    "save_figure",
    "save_samples_figure",
    "start_prometheus",
    "summarise",
    "write_plot",
]


@dataclass
class RunResult:
    """What a run produced: one record per step, the summary, and where the files are."""

    steps: list[dict[str, Any]]
    summary: dict[str, Any]
    output_dir: Path
    eval_accuracy: dict[str, float] = field(default_factory=dict)
    #: held-out accuracy by generated samples: ``{"step", "samples", "accuracy"}`` per evaluation
    eval_curve: list[dict[str, float]] = field(default_factory=list)
    initial_checksum: float = 0.0
    final_checksum: float = 0.0


def on_a_terminal() -> bool:
    """Whether stdout and stderr are both a terminal (else progress bars would garble a log)."""
    return sys.stdout.isatty() and sys.stderr.isatty()


def plain_output() -> None:
    """Turn off the progress bars of transformers and datasets: a log file gets plain lines."""
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


#: The primary rejection reasons, in precedence order.
REASONS = tuple(reason.value for reason in RejectionReason)


#: The words of a step line and what they mean (``format_legend`` fills in the settings).
LEGEND = (
    ("reward R acc A", "mean reward (accuracy + {brevity:g} x brevity) and accuracy of round 1's samples"),
    ("informative B -> F", "share of round 1's groups admitted -> share of the target trained on"),
    ("(T/{target} +S surplus)", "groups trained on / target; +S: S more were admitted, and discarded"),
    ("rejected REASON N", "groups rejected this step, by primary reason, over every round"),
    ("exact_dead N (phantom P)", "P of those N: equal accuracy, brevity spread (plain GRPO trains on them)"),
    ("cost xC in R round(s)", "groups generated / target, over R sampling rounds (round 1, then resampling)"),
    ("exhausted YES", "the budget's caps stopped resampling before the target was met"),
    ("gen, adm, train", "seconds generating; ms judging + planning (share of the step); seconds training"),
)


def format_legend(target: int, num_generations: int, brevity_weight: float) -> str:
    """What the words of a step line mean, printed once at the start of a run."""
    width = max(len(word.format(target=target)) for word, _ in LEGEND)
    lines = [f"each step line reads (target: {target} informative groups of {num_generations} samples):"]
    for word, meaning in LEGEND:
        lines.append(f"  {word.format(target=target):<{width}}  {meaning.format(brevity=brevity_weight)}")
    return "\n".join(lines)


def format_step(record: Mapping[str, Any]) -> str:
    """One line per step: reward, informative rate before -> after, rejections, cost, timings."""
    rejected = record["rejections"]
    seconds = record["seconds"]
    # Phantom groups are a subset of the exact_dead ones: the count stands beside theirs.
    phantom = {"exact_dead": f" (phantom {record['phantom_rejected']})"}
    parts = [f"{name} {rejected[name]}{phantom.get(name, '')}" for name in REASONS if rejected.get(name)]
    surplus = f" +{record['surplus']} surplus" if record["surplus"] else ""
    return (
        f"step {record['step']:>4} | reward {record['reward']:.3f} acc {record['accuracy']:.3f}"
        f" | informative {record['informative_before']:.0%} -> {record['informative_after']:.0%}"
        f" ({record['trained']}/{record['target']}{surplus})"
        f" | rejected {' '.join(parts) or 'none'}"
        f" | cost x{record['cost']:.2f} in {record['rounds']} round(s)"
        f" | exhausted {'YES' if record['exhausted'] else 'no'}"
        f" | gen {seconds['generation']:.2f}s adm {1000 * seconds['admission']:.1f}ms"
        f" ({record['admission_share']:.2%}) train {seconds['training']:.2f}s"
    )


class StepLines:
    """
    The step lines of a run, after the legend.

    Under a progress bar on a terminal, else as plain lines, flushed one by one, with every
    library's progress bar off (a log file then has no carriage returns and can be followed
    as it grows).
    """

    def __init__(self, config: TrainConfig) -> None:
        from tqdm.auto import tqdm

        interactive = on_a_terminal()
        if not interactive:
            plain_output()
        print(format_legend(config.batch_size, config.num_generations, config.brevity_weight), flush=True)
        self._bar = tqdm(
            total=config.steps,
            desc="GRPO",
            unit="step",
            disable=not (config.progress and interactive),
            dynamic_ncols=True,
        )

    def show(self, record: Mapping[str, Any]) -> None:
        """Print the step's line and advance the bar."""
        line = format_step(record)
        if self._bar.disable:
            print(line, flush=True)
            return
        self._bar.write(line)
        self._bar.set_postfix(
            reward=f"{record['reward']:.2f}", informative=f"{record['informative_after']:.0%}"
        )
        self._bar.update(1)

    def close(self) -> None:
        """Close the progress bar."""
        self._bar.close()


class JsonlLog:
    """Append one JSON object per line, flushed at once so a crash keeps every step."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle: TextIO = self.path.open("w", encoding="utf-8")

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` as one JSON line, flushed."""
        self._handle.write(json.dumps(record, sort_keys=True) + "\n")
        self._handle.flush()

    def close(self) -> None:
        """Close the file."""
        self._handle.close()


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a JSONL log."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line]


def summarise(steps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals and early-vs-late means of a run (early/late: first and last quarter of the steps)."""
    if not steps:
        return {"steps": 0}
    quarter = max(1, len(steps) // 4)

    def mean(key: str, part: Sequence[Mapping[str, Any]]) -> float:
        return sum(float(s[key]) for s in part) / len(part)

    seconds = {k: sum(s["seconds"][k] for s in steps) for k in steps[0]["seconds"]}
    early, late = steps[:quarter], steps[-quarter:]
    return {
        "steps": len(steps),
        "reward_early": mean("reward", early),
        "reward_late": mean("reward", late),
        "accuracy_early": mean("accuracy", early),
        "accuracy_late": mean("accuracy", late),
        "informative_before_mean": mean("informative_before", steps),
        "informative_after_mean": mean("informative_after", steps),
        "cost_mean": mean("cost", steps),
        "exhausted_steps": sum(bool(s["exhausted"]) for s in steps),
        "resampled_steps": sum(s["rounds"] > 1 for s in steps),
        "rejections": {r: sum(s["rejections"].get(r, 0) for s in steps) for r in REASONS},
        "phantom_rejected": sum(s["phantom_rejected"] for s in steps),
        "candidates": sum(s["generated_groups"] for s in steps),
        "admitted": sum(s["admitted"] for s in steps),
        "trained": sum(s["trained"] for s in steps),
        "surplus": sum(s["surplus"] for s in steps),
        "seconds": seconds,
        "admission_share": seconds["admission"] / max(seconds["step"], 1e-12),
    }


def format_summary(summary: Mapping[str, Any]) -> str:
    """The closing lines of a run."""
    if not summary.get("steps"):
        return "no steps ran"
    s = summary["seconds"]
    rejected = ", ".join(f"{k} {v}" for k, v in summary["rejections"].items() if v) or "none"
    return "\n".join(
        [
            f"reward (first -> last quarter): {summary['reward_early']:.3f} -> {summary['reward_late']:.3f}"
            f"   accuracy: {summary['accuracy_early']:.3f} -> {summary['accuracy_late']:.3f}",
            _informative_line(summary),
            f"groups: {summary['candidates']} judged, {summary['admitted']} admitted, {summary['trained']} "
            f"trained on ({summary['surplus']} surplus discarded); rejected: {rejected}; "
            f"{summary['phantom_rejected']} of the exact_dead groups had equal accuracy but brevity spread "
            f"(a phantom gradient under plain GRPO)",
            f"time: generation {s['generation']:.1f}s, reward {s['reward']:.2f}s, admission+planning "
            f"{s['admission']:.3f}s ({summary['admission_share']:.3%} of step time), training "
            f"{s['training']:.1f}s",
        ]
    )


def _informative_line(summary: Mapping[str, Any]) -> str:
    """How many groups were informative, and what resampling (if the budget allows any) made of it."""
    before, after = summary["informative_before_mean"], summary["informative_after_mean"]
    if not summary.get("resampled_steps"):
        return (
            f"informative groups: {before:.0%} of the groups sampled, trained on {after:.0%} of the target "
            "(no resampling: a step trains on the groups it admitted)"
        )
    return (
        f"informative groups: {before:.0%} sampled -> {after:.0%} of the target after resampling, at x"
        f"{summary['cost_mean']:.2f} generation cost; budget exhausted in "
        f"{summary['exhausted_steps']}/{summary['steps']} steps"
    )


def _rolling(values: Sequence[float], window: int) -> list[float]:
    """Trailing mean over up to ``window`` values."""
    return [
        sum(values[max(0, i - window + 1) : i + 1]) / len(values[max(0, i - window + 1) : i + 1])
        for i in range(len(values))
    ]


def write_plot(
    steps: Sequence[Mapping[str, Any]], path: str | Path, eval_curve: Sequence[Mapping[str, float]] = ()
) -> Path:
    """Write :func:`curves_figure` as a PNG to ``path``."""
    return save_figure(curves_figure(steps, eval_curve), path)


def save_samples_figure(figure: Any, axes: Sequence[Any], path: str | Path) -> Path:
    """Label each axis's x as generated samples, with a legend and a grid; lay out and save."""
    for axis in axes:
        axis.set_xlabel("generated samples")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    return save_figure(figure, path)


def save_figure(figure: Any, path: str | Path) -> Path:
    """Write ``figure`` as a PNG (100 dpi) to ``path`` and close it; the path."""
    import matplotlib.pyplot as plt

    target = Path(path)
    figure.savefig(target, dpi=100)
    plt.close(figure)
    return target


def curves_figure(steps: Sequence[Mapping[str, Any]], eval_curve: Sequence[Mapping[str, float]] = ()) -> Any:
    """
    A 2x3 figure over the steps, every axis labelled.

    Reward; accuracy (sampled, and the held-out checkpoints of ``eval_curve``, the figures
    the summary reports); informative rate before/after; cost; rejections by reason; seconds
    per phase.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [s["step"] for s in steps]
    figure, axes = plt.subplots(2, 3, figsize=(15, 7.5))
    _trend(axes[0, 0], x, [float(s["reward"]) for s in steps], "round 1's samples")
    axes[0, 0].set(title="reward (accuracy + brevity)", ylabel="mean reward")
    _trend(axes[0, 1], x, [float(s["accuracy"]) for s in steps], "round 1's samples")
    if eval_curve:
        axes[0, 1].plot(
            [p["step"] for p in eval_curve],
            [p["accuracy"] for p in eval_curve],
            "o-",
            color="black",
            label="held-out, greedy (the summary's figure)",
        )
    axes[0, 1].set(title="accuracy", ylabel="share correct")
    axes[0, 2].plot(x, [s["informative_before"] for s in steps], label="before resampling (round 1)")
    axes[0, 2].plot(x, [s["informative_after"] for s in steps], label="after (trained / target)")
    axes[0, 2].set(title="informative groups", ylabel="share of groups", ylim=(-0.05, 1.05))
    axes[1, 0].plot(x, [s["cost"] for s in steps], label="generated / target groups")
    exhausted = [s for s in steps if s["exhausted"]]
    if exhausted:
        axes[1, 0].scatter(
            [s["step"] for s in exhausted],
            [s["cost"] for s in exhausted],
            color="red",
            label="budget exhausted",
        )
    axes[1, 0].set(title="generation cost", ylabel="cost multiplier (x target)")
    bottom = [0.0] * len(steps)
    for reason in REASONS:
        heights = [float(s["rejections"].get(reason, 0)) for s in steps]
        if any(heights):
            axes[1, 1].bar(x, heights, bottom=bottom, label=reason)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    axes[1, 1].plot(x, [s["phantom_rejected"] for s in steps], "k.", label="phantom (of exact_dead)")
    axes[1, 1].set(title="rejected groups", ylabel="groups per step")
    for phase in ("generation", "training", "admission"):
        axes[1, 2].plot(x, [s["seconds"][phase] for s in steps], label=phase)
    axes[1, 2].set(title="time per step", ylabel="seconds")
    for axis in axes.flat:
        axis.set_xlabel("step")
        axis.legend(fontsize=8)
        axis.grid(alpha=0.3)
    figure.tight_layout()
    return figure


def _trend(axis: Any, x: Sequence[int], values: Sequence[float], label: str) -> None:
    """Per-step values, faint, under their trailing 5-step mean."""
    (line,) = axis.plot(x, values, alpha=0.35)
    axis.plot(x, _rolling(values, 5), color=line.get_color(), label=f"{label}, 5-step mean")


class _PrometheusObserver(StepObserver):
    """Exports every round's verdicts and plan."""

    def __init__(self, exporter: Any) -> None:
        self._exporter = exporter

    def round_judged(self, groups: Sequence[Any], verdicts: Any, plan: Any) -> None:
        self._exporter.observe(verdicts.result)
        self._exporter.observe_plan(plan)


def start_prometheus(port: int) -> StepObserver:
    """
    Serve ``group_admission_*`` metrics on ``port`` and return the observer that feeds them.

    Uses a registry of its own, so several runs in one process do not collide.
    """
    from prometheus_client import CollectorRegistry, start_http_server

    from group_admission.prometheus import PrometheusExporter

    registry = CollectorRegistry()
    exporter = PrometheusExporter(registry)
    start_http_server(port, registry=registry)
    return _PrometheusObserver(exporter)
