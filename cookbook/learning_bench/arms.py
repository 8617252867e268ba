"""
The eight arms and the bench's settings (the CPU bench, its quick smoke, the GPU bench).

Every arm runs an :class:`~group_admission.AdmissionSession`; they differ only in the
reward the advantages are computed from, the session's policy and budget, and where
prompts come from (the stream, a :class:`~group_admission.PromptHistory`, or a streaming
plan with partial rollout).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from .model import ModelSize

__all__ = [
    "ARMS",
    "ARM_NAMES",
    "DIAGNOSTIC_ARMS",
    "KNOWN_ARMS",
    "PROFILES",
    "Arm",
    "Profile",
    "profile_for",
]

GATE_ON_OUTCOME: Mapping[str, Any] = {"min_reward_std": 1e-6, "gate_on": ["outcome"]}
RESAMPLE: Mapping[str, Any] = {"max_extra_groups": 8, "max_resample_rounds": 2}
# Carried groups are resumed, not discarded, so the stream may keep more in flight.
STREAM: Mapping[str, Any] = {"max_extra_groups": 16}


@attrs.frozen
class Arm:
    """
    One strategy.

    Attributes:
        reward: ``"outcome"`` trains on the outcome alone; ``"composite"`` on outcome + shaping.
        admission: The session's policy settings (``None``: every well-formed group is kept).
        budget: The session's budget settings (``None``: no resampling).
        history: ``PromptHistoryConfig`` settings (its ``group_size`` and ``seed`` are the
            run's): prompts are picked with ``session.pick_prompts``.
        streaming: Launch with ``session.stream_plan`` and carry unfinished groups (partial rollout).
        padded_loss: Rejected groups stay in the loss at zero advantage (a diagnostic: the
            gradient of the gated arm at the loss scale of training on every group).
    """

    name: str
    label: str
    reward: Literal["outcome", "composite"] = "composite"
    admission: Mapping[str, Any] | None = None
    budget: Mapping[str, Any] | None = None
    history: Mapping[str, Any] | None = None
    streaming: bool = False
    padded_loss: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe description."""
        return {
            "name": self.name,
            "label": self.label,
            "reward": self.reward,
            "admission": None if self.admission is None else dict(self.admission),
            "budget": None if self.budget is None else dict(self.budget),
            "history": None if self.history is None else dict(self.history),
            "streaming": self.streaming,
            "padded_loss": self.padded_loss,
        }


ARMS: tuple[Arm, ...] = (
    Arm("outcome_only", "outcome only, every group", reward="outcome"),
    Arm("plain", "composite reward, every group (TRL's default)"),
    Arm(
        "zero_std_total",
        "std filter on the total reward (slime, DAPO, verl)",
        admission={"min_reward_std": 1e-6},
    ),
    Arm("gated", "gated on the outcome, no resampling", admission=GATE_ON_OUTCOME),
    Arm("gated_resample", "gated + bounded resampling", admission=GATE_ON_OUTCOME, budget=RESAMPLE),
    Arm(
        "gated_resample_history",
        "gated + resampling + PromptHistory skipping",
        admission=GATE_ON_OUTCOME,
        budget=RESAMPLE,
        history={"half_life": 150},
    ),
    Arm(
        "greso",
        "gated + resampling + GRESO's rule",
        admission=GATE_ON_OUTCOME,
        budget=RESAMPLE,
        history={"mode": "greso"},
    ),
    Arm(
        "streaming_partial",
        "gated, streaming plan with partial rollout",
        admission=GATE_ON_OUTCOME,
        budget=STREAM,
        streaming=True,
    ),
)
ARM_NAMES: tuple[str, ...] = tuple(arm.name for arm in ARMS)
# Not bench arms: run only when named (``--arms gated_padded``).
DIAGNOSTIC_ARMS: tuple[Arm, ...] = (
    Arm(
        "gated_padded",
        "gated, rejected groups in the loss at zero advantage (plain's loss scale)",
        admission=GATE_ON_OUTCOME,
        padded_loss=True,
    ),
)
KNOWN_ARMS: dict[str, Arm] = {arm.name: arm for arm in (*ARMS, *DIAGNOSTIC_ARMS)}


@attrs.frozen
class Profile:
    """
    Everything a run needs besides its arm, task and seed.

    Attributes:
        size: The transformer.
        lr: The RL learning rate (AdamW, no weight decay).
        token_budget: Generated tokens per run; a run stops at the first step that reaches it.
        evaluations: Held-out evaluations per run after the start (one per budget share).
        members: Completions per group.
        target_groups: Groups a step trains on (at most).
        slots: Sequences the streaming arm's engine decodes at once.
        confidence: The streaming plan's confidence.
        held_out, pool, warm: Problems held out, in the RL pool, and in the warm start.
        warm_lr, warm_max_steps: The supervised warm start's learning rate and step cap.
        warm_target: Per task, the validation greedy accuracy at which the warm start stops.
        pick_window: Candidates offered to ``pick_prompts`` at once.
        device: ``"cpu"`` or ``"cuda"``.
        workers: Runs in parallel by default.
        seeds: Seeds by default.
        arms: Arms by default.
    """

    name: str
    size: ModelSize = attrs.field(factory=ModelSize)
    lr: float = 2e-4
    token_budget: int = 100_000
    evaluations: int = 10
    members: int = 8
    target_groups: int = 8
    slots: int = 64
    confidence: float = 0.9
    held_out: int = 1000
    pool: int = 512
    warm: int = 2000
    warm_lr: float = 1e-3
    warm_max_steps: int = 1500
    warm_target: Mapping[str, float] = attrs.field(factory=lambda: {"neutral": 0.33, "conflict": 0.40})
    pick_window: int = 24
    device: str = "cpu"
    workers: int = 2
    seeds: int = 5
    arms: tuple[str, ...] = ARM_NAMES

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe description."""
        data = attrs.asdict(self)
        data["size"]["parameters"] = self.size.parameters()
        data["warm_target"] = dict(self.warm_target)
        data["arms"] = list(self.arms)
        return data


PROFILES: dict[str, Profile] = {
    "cpu": Profile("cpu"),
    # One seed, a few steps, every arm: the smoke test CI runs (under 3 minutes on 2 cores).
    "quick": Profile(
        "quick",
        token_budget=3_000,
        evaluations=2,
        held_out=500,
        warm_max_steps=400,
        workers=1,
        seeds=1,
    ),
    # One GPU: a wider, deeper model built and warm-started on the device; 3 arms x 3 seeds.
    "cuda": Profile(
        "cuda",
        size=ModelSize(layers=6, width=384, heads=6),
        lr=1e-4,
        token_budget=150_000,
        evaluations=15,
        device="cuda",
        workers=1,
        seeds=3,
        arms=("plain", "zero_std_total", "gated"),
    ),
}


def profile_for(device: str, *, quick: bool = False) -> Profile:
    """The profile of a device (``quick``: the smoke profile, on that device)."""
    if device not in ("cpu", "cuda"):
        raise ValueError(f"'device' must be 'cpu' or 'cuda' (got {device!r})")
    if quick:
        return attrs.evolve(PROFILES["quick"], device=device)
    return PROFILES[device]
