"""One step's sampling loop with a scripted sampler: admission, phantom groups, resampling, snapshots."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch
from grpo_gsm8k import rollout
from grpo_gsm8k.data import Problem
from grpo_gsm8k.rollout import Group, StepSample, collect_step, score_groups

from group_admission import GroupAdmissionPolicy, SamplingBudgetConfig, SamplingBudgetController

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


def run(resample: str, budget: SamplingBudgetConfig) -> tuple[StepSample, ScriptedSampler]:
    sampler = ScriptedSampler()
    sample = collect_step(
        sample=sampler,
        score=lambda groups: score_groups(groups, brevity_weight=0.5, free_chars=8),
        stream=ScriptedStream(),  # type: ignore[arg-type]
        policy=GroupAdmissionPolicy({"min_reward_std": 1e-6, "gate_on": ["accuracy"]}),
        controller=SamplingBudgetController(budget),
        target_groups=4,
        num_generations=G,
        max_new_tokens=16,
        resample=resample,  # type: ignore[arg-type]
        model=torch.nn.Linear(2, 2),
        policy_version=3,
    )
    return sample, sampler


BUDGET = SamplingBudgetConfig(max_extra_groups=4, max_extra_groups_per_round=4, max_resample_rounds=2)


@pytest.mark.usefixtures("breaking_scorer")
class TestCollectStep:
    def test_first_round_reasons_and_the_phantom_count(self) -> None:
        sample, _ = run("fresh", BUDGET)
        first = sample.rounds[0]

        assert (4, 1) == (first.groups, first.admitted)
        assert {"exact_dead": 2, "external": 1} == first.reasons
        assert 1 == sample.phantom_rejected
        assert ["mixed", "wrong-brevity-spread", "right-identical", "scorer-breaks"] == [
            g.problem.question for g in sample.first_round
        ]
        assert "missing_reward" in sample.stats.external_details

    def test_fresh_mode_draws_new_prompts_until_the_target_is_met(self) -> None:
        sample, sampler = run("fresh", BUDGET)

        assert [["fresh"] * 4] == sampler.rounds[1:]  # the per-round and extra-group caps (4) bind
        assert 5 == len(sample.admitted)
        assert ("target_met",) == sample.final_plan.limited_by

    def test_retry_mode_requeues_only_the_rejected_prompts(self) -> None:
        _, sampler = run("retry", BUDGET)

        # each rejected prompt at most once per round; the last round is cut by the extra-group cap
        assert [
            ["wrong-brevity-spread", "right-identical", "scorer-breaks"],
            ["wrong-brevity-spread"],
        ] == sampler.rounds[1:]

    def test_counts_conserve_and_caps_hold(self) -> None:
        sample, _ = run("retry", BUDGET)
        stats, state = sample.stats, sample.state

        assert (
            stats.candidates
            == stats.admitted + stats.external + stats.exact_dead + stats.near_tie + stats.redundant
        )
        assert state.generated_groups == stats.candidates == sum(r.groups for r in sample.rounds)
        assert state.generated_groups <= 4 + BUDGET.max_extra_groups
        assert len(sample.rounds) - 1 <= BUDGET.max_resample_rounds
        assert sample.final_plan.exhausted

    def test_every_round_records_one_snapshot_and_the_version(self) -> None:
        sample, _ = run("fresh", BUDGET)
        rounds = sample.rounds

        assert len(rounds) >= 2
        assert 1 == len({r.checksum for r in rounds})
        assert {3} == {r.policy_version for r in rounds}

    def test_the_worst_case_token_estimate_keeps_the_token_cap(self) -> None:
        # round 0 generates 116 tokens; a group may cost G * max_new_tokens = 64: 3 more fit in 320
        budget = SamplingBudgetConfig(max_extra_groups=8, max_resample_rounds=3, max_total_tokens=320)
        sample, sampler = run("fresh", budget)
        plan = sample.rounds[0].plan
        assert plan is not None

        assert 116 == sample.rounds[0].tokens
        assert (3, ["token_budget"]) == (plan["extra_groups"], plan["limited_by"])
        assert [["fresh"] * 3] == sampler.rounds[1:]
        assert sample.state.generated_tokens <= 320
