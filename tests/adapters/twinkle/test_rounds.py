"""
Resampling rounds with a scripted sampler (fast lane: twinkle's data types as doubles).

``test_real_twinkle.py`` runs the same rounds with a subclass of twinkle's real ``Sampler``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from group_admission import BudgetExhaustedError
from group_admission.adapters.twinkle import TwinkleGroupAdmission, sample_admitted_groups

from .twinkle_doubles import Prompts, grpo_advantage, pid_of, prompt, score, scripted_sampler

G = 4
Sampler = scripted_sampler()
GATED = {"min_reward_std": 1e-6, "gate_on": ["accuracy"]}


def step(budget=None, policy=GATED, **kwargs):
    return TwinkleGroupAdmission(
        policy, num_generations=G, budget=budget, advantage_fn=grpo_advantage, **kwargs
    )


def batch(*pids):
    return [prompt(pid) for pid in pids]


def test_a_resampling_round_replaces_the_rejected_groups():
    sampler = Sampler()
    extra = Prompts(["live"])
    admission = step({"max_extra_groups": 4, "max_resample_rounds": 2})
    result = sample_admitted_groups(
        admission,
        sampler,
        batch("live-0", "dead-1", "phantom-2", "live-3"),
        score,
        sampling_params={"num_samples": 1, "max_tokens": 16},
        extra_prompts=extra,
    )

    # Round 0 kept half, so the planner asks for ceil(2 / 0.5) = 4 groups for the 2 missing.
    assert sampler.calls == [4 * G, 4 * G]
    assert [pid_of(p) for p in result.prompts] == ["live-0", "live-3", "live-x0", "live-x1"]
    assert len(result.sequences) == 4 * G
    assert result.advantages.shape == (4 * G,)
    report = result.report
    assert (report.sampling_rounds, report.generated_groups, report.short_groups) == (2, 8, 0)
    assert report.surplus_groups == 2
    assert extra.drawn == 4
    assert not result.exhausted
    assert result.plan.limited_by == ("target_met",)
    totals = [a + b for a, b in zip(result.rewards["accuracy"], result.rewards["brevity"], strict=True)]
    assert torch.allclose(result.advantages, grpo_advantage(totals, num_generations=G))


def test_both_sampler_layouts_give_the_same_groups():
    results = []
    for params in ({"num_samples": 1}, {"num_samples": G}):
        sampler = Sampler()
        results.append(
            sample_admitted_groups(step(), sampler, batch("live-0", "dead-1"), score, sampling_params=params)
        )
        assert sampler.calls == [2 * G if params["num_samples"] == 1 else 2]
    texts = [[s.decoded for s in result.sequences] for result in results]
    assert texts[0] == texts[1]
    assert len(texts[0]) == G


def test_the_budget_bounds_an_all_dead_stream_and_says_so():
    sampler = Sampler()
    admission = step({"max_extra_groups": 6, "max_resample_rounds": 5, "max_total_samples": 10 * G})
    result = sample_admitted_groups(
        admission,
        sampler,
        batch("dead-0", "dead-1", "dead-2", "dead-3"),
        score,
        extra_prompts=Prompts(["dead"]),
    )

    assert result.exhausted
    assert result.report.exhausted
    assert not result.out_of_prompts
    assert result.prompts == []
    assert result.advantages.shape == (0,)
    assert result.report.generated_samples <= 10 * G
    assert sum(sampler.calls) <= 10 * G
    assert result.metrics["group_admission/exhausted"] == 1
    assert any(key.startswith("group_admission/limited_by/") for key in result.metrics)


def test_on_exhausted_raise_stops_with_the_reason():
    admission = step({"max_extra_groups": 1, "max_resample_rounds": 1})
    with pytest.raises(
        BudgetExhaustedError,
        match=r"kept 0 of 2 target groups after 3 generated groups .* caps: resample_round_budget",
    ):
        sample_admitted_groups(
            admission,
            Sampler(),
            batch("dead-0", "dead-1"),
            score,
            extra_prompts=Prompts(["dead"]),
            on_exhausted="raise",
        )


def test_running_out_of_extra_prompts_is_exhaustion_too():
    admission = step({"max_extra_groups": 8, "max_resample_rounds": 3})
    result = sample_admitted_groups(
        admission, Sampler(), batch("live-0", "dead-1", "dead-2"), score, extra_prompts=iter(batch("dead-x"))
    )

    assert result.out_of_prompts
    assert result.exhausted
    assert not result.report.exhausted
    assert result.report.kept_groups == 1
    assert result.metrics["group_admission/out_of_prompts"] == 1


def test_without_extra_prompts_the_first_round_is_the_step():
    sampler = Sampler()
    result = sample_admitted_groups(
        step({"max_extra_groups": 8, "max_resample_rounds": 3}), sampler, batch("live-0", "dead-1"), score
    )
    assert sampler.calls == [2 * G]
    assert result.out_of_prompts
    assert len(result.prompts) == 1


def test_surplus_groups_are_discarded_as_the_report_says():
    admission = step(
        {"max_extra_groups": 8, "max_resample_rounds": 1, "mode": "confidence", "confidence": 0.99}
    )
    result = sample_admitted_groups(
        admission,
        Sampler(),
        batch("live-0", "dead-1", "live-2", "dead-3"),
        score,
        extra_prompts=Prompts(["live"]),
    )
    report = result.report
    assert report.surplus_groups > 0
    assert report.trained_groups == 4
    assert len(result.prompts) == 4
    assert len(result.sequences) == 4 * G


def test_a_failed_sample_rejects_its_group_as_external():
    admission = step({"max_extra_groups": 2, "max_resample_rounds": 1})
    result = sample_admitted_groups(
        admission, Sampler(), batch("error-0", "live-1"), score, extra_prompts=Prompts(["live"])
    )
    assert admission.session.stats.external_details == {"sampler_error": 1}
    assert [pid_of(p) for p in result.prompts] == ["live-1", "live-x0"]


def test_a_hard_token_cap_from_max_tokens():
    """max_tokens x G bounds each planned group's tokens, so the token cap is never crossed."""
    admission = step({"max_extra_groups": 100, "max_resample_rounds": 100, "max_total_tokens": 40 * G})
    result = sample_admitted_groups(
        admission,
        Sampler(),
        batch("dead-0", "dead-1"),
        score,
        sampling_params={"num_samples": G, "max_tokens": 5},
        extra_prompts=Prompts(["dead"]),
    )
    assert result.exhausted
    assert result.plan.limited_by == ("token_budget",)
    # The report describes that last plan, with the max_tokens bound it was given.
    assert result.report.exhausted
    assert result.report.limited_by == ("token_budget",)
    assert result.metrics["group_admission/exhausted"] == 1
    # Round 0 is the batch; every later round fit 5 x G tokens per group under the cap.
    assert result.report.generated_tokens <= 40 * G
    assert 40 * G - result.report.generated_tokens < 5 * G


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.sampled_from(["live", "dead", "phantom", "solved"]), min_size=1, max_size=5),
    st.lists(st.sampled_from(["live", "dead", "phantom"]), min_size=1, max_size=4),
    st.integers(0, 6),
    st.integers(0, 3),
    st.one_of(st.none(), st.integers(1, 40)),
)
def test_caps_and_the_trained_count_hold(kinds, extra_kinds, max_extra, rounds, max_samples):
    budget = {"max_extra_groups": max_extra, "max_resample_rounds": rounds}
    if max_samples is not None:
        budget["max_total_samples"] = max(len(kinds), max_samples) * G
    sampler = Sampler()
    result = sample_admitted_groups(
        step(budget),
        sampler,
        batch(*(f"{kind}-{i}" for i, kind in enumerate(kinds))),
        score,
        extra_prompts=Prompts(extra_kinds),
    )
    report = result.report
    assert report.generated_groups <= len(kinds) + max_extra
    assert report.sampling_rounds <= rounds + 1
    if max_samples is not None:
        assert report.generated_samples <= budget["max_total_samples"]
    assert sum(sampler.calls) == report.generated_samples  # num_samples=1: one request per sample
    assert len(result.prompts) == report.trained_groups <= len(kinds)
    assert len(result.sequences) == result.advantages.numel() == report.trained_groups * G
    assert result.exhausted == (report.short_groups > 0)


def test_an_error_in_a_round_closes_the_step_so_the_next_call_runs():
    admission = step({"max_extra_groups": 4, "max_resample_rounds": 2})
    calls = []

    def failing_score(sequences):
        calls.append(len(sequences))
        if len(calls) == 2:  # the resampling round's scorer fails
            raise RuntimeError("reward server down")
        return score(sequences)

    with pytest.raises(RuntimeError, match="reward server down"):
        sample_admitted_groups(
            admission, Sampler(), batch("live-0", "dead-1"), failing_score, extra_prompts=Prompts(["live"])
        )
    assert not admission.session.step_open
    judged = admission.session.stats.candidates
    assert judged == 2  # round 0's groups stay counted; the failed round judged nothing

    result = sample_admitted_groups(admission, Sampler(), batch("live-2", "live-3"), score)
    assert [pid_of(p) for p in result.prompts] == ["live-2", "live-3"]
    assert result.report.target_groups == 2
