"""
The admission step on twinkle's flat rows, against doubles (fast lane; no twinkle needed).

The same behaviour against the installed twinkle-kit 0.5.1 is in ``test_real_twinkle.py``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from group_admission import SessionConfig
from group_admission.adapters.twinkle import UNSUMMABLE_REWARD, TwinkleGroupAdmission

from .twinkle_doubles import grpo_advantage

G = 4
GATED = {"min_reward_std": 1e-6, "min_reward_range": 0.02, "gate_on": ["accuracy"]}
# Four groups of G: a real signal, a phantom (accuracy dead, brevity spread), all right, a near tie.
ACCURACY = [*(0, 1, 1, 0), *(0, 0, 0, 0), *(1, 1, 1, 1), *(0.5, 0.51, 0.5, 0.5)]
BREVITY = [*(0.2, 0.4, 0.6, 0.8), *(0.9, 0.1, 0.5, 0.3), *(0.1, 0.2, 0.3, 0.4), *(0.0,) * 4]


def admission(policy=GATED, **kwargs):
    return TwinkleGroupAdmission(policy, num_generations=G, advantage_fn=grpo_advantage, **kwargs)


def test_gate_on_rejects_the_phantom_group_that_the_summed_reward_admits():
    gated = admission().admit({"accuracy": ACCURACY, "brevity": BREVITY})
    summed = admission({"min_reward_std": 1e-6, "min_reward_range": 0.02}).admit(
        {"accuracy": ACCURACY, "brevity": BREVITY}
    )

    assert gated.keep.tolist() == [True, False, False, False]
    assert summed.keep.tolist() == [True, True, True, False]  # the phantom gets through on the sum
    reasons = [gated.verdicts.result.decision(g).reason for g in range(4)]
    assert [str(r) for r in reasons] == ["None", "exact_dead", "exact_dead", "near_tie"]


def test_rejected_rows_get_zero_advantage_and_leave_the_mask():
    rows = admission().admit({"accuracy": ACCURACY, "brevity": BREVITY})

    assert rows.mask.tolist() == [True] * G + [False] * 3 * G
    assert torch.count_nonzero(rows.advantages[~rows.mask]) == 0
    totals = [a + b for a, b in zip(ACCURACY, BREVITY, strict=True)]
    assert torch.allclose(rows.advantages[:G], grpo_advantage(totals[:G], num_generations=G))
    assert rows.select(list(range(4 * G))) == list(range(G))
    assert rows.kept_groups == 1


def test_kept_advantages_are_computed_on_the_kept_groups_alone():
    """With scale='batch', the std is the kept groups' std, as if twinkle never saw the others."""
    rewards = [*(0, 1, 0, 1), *(0, 0, 0, 0), *(0, 3, 0, 3)]
    rows = admission({"min_reward_std": 1e-6}, scale="batch").admit(rewards)

    kept_only = [*rewards[:G], *rewards[2 * G :]]
    expected = grpo_advantage(kept_only, num_generations=G, scale="batch")
    assert torch.equal(rows.advantages[rows.mask], expected)
    assert not torch.equal(rows.advantages, grpo_advantage(rewards, num_generations=G, scale="batch"))


def test_the_components_reach_the_advantage_function_unsummed():
    seen = []

    def spy(rewards, num_generations, scale):
        seen.append(rewards)
        return grpo_advantage(rewards, num_generations=num_generations, scale=scale)

    TwinkleGroupAdmission(GATED, num_generations=G, advantage_fn=spy).admit(
        {"accuracy": ACCURACY, "brevity": BREVITY}
    )

    assert seen[0].shape == (G, 2)
    assert seen[0].dtype == torch.float32
    assert seen[0][:, 0].tolist() == [0, 1, 1, 0]


def test_data_problems_reject_the_group_as_external_and_count():
    accuracy = [0, 1, 0, 1] * 3
    brevity = [0.5, None, 0.5, 0.5] + [0.5] * 4 + [0.1, 0.2, math.nan, 0.3]
    accuracy[4] = None  # a gated component is missing: the session reports missing_reward
    step = admission()
    rows = step.admit({"accuracy": accuracy, "brevity": brevity})

    decisions = [rows.verdicts.result.decision(g) for g in range(3)]
    assert rows.keep.tolist() == [False, False, False]
    assert decisions[0].external_reasons == (UNSUMMABLE_REWARD,)
    assert decisions[1].external_reasons == ("missing_reward",)
    assert decisions[2].external_reasons == (UNSUMMABLE_REWARD,)
    stats = step.session.stats
    assert (stats.candidates, stats.external) == (3, 3)
    assert stats.external_details == {UNSUMMABLE_REWARD: 2, "missing_reward": 1}


def test_host_external_reasons_and_tensors_are_accepted():
    rewards = torch.tensor([0.0, 1.0, 0.0, 1.0] * 2)
    rows = admission({"min_reward_std": 1e-6}).admit(rewards, external_reasons=[[], ["sampler_error"]])

    assert rows.keep.tolist() == [True, False]
    assert rows.verdicts.result.decision(1).external_reasons == ("sampler_error",)


def test_the_redundancy_gate_reads_the_completions():
    texts = ["the same answer"] * G + ["a", "b c", "d e f", "g h i j"]
    rows = admission({"max_mean_pairwise_similarity": 0.9}).admit([0, 1, 0, 1] * 2, completions=texts)

    assert rows.keep.tolist() == [False, True]
    assert str(rows.verdicts.result.decision(0).reason) == "redundant"


def test_metrics_are_flat_numbers_under_one_prefix():
    step = admission(budget={"max_extra_groups": 4, "max_resample_rounds": 1})
    step.begin_step(4)
    step.admit({"accuracy": ACCURACY, "brevity": BREVITY})
    step.plan()
    report = step.end_step()
    metrics = step.metrics(report)

    assert all(key.startswith("group_admission/") for key in metrics)
    assert all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in metrics.values())
    assert metrics["group_admission/short_groups"] == 3
    assert metrics["group_admission/step/exact_dead_group_count"] == 2
    assert metrics["group_admission/total/near_tie_group_count"] == 1


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=G, max_size=G), min_size=1, max_size=6),
    st.sampled_from(["group", "batch", "none"]),
)
def test_mask_advantages_and_counts_agree(groups, scale):
    rewards = [value for group in groups for value in group]
    step = admission({"min_reward_std": 1e-6}, scale=scale)
    rows = step.admit(rewards)

    keep = np.array([len(set(group)) > 1 for group in groups])
    assert rows.keep.tolist() == keep.tolist()
    assert rows.mask.tolist() == np.repeat(keep, G).tolist()
    assert torch.count_nonzero(rows.advantages[~rows.mask]) == 0
    kept = [value for group, k in zip(groups, keep, strict=True) if k for value in group]
    if kept:
        assert torch.equal(rows.advantages[rows.mask], grpo_advantage(kept, num_generations=G, scale=scale))
    stats = step.session.stats
    assert stats.candidates == len(groups)
    assert stats.admitted == int(keep.sum())
    stats.check_conservation()


def test_importing_the_package_imports_no_twinkle_and_no_torch():
    import subprocess
    import sys

    code = (
        "import sys, group_admission.adapters.twinkle as t; "
        "print(sorted(m for m in ('twinkle', 'torch') if m in sys.modules), dict(t.SUPPORTED_VERSIONS))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] {'twinkle-kit': '>=0.5.1,<0.6'}"


def test_the_recommended_block_builds_the_session_and_its_arguments_win():
    block = {"preset": "recommended", "policy": {"gate_on": ["accuracy"]}}
    config = SessionConfig.from_mapping(block)

    step = admission(block)
    kept = admission(block, loss_scale="kept")

    assert step.policy.config == config.policy
    assert step.session.loss_scale == config.loss_scale
    assert kept.session.loss_scale == "kept"
    step.begin_step(4)
    step.admit({"accuracy": ACCURACY, "brevity": BREVITY})
    report = step.end_step()
    assert step.last_report == report
    assert report.kept_groups == 2  # the signal and the near tie (no range gate in the preset)
