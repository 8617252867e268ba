"""The simulator settings several benchmarks share: slime's default step and the pull request's."""

from __future__ import annotations

from group_admission import GroupAdmissionConfig, SamplingBudgetConfig
from group_admission.simulation import (
    BinaryTaskModel,
    CompositeTaskModel,
    ResponseLengthModel,
    SimulationConfig,
    TaskModel,
)

__all__ = ["PR_POLICY", "PR_TASKS", "SLIME_POLICY", "SLIME_TASKS", "STEP_BUDGET", "pr_config", "slime_config"]

# --- slime's default step ------------------------------------------------------------------
SLIME_POLICY = GroupAdmissionConfig(min_reward_std=1e-6)  # slime's zero-std filter
#: The two task difficulties slime's default step runs on.
SLIME_TASKS = {
    "uniform Beta(1,1)": BinaryTaskModel(alpha=1.0, beta=1.0),
    "polarised Beta(0.5,0.5)": BinaryTaskModel(alpha=0.5, beta=0.5),
}
#: The round controller's step budget in slime's setting.
STEP_BUDGET = SamplingBudgetConfig(max_extra_groups=32, max_resample_rounds=4)

# --- the pull request's experiment ----------------------------------------------------------
PR_POLICY = GroupAdmissionConfig(min_reward_std=1e-6, min_reward_range=0.02, min_nontrivial_advantages=2)
# Chosen on a small grid so that the initial informative rate lands in 0.85-0.90 and most
# rejections are exact_dead (the PR saw 6-10 exact_dead and 0-2 near_tie per round): 90%
# of tasks give partial credit on a 0.01 grid, the rest are all-or-nothing.
PR_TASKS = CompositeTaskModel(
    alpha=1.0, beta=1.0, shaping_spread=0.02, shaping_resolution=0.01, shaping_task_share=0.9
)


def slime_config(tasks: TaskModel, steps: int, seed: int = 0) -> SimulationConfig:
    """Slime's default step on ``tasks``: 16 groups of 8, responses of mean 1024 tokens (cv 0.6)."""
    lengths = ResponseLengthModel(mean_tokens=1024, cv=0.6)
    return SimulationConfig(
        tasks=tasks, lengths=lengths, group_size=8, target_groups=16, steps=steps, seed=seed
    )


def pr_config(steps: int, seed: int = 0) -> SimulationConfig:
    """The pull request's experiment: 50 tasks in groups of 3, responses of mean 1500 tokens (cv 0.5)."""
    lengths = ResponseLengthModel(mean_tokens=1500, cv=0.5)
    return SimulationConfig(
        tasks=PR_TASKS, lengths=lengths, group_size=3, target_groups=50, steps=steps, seed=seed
    )
