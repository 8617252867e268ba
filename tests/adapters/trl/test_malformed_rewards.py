"""
Malformed rewards through TRL's own GRPOTrainer step: each malformed group is ``external`` and counted.

TRL (the installed 1.x) turns every reward function's output into one float32 tensor (``None``
as NaN) and trains on the weighted ``nansum``. One step of two groups, a live one and a dead
one; a reward function returns a malformed value for a member of the live group: missing, not
finite, finite in float64 but not in float32, or a sum of functions that overflows float32.
The live group must be rejected as ``external`` with its reason and counted, and the step's
loss must stay finite: TRL computes advantages of the whole batch, so one infinite reward it
kept would make them NaN. (TRL generates exactly ``num_generations`` completions per prompt and
raises in its own conversion on a reward that is no number, with or without the adapter: no
row for those here.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from trl_helpers import accuracy, grpo_config, prompt_dataset

from group_admission.adapters.trl import AdmissionGRPOTrainer

GATE = {"min_reward_std": 1e-6, "gate_on": ["accuracy"]}


def _odd(value: Any, *, gated: bool) -> Callable[..., list[Any]]:
    """A reward function that gives the first member of the live group ``value``."""

    def reward(completions: list[Any], kind: list[str], **_: Any) -> list[Any]:
        base = accuracy(completions, kind) if gated else [0.5] * len(kind)
        first = kind.index("live")
        return [value if i == first else v for i, v in enumerate(base)]

    reward.__name__ = "accuracy" if gated else "shaping"
    return reward


def _shaping(value: float) -> Callable[..., list[float]]:
    def reward(completions: list[Any], kind: list[str], **_: Any) -> list[float]:
        return [value if k == "live" else 0.0 for k in kind]

    reward.__name__ = f"shaping_{len(str(value))}"
    return reward


#: name, the reward functions, the reasons the live group may be counted with.
ROWS: list[tuple[str, Callable[[], list[Any]], set[str]]] = [
    ("None in gate_on", lambda: [_odd(None, gated=True)], {"missing_reward", "non_finite_reward"}),
    ("NaN in gate_on", lambda: [_odd(math.nan, gated=True)], {"missing_reward", "non_finite_reward"}),
    ("inf in gate_on", lambda: [_odd(math.inf, gated=True)], {"non_finite_reward"}),
    ("float32 overflow in gate_on", lambda: [_odd(1e39, gated=True)], {"non_finite_reward"}),
    ("inf outside gate_on", lambda: [accuracy, _odd(-math.inf, gated=False)], {"unsummable_reward"}),
    ("float32 overflow outside gate_on", lambda: [accuracy, _odd(1e39, gated=False)], {"unsummable_reward"}),
    (
        "a sum that overflows float32",
        lambda: [accuracy, _shaping(3e38), _shaping(3.0e38 + 1e31)],
        {"unsummable_reward"},
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("scale", ["group", "batch"])
@pytest.mark.parametrize(("name", "funcs", "reasons"), ROWS, ids=[row[0] for row in ROWS])
def test_a_malformed_reward_rejects_its_group_as_external_and_trl_trains_on_the_rest(
    tiny_model: str, tmp_path: Path, name: str, funcs: Callable[[], list[Any]], reasons: set[str], scale: str
) -> None:
    trainer = AdmissionGRPOTrainer(
        model=tiny_model,
        reward_funcs=funcs(),
        args=grpo_config(tmp_path, max_steps=1, per_device_train_batch_size=8, scale_rewards=scale),
        train_dataset=prompt_dataset(2),  # one dead prompt, one live: the step's two groups
        admission=GATE,
    )
    trainer.train()

    stats = trainer.admission_session.stats
    assert (2, 1) == (stats.candidates, stats.external), name
    assert set(stats.external_details) <= reasons
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    assert losses
    assert all(math.isfinite(loss) for loss in losses)
