"""
The arms and the bench's settings (the CPU bench, its quick smoke, the GPU bench).

Every arm runs an :class:`~group_admission.AdmissionSession`; they differ only in the
reward the advantages are computed from, the session's policy, budget and loss scale, and
where prompts come from (the stream, a :class:`~group_admission.PromptHistory`, or a
streaming plan with partial rollout). ``recommended`` is built from
``SessionConfig.preset("recommended")``, exactly as the README tells users to start;
``oracle_skip`` measures the limit of pre-generation allocation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from cookbook.learning_bench.model import ModelSize
from group_admission import SessionConfig

__all__ = [
    "ARMS",
    "ARM_NAMES",
    "DIAGNOSTIC_ARMS",
    "KNOWN_ARMS",
    "PROFILES",
    "RATE_ORACLE_ARMS",
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
        loss_scale: The session's loss-scale mode; the step's loss (a token mean over its
            trained groups) is multiplied by ``StepReport.loss_scale``. ``"kept"`` is what
            the eight original arms trained with.
        oracle: Never pay for a group without outcome spread: such groups are found by the
            bench's common random numbers, never judged, charged or trained on (the limit
            of pre-generation allocation; a measurement, not a strategy).
        budget_share: The share of the profile's token budget the arm runs for (the oracle
            needs a fraction of it to reach plain's accuracy, and decodes several times more
            than it is charged).
        preset: Build the session (and the prompt history) from this
            ``SessionConfig`` preset, gated on the outcome; ``admission``, ``budget``,
            ``history`` and ``loss_scale`` are then read from it.
        rate_bound: Know each offered prompt's pass rate (measured, not charged) and skip
            it when its group's chance of outcome spread is below this bound: the limit of
            pre-generation prediction (``limits.py``; a measurement, not a strategy).
        rate_stop: With ``rate_bound``, also decode each group member by member and stop
            it when the chance that the rest break its tie falls below the bound (its
            decoded members charged): the limit of screening with a pilot.
    """

    name: str
    label: str
    reward: Literal["outcome", "composite"] = "composite"
    admission: Mapping[str, Any] | None = None
    budget: Mapping[str, Any] | None = None
    history: Mapping[str, Any] | None = None
    streaming: bool = False
    padded_loss: bool = False
    loss_scale: str = "kept"
    oracle: bool = False
    budget_share: float = 1.0
    preset: str | None = None
    rate_bound: float | None = None
    rate_stop: bool = False

    def resolved(self) -> Arm:
        """This arm with a preset's settings spelled out (itself when it has none)."""
        if self.preset is None:
            return self
        config = SessionConfig.preset(self.preset, policy={"gate_on": ["outcome"]}).to_dict()
        return attrs.evolve(
            self,
            admission=config["policy"],
            budget=config["budget"],
            history=config["history"],
            loss_scale=config["loss_scale"],
            preset=None,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe description (a preset's settings spelled out)."""
        if self.preset is not None:
            return self.resolved().to_dict() | {"preset": self.preset}
        return {
            "name": self.name,
            "label": self.label,
            "reward": self.reward,
            "admission": None if self.admission is None else dict(self.admission),
            "budget": None if self.budget is None else dict(self.budget),
            "history": None if self.history is None else dict(self.history),
            "streaming": self.streaming,
            "padded_loss": self.padded_loss,
            "loss_scale": self.loss_scale,
            "oracle": self.oracle,
            "budget_share": self.budget_share,
            "preset": self.preset,
            "rate_bound": self.rate_bound,
            "rate_stop": self.rate_stop,
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
    # The loss scale after filtering: a constant normaliser, and RAGEN's sqrt of the kept
    # fraction (its linear fraction is the constant one when nothing is resampled).
    Arm("gated_target", "gated, loss at the target's scale", admission=GATE_ON_OUTCOME, loss_scale="target"),
    Arm(
        "gated_sqrt",
        "gated, loss x sqrt(kept fraction) (RAGEN)",
        admission=GATE_ON_OUTCOME,
        loss_scale="sqrt",
    ),
    Arm("recommended", "SessionConfig.preset('recommended'), gated on the outcome", preset="recommended"),
    Arm(
        "oracle_skip",
        "never pays for a group without outcome spread (the limit; measurement only)",
        admission=GATE_ON_OUTCOME,
        loss_scale="target",
        oracle=True,
        budget_share=0.7,
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
    Arm(
        "history_target",
        "gated + resampling + PromptHistory, loss at the target's scale",
        admission=GATE_ON_OUTCOME,
        budget=RESAMPLE,
        history={"half_life": 150},
        loss_scale="target",
    ),
    Arm(
        "gated_resample_target",
        "gated + resampling, loss at the target's scale (history_target without the history)",
        admission=GATE_ON_OUTCOME,
        budget=RESAMPLE,
        loss_scale="target",
    ),
    *(
        Arm(
            f"history_target_{name}",
            f"history_target with {description}",
            admission=GATE_ON_OUTCOME,
            budget=RESAMPLE,
            history=history,
            loss_scale="target",
        )
        for name, description, history in (
            ("skip20", "skip_below 0.2", {"half_life": 150, "skip_below": 0.2}),
            ("skip30", "skip_below 0.3", {"half_life": 150, "skip_below": 0.3}),
            ("noforget", "no forgetting", {"skip_below": 0.1}),
        )
    ),
    *(
        Arm(
            f"skip_{name}",
            f"gated, one round of prompts the history keeps ({description}), loss at the target's scale",
            admission=GATE_ON_OUTCOME,
            history=history,
            loss_scale="target",
        )
        for name, description, history in (
            ("10", "skip_below 0.1", {"half_life": 150}),
            ("20", "skip_below 0.2", {"half_life": 150, "skip_below": 0.2}),
            ("30", "skip_below 0.3", {"half_life": 150, "skip_below": 0.3}),
        )
    ),
)
# The limits of prediction (``limits.py``): measurements, run when named.
RATE_ORACLE_ARMS: tuple[Arm, ...] = (
    Arm(
        "rate_oracle",
        "skips a prompt whose chance of spread is below 0.1, knowing its pass rate (limit of prediction)",
        admission=GATE_ON_OUTCOME,
        loss_scale="target",
        rate_bound=0.1,
    ),
    Arm(
        "rate_oracle_stop",
        "rate_oracle that also stops a group member by member at the same bound (limit of a pilot)",
        admission=GATE_ON_OUTCOME,
        loss_scale="target",
        rate_bound=0.1,
        rate_stop=True,
    ),
)
KNOWN_ARMS: dict[str, Arm] = {arm.name: arm for arm in (*ARMS, *DIAGNOSTIC_ARMS, *RATE_ORACLE_ARMS)}


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
        rate_samples: Completions that measure a prompt's pass rate for the rate oracle.
        device: ``"cpu"`` or ``"cuda"``.
        workers: Runs in parallel by default.
        seeds: Seeds by default.
        arms: Arms by default.
        long_seeds: Seeds by default for ``long_arms`` (the comparisons the conclusions rest on).
        long_arms: Arms run on ``long_seeds`` seeds.
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
    rate_samples: int = 64
    device: str = "cpu"
    workers: int = 2
    seeds: int = 5
    arms: tuple[str, ...] = ARM_NAMES
    long_seeds: int = 8
    long_arms: tuple[str, ...] = ("plain", "recommended", "oracle_skip")

    def seeds_of(self, arm: str, seeds: Sequence[int] | None = None) -> list[int]:
        """The seeds ``arm`` runs on: ``seeds`` when given, else the profile's (longer for ``long_arms``)."""
        if seeds is not None:
            return list(seeds)
        return list(range(self.long_seeds if arm in self.long_arms else self.seeds))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe description."""
        data = attrs.asdict(self)
        data["size"]["parameters"] = self.size.parameters()
        data["warm_target"] = dict(self.warm_target)
        data["arms"] = list(self.arms)
        data["long_arms"] = list(self.long_arms)
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
        long_seeds=1,
    ),
    # One GPU: a wider, deeper model built and warm-started on the device; 6 arms x 3 seeds.
    "cuda": Profile(
        "cuda",
        size=ModelSize(layers=6, width=384, heads=6),
        lr=1e-4,
        token_budget=150_000,
        evaluations=15,
        device="cuda",
        seeds=3,
        long_seeds=3,
        arms=("plain", "zero_std_total", "gated", "gated_target", "recommended", "oracle_skip"),
        workers=6,
    ),
}


def profile_for(device: str, *, quick: bool = False) -> Profile:
    """The profile of a device (``quick``: the smoke profile, on that device)."""
    if device not in ("cpu", "cuda"):
        raise ValueError(f"'device' must be 'cpu' or 'cuda' (got {device!r})")
    if quick:
        return attrs.evolve(PROFILES["quick"], device=device)
    return PROFILES[device]
