"""The recipe with a scripted sampler: admission, phantom groups, resampling, surplus, observers."""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from cookbook.grpo_gsm8k import rollout
from cookbook.grpo_gsm8k.data import Problem
from cookbook.grpo_gsm8k.observers import RoundLog, Stopwatch
from cookbook.grpo_gsm8k.recipe import StepObserver, StepSample, collect_step, fresh_problems, retry_rejected
from cookbook.grpo_gsm8k.rollout import Group, score_groups
from group_admission import AdmissionSession, SamplingBudgetConfig, StepReport

G = 4
# question -> the G completions the scripted sampler returns for it (gold is 7 everywhere)
SCRIPT = {
    "mixed": ["#### 7", "#### 6", "#### 7", "4 + 3 = 6\n#### 6"],  # accuracy spread: admitted
    "wrong-brevity-spread": ["#### 6", "4 + 3 = 6\n#### 6", "#### 5", "#### 6"],  # phantom: exact_dead
    "right-identical": ["#### 7"] * G,  # exact_dead, no spread at all
    "scorer-breaks": ["#### 7", "#### 6", "#### 7", "#### 6"],  # external: the scorer raises
}


def problem(question: str) -> Problem:
    return Problem(question=question, answer="#### 7", gold=7.0)


class ScriptedSampler:
    """Returns the scripted completions and records which problems each round asked for."""

    def __init__(self) -> None:
        self.rounds: list[list[str]] = []

    def __call__(self, problems: Sequence[Problem]) -> list[Group]:
        self.rounds.append([p.question for p in problems])
        return [
            Group(
                problem=p,
                prompt_ids=[1, 2],
                completion_ids=[[3] * len(t) for t in SCRIPT.get(p.question, SCRIPT["mixed"])],
                texts=list(SCRIPT.get(p.question, SCRIPT["mixed"])),
                truncated=[False] * G,
            )
            for p in problems
        ]


@pytest.fixture
def breaking_scorer(monkeypatch: pytest.MonkeyPatch) -> None:
    real = rollout.score_group

    def score(texts: Sequence[str], gold: float, **kwargs: object) -> dict[str, list[float]]:
        if list(texts) == SCRIPT["scorer-breaks"]:
            raise RuntimeError("reward server down")
        return real(texts, gold, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(rollout, "score_group", score)


class ScriptedStream:
    """Round 0 draws the four scripted problems; every later draw is a fresh, mixed-reward one."""

    def __init__(self) -> None:
        self.calls = 0

    def take(self, count: int) -> list[Problem]:
        self.calls += 1
        names = list(SCRIPT) if self.calls == 1 else ["fresh"] * count
        return [problem(q) for q in names[:count]]


class Recorder(StepObserver):
    """Records the order of the hooks."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def round_started(self, problems: Sequence[Problem]) -> None:
        self.calls.append("started")

    def round_generated(self, groups: Sequence[Group]) -> None:
        self.calls.append("generated")

    def round_scored(self, groups: Sequence[Group]) -> None:
        self.calls.append("scored")

    def round_judged(self, groups: Sequence[Group], verdicts: object, plan: object) -> None:
        self.calls.append("judged")

    def step_ended(self, report: StepReport, trained: Sequence[Group]) -> None:
        self.calls.append("ended")


@dataclass
class Run:
    sample: StepSample
    sampler: ScriptedSampler
    session: AdmissionSession
    log: RoundLog
    recorder: Recorder


def run(resample: str, budget: SamplingBudgetConfig) -> Run:
    sampler, stream = ScriptedSampler(), ScriptedStream()
    session = AdmissionSession({"min_reward_std": 1e-6, "gate_on": ["accuracy"]}, budget=budget)
    log, recorder = RoundLog(torch.nn.Linear(2, 2), policy_version=3), Recorder()
    sample = collect_step(
        session,
        stream.take(4),
        sampler,
        lambda groups: score_groups(groups, brevity_weight=0.5, free_chars=8),
        retry_rejected() if resample == "retry" else fresh_problems(stream),  # type: ignore[arg-type]
        num_generations=G,
        tokens_per_group=G * 16,
        observers=[log, recorder],
    )
    return Run(sample, sampler, session, log, recorder)


BUDGET = SamplingBudgetConfig(max_extra_groups=4, max_extra_groups_per_round=4, max_resample_rounds=2)


@pytest.mark.usefixtures("breaking_scorer")
class TestCollectStep:
    def test_first_round_reasons_and_the_phantom_count(self) -> None:
        done = run("fresh", BUDGET)
        first = done.log.rounds[0]

        assert (4, 1) == (first.groups, first.admitted)
        assert {"exact_dead": 2, "external": 1} == first.reasons
        assert 1 == done.log.phantom
        assert ["mixed", "wrong-brevity-spread", "right-identical", "scorer-breaks"] == [
            g.problem.question for g in done.log.first_round
        ]
        assert "missing_reward" in done.session.step_stats.external_details

    def test_fresh_mode_draws_new_prompts_until_the_target_is_met(self) -> None:
        done = run("fresh", BUDGET)
        report = done.sample.report

        assert [["fresh"] * 4] == done.sampler.rounds[1:]  # the per-round and extra-group caps (4) bind
        assert (5, 4, 1) == (report.admitted_groups, report.trained_groups, report.surplus_groups)
        assert ("target_met",) == report.limited_by

    def test_the_step_trains_on_the_target_and_discards_the_surplus(self) -> None:
        done = run("fresh", BUDGET)
        trained = done.sample.trained

        assert 4 == len(trained)
        assert ["mixed", "fresh", "fresh", "fresh"] == [g.problem.question for g in trained]
        assert all(g.rewards["accuracy"] for g in trained)

    def test_retry_mode_requeues_only_the_rejected_prompts(self) -> None:
        done = run("retry", BUDGET)

        # each rejected prompt at most once per round; the last round is cut by the extra-group cap
        assert [
            ["wrong-brevity-spread", "right-identical", "scorer-breaks"],
            ["wrong-brevity-spread"],
        ] == done.sampler.rounds[1:]

    def test_counts_conserve_and_caps_hold(self) -> None:
        done = run("retry", BUDGET)
        stats, report = done.session.step_stats, done.sample.report

        assert (
            stats.candidates
            == stats.admitted + stats.external + stats.exact_dead + stats.near_tie + stats.redundant
        )
        assert report.generated_groups == stats.candidates == sum(r.groups for r in done.log.rounds)
        assert report.generated_groups <= 4 + BUDGET.max_extra_groups
        assert report.sampling_rounds - 1 <= BUDGET.max_resample_rounds
        assert report.exhausted
        assert len(done.sample.trained) == report.trained_groups == stats.admitted < 4

    def test_every_round_records_one_snapshot_and_the_version(self) -> None:
        rounds = run("fresh", BUDGET).log.rounds

        assert len(rounds) >= 2
        assert 1 == len({r.checksum for r in rounds})
        assert {3} == {r.policy_version for r in rounds}

    def test_the_worst_case_token_estimate_keeps_the_token_cap(self) -> None:
        # round 0 generates 116 tokens; a group may cost G * max_new_tokens = 64: 3 more fit in 320
        budget = SamplingBudgetConfig(max_extra_groups=8, max_resample_rounds=3, max_total_tokens=320)
        done = run("fresh", budget)
        plan = done.log.rounds[0].plan

        assert 116 == done.log.rounds[0].tokens
        assert (3, ["token_budget"]) == (plan["extra_groups"], plan["limited_by"])
        assert [["fresh"] * 3] == done.sampler.rounds[1:]
        assert done.sample.report.generated_tokens <= 320

    def test_observers_see_every_round_in_order(self) -> None:
        done = run("fresh", BUDGET)

        rounds = len(done.log.rounds)
        assert ["started", "generated", "scored", "judged"] * rounds + ["ended"] == done.recorder.calls

    def test_the_stopwatch_times_each_phase(self) -> None:
        stopwatch = Stopwatch()
        stopwatch.round_started([])
        stopwatch.round_generated([])
        stopwatch.round_scored([])
        stopwatch.round_judged([], None, None)  # type: ignore[arg-type]

        assert {"generation", "reward", "admission"} == set(stopwatch.seconds)
        assert all(seconds >= 0 for seconds in stopwatch.seconds.values())


def test_docs_quote_the_recipe_as_it_is() -> None:
    """docs/cookbook.md shows collect_step verbatim; this keeps the quote in sync."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "cookbook.md").read_text(encoding="utf-8")
    quoted = re.search(r"^```py\n(def collect_step\(.*?)^```", page, re.DOTALL | re.MULTILINE)

    assert quoted is not None, "docs/cookbook.md must quote collect_step in a ```py block"
    assert inspect.getsource(collect_step) == quoted.group(1)
