"""
Turning group verdicts into TRL's batch: zero advantages, masked rows, the normaliser of the loss scale.

A rejected row is masked (``completion_mask`` and ``tool_mask`` 0) and gets advantage 0, so
it leaves every masked sum of ``GRPOTrainer._compute_loss`` (trl 1.16): the policy loss, the
KL term, the entropy bonus. What is left is the normaliser, which TRL computes differently
per loss type, and which the session's loss-scale mode chooses (:func:`row_factor`):

- ``"target"``: the update of the full batch with the rejected rows at zero advantage
  (Dr. GRPO's constant denominator). ``dapo``, ``cispo`` and ``vespo`` divide by
  ``num_items_in_batch``, which keeps the batch's token count; ``grpo``, ``sapo``,
  ``luspo`` and ``dr_grpo`` count masked rows as rows already; ``bnpo`` divides by the
  micro-batch's mask sum, so the kept rows' advantages are scaled by kept / all tokens of
  the generation batch (exact when a generation batch is one micro-batch).
- ``"kept"``: the loss averaged over the kept rows alone, as if the rejected rows were
  removed: ``num_items_in_batch`` is recounted after masking; the row-count losses scale
  the kept rows' advantages by ``rows / kept_rows`` (over the whole gathered batch).
- ``"linear"``, ``"sqrt"``: ``"kept"``, then the kept rows' advantages times the step's
  ``loss_scale`` (RAGEN's kept fraction, or its square root).

Every policy term is linear in a positive advantage scale, so each scale is exact for it.
The KL term carries no advantage: with ``beta > 0`` a rejected row has no KL (it trains on
nothing), unlike the full batch's zero-advantage row, and the advantage scales do not
reach the kept rows' KL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._trl_imports import torch

__all__ = [
    "NORMALISATION",
    "ROW_COUNT_LOSSES",
    "mask_rejected_rows",
    "row_factor",
    "row_keep",
    "zero_std_fraction",
]

_RECOUNT = {"kept": "recount num_items_in_batch", "target": "num_items_in_batch of the full batch"}
_ROWS = {"kept": "advantages x rows/kept_rows", "target": "none needed (masked rows count as rows)"}
#: How each TRL ``loss_type`` takes the ``"kept"`` and ``"target"`` loss scales after masking
#: (``"linear"`` and ``"sqrt"``: ``"kept"``, then the advantages x the step's ``loss_scale``;
#: documented in docs/adapters/trl.md).
NORMALISATION: dict[str, dict[str, str]] = {
    "dapo": _RECOUNT,
    "cispo": _RECOUNT,
    "vespo": _RECOUNT,
    "bnpo": {
        "kept": "none needed (per micro-batch token mean)",
        "target": "advantages x kept_tokens/all_tokens (of the generation batch)",
    },
    "grpo": _ROWS,
    "sapo": _ROWS,
    "luspo": _ROWS,
    "dr_grpo": _ROWS,
}
#: Loss types whose normaliser counts rows, masked or not.
ROW_COUNT_LOSSES = frozenset({"grpo", "sapo", "luspo", "dr_grpo"})


def row_keep(group_keep: Any, num_generations: int, device: torch.device) -> torch.Tensor:
    """Expand a ``(G,)`` group verdict to a ``(G * num_generations,)`` row mask."""
    keep = torch.as_tensor(group_keep, dtype=torch.bool, device=device)
    return keep.repeat_interleave(num_generations)


def row_factor(
    loss_type: str, mode: str, scale: float, *, rows: tuple[int, int], tokens: tuple[float, float]
) -> float:
    """
    The factor on the kept rows' advantages that gives ``loss_type`` the loss scale ``mode``.

    Args:
        loss_type: TRL's ``loss_type``.
        mode: The session's loss-scale mode.
        scale: The step's :attr:`StepReport.loss_scale` (used by ``"linear"`` and ``"sqrt"``).
        rows: (kept rows, all rows) over every rank.
        tokens: (kept, all) loss-mask tokens over every rank.
    """
    kept_rows, all_rows = rows
    kept_tokens, all_tokens = tokens
    if mode == "target":
        return kept_tokens / all_tokens if loss_type == "bnpo" and all_tokens > 0 else 1.0
    factor = all_rows / kept_rows if loss_type in ROW_COUNT_LOSSES and kept_rows > 0 else 1.0
    return factor * (scale if mode in ("linear", "sqrt") else 1.0)


def mask_rejected_rows(
    output: dict[str, Any],
    local_keep: torch.Tensor,
    *,
    loss_type: str,
    mode: str,
    scale: float,
    rows: tuple[int, int],
    gather_sum: Callable[[torch.Tensor], torch.Tensor],
) -> dict[str, Any]:
    """
    Return a copy of TRL's batch in which the rows outside ``local_keep`` train on nothing.

    Args:
        output: What ``_generate_and_score_completions`` returned for this rank.
        local_keep: ``(B_local,)`` bool: this rank's rows that belong to kept groups.
        loss_type: TRL's ``loss_type``.
        mode: The session's loss-scale mode.
        scale: The step's ``loss_scale``.
        rows: (kept rows, all rows) over every rank.
        gather_sum: Sums a scalar tensor over ranks (``accelerator.gather(x).sum()``).
    """
    masked = dict(output)
    keep = local_keep.to(output["completion_mask"].dtype).unsqueeze(1)
    full_mask = output["completion_mask"]
    if output.get("tool_mask") is not None:
        full_mask = full_mask * output["tool_mask"]
    # New tensors, never in-place writes: TRL reuses the buffered batch across iterations.
    masked["completion_mask"] = output["completion_mask"] * keep
    loss_mask = masked["completion_mask"]
    if output.get("tool_mask") is not None:
        masked["tool_mask"] = output["tool_mask"] * keep.to(output["tool_mask"].dtype)
        loss_mask = loss_mask * masked["tool_mask"]
    kept_tokens, all_tokens = gather_sum(loss_mask.sum()), gather_sum(full_mask.sum())
    factor = row_factor(
        loss_type, mode, scale, rows=rows, tokens=(float(kept_tokens.item()), float(all_tokens.item()))
    )
    advantages = output["advantages"]
    row_scale = local_keep.to(advantages.dtype) * factor
    masked["advantages"] = advantages * (row_scale if advantages.dim() == 1 else row_scale.unsqueeze(1))
    masked["num_items_in_batch"] = all_tokens if mode == "target" else kept_tokens
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
