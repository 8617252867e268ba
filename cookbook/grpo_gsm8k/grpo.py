"""
The GRPO maths, in pure torch: no sampling, no admission.

Group-normalised advantages, completion masks, token log-probabilities and the clipped
policy-gradient loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch

__all__ = [
    "AdvantageScale",
    "Collated",
    "clipped_pg_loss",
    "collate",
    "completion_mask",
    "group_advantages",
    "parameter_checksum",
    "token_logprobs",
]

AdvantageScale = Literal["group", "batch", "none"]
ADVANTAGE_SCALES: tuple[AdvantageScale, ...] = ("group", "batch", "none")
LossAggregation = Literal["token", "sequence"]
LOSS_AGGREGATIONS: tuple[LossAggregation, ...] = ("token", "sequence")
_EPS = 1e-6


def group_advantages(rewards: torch.Tensor, scale: AdvantageScale = "group") -> torch.Tensor:
    """
    GRPO advantages of a ``(groups, G)`` reward matrix.

    Each reward minus its group's mean, divided by the group's std (``group``, GRPO), by
    the std of every reward in the batch (``batch``), or not divided (``none``, Dr. GRPO).
    The std is Bessel-corrected, as in TRL and verl; ``1e-6`` guards the division.

    Raises:
        ValueError: ``rewards`` is not 2-D with at least two columns, or ``scale`` is unknown.
    """
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError(f"'rewards' must have shape (groups, G) with G >= 2 (got {tuple(rewards.shape)})")
    if scale not in ADVANTAGE_SCALES:
        raise ValueError(f"'scale' must be one of {ADVANTAGE_SCALES} (got {scale!r})")
    rewards = rewards.to(torch.float64)
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if scale == "group":
        centred = centred / (rewards.std(dim=1, keepdim=True) + _EPS)
    elif scale == "batch":
        centred = centred / (rewards.std() + _EPS) if rewards.numel() > 1 else centred
    return centred.to(torch.float32)


def completion_mask(completion_ids: torch.Tensor, eos_ids: Sequence[int]) -> torch.Tensor:
    """
    ``True`` on every completion token up to and including the first EOS, ``False`` after it.

    A completion without EOS (truncated at ``max_new_tokens``) is kept whole. Padding that
    ``generate`` appends after EOS is masked whatever its id.
    """
    is_eos = torch.isin(completion_ids, torch.tensor(list(eos_ids), device=completion_ids.device))
    # Number of EOS tokens strictly before each position: zero means "not past the first EOS".
    before = torch.cumsum(is_eos.long(), dim=1) - is_eos.long()
    return before == 0


class Collated:
    """A padded training batch: ``[left pad | prompt | completion | right pad]`` per row."""

    def __init__(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        completion_mask: torch.Tensor,
        completion_width: int,
    ) -> None:
        self.input_ids = input_ids
        self.attention_mask = attention_mask
        self.completion_mask = completion_mask
        self.completion_width = completion_width

    def to(self, device: str | torch.device) -> Collated:
        """The batch on ``device``."""
        return Collated(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.completion_mask.to(device),
            self.completion_width,
        )


def collate(
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    pad_id: int,
) -> Collated:
    """
    Pad prompts on the left and completions (already cut after their first EOS) on the right.

    Every completion then starts at the same column and the loss sees completion tokens
    only: prompt tokens and padding are outside ``completion_mask``.
    """
    if len(prompts) != len(completions) or not prompts:
        raise ValueError(f"need one prompt per completion (got {len(prompts)} and {len(completions)})")
    prompt_width = max(len(p) for p in prompts)
    completion_width = max(1, *(len(c) for c in completions))
    rows = len(prompts)
    input_ids = torch.full((rows, prompt_width + completion_width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    mask = torch.zeros((rows, completion_width), dtype=torch.bool)
    for row, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        start = prompt_width - len(prompt)
        input_ids[row, start:prompt_width] = torch.as_tensor(prompt, dtype=torch.long)
        input_ids[row, prompt_width : prompt_width + len(completion)] = torch.as_tensor(
            completion, dtype=torch.long
        )
        attention[row, start : prompt_width + len(completion)] = 1
        mask[row, : len(completion)] = True
    return Collated(input_ids, attention, mask, completion_width)


def token_logprobs(model: Any, batch: Collated, *, temperature: float = 1.0) -> torch.Tensor:
    """
    Log-probabilities of the completion tokens, shape ``(rows, completion_width)``.

    Only the logits that predict completion tokens are materialised (``logits_to_keep``),
    which matters for 150k-token vocabularies. Position ids follow the attention mask, as
    in ``generate``, so left padding does not shift positions.
    """
    width = batch.completion_width
    positions = (batch.attention_mask.cumsum(dim=1) - 1).clamp(min=0)
    logits = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=positions,
        logits_to_keep=width + 1,
        use_cache=False,
    ).logits[:, :-1, :]
    logits = logits.float() / temperature
    targets = batch.input_ids[:, -width:]
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def clipped_pg_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float | None = None,
    aggregation: LossAggregation = "token",
    normaliser: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """
    PPO's clipped surrogate over completion tokens (prompt, padding and post-EOS excluded).

    ``advantages`` holds one value per row (the sequence's advantage, broadcast to its
    tokens). ``clip_high`` defaults to ``clip_low`` (DAPO's clip-higher when larger).
    ``aggregation="token"`` averages over every masked token of the batch (DAPO; long
    completions weigh more); ``"sequence"`` averages each completion over its own tokens,
    then over completions (the original GRPO; every completion weighs the same).
    ``normaliser`` replaces the denominator (the token count, or the row count), so the
    micro-batches of one mini-batch add up to the mini-batch's mean.

    Returns:
        The loss (a scalar to minimise) and ``{"clip_fraction", "ratio_mean"}``.
    """
    high = clip_low if clip_high is None else clip_high
    ratio = torch.exp(logprobs - old_logprobs)
    per_token_adv = advantages.unsqueeze(1).to(logprobs.dtype)
    unclipped = ratio * per_token_adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + high) * per_token_adv
    objective = torch.minimum(unclipped, clipped)
    weight = mask.to(logprobs.dtype)
    if aggregation == "token":
        total = (objective * weight).sum()
        count = float(weight.sum()) if normaliser is None else normaliser
    elif aggregation == "sequence":
        total = ((objective * weight).sum(dim=1) / weight.sum(dim=1).clamp(min=1.0)).sum()
        count = float(weight.shape[0]) if normaliser is None else normaliser
    else:
        raise ValueError(f"'aggregation' must be one of {LOSS_AGGREGATIONS} (got {aggregation!r})")
    loss = -total / max(count, 1.0)
    with torch.no_grad():
        active = weight.sum().clamp(min=1.0)
        stats = {
            "clip_fraction": float(((clipped < unclipped).to(weight.dtype) * weight).sum() / active),
            "ratio_mean": float((ratio * weight).sum() / active),
        }
    return loss, stats


@torch.no_grad()
def parameter_checksum(model: Any) -> float:
    """
    A cheap fingerprint of the weights (a weighted sum of every parameter).

    Equal within a step proves every sampling round used one policy snapshot; different
    across steps proves the optimizer moved the weights.
    """
    total = torch.zeros((), dtype=torch.float64)
    for index, parameter in enumerate(model.parameters()):
        total += (index + 1) * parameter.detach().to(torch.float64).sum().cpu()
    return float(total)
