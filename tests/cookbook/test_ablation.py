"""The evidence ablation: a two-step smoke of every arm, its bookkeeping, and its statistics."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from cookbook.grpo_gsm8k.ablation import ARMS, arm_config, main, write_held_out
from cookbook.grpo_gsm8k.ablation_report import summarise_arms
from cookbook.grpo_gsm8k.config import parse_config
from cookbook.grpo_gsm8k.data import Problem, load_problems
from cookbook.grpo_gsm8k.report import read_jsonl
from cookbook.grpo_gsm8k.rollout import Group
from cookbook.grpo_gsm8k.skipping import SkippingStream
from cookbook.grpo_gsm8k.train import trained_kinds
from group_admission import (
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    PromptHistory,
    PromptHistoryConfig,
    SessionConfig,
)

from .conftest import DEMO_CONFIG

G, TARGET, SAMPLES = 4, 4, 32  # plain GRPO: two steps of 4 groups x 4 samples
RUN_KEYS = {
    "arm", "seed", "steps", "samples", "tokens", "groups_generated", "groups_trained", "trained_dead",
    "trained_phantom", "trained_phantom_wrong", "prompts_skipped", "rejected", "surplus", "updates",
    "exhausted_steps", "reward_late", "train_accuracy_late", "completion_tokens_late",
    "reward_curve", "eval_curve", "accuracy_before", "accuracy_after",
    "accuracy_curve_mean", "wall_s", "cpu_s",
}  # fmt: skip


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory, demo_assets: tuple[Path, Path]) -> dict[str, Any]:
    """Every arm, one seed, 32 generated samples each, in this process."""
    data, model = demo_assets
    out = tmp_path_factory.mktemp("ablation")
    report = main(
        [
            *("--config", str(DEMO_CONFIG), "--model", str(model), "--dataset", str(data)),
            *("--seeds", "1", "--samples", str(SAMPLES), "--eval-every", "16", "--held-out", "8"),
            *("--workers", "1", "--pool", "16", "--out", str(out)),
            *("--batch-size", str(TARGET), "--num-generations", str(G), "--micro-batch-size", "16"),
            *("--admission.budget.max_extra_groups", "4", "--admission.budget.max_total_samples", "32"),
        ]
    )
    return {"report": report, "out": out}


def steps_of(smoke: dict[str, Any], arm: str) -> list[dict[str, Any]]:
    return read_jsonl(smoke["out"] / "runs" / arm / "seed0" / "steps.jsonl")


def run_of(smoke: dict[str, Any], arm: str) -> dict[str, Any]:
    return next(r for r in smoke["report"]["runs"] if r["arm"] == arm)


def test_the_report_has_every_arm_and_its_files(smoke: dict[str, Any]) -> None:
    report, out = smoke["report"], smoke["out"]

    assert [arm.name for arm in ARMS] == [a["arm"] for a in report["arms"]]
    assert {"setup", "runs", "arms", "timing"} == set(report)
    assert all(RUN_KEYS == set(run) for run in report["runs"])
    assert report == json.loads((out / "ablation.json").read_text())
    assert "| plain GRPO (every group) |" in (out / "ablation.md").read_text()
    assert (out / "ablation.png").stat().st_size > 10_000
    assert report["timing"]["cpu_s"] > 0


@pytest.mark.parametrize("arm", [arm.name for arm in ARMS])
def test_counts_conserve_and_the_x_axis_charges_every_round(smoke: dict[str, Any], arm: str) -> None:
    run, steps = run_of(smoke, arm), steps_of(smoke, arm)
    totals = [s["samples_total"] for s in steps]

    assert run["groups_generated"] == run["groups_trained"] + run["surplus"] + run["rejected"]
    assert run["samples"] == G * run["groups_generated"] == totals[-1]
    # every round's samples count, resampling rounds included
    assert totals == [sum(s["generated_samples"] for s in steps[: i + 1]) for i in range(len(steps))]
    assert all(s["generated_samples"] == G * sum(r["groups"] for r in s["round_detail"]) for s in steps)
    # the run stops at the first step that reaches the budget
    assert totals[-1] >= SAMPLES > (totals[-2] if len(totals) > 1 else 0)
    # evaluated at the start and at each step that passed a multiple of --eval-every (16)
    crossed = [t for before, t in zip([0, *totals[:-1]], totals, strict=True) if t // 16 > before // 16]
    assert [0, *crossed] == [p["samples"] for p in run["eval_curve"]]


def test_plain_grpo_trains_on_every_group(smoke: dict[str, Any]) -> None:
    run, steps = run_of(smoke, "grpo"), steps_of(smoke, "grpo")

    assert 0 == run["rejected"]
    assert run["groups_trained"] == run["groups_generated"] == 2 * TARGET
    assert SAMPLES == run["samples"]
    assert all(1 == s["rounds"] for s in steps)


def test_zero_std_drops_exactly_the_groups_without_total_spread(smoke: dict[str, Any]) -> None:
    steps = steps_of(smoke, "zero_std")

    assert all(0 == s["trained_dead"] for s in steps)  # every group without spread was dropped
    assert all(0 == s["phantom_rejected"] for s in steps)  # no group with spread was
    assert all(1 == s["rounds"] for s in steps)
    assert all(set(s["rejections"]) >= {"exact_dead"} for s in steps)
    assert all(sum(s["rejections"].values()) == s["rejections"]["exact_dead"] for s in steps)


@pytest.mark.parametrize("arm", ["gate", "gate_resample", "gate_resample_skip"])
def test_admission_arms_never_train_on_a_rejected_group(smoke: dict[str, Any], arm: str) -> None:
    steps = steps_of(smoke, arm)

    assert all(0 == s["trained_dead"] == s["trained_phantom"] for s in steps)
    assert all(s["trained"] <= s["admitted"] for s in steps)


def test_only_the_resampling_arms_resample(smoke: dict[str, Any]) -> None:
    assert all(1 == s["rounds"] for s in steps_of(smoke, "gate"))
    resampled = steps_of(smoke, "gate_resample")

    assert any(s["rounds"] > 1 for s in resampled)
    assert len(resampled) <= len(steps_of(smoke, "grpo"))  # charged for it: fewer steps


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--arms", "grpo,best"], "unknown arm(s) ['best']"),
        (["--samples", "100", "--eval-every", "64"], "--samples must be a multiple of --eval-every"),
    ],
)
def test_bad_flags_stop_with_the_reason(flags: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=re.escape(message)):
        main(flags)


def test_the_history_section_is_checked_by_name() -> None:
    history = parse_config(["--admission.history.skip_below", "0.3", "--num-generations", "8"])
    built = history.session_config().prompt_history(8)

    assert built is not None
    assert (0.3, 8) == (built.config.skip_below, built.config.group_size)
    with pytest.raises(ValueError, match="skip_below"):
        parse_config(["--admission.history.skip_below", "2"])


def test_every_arm_is_a_session_config_and_only_the_last_skips() -> None:
    base = parse_config(["--config", str(DEMO_CONFIG)])
    built = {arm.name: arm_config(base, arm, 0, Path()).session_config() for arm in ARMS}

    assert [name for name, config in built.items() if config.history is not None] == ["gate_resample_skip"]
    assert built["grpo"].policy == GroupAdmissionConfig()  # every gate off
    assert built["zero_std"] == SessionConfig.preset("zero_std")
    assert all(built[name].policy.gate_on == ("accuracy",) for name in ("gate", "gate_resample"))
    assert 0 == built["gate"].budget.max_resample_rounds < built["gate_resample"].budget.max_resample_rounds
    assert built["gate_resample"].budget == built["gate_resample_skip"].budget
    assert 2 * base.batch_size == built["gate_resample"].budget.max_extra_groups


def test_the_held_out_problems_are_distinct_and_unseen(
    demo_assets: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cookbook.grpo_gsm8k.offline.problems as problems

    data, _ = demo_assets
    training = [p.question for p in load_problems(str(data), "main", "train")]

    path = write_held_out(tmp_path / "held-out.jsonl", training, 500)
    held_out = load_problems(str(path), split="test")

    assert 500 == len({p.question for p in held_out})
    assert not {p.question for p in held_out} & set(training)
    seen_only = [{"question": question, "answer": "#### 1"} for question in training[:50]]
    monkeypatch.setattr(problems, "generate_problems", lambda *_args, **_kwargs: seen_only)
    with pytest.raises(ValueError, match=r"'count' must be <= 0 unseen problems"):
        write_held_out(tmp_path / "too-many.jsonl", training, 10)


def group(accuracy: list[float], brevity: list[float]) -> Group:
    problem = Problem(question="q", answer="#### 1", gold=1.0)
    texts = ["x"] * len(accuracy)
    g = Group(problem, [1], [[2]] * len(accuracy), texts, [False] * len(accuracy))
    g.rewards = {"accuracy": list(accuracy), "brevity": list(brevity)}
    return g


def test_trained_kinds_tell_dead_from_phantom() -> None:
    groups = [
        group([1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5]),  # informative
        group([0, 0, 0, 0], [0.0, 0.0, 0.0, 0.0]),  # dead
        group([1, 1, 1, 1], [0.5, 0.5, 0.5, 0.5]),  # dead
        group([0, 0, 0, 0], [0.5, 0.0, 0.5, 0.0]),  # phantom, all wrong
        group([1, 1, 1, 1], [0.5, 0.0, 0.5, 0.0]),  # phantom, all right
    ]

    assert {"trained_dead": 2, "trained_phantom": 2, "trained_phantom_wrong": 1} == trained_kinds(groups)


def test_the_skipping_stream_skips_prompts_seen_dead_and_never_stalls() -> None:
    problems = [Problem(question=f"q{i}", answer="#### 1", gold=1.0) for i in range(4)]
    history = PromptHistory(
        PromptHistoryConfig(group_size=4, skip_below=0.5, exploration=0.0, prior=(1.0, 1.0))
    )
    policy = GroupAdmissionPolicy({"min_reward_std": 1e-6})
    for step in range(3):  # q0 and q1 were all-right three times: informative probability 0.24
        history.observe_batch(["q0", "q1"], policy.evaluate_batch([[1.0] * 4] * 2), step=step)
    stream = SkippingStream(problems, seed=0, history=history)
    stream.step = 3

    taken = stream.take(4)

    assert {"q2", "q3"} == {p.question for p in taken}
    assert stream.skipped >= 4  # two epochs' worth of q0 and q1
    everything_dead = SkippingStream(problems[:2], seed=0, history=history)
    everything_dead.step = 3
    assert 2 == len(everything_dead.take(2))  # hands out what comes rather than loop


def test_paired_gains_and_their_interval() -> None:
    runs = [
        {"arm": arm, "seed": seed, "accuracy_after": acc, "accuracy_before": 0.3, "reward_late": 0.5,
         "accuracy_curve_mean": acc, "train_accuracy_late": 0.4, "completion_tokens_late": 3.0,
         "surplus": 0, "prompts_skipped": 0,
         "groups_trained": 10, "trained_dead": 2, "trained_phantom": 1, "trained_phantom_wrong": 1,
         "samples": 64, "tokens": 1, "steps": 2, "updates": 2, "wall_s": 1, "cpu_s": 1,
         "eval_curve": [{"samples": 0, "accuracy": 0.3}, {"samples": 64, "accuracy": acc}]}
        for arm, seed, acc in [("grpo", 0, 0.5), ("grpo", 1, 0.6), ("gate", 0, 0.6), ("gate", 1, 0.8)]
    ]  # fmt: skip

    grpo, gate = summarise_arms(runs, ["grpo", "gate"], every=64)

    assert grpo["gain_over_grpo"] is None
    gain = gate["gain_over_grpo"]
    assert math.isclose(gain["mean"], 0.15)
    half = 12.706 * gain["std"] / math.sqrt(2)
    assert math.isclose(gain["ci95_high"] - gain["mean"], half)
    assert math.isclose(0.2, grpo["dead_share"]["mean"])
    assert [0, 64] == [p["checkpoint"] for p in gate["curve"]]
    assert math.isclose(0.7, gate["curve"][1]["accuracy_mean"])


def test_the_earlier_setup_note_quotes_the_published_results() -> None:
    """docs/evidence.md's note on this ablation quotes cookbook/grpo_gsm8k/results/ablation_tiny.json."""
    root = Path(__file__).resolve().parents[2]
    report = json.loads((root / "cookbook" / "grpo_gsm8k" / "results" / "ablation_tiny.json").read_text())
    page = (root / "docs" / "evidence.md").read_text(encoding="utf-8")
    note = page[page.index("## Earlier setup") :]
    arms = {arm["arm"]: arm for arm in report["arms"]}
    finals = [arm["accuracy_after"]["mean"] for arm in report["arms"]]
    gain = arms["gate_resample"]["gain_over_grpo"]

    assert f"{min(finals):.3f}-{max(finals):.3f}" in note
    assert f"from {arms['grpo']['accuracy_before']:.3f}" in note
    assert f"{sum(r['accuracy_after'] == 0.294 for r in report['runs'])} of the 25 runs" in note
    assert f"+{gain['mean']:.3f}, 95% CI {gain['ci95_low']:.3f} to +{gain['ci95_high']:.3f}" in note
    assert f"{100 * arms['grpo']['dead_share']['mean']:.0f}% dead" in note
    assert (root / "docs" / "evidence" / "ablation_tiny.png").stat().st_size > 10_000
