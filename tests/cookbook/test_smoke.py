"""The recipe end to end on the embedded default: a few real GRPO steps offline, then its regression."""

from __future__ import annotations

import itertools
import json
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from cookbook.grpo_gsm8k.config import PLAIN_GRPO, parse_config
from cookbook.grpo_gsm8k.report import read_jsonl
from cookbook.grpo_gsm8k.train import main, train
from group_admission import loss_scale

from .conftest import DEMO_CONFIG, REPO, pinned_environment

#: The training script, run by name from the repository root as the docs run it.
TRAIN = ["-m", "cookbook.grpo_gsm8k.train"]

SMALL = [
    "--steps",
    "3",
    "--batch-size",
    "4",
    "--num-generations",
    "6",
    "--admission.budget.max_extra_groups",
    "4",
    "--admission.budget.max_extra_groups_per_round",
    "3",
    "--admission.budget.max_total_samples",
    "42",
    "--admission.budget.max_total_tokens",
    "600",
]


def check_invariants(steps: list[dict[str, object]], argv: list[str]) -> None:
    config = parse_config(argv)
    budget = config.session_config().budget
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
        # the loss was scaled as the session's mode says, from the step's own counts
        mode = config.session_config().loss_scale
        trained, generated = step["trained"], step["generated_groups"]
        wanted = loss_scale(mode, trained_groups=trained, target_groups=target, generated_groups=generated)  # type: ignore[arg-type]
        assert step["loss_scale"] == pytest.approx(wanted)
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


def test_plain_grpo_trains_beside_on_the_same_seed_and_every_group(
    demo_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*demo_args, *SMALL, "--steps", "4", "--max-samples", "96", "--baseline", "plain"]
    result = main(argv)
    out = capsys.readouterr().out
    plain_dir = result.output_dir / "plain"
    plain = read_jsonl(plain_dir / "steps.jsonl")
    compared = json.loads((result.output_dir / "comparison.json").read_text())

    check_invariants(result.steps, argv)
    assert all(1 == s["rounds"] and s["trained"] == s["target"] == s["generated_groups"] for s in plain)
    assert all(0 == sum(s["rejections"].values()) for s in plain)  # every group, phantom or dead
    assert all(1.0 == s["loss_scale"] for s in plain)
    # Same seed, same problems: the first round of the first step is the same prompts.
    assert plain[0]["round_detail"][0]["groups"] == result.steps[0]["round_detail"][0]["groups"]
    written = json.loads((plain_dir / "config.json").read_text())
    assert (written["seed"], written["admission"]) == (parse_config(argv).seed, dict(PLAIN_GRPO))
    assert compared["plain"]["samples"] == plain[-1]["samples_total"] >= 96
    assert compared["admission"]["samples"] == result.steps[-1]["samples_total"] >= 96
    assert "plain GRPO beside admission (recommended), same seed and problems:" in out
    assert "png" not in out  # --no-plot: no plot is named


def _documented_summary() -> list[str]:
    """The closing lines docs/cookbook.md shows for the main job, without the time line."""
    page = (REPO / "docs" / "cookbook.md").read_text(encoding="utf-8")
    start = page.index("```text\nreward (first -> last quarter)") + len("```text\n")
    block = page[start : page.index("```", start)]
    return [line.rstrip() for line in block.splitlines() if not line.startswith("time:")]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_main_job_prints_the_figures_the_docs_show(
    demo_assets: tuple[Path, Path], tmp_path: Path
) -> None:
    """
    Issue 28: the documented figures reproduce where they are produced: the main job as
    run_demo.sh runs it (pinned code paths, both runs), on assets built the same way.
    """
    data, model = demo_assets
    argv = ["--config", str(DEMO_CONFIG), "--model", str(model), "--dataset", str(data)]
    done = subprocess.run(
        [sys.executable, *TRAIN, *argv, "--output-dir", str(tmp_path / "run"), "--no-plot"],
        cwd=REPO,
        env=pinned_environment(),
        capture_output=True,
        text=True,
        timeout=590,
        check=False,
    )
    assert 0 == done.returncode, done.stderr[-3000:]
    printed = [line.rstrip() for line in done.stdout.splitlines() if not line.startswith("time:")]
    shown = _documented_summary()

    start = printed.index(shown[0])
    assert shown == printed[start : start + len(shown)]
    compared = json.loads((tmp_path / "run" / "comparison.json").read_text())
    plain, admission = compared["plain"]["held_out"], compared["admission"]["held_out"]
    assert plain[0] == admission[0]  # one policy, one held-out set
    assert plain[1] < plain[0] < admission[1]  # the phantom collapse, and what admission buys
    assert compared["plain"]["trained_phantom"] > 0 == compared["admission"]["trained_phantom"]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for side in (plain, admission):
        assert f"{side[0]:.2f} to {side[1]:.2f}" in readme


def test_cli_entry_point_runs_by_name_and_prints_plain_lines_into_a_pipe(
    demo_args: list[str], tmp_path: Path
) -> None:
    import subprocess
    import sys

    with_progress = [arg for arg in demo_args if arg != "--no-progress"]  # the default: a progress bar
    completed = subprocess.run(
        [sys.executable, *TRAIN, *with_progress, *SMALL, "--steps", "2"],
        cwd=REPO,
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
