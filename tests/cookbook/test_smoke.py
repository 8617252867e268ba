"""The recipe end to end on the embedded default: a few real GRPO steps offline, then its regression."""

from __future__ import annotations

import itertools
import json
import socket
import urllib.request
from pathlib import Path

import pytest
from grpo_gsm8k.config import parse_config
from grpo_gsm8k.report import read_jsonl
from grpo_gsm8k.train import main, train

SMALL = [
    "--steps",
    "3",
    "--batch-size",
    "4",
    "--num-generations",
    "6",
    "--budget.max_extra_groups",
    "4",
    "--budget.max_extra_groups_per_round",
    "3",
    "--budget.max_total_samples",
    "42",
    "--budget.max_total_tokens",
    "600",
]


def check_invariants(steps: list[dict[str, object]], argv: list[str]) -> None:
    config = parse_config(argv)
    budget = config.budget_config()
    target, group_size = config.batch_size, config.num_generations
    version = 0
    for step in steps:
        rejections = sum(step["rejections"].values())  # type: ignore[attr-defined]
        rounds = step["round_detail"]
        assert step["candidates"] == step["admitted"] + rejections
        assert step["candidates"] == step["generated_groups"] == sum(r["groups"] for r in rounds)  # type: ignore[attr-defined]
        assert step["admitted"] == sum(r["admitted"] for r in rounds)  # type: ignore[attr-defined]
        # every step trains on at most the target; the admitted groups beyond it are surplus
        assert step["trained"] == min(step["admitted"], target)  # type: ignore[type-var]
        assert step["surplus"] == max(0, step["admitted"] - target)  # type: ignore[operator]
        # the step's rates are StepReport.metrics(), the vocabulary every host logs
        assert step["informative_after"] == step["trained"] / target  # type: ignore[operator]
        assert step["cost"] == step["generated_groups"] / target  # type: ignore[operator]
        # no cap exceeded
        assert step["generated_groups"] <= target + budget.max_extra_groups  # type: ignore[operator]
        assert step["rounds"] - 1 <= budget.max_resample_rounds  # type: ignore[operator]
        assert all(r["groups"] <= budget.max_extra_groups_per_round for r in rounds[1:])  # type: ignore[index]
        assert step["generated_samples"] == group_size * step["generated_groups"]  # type: ignore[operator]
        assert step["generated_samples"] <= budget.max_total_samples  # type: ignore[operator]
        assert step["generated_tokens"] <= budget.max_total_tokens  # type: ignore[operator]
        # one policy snapshot per step, and the version counts every optimizer step before it
        assert 1 == len(set(step["snapshot_checksums"]))  # type: ignore[arg-type]
        assert version == step["policy_version"]
        version += int(step["updates"])  # type: ignore[call-overload]
    totals = {k: sum(s[k] for s in steps) for k in ("candidates", "admitted")}  # type: ignore[misc]
    all_rejections = sum(sum(s["rejections"].values()) for s in steps)  # type: ignore[attr-defined]
    assert totals["candidates"] == totals["admitted"] + all_rejections


def test_three_steps_train_and_keep_every_invariant(
    demo_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*demo_args, *SMALL]
    result = main(argv)
    steps = result.steps

    assert 3 == len(steps)
    assert sum(s["updates"] for s in steps) > 0
    assert result.initial_checksum != result.final_checksum  # the optimizer moved the weights
    check_invariants(steps, argv)
    # the checksum of a step after an update differs from the one before it
    for before, after in itertools.pairwise(steps):
        if before["updates"]:
            assert before["snapshot_checksums"][0] != after["snapshot_checksums"][0]
    assert steps == read_jsonl(result.output_dir / "steps.jsonl")
    assert json.loads((result.output_dir / "summary.json").read_text())["steps"] == 3
    out = capsys.readouterr().out
    assert "step    1 | reward" in out
    assert out.index("each step line reads") < out.index("step    1 | reward")  # the legend comes first
    assert "informative groups:" in out
    assert "of step time" in out


def test_retry_mode_with_the_plot_and_the_prometheus_endpoint(demo_args: list[str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [
        *demo_args,
        *SMALL,
        "--steps",
        "2",
        "--resample",
        "retry",
        "--plot",
        "--prometheus-port",
        str(port),
    ]

    result = train(parse_config(argv))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        metrics = response.read().decode()

    check_invariants(result.steps, argv)
    assert (result.output_dir / "curves.png").stat().st_size > 10_000
    judged = sum(s["candidates"] for s in result.steps)
    exported = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("group_admission_groups_total{")
    )
    assert judged == exported


@pytest.mark.slow
def test_reward_rises_on_the_embedded_default(demo_args: list[str]) -> None:
    """The sign of the advantage and the loss masking are right: the default learns."""
    result = train(parse_config([*demo_args, "--eval-problems", "64"]))  # the default's 40 steps
    rewards = [s["reward"] for s in result.steps]
    early, late = sum(rewards[:10]) / 10, sum(rewards[-10:]) / 10

    assert 40 == len(rewards)
    assert late > early + 0.04, (early, late)
    assert result.eval_accuracy["after"] > result.eval_accuracy["before"]
    assert result.summary["phantom_rejected"] > 0  # all-wrong groups with brevity spread were rejected


def test_cli_entry_point_runs_as_a_script_and_prints_plain_lines_into_a_pipe(
    demo_args: list[str], tmp_path: Path
) -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "cookbook" / "grpo_gsm8k" / "train.py"
    with_progress = [arg for arg in demo_args if arg != "--no-progress"]  # the default: a progress bar
    completed = subprocess.run(
        [sys.executable, str(script), *with_progress, *SMALL, "--steps", "2"],
        capture_output=True,  # bytes: text mode would turn a carriage return into a newline
        timeout=300,
        check=False,
    )

    stdout, stderr = completed.stdout.decode(), completed.stderr.decode()
    assert 0 == completed.returncode, stderr[-2000:]
    lines = stdout.splitlines()
    assert [line[:18] for line in lines if line.startswith("step ")] == [
        "step    1 | reward",
        "step    2 | reward",
    ]
    # Not a terminal: no progress bar (ours, transformers' or datasets'), no carriage return.
    assert "\r" not in stdout
    assert "\r" not in stderr
    assert "it/s" not in stderr
