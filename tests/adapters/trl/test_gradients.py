"""With ``loss_scale="kept"``, masked rejected groups give the gradient of the batch without them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from trl import GRPOTrainer
from trl_helpers import accuracy, brevity, grpo_config, prompt_dataset

from group_admission.adapters.trl import AdmissionGRPOTrainer

# Stated bound: max |g_masked - g_removed| / max |g_removed| over all parameters.
MAX_RELATIVE_ERROR = 1e-5
LOSS_TYPES = ["dapo", "bnpo", "grpo", "dr_grpo", "sapo", "cispo", "luspo", "vespo"]
# The KL term carries no advantage, so a row-count rescale cannot reach it.
EXACT_WITH_KL = ["dapo", "bnpo", "cispo"]
ROW_FIELDS = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages")


def make_trainer(
    tiny_model: str,
    tmp_path: Path,
    loss_type: str,
    beta: float = 0.0,
    *,
    loss_scale: str = "kept",
    dataset: Any = None,
    groups: int = 4,
) -> Any:
    extra: dict[str, Any] = {"importance_sampling_level": "sequence"} if loss_type == "luspo" else {}
    args = grpo_config(
        tmp_path, loss_type=loss_type, beta=beta, per_device_train_batch_size=4 * groups, **extra
    )
    return AdmissionGRPOTrainer(
        model=tiny_model,
        reward_funcs=[accuracy, brevity],
        args=args,
        train_dataset=prompt_dataset(16) if dataset is None else dataset,
        admission={"min_reward_std": 1e-6, "gate_on": ["accuracy"]},
        loss_scale=loss_scale,
    )


def generation_batch(trainer: Any) -> list[dict[str, Any]]:
    """Four prompts (dead, live, dead, live), each repeated num_generations times."""
    rows = [trainer.train_dataset[i] for i in range(4)]
    return [dict(row) for row in rows for _ in range(trainer.num_generations)]


def gradient(trainer: Any, batch: dict[str, Any]) -> torch.Tensor:
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(); one micro-batch here
    trainer.model.zero_grad(set_to_none=True)
    trainer.compute_loss(trainer.model, batch).backward()
    return torch.cat([p.grad.reshape(-1) for p in trainer.model.parameters() if p.grad is not None])


def masked_and_removed(trainer: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    trainer.model.train()
    torch.manual_seed(0)
    raw = GRPOTrainer._generate_and_score_completions(trainer, generation_batch(trainer))
    trainer._captured = None
    torch.manual_seed(0)
    masked = trainer._generate_and_score_completions(generation_batch(trainer))
    assert torch.equal(raw["completion_ids"], masked["completion_ids"])  # same generations
    keep = masked["completion_mask"].sum(dim=1) > 0
    keep |= torch.arange(keep.numel()) % 8 >= 4  # live groups (rows 4-7, 12-15) always stay
    removed = {key: raw[key][keep] for key in ROW_FIELDS}
    removed["num_items_in_batch"] = removed["completion_mask"].sum()
    for key in ("old_per_token_logps", "ref_per_token_logps"):
        if key in raw:
            removed[key] = raw[key][keep]
    return masked, removed


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_masked_gradient_equals_removed_gradient(tiny_model: str, tmp_path: Path, loss_type: str) -> None:
    trainer = make_trainer(tiny_model, tmp_path, loss_type)
    masked, removed = masked_and_removed(trainer)

    expected, actual = gradient(trainer, removed), gradient(trainer, masked)

    error = float((actual - expected).abs().max() / expected.abs().max())
    assert expected.abs().max() > 0
    assert error < MAX_RELATIVE_ERROR, f"{loss_type}: relative error {error:.2e}"


def move_policy(trainer: Any) -> Any:
    """Move the policy away from the reference, so that a KL term (beta > 0) has a gradient."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in trainer.model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    return trainer


def kl_trainer(tiny_model: str, tmp_path: Path, loss_type: str) -> Any:
    """beta > 0 with the policy moved away from the reference, so the KL term has a gradient."""
    return move_policy(make_trainer(tiny_model, tmp_path, loss_type, beta=0.5))


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", EXACT_WITH_KL)
def test_token_normalised_losses_stay_exact_with_kl(tiny_model: str, tmp_path: Path, loss_type: str) -> None:
    trainer = kl_trainer(tiny_model, tmp_path, loss_type)
    masked, removed = masked_and_removed(trainer)

    expected, actual = gradient(trainer, removed), gradient(trainer, masked)

    assert float((actual - expected).abs().max() / expected.abs().max()) < MAX_RELATIVE_ERROR


@pytest.mark.slow
def test_row_normalised_losses_are_not_exact_with_kl(tiny_model: str, tmp_path: Path) -> None:
    """The documented limit: grpo's KL term is averaged over all rows, masked ones included."""
    trainer = kl_trainer(tiny_model, tmp_path, "grpo")
    masked, removed = masked_and_removed(trainer)

    expected, actual = gradient(trainer, removed), gradient(trainer, masked)

    assert float((actual - expected).abs().max() / expected.abs().max()) > 1e-3


def test_rejected_rows_leave_the_normaliser(tiny_model: str, tmp_path: Path) -> None:
    trainer = make_trainer(tiny_model, tmp_path, "dapo")
    masked, removed = masked_and_removed(trainer)

    dead_rows = torch.arange(16) % 8 < 4
    assert int(masked["completion_mask"][dead_rows].sum()) == 0
    assert torch.equal(masked["advantages"][dead_rows], torch.zeros(8))
    assert int(masked["num_items_in_batch"]) == int(removed["completion_mask"].sum())
