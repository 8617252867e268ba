"""
Plain GRPO beside admission: the same run, every group trained on, in a second process.

With ``baseline: plain`` the training script starts this run before its own and waits for it
after: the same model, problems, seed and settings, and (with ``max_samples``) the same
number of generated samples, with the admission block replaced by :data:`PLAIN_GRPO`
(every group trained on, on the total reward: what plain GRPO does). Each process takes one
CPU thread, so on two cores both take about the time of one. The run's folder gets the
baseline's files under ``plain/``, ``comparison.json`` and ``comparison.png``.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import queue
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from cookbook.grpo_gsm8k.config import PLAIN_GRPO, TrainConfig

if TYPE_CHECKING:
    from multiprocessing import Queue

    from cookbook.grpo_gsm8k.report import RunResult

#: The training function the baseline runs (``train.train``, passed in: train.py imports this module).
Train = Callable[[TrainConfig], "RunResult"]

__all__ = ["Baseline", "baseline_config", "comparison", "format_comparison", "write_comparison_plot"]


def baseline_config(config: TrainConfig) -> TrainConfig:
    """The baseline of ``config``: plain GRPO, same everything else, into ``output_dir/plain``."""
    return attrs.evolve(
        config,
        admission=dict(PLAIN_GRPO),
        baseline=None,
        output_dir=str(Path(config.output_dir) / "plain"),
        progress=False,
        plot=False,
        prometheus_port=None,
        save_model=False,
    )


def _train_quietly(config: TrainConfig, train: Train, results: Queue[Any]) -> None:
    """The baseline's process: one thread, no step lines; the result (or the error) goes in ``results``."""
    import torch

    torch.set_num_threads(1)  # the two runs are the parallelism
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its step lines are in its steps.jsonl
            results.put(("done", train(config)))
    except BaseException:  # reported in the parent, where the run was asked for
        results.put(("failed", traceback.format_exc()))


class Baseline:
    """The baseline run, in a process of its own from construction to :meth:`result`."""

    def __init__(self, config: TrainConfig, train: Train) -> None:
        self.config = baseline_config(config)
        context = multiprocessing.get_context("spawn")
        self._results: Queue[Any] = context.Queue()
        self._process = context.Process(
            target=_train_quietly, args=(self.config, train, self._results), daemon=True
        )
        self._process.start()

    def result(self) -> RunResult:
        """
        Wait for the run and return it.

        Raises:
            RuntimeError: the run failed (with its traceback), or its process died.
        """
        while True:  # until the run reports, or its process is gone without a word
            try:
                status, value = self._results.get(timeout=1.0)
                break
            except queue.Empty:
                if not self._process.is_alive():
                    code = self._process.exitcode
                    raise RuntimeError(
                        f"the plain GRPO baseline's process ended with no result (exit code {code})"
                    ) from None
        self._process.join()
        if status != "done":
            raise RuntimeError(f"the plain GRPO baseline failed:\n{value}")
        result: RunResult = value
        return result

    def close(self) -> None:
        """Stop the run if it is still going (the main run failed or was interrupted)."""
        if self._process.is_alive():
            self._process.terminate()
        self._process.join()


def _side(result: RunResult) -> dict[str, Any]:
    steps = result.steps
    late = steps[-max(1, len(steps) // 4) :]
    return {
        "held_out": [result.eval_accuracy.get("before"), result.eval_accuracy.get("after")],
        "eval_curve": result.eval_curve,
        "steps": len(steps),
        "updates": int(sum(s["updates"] for s in steps)),
        "samples": steps[-1]["samples_total"] if steps else 0,
        "trained": sum(s["trained"] for s in steps),
        "trained_phantom": sum(s["trained_phantom"] for s in steps),
        "trained_dead": sum(s["trained_dead"] for s in steps),
        "accuracy_late": sum(s["accuracy"] for s in late) / max(1, len(late)),
        "completion_tokens_late": sum(s["completion_tokens_mean"] for s in late) / max(1, len(late)),
        "samples_curve": [s["samples_total"] for s in steps],
        "completion_tokens": [s["completion_tokens_mean"] for s in steps],
    }


def comparison(plain: RunResult, admission: RunResult) -> dict[str, Any]:
    """What ``comparison.json`` holds: each run's held-out curve and what it trained on."""
    return {"plain": _side(plain), "admission": _side(admission)}


#: The comparison's rows: a name, and its cell from one run's side.
_ROWS: tuple[tuple[str, Callable[[Mapping[str, Any]], str]], ...] = (
    ("held-out greedy accuracy", lambda s: " -> ".join(f"{v:.3f}" for v in s["held_out"] if v is not None)),
    ("samples generated", lambda s: f"{s['samples']:,}"),
    ("steps (optimizer updates)", lambda s: f"{s['steps']} ({s['updates']})"),
    ("groups trained on", lambda s: f"{s['trained']}"),
    ("  phantom: all right or all wrong", lambda s: f"{s['trained_phantom']}"),
    ("  dead: no reward spread", lambda s: f"{s['trained_dead']}"),
    ("sampled accuracy, last quarter", lambda s: f"{s['accuracy_late']:.3f}"),
    ("completion tokens, last quarter", lambda s: f"{s['completion_tokens_late']:.1f}"),
)


def format_comparison(compared: Mapping[str, Mapping[str, Any]], label: str) -> str:
    """The closing table: plain GRPO and the run with admission, side by side."""
    plain, admission = compared["plain"], compared["admission"]
    width = max(len(name) for name, _ in _ROWS)
    lines = [
        f"plain GRPO beside {label}, same seed and problems:",
        f"  {'':<{width}}  {'plain GRPO':<16}{label}",
    ]
    lines += [f"  {name:<{width}}  {cell(plain):<16}{cell(admission)}" for name, cell in _ROWS]
    return "\n".join(lines)


def write_comparison_plot(compared: Mapping[str, Mapping[str, Any]], path: str | Path, label: str) -> Path:
    """Held-out accuracy and completion length against generated samples, both runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cookbook.grpo_gsm8k.report import save_samples_figure

    figure, (accuracy, length) = plt.subplots(1, 2, figsize=(11, 4))
    for name, side in (("plain GRPO", compared["plain"]), (label, compared["admission"])):
        curve: Sequence[Mapping[str, float]] = side["eval_curve"]
        accuracy.plot([p["samples"] for p in curve], [p["accuracy"] for p in curve], "o-", label=name)
        length.plot(side["samples_curve"], side["completion_tokens"], label=name)
    accuracy.set(title="held-out greedy accuracy", ylabel="share correct", ylim=(0, 1))
    length.set(title="completion length (round 1)", ylabel="tokens per completion")
    return save_samples_figure(figure, (accuracy, length), path)


def finish_comparison(plain: RunResult, admission: RunResult, config: TrainConfig) -> str:
    """Write ``comparison.json`` (and ``comparison.png`` with ``plot``); return the table."""
    compared = comparison(plain, admission)
    output = Path(config.output_dir)
    (output / "comparison.json").write_text(json.dumps(compared, indent=1))
    label = f"admission ({config.admission.get('preset') or 'no preset'})"
    if config.plot:
        write_comparison_plot(compared, output / "comparison.png", label)
    return format_comparison(compared, label)
