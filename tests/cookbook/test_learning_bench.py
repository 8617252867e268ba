"""The learning bench: its quick smoke, its bookkeeping, partial rollout, skipping, determinism."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cookbook.learning_bench.arms import ARM_NAMES, ARMS, PROFILES, profile_for  # noqa: E402
from cookbook.learning_bench.learning_bench import main  # noqa: E402
from cookbook.learning_bench.model import (  # noqa: E402
    Policy,
    TinyLM,
    build_policy,
    greedy_accuracy,
    policy_loss,
    warm_start,
)
from cookbook.learning_bench.report import tokens_to_reach  # noqa: E402
from cookbook.learning_bench.rollout import decode, new_group  # noqa: E402
from cookbook.learning_bench.runner import Run, make_run, run_arm  # noqa: E402
from cookbook.learning_bench.task import DIRECT, DOT, PAD, SEMI, STEP, TASKS, make_split, prompt_tokens, score  # noqa: E402
from cookbook.stats import paired  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]
QUICK = PROFILES["quick"]
ARM = {arm.name: arm for arm in ARMS}


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The quick bench as CI runs it: every arm, both tasks, one seed, in this process."""
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("learning_bench")
    report = main(["--quick", "--out", str(out)])
    return {"report": report, "out": out}


@pytest.fixture(scope="module")
def warm() -> dict[str, Any]:
    """A warm start of the conflict task (the quick profile's) and its split."""
    torch.set_num_threads(1)
    split = make_split(QUICK.held_out, QUICK.pool, QUICK.warm)
    policy = build_policy(QUICK.size, lr=QUICK.warm_lr)
    task = TASKS["conflict"]
    warm_start(policy, task, split.warm, split.validation, target=0.4, max_steps=QUICK.warm_max_steps, seed=0)
    return {
        "split": split,
        "task": task,
        "weights": {k: v.clone() for k, v in policy.model.state_dict().items()},
    }


# -- the task -------------------------------------------------------------------------
def test_scores_read_the_answer_before_the_end_mark_and_pay_brevity_only_for_answers() -> None:
    task = TASKS["conflict"]
    problem = np.array([3 * 289 + 5 * 17 + 2])  # (3 + 5) * 2 = 16
    rows = np.array(
        [
            [STEP, 8, SEMI, 16, DOT, PAD, PAD],  # right, with the step: brevity 0.5
            [DIRECT, 16, DOT, PAD, PAD, PAD, PAD],  # right, direct: brevity 1
            [DIRECT, 15, DOT, PAD, PAD, PAD, PAD],  # wrong, direct: brevity 1 all the same
            [DOT, PAD, PAD, PAD, PAD, PAD, PAD],  # empty: no answer, no brevity
            [DIRECT, 16, 16, 16, 16, 16, 16],  # no end mark: no answer
        ]
    )
    scores = score(task, np.repeat(problem, len(rows)), rows)

    assert scores.outcome.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert scores.shaping.tolist() == pytest.approx([0.25, 0.5, 0.5, 0.0, 0.0])
    assert scores.lengths.tolist() == [5, 3, 3, 1, 7]
    assert scores.step.tolist() == [True, False, False, False, False]


def test_the_split_is_disjoint_and_the_neutral_prompt_shows_the_step() -> None:
    split = make_split()
    parts = [set(split.held_out), set(split.pool), set(split.warm), set(split.validation)]

    assert [len(p) for p in parts] == [1000, 512, 2000, 500]
    assert sum(len(p) for p in parts) == len(set().union(*parts))
    problem = np.array([3 * 289 + 5 * 17 + 2])
    assert prompt_tokens(TASKS["neutral"], problem)[0, -2] == 8  # s = (3 + 5) mod 17
    assert prompt_tokens(TASKS["conflict"], problem).shape == (1, 7)
    with pytest.raises(ValueError, match="must be <= 4913"):
        make_split(held_out=4000, pool=1000)


# -- the quick bench ------------------------------------------------------------------
@pytest.mark.timeout(900)  # the fixture runs the quick bench first: about 2 minutes on 2 idle cores
def test_the_quick_bench_writes_the_issue_shape_for_every_arm_and_task(quick: dict[str, Any]) -> None:
    out: Path = quick["out"]
    report = json.loads((out / "learning_bench.json").read_text())

    assert (out / "learning_bench.png").stat().st_size > 0
    assert "| outcome_only |" in (out / "learning_bench.md").read_text()
    assert set(report) >= {"setup", "tasks", "timing"}
    assert set(report["tasks"]) == {"neutral", "conflict"}
    for task in report["tasks"].values():
        assert isinstance(task["start_accuracy"], float)
        assert task["heldout_size"] == QUICK.held_out
        assert list(task["arms"]) == list(ARM_NAMES)
        for arm in task["arms"].values():
            assert arm["seeds"] == [0]
            assert all(isinstance(v, float) for v in arm["final_accuracy"])
            assert all(isinstance(v, int) for v in arm["generated_tokens"])
            assert all(v is None or isinstance(v, int) for v in arm["tokens_to_plain_final"])
            assert all(v is None or isinstance(v, int) for v in arm["tokens_to_90pct_plain_gain"])
        assert report["setup"]["limit_arm"] == "oracle_skip"
        assert task["efficiency_reference"] in ("plain", "outcome_only")
        table = task["warm_table"]["by_format"]
        assert sum(row["completions"] for row in table.values()) == task["heldout_size"] * 8


def test_a_report_summarised_again_is_the_same_report(quick: dict[str, Any]) -> None:
    from cookbook.learning_bench.learning_bench import resummarise

    report = json.loads((quick["out"] / "learning_bench.json").read_text())
    again = resummarise([json.loads((quick["out"] / "learning_bench.json").read_text())])

    assert again == report


def _only(report: dict[str, Any], arms: set[str]) -> dict[str, Any]:
    """A copy of ``report`` that ran only ``arms``."""
    part = json.loads(json.dumps(report))
    part["setup"]["arms"] = [a for a in part["setup"]["arms"] if a["name"] in arms]
    for task in part["tasks"].values():
        task["arms"] = {name: s for name, s in task["arms"].items() if name in arms}
    return part


def test_reports_of_one_profile_summarised_together_pair_their_runs(quick: dict[str, Any]) -> None:
    from cookbook.learning_bench.learning_bench import resummarise

    report = json.loads((quick["out"] / "learning_bench.json").read_text())
    later = {"oracle_skip", "recommended"}
    first, second = _only(report, set(ARM_NAMES) - later), _only(report, later)
    together = resummarise([first, second])

    assert together["tasks"] == report["tasks"]  # pairs, ratios to the oracle and to plain, as if run at once
    assert {a["name"] for a in together["setup"]["arms"]} == set(ARM_NAMES)
    with pytest.raises(SystemExit, match="in two reports"):
        resummarise([first, _only(report, {"plain"})])
    other = json.loads(json.dumps(second))
    other["setup"]["profile"]["lr"] = 1.0
    with pytest.raises(SystemExit, match="different profiles"):
        resummarise([first, other])


def _runs(quick: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (task, arm, {"counts": counts, "tokens": tokens})
        for task, summary in quick["report"]["tasks"].items()
        for arm, s in summary["arms"].items()
        for counts, tokens in zip(s["counts"], s["generated_tokens"], strict=True)
    ]


def test_every_run_stops_at_the_token_budget_and_its_counts_conserve(quick: dict[str, Any]) -> None:
    most_per_step = 16 * QUICK.members * TASKS["conflict"].max_new_tokens  # 16 groups at most, full length
    for _task, arm, run in _runs(quick):
        counts = run["counts"]
        budget = round(QUICK.token_budget * ARM[arm].budget_share)
        assert budget <= run["tokens"] < budget + most_per_step, arm
        assert counts["judged"] == counts["session_generated_groups"], arm
        assert counts["trained"] == counts["session_trained_groups"], arm
        assert counts["surplus"] == counts["session_surplus_groups"], arm
        assert counts["judged"] == counts["trained"] + counts["surplus"] + counts["rejected"], arm
        assert counts["trained"] <= counts["judged"], arm
        assert counts["updates"] <= counts["steps"], arm
        assert counts["trained_dead"] + counts["trained_phantom"] <= counts["trained"], arm


def test_arms_are_charged_for_every_token_they_decode(quick: dict[str, Any]) -> None:
    for _task, arm, run in _runs(quick):
        counts = run["counts"]
        # What the session was told, plus what resumed groups decoded before the step that
        # finished them, plus what is still running at the end, is every token decoded.
        charged = counts["session_generated_tokens"] + counts["resumed_prior_tokens"]
        assert charged + counts["tokens_carried_at_end"] == counts["tokens"], arm
        # The session itself counts every decoded token: a carried group's in the step that decoded them.
        assert counts["session_decoded_tokens"] == counts["tokens"], arm
        if not ARM[arm].streaming:
            assert counts["resumed_prior_tokens"] == counts["tokens_carried_at_end"] == 0, arm


def test_the_arms_differ_where_they_should(quick: dict[str, Any]) -> None:
    for summary in quick["report"]["tasks"].values():
        arms = summary["arms"]
        assert arms["outcome_only"]["phantom_share"] == 0.0
        assert arms["plain"]["phantom_share"] > 0
        assert arms["plain"]["dead_share"] > 0
        assert arms["zero_std_total"]["dead_share"] == 0.0
        assert arms["zero_std_total"]["phantom_share"] > 0
        gated_arms = [
            arm.name for arm in ARMS if arm.resolved().admission and "gate_on" in arm.resolved().admission
        ]
        assert {"gated", "gated_target", "gated_sqrt", "recommended", "oracle_skip"} <= set(gated_arms)
        for gated in gated_arms:
            assert arms[gated]["dead_share"] == arms[gated]["phantom_share"] == 0.0
        # The oracle pays only for groups with outcome spread: every group it was charged for trains.
        oracle = arms["oracle_skip"]["counts"][0]
        assert oracle["oracle_skipped"] > 0
        assert oracle["rejected"] == 0
        # The loss scale each arm trains with is the one its session reports.
        kept, target = arms["gated"]["counts"][0], arms["gated_target"]["counts"][0]
        assert kept["loss_scale_sum"] == kept["updates"]  # "kept": 1 every step
        assert target["loss_scale_sum"] == pytest.approx(target["trained"] / QUICK.target_groups)
        assert target["loss_scale_sum"] < target["updates"]


# -- partial rollout ------------------------------------------------------------------
def _logp_under(weights: dict[str, Any], prompt: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    policy = build_policy(QUICK.size, lr=1e-4)
    policy.model.load_state_dict(weights)
    width = len(prompt)
    full = torch.as_tensor(np.concatenate([np.repeat(prompt[None], len(tokens), 0), tokens], axis=1))
    with torch.no_grad():
        logits = policy.logits(full[:, :-1])[:, width - 1 :]
    return torch.log_softmax(logits, -1).gather(2, full[:, width:, None]).squeeze(2).numpy()


def test_resumed_groups_are_finished_by_the_updated_policy_and_keep_each_tokens_log_probability(
    warm: dict[str, Any],
) -> None:
    run = make_run(ARM["streaming_partial"], warm["task"], 0, QUICK, warm["split"], warm["weights"])
    trained: list[Any] = []
    original = Run.train

    def capture(self: Run, groups: list[Any], scale: float, padding: list[Any] | None = None) -> None:
        trained.extend((g, {k: v.clone() for k, v in self.policy.model.state_dict().items()}) for g in groups)
        original(self, groups, scale, padding)

    snapshots = {0: {k: v.clone() for k, v in run.policy.model.state_dict().items()}}
    Run.train = capture  # type: ignore[method-assign]
    try:
        for step in range(8):
            run.step(step)
            snapshots[run.policy.version] = {k: v.clone() for k, v in run.policy.model.state_dict().items()}
    finally:
        Run.train = original  # type: ignore[method-assign]
    resumed = [(g, now) for g, now in trained if g.resumed]

    assert run.counts.trained_resumed == len(resumed) > 0
    assert run.counts.stale_trained_tokens > 0
    for group, _ in resumed:
        assert len(group.versions) >= 2  # decoded by more than one policy
        for member in range(len(group.tokens)):
            versions = group.version[member, : group.progress[member]]
            assert (np.diff(versions) >= 0).all()  # later tokens by the same or a newer policy
        for version in group.versions:
            where = group.version == version
            expected = _logp_under(snapshots[version], group.prompt, group.tokens)
            np.testing.assert_allclose(group.logp[where], expected[where], atol=1e-4)


def test_the_loss_of_fresh_tokens_is_on_policy_gradient() -> None:
    """With the decoding policy's own log-probabilities every ratio is 1: plain GRPO."""
    policy = build_policy(QUICK.size, lr=1e-4, seed=3)
    task = TASKS["conflict"]
    group = new_group(task, 1234, prompt_tokens(task, np.array([1234]))[0], members=8, seed=0, key=(1,))
    decode(policy, [group], 0)
    advantage = np.linspace(-1, 1, 8)
    prompts = np.repeat(group.prompt[None], 8, 0)
    loss = policy_loss(policy, prompts, group.tokens, group.logp, group.progress, advantage)
    expected = (
        -(advantage[:, None] * (np.arange(7)[None] < group.progress[:, None])).sum() / group.progress.sum()
    )

    assert float(loss.detach()) == pytest.approx(expected, abs=1e-5)


def test_the_padded_diagnostic_trains_the_gated_groups_at_another_loss_scale(warm: dict[str, Any]) -> None:
    from cookbook.learning_bench.arms import KNOWN_ARMS

    runs = {
        name: make_run(KNOWN_ARMS[name], warm["task"], 0, QUICK, warm["split"], warm["weights"])
        for name in ("gated", "gated_padded")
    }
    for run in runs.values():
        run.step(0)
    gated, padded = runs["gated"], runs["gated_padded"]

    assert gated.counts == padded.counts  # the same groups judged, kept and trained
    assert gated.counts.rejected > 0
    assert padded.rejected == []  # used by the step's update, then dropped
    weights = [
        (a - b).abs().max().item()
        for a, b in zip(gated.policy.model.parameters(), padded.policy.model.parameters(), strict=True)
    ]
    assert max(weights) > 0


# -- skipping and common random numbers -------------------------------------------------
def test_a_group_is_the_same_whichever_batch_decodes_it(warm: dict[str, Any]) -> None:
    policy = build_policy(QUICK.size, lr=1e-4)
    policy.model.load_state_dict(warm["weights"])
    task = warm["task"]
    ids = warm["split"].pool[:6]
    prompts = prompt_tokens(task, ids)

    def groups() -> list[Any]:
        return [
            new_group(task, int(p), prompts[i], members=8, seed=5, key=(0, 2, int(p)))
            for i, p in enumerate(ids)
        ]

    together, alone = groups(), groups()[3:4]
    decode(policy, together, 0)
    decode(policy, alone, 0)

    np.testing.assert_array_equal(together[3].tokens, alone[0].tokens)


@pytest.mark.parametrize("arm", ["gated_resample_history", "greso"])
def test_skipped_prompts_get_an_uncharged_counterfactual_group(warm: dict[str, Any], arm: str) -> None:
    profile = attrs.evolve(QUICK, pool=12, token_budget=6_000, evaluations=1)
    split = attrs.evolve(warm["split"], pool=warm["split"].pool[:12])
    record = run_arm(ARM[arm], warm["task"], 0, profile, split, warm["weights"])
    counts = record["counts"]

    assert counts["skipped"] > 0  # a pool of 12 is revisited often enough to skip
    assert 0 <= counts["skipped_informative"] <= counts["skipped"]
    assert counts["session_generated_tokens"] == counts["tokens"]  # counterfactuals are not charged


# -- determinism ------------------------------------------------------------------------
@pytest.mark.parametrize("arm", ["streaming_partial", "gated_resample_history", "plain"])
def test_a_run_is_deterministic_given_its_seed(warm: dict[str, Any], arm: str) -> None:
    profile = attrs.evolve(QUICK, token_budget=2_000, evaluations=1)
    first, second, other = (
        run_arm(ARM[arm], warm["task"], seed, profile, warm["split"], warm["weights"]) for seed in (4, 4, 5)
    )
    for record in (first, second, other):
        del record["wall_s"], record["cpu_s"]

    assert first == second
    assert first["counts"] != other["counts"] or first["curve"] != other["curve"]


# -- the report -------------------------------------------------------------------------
def test_the_paired_ratio_is_geometric_and_counts_runs_that_never_reached_at_their_bound() -> None:
    from cookbook.learning_bench.report import ratio

    same = ratio([50, 100, 200], [100, 200, 400], [1000, 1000, 1000])
    assert same["ratio"] == pytest.approx(0.5)
    assert same["ci95_low"] == pytest.approx(0.5)
    assert same["censored"] == 0
    censored = ratio([None, 100], [100, 100], [300, 300])
    assert censored["censored"] == 1
    assert censored["ratio"] == pytest.approx(np.sqrt(3.0))  # the unreached run at 300 / 100, not dropped
    assert ratio([10], [None], [100])["ratio"] is None  # no reference: no ratio


def test_the_recommended_arm_is_the_preset_the_readme_recommends() -> None:
    from group_admission import SessionConfig

    resolved = ARM["recommended"].resolved()
    preset = SessionConfig.preset("recommended", policy={"gate_on": ["outcome"]}).to_dict()
    assert resolved.admission == preset["policy"]
    assert resolved.budget == preset["budget"]
    assert resolved.history == preset["history"]
    assert resolved.loss_scale == preset["loss_scale"]
    assert ARM["recommended"].to_dict()["preset"] == "recommended"


def test_tokens_to_target_interpolates_between_evaluations() -> None:
    curve = [
        {"tokens": 0, "accuracy": 0.2},
        {"tokens": 100, "accuracy": 0.4},
        {"tokens": 200, "accuracy": 0.6},
    ]

    assert tokens_to_reach(curve, 0.5) == 150
    assert tokens_to_reach(curve, 0.1) == 0
    assert tokens_to_reach(curve, 0.7) is None


def test_the_decision_rule_reads_the_interval() -> None:
    from cookbook.learning_bench.report import verdict

    assert verdict(paired([0.02, 0.03, 0.025])) == "higher"
    assert verdict(paired([-0.02, -0.03, -0.025])) == "lower"
    assert verdict(paired([-0.02, 0.03, 0.0])) == "no measurable difference"
    assert verdict(paired([0.5])) == "no measurable difference"  # one seed decides nothing


# -- the GPU profile, on the CPU ------------------------------------------------------------
def test_the_cuda_profile_is_a_larger_model_with_the_per_token_arms_on_three_seeds() -> None:
    cuda, cpu = profile_for("cuda"), profile_for("cpu")

    assert cuda.device == "cuda"
    assert cuda.workers >= 1
    assert {"plain", "recommended", "oracle_skip"} <= set(cuda.arms)
    assert cuda.seeds == cuda.long_seeds == 3
    assert set(cuda.arms) <= set(ARM_NAMES)
    assert cuda.size.parameters() > 10 * cpu.size.parameters()
    assert sum(p.numel() for p in TinyLM(cuda.size).parameters()) == cuda.size.parameters()
    assert profile_for("cuda", quick=True).device == "cuda"
    with pytest.raises(ValueError, match="'device' must be 'cpu' or 'cuda'"):
        profile_for("tpu")


def test_the_cuda_model_trains_under_bf16_autocast_on_the_cpu(warm: dict[str, Any]) -> None:
    """The device path's precision logic (bf16 autocast, fp32 log-probabilities), exercised on the CPU."""
    cuda = profile_for("cuda")
    policy = build_policy(cuda.size, lr=cuda.lr, seed=0)
    policy = Policy(policy.model, policy.optimizer, policy.device, autocast=torch.bfloat16)
    task = warm["task"]
    group = new_group(task, 77, prompt_tokens(task, np.array([77]))[0], members=8, seed=0, key=(2,))
    decode(policy, [group], 0)
    loss = policy_loss(
        policy,
        np.repeat(group.prompt[None], 8, 0),
        group.tokens,
        group.logp,
        group.progress,
        np.linspace(-1, 1, 8),
    )
    policy.update(loss)

    assert group.logp.dtype == np.float32
    assert np.isfinite(group.logp).all()
    assert bool(torch.isfinite(loss.detach()))
    assert policy.version == 1
    assert 0.0 <= greedy_accuracy(policy, task, warm["split"].held_out[:50])["accuracy"] <= 1.0
    assert build_policy(QUICK.size, lr=1e-4).autocast is None  # fp32 on the CPU


def test_the_command_refuses_bad_flags() -> None:
    with pytest.raises(SystemExit, match="unknown"):
        main(["--arms", "plain,nope"])
    with pytest.raises(SystemExit, match="--seeds"):
        main(["--seeds", "x"])
    with pytest.raises(SystemExit, match="--tokens"):
        main(["--tokens", "0"])
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="no CUDA device"):
            main(["--device", "cuda"])


# -- the published results ------------------------------------------------------------------
def test_the_published_tables_are_the_published_results() -> None:
    """docs/evidence.md shows the tables of the published report, row for row, as this code summarises it."""
    from cookbook.learning_bench.learning_bench import resummarise
    from cookbook.learning_bench.report import format_tables

    root = Path(__file__).resolve().parents[2]
    text = (root / "cookbook" / "learning_bench" / "results" / "learning_bench.json").read_text()
    report = json.loads(text)
    page = (root / "docs" / "evidence.md").read_text(encoding="utf-8")
    rows = [line for line in format_tables(report).splitlines() if line.startswith("| ")]

    assert resummarise([json.loads(text)]) == report  # summarised by the code that is here
    assert len(rows) > 50
    assert [row for row in rows if row not in page] == []
    assert (root / "docs" / "evidence" / "learning_bench.png").stat().st_size > 10_000
    for task in report["tasks"].values():
        assert task["gate"]["holds"]
        assert task["heldout_size"] >= 500
        assert all(len(arm["seeds"]) >= 5 for arm in task["arms"].values())
