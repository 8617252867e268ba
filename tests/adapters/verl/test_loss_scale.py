"""
The loss scale a verl step reports is what verl 0.9.1's own loss aggregation does to a short step.

verl's actor aggregates with ``agg_loss`` (``verl.trainer.ppo.core_algos``), normalising
``seq-mean-*`` modes by the constant ``ppo_mini_batch_size x rollout.n`` sequences and
``token-mean`` by the mini-batch's own tokens. A step the caps cut short trains on fewer
groups: with one mini-batch per step, ``seq-mean-token-sum-norm`` (a constant
``loss_scale_factor``) gives it the loss of the full target with the missing groups at zero,
which is the ``"target"`` scale; ``token-mean`` averages over the kept groups: ``"kept"``.
"""

from __future__ import annotations

import pytest

pytest.importorskip(
    "verl.trainer.ppo.v1.replay_buffer", reason="needs verl==0.9.1 and TransferQueue (run .ci/verl)"
)

import torch
from verl.trainer.ppo.core_algos import agg_loss

from doubles.verl_rollout import FakeRollout, dapo_member, make_sampler
from group_admission import SessionConfig
from group_admission.adapters.verl import VerlAdmissionSettings

N = 4
TARGET = 4
LENGTH = 16  # response length: verl's loss_mask width, and the constant loss_scale_factor


def one_in_three_alive(index: int):
    if index % 3 == 0:
        return [dapo_member(float(i % 2)) for i in range(N)]
    return [dapo_member(1.0) for _ in range(N)]  # all right: no signal


def short_step(tq, mode: str) -> tuple[int, float]:
    """A real short step through the sampler: the groups it trains on and the scale it logs."""
    rollout = FakeRollout(tq, one_in_three_alive)
    sampler = make_sampler(
        rollout.refill,
        policy={"min_reward_std": 1e-6, "gate_on": ["acc"]},
        budget={"max_extra_groups": 4, "max_resample_rounds": 1},
        loss_scale=mode,
    )
    rollout.submit(TARGET)  # verl's prepare_step dispatches one train batch before sampling
    _, metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=TARGET)
    trained = int(metrics["group_admission/trained_groups"])
    assert 0 < trained < TARGET  # short: the case where the modes differ
    return trained, metrics["group_admission/loss_scale"]


def rows(groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A loss matrix and a mask of random response lengths, for ``groups`` groups of N."""
    generator = torch.Generator().manual_seed(groups)
    loss = torch.rand(groups * N, LENGTH, generator=generator, dtype=torch.float64)
    lengths = torch.randint(1, LENGTH + 1, (groups * N,), generator=generator)
    mask = (torch.arange(LENGTH) < lengths.unsqueeze(1)).to(torch.float64)
    return loss, mask


@pytest.mark.parametrize("mode_name", ["seq-mean-token-sum-norm", "seq-mean-token-mean"])
def test_target_is_verls_constant_normaliser_on_a_short_step(tq, mode_name: str) -> None:
    trained, scale = short_step(tq, "target")
    loss, mask = rows(trained)
    factor = LENGTH if mode_name == "seq-mean-token-sum-norm" else None

    # As verl's actor aggregates the step: global_batch_size = ppo_mini_batch_size x n = the target's rows.
    short = agg_loss(loss, mask, mode_name, global_batch_size=TARGET * N, loss_scale_factor=factor)
    kept_average = agg_loss(loss, mask, mode_name, global_batch_size=trained * N, loss_scale_factor=factor)
    missing = (TARGET - trained) * N
    full = agg_loss(
        torch.cat([loss, torch.zeros(missing, LENGTH, dtype=loss.dtype)]),
        torch.cat([mask, torch.ones(missing, LENGTH, dtype=mask.dtype)]),
        mode_name,
        global_batch_size=TARGET * N,
        loss_scale_factor=factor,
    )

    assert scale == pytest.approx(trained / TARGET)
    assert float(short) == pytest.approx(scale * float(kept_average))
    assert float(short) == pytest.approx(float(full))  # the full target, missing groups at zero


def test_kept_is_verls_token_mean(tq) -> None:
    trained, scale = short_step(tq, "kept")
    loss, mask = rows(trained)

    short = agg_loss(loss, mask, "token-mean")  # batch_num_tokens: the mini-batch's own tokens

    assert 1.0 == scale
    assert float(short) == pytest.approx(float((loss * mask).sum() / mask.sum()))


def test_an_unknown_loss_scale_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="'loss_scale' must be one of 'kept', 'target', 'linear', 'sqrt'"):
        VerlAdmissionSettings.from_mapping({"loss_scale": "token-mean"})


def test_the_recommended_block_fills_the_prompt_history() -> None:
    """The preset's history section is the sampler's ``history``, unless the block sets it to ``None``."""
    block = {"preset": "recommended", "policy": {"gate_on": ["acc"]}}

    settings = VerlAdmissionSettings.from_mapping(block)

    assert settings.history == dict(SessionConfig.from_mapping(block).history or {})
    assert settings.history
    assert VerlAdmissionSettings.from_mapping({**block, "history": None}).history is None


def test_the_recommended_block_in_sampler_kwargs_builds_the_session(tq) -> None:
    """``sampler_kwargs`` carries a SessionConfig block beside the sampler's own keys."""
    # history: None keeps verl's own sampler (the prompt sampler needs verl's PPOTrainer,
    # which tests/adapters/verl/test_prompt_history.py runs).
    block = {"preset": "recommended", "policy": {"gate_on": ["acc"]}, "history": None}
    config = SessionConfig.from_mapping(block)

    sampler = make_sampler(lambda count: count, **block, gen_batch_size=2)

    assert sampler.settings.policy == config.policy
    assert sampler.session.policy.config == config.policy
    assert sampler.settings.loss_scale == config.loss_scale
    assert sampler.settings.gen_batch_size == 2
    assert sampler.settings.history is None
