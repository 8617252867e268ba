"""
The loss scale RAGEN applies after the filter, and the tokens its batch decoded.

``RayAgentTrainer.train_step`` runs RAGEN's own loss scaling (agent_trainer.py:1113-1117 and
1401-1408 at 20daedc: ``filter_kept_ratio`` into ``meta_info``, then the advantages times it,
or its square root); the filter, built from the config as ``install()`` builds it, logs the
scale that RAGEN then applies.
"""

from __future__ import annotations

import math

import pytest

from group_admission import loss_scale
from group_admission.adapters.ragen import RagenGroupAdmissionFilter

from .ragen_types import RayAgentTrainer, base_config, make_batch

BINARY = [1, 0, 1, 0, 1, 1, 1, 1, 0, 0.5, 0, 0, 0, 0, 0, 0]  # 4 groups of 4: 2 admitted
PREFIX = "rollout/group_admission/"


def trainer(scaling: str, selection: str = "none", value: float = 1.0) -> RayAgentTrainer:
    config = base_config(rollout_filter_strategy="group_admission", rollout_filter_value=value)
    config.es_manager.train.env_groups = 4
    config.actor_rollout_ref.actor.filter_loss_scaling = scaling
    config.actor_rollout_ref.rollout.group_admission = {
        "policy": {"min_reward_std": 1e-6},
        "selection": selection,
    }
    host = RayAgentTrainer(config)
    host.rollout_filter = RagenGroupAdmissionFilter.from_config(config)
    return host


@pytest.mark.parametrize(("scaling", "mode"), [("none", "kept"), ("linear", "linear"), ("sqrt", "sqrt")])
@pytest.mark.parametrize(("selection", "value", "kept"), [("none", 1.0, 2), ("top_k_abs", 1.0, 1)])
def test_the_logged_loss_scale_is_the_factor_ragen_applies(
    scaling: str, mode: str, selection: str, value: float, kept: int
) -> None:
    host = trainer(scaling, selection, value)

    out, metrics = host.train_step(make_batch(BINARY, group_ids=[g for g in range(4) for _ in range(4)]))

    applied = out.batch["advantages"][0].item()  # advantages of 1, times what RAGEN applies
    assert mode == host.rollout_filter.session.loss_scale
    assert applied == pytest.approx(metrics[f"{PREFIX}loss_scale"])
    expected = {"kept": 1.0, "linear": kept / 4, "sqrt": math.sqrt(kept / 4)}[mode]
    assert metrics[f"{PREFIX}loss_scale"] == pytest.approx(expected)  # the selection's groups count


def test_linear_is_the_target_scale_because_ragen_generates_exactly_its_groups() -> None:
    for trained in range(5):
        target = loss_scale("target", trained_groups=trained, target_groups=4, generated_groups=4)
        assert target == loss_scale("linear", trained_groups=trained, target_groups=4, generated_groups=4)


def test_every_token_of_the_batch_is_counted_before_any_group_is_dropped() -> None:
    host = trainer("none")
    batch = make_batch(BINARY, group_ids=[g for g in range(4) for _ in range(4)], tokens=6)
    decoded = int(batch.batch["loss_mask"].sum())

    _, metrics = host.train_step(batch)
    _, again = host.train_step(
        make_batch(BINARY, group_ids=[g for g in range(4) for _ in range(4)], tokens=6)
    )

    assert (decoded, decoded, 0) == (
        metrics[f"{PREFIX}decoded_tokens"],
        metrics[f"{PREFIX}generated_tokens"],
        metrics[f"{PREFIX}aborted_tokens"],
    )
    assert decoded == again[f"{PREFIX}decoded_tokens"]  # per step, not cumulative
    assert 2 * decoded == host.rollout_filter.session.tokens.decoded
