"""
The loss scale in TRL, measured with TRL 1.16's own ``compute_loss``: every loss type, every mode.

The reference of ``"target"`` is TRL itself on the full generation batch, its rejected groups
at zero advantage and still in the batch: two informative groups of eight must take that
update. ``"linear"`` and ``"sqrt"`` are ``"kept"`` times the step's ``loss_scale``.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import torch
from test_gradients import LOSS_TYPES, MAX_RELATIVE_ERROR, gradient, make_trainer, move_policy
from trl import GRPOTrainer

#: Eight groups, two of them informative: the step keeps 2 of its target of 8.
KINDS = ["dead", "dead", "live", "dead", "dead", "dead", "live", "dead"]
GROUP = 4  # num_generations of grpo_config


def eight_groups() -> Any:
    from datasets import Dataset

    return Dataset.from_list(
        [{"prompt": f"Tom has {i} pens. How many?", "kind": k} for i, k in enumerate(KINDS)]
    )


def trainer_for(tiny_model: str, tmp_path: Path, loss_type: str, mode: str, beta: float = 0.0) -> Any:
    trainer = make_trainer(
        tiny_model, tmp_path, loss_type, beta, loss_scale=mode, dataset=eight_groups(), groups=len(KINDS)
    )
    return move_policy(trainer) if beta else trainer


def batch(trainer: Any) -> list[dict[str, Any]]:
    return [dict(trainer.train_dataset[i]) for i in range(len(KINDS)) for _ in range(GROUP)]


def ours_and_full(trainer: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The adapter's batch, and TRL's own of the same generations, the rejected rows at advantage 0."""
    trainer.model.train()
    torch.manual_seed(0)
    full = GRPOTrainer._generate_and_score_completions(trainer, batch(trainer))
    trainer._captured = None
    torch.manual_seed(0)
    ours = trainer._generate_and_score_completions(batch(trainer))
    assert torch.equal(full["completion_ids"], ours["completion_ids"])  # the same generations
    rejected = torch.tensor([kind == "dead" for kind in KINDS]).repeat_interleave(GROUP)
    full["advantages"] = torch.where(rejected, torch.zeros_like(full["advantages"]), full["advantages"])
    return ours, full


def kl_only(inputs: dict[str, Any]) -> dict[str, Any]:
    """The same batch at zero advantage: its loss is its KL term alone."""
    return {**inputs, "advantages": torch.zeros_like(inputs["advantages"])}


def relative(actual: torch.Tensor, expected: torch.Tensor) -> float:
    assert expected.abs().max() > 0
    return float((actual - expected).abs().max() / expected.abs().max())


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_target_takes_the_update_of_the_full_batch_with_zero_advantage_groups(
    tiny_model: str, tmp_path: Path, loss_type: str
) -> None:
    trainer = trainer_for(tiny_model, tmp_path, loss_type, "target")
    ours, full = ours_and_full(trainer)

    assert (2, 8, 0.25) == (
        trainer.last_report.trained_groups,
        trainer.last_report.target_groups,
        trainer.last_report.loss_scale,
    )
    error = relative(gradient(trainer, ours), gradient(trainer, full))
    assert error < MAX_RELATIVE_ERROR, f"{loss_type}: relative error {error:.2e}"


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_with_kl_target_differs_from_the_full_batch_by_the_kl_of_the_rows_it_masks(
    tiny_model: str, tmp_path: Path, loss_type: str
) -> None:
    """
    The caveat at beta > 0: a rejected group trains on nothing, KL included.

    The full batch keeps the rejected rows' KL; the adapter's masks it. The policy terms
    agree (the test above), so the two updates differ by exactly the two batches' KL
    terms, each measured by TRL on the batch at zero advantage.
    """
    trainer = trainer_for(tiny_model, tmp_path, loss_type, "target", beta=0.5)
    ours, full = ours_and_full(trainer)

    g_ours, g_full = gradient(trainer, ours), gradient(trainer, full)
    kl_gap = gradient(trainer, kl_only(ours)) - gradient(trainer, kl_only(full))

    assert relative(g_ours, g_full) > 1e-3  # the caveat is real: not the full batch's update
    assert relative(g_ours - g_full, kl_gap) < 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["linear", "sqrt"])
@pytest.mark.parametrize("loss_type", ["dapo", "bnpo", "grpo", "dr_grpo"])
def test_the_kept_fraction_modes_scale_the_kept_update_by_the_steps_loss_scale(
    tiny_model: str, tmp_path: Path, loss_type: str, mode: str
) -> None:
    kept = trainer_for(tiny_model, tmp_path, loss_type, "kept")
    scaled = trainer_for(tiny_model, tmp_path, loss_type, mode)
    torch.manual_seed(0)
    kept.model.train()
    kept_batch = kept._generate_and_score_completions(batch(kept))
    torch.manual_seed(0)
    scaled.model.train()
    scaled_batch = scaled._generate_and_score_completions(batch(scaled))

    factor = scaled.last_report.loss_scale
    assert factor == pytest.approx(0.25 if mode == "linear" else 0.5)  # 2 kept of 8 generated
    error = relative(gradient(scaled, scaled_batch), factor * gradient(kept, kept_batch))
    assert error < MAX_RELATIVE_ERROR


def test_the_default_is_the_sessions_and_the_scale_is_logged(tiny_model: str, tmp_path: Path) -> None:
    from group_admission import AdmissionSession
    from group_admission.adapters.trl import AdmissionMixin

    default = inspect.signature(AdmissionMixin.__init__).parameters["loss_scale"].default
    assert default == AdmissionSession().loss_scale
    trainer = make_trainer(tiny_model, tmp_path, "dapo", loss_scale=default, dataset=eight_groups(), groups=8)
    trainer.model.train()
    trainer._generate_and_score_completions(batch(trainer))

    assert [0.25] == trainer._metrics["train"]["group_admission/loss_scale"]


@pytest.mark.parametrize("truncate", [False, True], ids=["kept whole", "mask_truncated_completions"])
def test_every_decoded_token_is_counted_truncated_completions_included(
    tiny_model: str, tmp_path: Path, truncate: bool
) -> None:
    plain = make_trainer(tiny_model, tmp_path, "dapo", dataset=eight_groups(), groups=8)
    trainer = make_trainer(tiny_model, tmp_path / "t", "dapo", dataset=eight_groups(), groups=8)
    trainer.args.mask_truncated_completions = trainer.mask_truncated_completions = truncate
    plain.model.train()
    torch.manual_seed(0)
    raw = GRPOTrainer._generate_and_score_completions(plain, batch(plain))
    plain._captured = None
    trainer.model.train()
    torch.manual_seed(0)
    trainer._generate_and_score_completions(batch(trainer))

    decoded = int(raw["completion_mask"].sum())  # every completion token, none masked
    assert (raw["completion_mask"].sum(dim=1) == trainer.max_completion_length).any()  # some are truncated
    report = trainer.last_report
    assert (decoded, decoded) == (report.generated_tokens, report.decoded_tokens)
    assert [decoded] == trainer._metrics["train"]["group_admission/decoded_tokens"]
