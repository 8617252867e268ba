"""Admission statistics and budget state travel with TRL checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from trl_helpers import accuracy, brevity, grpo_config, prompt_dataset

from group_admission.adapters.trl import STATE_FILE, AdmissionGRPOTrainer

PLAN_KEYS = ("generated_groups", "sampling_rounds", "effective_rate", "short_groups", "exhausted")


def run(tiny_model: str, out: Path, resume: str | None = None) -> Any:
    trainer = AdmissionGRPOTrainer(
        model=tiny_model,
        reward_funcs=[accuracy, brevity],
        args=grpo_config(out, max_steps=4, save_strategy="steps", save_steps=2),
        train_dataset=prompt_dataset(),
        admission={"min_reward_std": 1e-6, "gate_on": ["accuracy"]},
        budget={"max_extra_groups": 2, "max_resample_rounds": 1},
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def plans(trainer: Any) -> list[tuple[float, ...]]:
    rows = [row for row in trainer.state.log_history if "group_admission/sampling_rounds" in row]
    return [tuple(row[f"group_admission/{key}"] for key in PLAN_KEYS) for row in rows]


@pytest.mark.slow
def test_resume_restores_the_state_and_gives_identical_later_plans(tiny_model: str, tmp_path: Path) -> None:
    original = run(tiny_model, tmp_path / "a")
    checkpoint = tmp_path / "a" / "out" / "checkpoint-2"
    saved = json.loads((checkpoint / STATE_FILE).read_text())

    resumed = run(tiny_model, tmp_path / "b", resume=str(checkpoint))

    assert saved["session"]["stats"]["counts"]["candidates"] >= 4
    assert plans(original)[2:] == plans(resumed)[-2:]
    assert original.admission_session.state_dict() == resumed.admission_session.state_dict()
