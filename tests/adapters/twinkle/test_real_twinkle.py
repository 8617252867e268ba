"""
The adapter against the installed twinkle-kit 0.5.1: its GRPOAdvantage, Sampler, data types, losses.

These tests run in ``.venv-twinkle`` (``.ci/twinkle``); elsewhere twinkle is not importable
and the whole module skips.
"""

from __future__ import annotations

from importlib import metadata

import pytest

pytest.importorskip("twinkle.sampler", reason="needs twinkle-kit==0.5.1 (run .ci/twinkle)")

import torch
from packaging.specifiers import SpecifierSet
from twinkle.advantage import GRPOAdvantage
from twinkle.data_format import SampledSequence, SampleResponse, SamplingParams
from twinkle.loss import DRGRPOLoss, GRPOLoss, PPOLoss
from twinkle.reward import GSM8KAccuracyReward
from twinkle.sampler import Sampler

from group_admission.adapters.twinkle import SUPPORTED_VERSIONS, TwinkleGroupAdmission, sample_admitted_groups

from .twinkle_doubles import Prompts, grpo_advantage, pid_of, prompt, scripted_sampler

G = 4
GATED = {"min_reward_std": 1e-6, "min_reward_range": 0.02, "gate_on": ["accuracy"]}
# A real signal, a phantom group (all wrong, brevity spread), an all-right group, a near tie, a dead group.
ACCURACY = [*(0, 1, 1, 0), *(0, 0, 0, 0), *(1, 1, 1, 1), *(0.5, 0.51, 0.5, 0.5), *(1, 1, 1, 1)]
BREVITY = [*(0.2, 0.4, 0.6, 0.8), *(0.9, 0.1, 0.5, 0.3), *(0.1, 0.2, 0.3, 0.4), *(0.0,) * 4, *(0.5,) * 4]
ScriptedSampler = scripted_sampler(Sampler, SampledSequence, SampleResponse)


def components():
    return torch.tensor([[a, b] for a, b in zip(ACCURACY, BREVITY, strict=True)], dtype=torch.float32)


def test_the_installed_twinkle_is_a_supported_one():
    installed = metadata.version("twinkle-kit")
    assert installed == "0.5.1"  # the version .ci/twinkle pins
    assert installed in SpecifierSet(SUPPORTED_VERSIONS["twinkle-kit"])


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_the_fast_lane_double_is_twinkles_arithmetic(scale):
    generator = torch.Generator().manual_seed(0)
    flat = torch.rand(24, generator=generator)
    two_d = torch.rand(24, 3, generator=generator)
    for rewards in (flat, two_d, flat.tolist()):
        assert torch.equal(
            grpo_advantage(rewards, num_generations=G, scale=scale),
            GRPOAdvantage()(rewards, num_generations=G, scale=scale),
        )


@pytest.mark.parametrize("scale", ["group", "none"])
def test_kept_advantages_are_twinkles_own(scale):
    rows = TwinkleGroupAdmission(GATED, num_generations=G, scale=scale).admit(
        {"accuracy": ACCURACY, "brevity": BREVITY}
    )
    twinkle = GRPOAdvantage()(components(), num_generations=G, scale=scale)  # twinkle sums the components

    assert rows.keep.tolist() == [True, False, False, False, False]
    assert torch.equal(rows.advantages[rows.mask], twinkle[rows.mask])
    assert torch.count_nonzero(rows.advantages[~rows.mask]) == 0
    # The same as the cookbook's loop, which sums in Python first: equal to float32 rounding.
    totals = [a + b for a, b in zip(ACCURACY, BREVITY, strict=True)]
    assert torch.allclose(
        rows.advantages[rows.mask], GRPOAdvantage()(totals, num_generations=G, scale=scale)[:G]
    )


def test_with_batch_scale_the_kept_groups_alone_set_the_std():
    policy = {"min_reward_std": 1e-6, "min_reward_range": 0.02}
    rows = TwinkleGroupAdmission(policy, num_generations=G, scale="batch").admit(
        {"accuracy": ACCURACY, "brevity": BREVITY}
    )
    kept = components()[rows.mask]

    assert torch.equal(rows.advantages[rows.mask], GRPOAdvantage()(kept, num_generations=G, scale="batch"))


def test_twinkle_trains_on_dead_and_near_tie_groups_and_admission_drops_them():
    totals = components().sum(dim=-1)
    twinkle = GRPOAdvantage()(totals, num_generations=G).view(-1, G)
    rows = TwinkleGroupAdmission({"min_reward_std": 1e-6, "min_reward_range": 0.02}, num_generations=G).admit(
        totals
    )

    assert torch.count_nonzero(twinkle[4]) == 0  # a dead group: zero advantages, yet rows in the loss
    assert twinkle[3].tolist() == pytest.approx([-0.5, 1.5, -0.5, -0.5], abs=1e-3)  # a 0.01 tie, amplified
    assert rows.keep.tolist() == [True, True, True, False, False]
    reasons = [str(rows.verdicts.result.decision(g).reason) for g in (3, 4)]
    assert reasons == ["near_tie", "exact_dead"]


def test_twinkle_gives_the_phantom_group_a_full_gradient_and_gate_on_removes_it():
    twinkle = GRPOAdvantage()(components(), num_generations=G).view(-1, G)
    gated = TwinkleGroupAdmission(GATED, num_generations=G).admit({"accuracy": ACCURACY, "brevity": BREVITY})
    summed = TwinkleGroupAdmission({"min_reward_std": 1e-6}, num_generations=G).admit(
        {"accuracy": ACCURACY, "brevity": BREVITY}
    )

    assert twinkle[1].abs().max() > 1.0  # all four answers wrong, rewarded for being short
    assert not gated.keep[1]
    assert torch.count_nonzero(gated.advantages.view(-1, G)[1]) == 0
    assert summed.keep[1]  # gating on the sum, as twinkle sums, lets it through
    assert torch.equal(summed.advantages.view(-1, G)[1], twinkle[1])


def twinkle_score(sequences):
    """twinkle's own GSM8K accuracy reward, plus a brevity term, on the sampled rows."""
    features = [sequence.new_input_feature for sequence in sequences]
    brevity = [max(0.0, 1.0 - len(s.decoded) / 100) for s in sequences]
    return {"accuracy": GSM8KAccuracyReward()(features), "brevity": brevity}


@pytest.mark.parametrize("num_samples", [1, G])
def test_a_resampling_round_with_a_twinkle_sampler_subclass(num_samples):
    sampler = ScriptedSampler()
    admission = TwinkleGroupAdmission(
        GATED, num_generations=G, budget={"max_extra_groups": 4, "max_resample_rounds": 2}
    )
    params = SamplingParams(max_tokens=16, num_samples=num_samples, logprobs=1)
    batch = [prompt(pid) for pid in ("live-0", "dead-1", "phantom-2", "solved-3")]
    result = sample_admitted_groups(
        admission, sampler, batch, twinkle_score, sampling_params=params, extra_prompts=Prompts(["live"])
    )

    assert isinstance(sampler, Sampler)
    assert all(isinstance(s, SampledSequence) for s in result.sequences)
    requests = 1 if num_samples == G else G
    # One of four kept: the planner asks for ceil(3 / 0.25) = 12 groups, max_extra_groups grants 4.
    assert sampler.calls == [4 * requests, 4 * requests]
    assert [pid_of(p) for p in result.prompts] == ["live-0", "live-x0", "live-x1", "live-x2"]
    assert result.report.sampling_rounds == 2
    assert result.report.surplus_groups == 1
    assert not result.exhausted
    kept = torch.tensor(
        [[a, b] for a, b in zip(result.rewards["accuracy"], result.rewards["brevity"], strict=True)]
    )
    assert torch.equal(result.advantages, GRPOAdvantage()(kept, num_generations=G))
    old_logps = [[lp[0][1] for lp in s.logprobs] for s in result.sequences]  # the cookbook's extraction
    assert len(old_logps) == result.advantages.numel() == 4 * G


def loss_batch(rows, lengths, seed=0):
    """GRPOLoss inputs: labels (-100 on the prompt), current logps needing grad, old logps per row."""
    width = 2 + max(lengths)
    labels = torch.full((rows, width), -100)
    for row, length in enumerate(lengths):
        labels[row, 2 : 2 + length] = 7
    logps = (-torch.rand(rows, width, generator=torch.Generator().manual_seed(seed))).requires_grad_()
    old = [
        (-torch.rand(length, generator=torch.Generator().manual_seed(seed + 1 + row))).tolist()
        for row, length in enumerate(lengths)
    ]
    return labels, logps, old


def loss_of(loss_fn, labels, logps, old, advantages):
    return loss_fn({"labels": labels}, {"logps": logps}, old_logps=old, advantages=advantages)["loss"]


@pytest.mark.parametrize(("loss_fn", "normaliser"), [(GRPOLoss(), "rows"), (PPOLoss(), "tokens")])
def test_the_mask_removes_rejected_rows_from_the_loss_normaliser(loss_fn, normaliser):
    """Zero advantages alone leave rejected rows in twinkle's normaliser; selecting the rows does not."""
    rewards = [*(0, 1, 1, 0), *(1, 1, 1, 1)]  # a kept group and a dead one
    rows = TwinkleGroupAdmission({"min_reward_std": 1e-6}, num_generations=G).admit(rewards)
    lengths = [3, 5, 2, 4, 6, 6, 1, 3]
    labels, logps, old = loss_batch(8, lengths)
    kept = rows.mask

    zeroed = loss_of(loss_fn, labels, logps, old, rows.advantages)
    selected = loss_of(loss_fn, labels[kept], logps[kept], rows.select(old), rows.advantages[kept])
    # The selected loss is the loss of a batch that only ever held the kept group.
    alone = loss_of(loss_fn, labels[:G], logps[:G], old[:G], GRPOAdvantage()(rewards[:G], num_generations=G))
    assert torch.allclose(selected, alone)

    share = G / 8 if normaliser == "rows" else sum(lengths[:G]) / sum(lengths)
    assert torch.allclose(zeroed, selected * share)
    (grad_zeroed,) = torch.autograd.grad(zeroed, logps)
    (grad_selected,) = torch.autograd.grad(selected, logps)
    assert torch.allclose(grad_zeroed, grad_selected * share)
    assert torch.count_nonzero(grad_zeroed[~kept]) == 0

    # Masking the rejected rows' labels fixes a token mean, not GRPOLoss's per-row mean.
    masked = labels.clone()
    masked[~kept] = -100
    relabelled = loss_of(
        loss_fn,
        masked,
        logps,
        [o if k else [] for o, k in zip(old, kept.tolist(), strict=True)],
        rows.advantages,
    )
    expected = selected if normaliser == "tokens" else selected * G / 8
    assert torch.allclose(relabelled, expected)


def test_with_a_kl_term_zeroed_advantages_still_train_rejected_rows_and_selection_does_not():
    """GRPOLoss(beta > 0): the KL term has gradient on every row it sees, whatever its advantage."""
    rewards = [*(0, 1, 1, 0), *(1, 1, 1, 1)]  # a kept group and a dead one
    rows = TwinkleGroupAdmission({"min_reward_std": 1e-6}, num_generations=G).admit(rewards)
    lengths = [3, 5, 2, 4, 6, 6, 1, 3]
    labels, logps, old = loss_batch(8, lengths)
    ref = [
        (-torch.rand(n, generator=torch.Generator().manual_seed(90 + i))).tolist()
        for i, n in enumerate(lengths)
    ]
    loss_fn, kept = GRPOLoss(beta=0.1), rows.mask

    def loss(mask, advantages):
        chosen = mask.tolist()
        pick = [value for value, keep in zip(ref, chosen, strict=True) if keep]
        chosen_old = [value for value, keep in zip(old, chosen, strict=True) if keep]
        outputs = {"logps": logps[mask]}
        return loss_fn(
            {"labels": labels[mask]}, outputs, old_logps=chosen_old, ref_logps=pick, advantages=advantages
        )["loss"]

    everything = torch.ones(8, dtype=torch.bool)
    (zeroed,) = torch.autograd.grad(loss(everything, rows.advantages), logps)
    (selected,) = torch.autograd.grad(loss(kept, rows.advantages[kept]), logps)

    assert torch.count_nonzero(zeroed[~kept]) > 0  # the dead group still steers the update
    assert torch.count_nonzero(selected[~kept]) == 0


@pytest.mark.parametrize("mode", ["target", "kept"])
@pytest.mark.parametrize(
    "loss_fn", [GRPOLoss(), DRGRPOLoss(max_completion_length=8)], ids=["GRPOLoss", "DRGRPOLoss"]
)
def test_a_short_step_takes_the_update_of_the_full_target_in_twinkles_losses(loss_fn, mode):
    """Two of the four groups are dead and the budget allows no more: the step is short."""
    admission = TwinkleGroupAdmission(GATED, num_generations=G, loss_scale=mode)
    batch = [prompt(pid) for pid in ("live-0", "dead-1", "live-2", "solved-3")]
    result = sample_admitted_groups(admission, ScriptedSampler(), batch, twinkle_score)
    trained = result.report.trained_groups
    assert (2, 4) == (trained, result.report.target_groups)
    rows = trained * G
    lengths = [3, 5, 2, 4, 6, 6, 1, 3] * 2
    labels, logps, old = loss_batch(4 * G, lengths)
    # The full target: the kept groups' rows, then the missing groups' rows at zero advantage.
    full_advantages = torch.cat([result.advantages / result.report.loss_scale, torch.zeros(4 * G - rows)])

    step = loss_of(loss_fn, labels[:rows], logps[:rows], old[:rows], result.advantages)
    full = loss_of(loss_fn, labels, logps, old, full_advantages)
    kept_mean = loss_of(loss_fn, labels[:rows], logps[:rows], old[:rows], full_advantages[:rows])

    assert result.report.loss_scale == (0.5 if mode == "target" else 1.0)
    assert torch.allclose(step, full if mode == "target" else kept_mean)
    assert not torch.allclose(full, kept_mean)  # the modes differ on a short step
