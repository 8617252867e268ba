"""
The policy update: clipped policy-gradient steps on a step's trained groups.

Advantages from the total reward (``grpo.group_advantages``), old log-probabilities from the
sampling snapshot, mini-batches of ``mini_batch_groups`` groups, ``ppo_epochs`` passes, and the
loss of each mini-batch multiplied by the session's loss scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from cookbook.grpo_gsm8k.config import TrainConfig
from cookbook.grpo_gsm8k.data import autocast
from cookbook.grpo_gsm8k.grpo import clipped_pg_loss, collate, group_advantages, token_logprobs
from cookbook.grpo_gsm8k.rollout import Group

__all__ = ["chunks", "update_policy"]


def chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``items`` in consecutive slices of ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]


Row = tuple[list[int], list[int], float]  # prompt ids, completion ids, advantage


@torch.no_grad()
def _snapshot_logprobs(
    model: Any, rows: Sequence[Row], indices: Sequence[int], config: TrainConfig, *, pad_id: int, device: str
) -> list[torch.Tensor | None]:
    """Token log-probs of the rows at ``indices`` under the current weights (``None`` elsewhere)."""
    old: list[torch.Tensor | None] = [None] * len(rows)
    for part in chunks(indices, config.micro_batch_size):
        batch = collate([rows[i][0] for i in part], [rows[i][1] for i in part], pad_id).to(device)
        with autocast(device, config.dtype):
            logprobs = token_logprobs(model, batch, temperature=config.temperature)
        for k, i in enumerate(part):
            old[i] = logprobs[k, : len(rows[i][1])]
    return old


def _backward(
    model: Any,
    rows: Sequence[Row],
    indices: Sequence[int],
    old: list[torch.Tensor | None],
    config: TrainConfig,
    *,
    pad_id: int,
    device: str,
    loss_scale: float,
) -> tuple[float, list[float]]:
    """
    Accumulate the clipped loss's gradient over one mini-batch; return the loss and clip fractions.

    The gradient is the loss's times ``loss_scale`` (``StepReport.loss_scale``); the loss
    returned is the unscaled average.
    """
    if config.loss_aggregation == "token":
        normaliser = float(sum(len(rows[i][1]) for i in indices))
    else:
        normaliser = float(len(indices))
    loss_total, clip_fractions = 0.0, []
    for part in chunks(indices, config.micro_batch_size):
        batch = collate([rows[i][0] for i in part], [rows[i][1] for i in part], pad_id).to(device)
        with autocast(device, config.dtype):
            logprobs = token_logprobs(model, batch, temperature=config.temperature)
        old_padded = torch.zeros_like(logprobs)
        for k, i in enumerate(part):
            cached = old[i]
            if cached is None:  # first mini-batch, first epoch: the weights are the snapshot
                cached = old[i] = logprobs[k, : len(rows[i][1])].detach()
            old_padded[k, : len(cached)] = cached
        adv = torch.tensor([rows[i][2] for i in part], device=logprobs.device)
        loss, stats = clipped_pg_loss(
            logprobs,
            old_padded,
            adv,
            batch.completion_mask,
            clip_low=config.clip_eps,
            clip_high=config.clip_eps_high,
            aggregation=config.loss_aggregation,  # type: ignore[arg-type]
            normaliser=normaliser,
        )
        (loss * loss_scale).backward()  # type: ignore[no-untyped-call]
        loss_total += float(loss.detach())
        clip_fractions.append(stats["clip_fraction"])
    return loss_total, clip_fractions


def update_policy(
    model: Any,
    optimizer: torch.optim.Optimizer,
    groups: Sequence[Group],
    config: TrainConfig,
    *,
    pad_id: int,
    device: str,
    loss_scale: float = 1.0,
) -> dict[str, float]:
    """
    Clipped policy-gradient updates on the step's groups; returns loss and diagnostics.

    The old log-probabilities are taken once, from the sampling snapshot, before the first
    update; mini-batches of ``mini_batch_groups`` groups each take one optimizer step, for
    ``ppo_epochs`` passes, so the clip binds from the second mini-batch on. Every
    mini-batch's loss, averaged over its tokens (or completions), is multiplied by
    ``loss_scale``: the session's ``StepReport.loss_scale``, so that a step trained on fewer
    groups than its target weighs what the preset's loss-scale mode says.
    """
    rewards = torch.tensor([g.total_reward for g in groups], dtype=torch.float32)
    advantages = group_advantages(rewards, config.advantage_scale)  # type: ignore[arg-type]
    rows = [
        (g.prompt_ids, ids, float(advantages[i, j]))
        for i, g in enumerate(groups)
        for j, ids in enumerate(g.completion_ids)
    ]
    per_update = (config.mini_batch_groups or len(groups)) * config.num_generations
    # Old log-probs come from the sampling snapshot. The first mini-batch is scored before
    # any update, so its own forward pass provides them; only later rows need a pass now.
    later = list(range(per_update if config.ppo_epochs == 1 else 0, len(rows)))
    old = _snapshot_logprobs(model, rows, later, config, pad_id=pad_id, device=device)
    losses, clip_fractions, norms = [], [], []
    for _ in range(config.ppo_epochs):
        for start in range(0, len(rows), per_update):
            indices = list(range(start, min(start + per_update, len(rows))))
            optimizer.zero_grad(set_to_none=True)
            loss, fractions = _backward(
                model, rows, indices, old, config, pad_id=pad_id, device=device, loss_scale=loss_scale
            )
            clip_fractions += fractions
            norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)))
            optimizer.step()
            losses.append(loss)
    return {
        "loss": float(np.mean(losses)),
        "clip_fraction": float(np.mean(clip_fractions)),
        "grad_norm": float(np.mean(norms)),
        "updates": float(len(losses)),
    }
