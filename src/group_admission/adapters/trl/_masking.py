"""
Turning group verdicts into TRL's batch: zero advantages, masked rows, a true normaliser.

TRL normalises each loss type differently (read from ``GRPOTrainer._compute_loss`` of
trl 1.16). Masking a rejected row removes its tokens from every masked sum, so what is
left to fix is the normaliser:

- ``dapo``, ``cispo``, ``vespo`` divide by ``num_items_in_batch``, computed before the
  rewards: it is recomputed from the masked loss mask.
- ``bnpo`` divides by the micro-batch's own mask sum: masked rows already drop out.
- ``grpo``, ``sapo``, ``luspo`` average per-row values over the rows, ``dr_grpo`` divides
  by ``rows x max_completion_length``: masked rows still count as rows, so the admitted
  rows' advantages are scaled by ``rows / admitted_rows`` (over the whole gathered batch).
  The policy term is linear in a positive advantage scale, so this is exact; the KL term
  does not carry the advantage, so it is exact only at ``beta == 0``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._trl_imports import torch

__all__ = [
    "NORMALISATION",
    "ROW_COUNT_LOSSES",
    "mask_rejected_rows",
    "row_keep",
    "zero_std_fraction",
]

#: How each TRL ``loss_type`` is made exact after masking (documented in docs/adapters/trl.md).
NORMALISATION: dict[str, str] = {
    "dapo": "recount num_items_in_batch",
    "cispo": "recount num_items_in_batch",
    "vespo": "recount num_items_in_batch",
    "bnpo": "none needed (per micro-batch token mean)",
    "grpo": "advantages x rows/admitted_rows (exact at beta=0)",
    "sapo": "advantages x rows/admitted_rows (exact at beta=0)",
    "luspo": "advantages x rows/admitted_rows (exact at beta=0)",
    "dr_grpo": "advantages x rows/admitted_rows (exact at beta=0)",
}
#: Loss types whose normaliser counts rows, masked or not.
ROW_COUNT_LOSSES = frozenset({"grpo", "sapo", "luspo", "dr_grpo"})


def row_keep(group_keep: Any, num_generations: int, device: torch.device) -> torch.Tensor:
    """Expand a ``(G,)`` group verdict to a ``(G * num_generations,)`` row mask."""
    keep = torch.as_tensor(group_keep, dtype=torch.bool, device=device)
    return keep.repeat_interleave(num_generations)


def mask_rejected_rows(
    output: dict[str, Any],
    local_keep: torch.Tensor,
    *,
    loss_type: str,
    admitted_rows: int,
    total_rows: int,
    gather_sum: Callable[[torch.Tensor], torch.Tensor],
) -> dict[str, Any]:
    """
    Return a copy of TRL's batch in which the rows outside ``local_keep`` train on nothing.

    Args:
        output: What ``_generate_and_score_completions`` returned for this rank.
        local_keep: ``(B_local,)`` bool: this rank's rows that belong to admitted groups.
        loss_type: TRL's ``loss_type``.
        admitted_rows: Admitted rows over every rank.
        total_rows: All rows over every rank.
        gather_sum: Sums a scalar tensor over ranks (``accelerator.gather(x).sum()``).
    """
    masked = dict(output)
    keep = local_keep.to(output["completion_mask"].dtype).unsqueeze(1)
    # New tensors, never in-place writes: TRL reuses the buffered batch across iterations.
    masked["completion_mask"] = output["completion_mask"] * keep
    loss_mask = masked["completion_mask"]
    if output.get("tool_mask") is not None:
        masked["tool_mask"] = output["tool_mask"] * keep.to(output["tool_mask"].dtype)
        loss_mask = loss_mask * masked["tool_mask"]
    advantages = output["advantages"]
    row_scale = local_keep.to(advantages.dtype)
    if loss_type in ROW_COUNT_LOSSES and admitted_rows > 0:
        row_scale = row_scale * (total_rows / admitted_rows)
    masked["advantages"] = advantages * (row_scale if advantages.dim() == 1 else row_scale.unsqueeze(1))
    masked["num_items_in_batch"] = gather_sum(loss_mask.sum())
    return masked


def zero_std_fraction(rewards: torch.Tensor, num_generations: int) -> float:
    """
    The share of groups whose trained reward has zero spread, judged group by group.

    TRL's ``frac_reward_zero_std`` compares the std it scales by, which under
    ``scale_rewards="batch"`` is one number for the whole batch.
    """
    grouped = rewards.view(-1, num_generations)
    missing = torch.isnan(grouped)
    # ``None`` rewards (NaN) do not count, as in TRL's nan-aware statistics.
    high = torch.where(missing, -torch.inf, grouped).amax(dim=1)
    low = torch.where(missing, torch.inf, grouped).amin(dim=1)
    spread = torch.where(missing.all(dim=1), torch.zeros_like(high), high - low)
    return float(torch.isclose(spread, torch.zeros_like(spread)).float().mean().item())
