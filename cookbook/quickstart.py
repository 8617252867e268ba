"""A minute with group-admission: judge a step's groups, then plan bounded resampling.

Runs offline in well under a second; no model, no data download.
"""

from __future__ import annotations

import random

from group_admission import (
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    SamplingBudgetConfig,
    SamplingBudgetController,
    group_admission_metrics,
)

TARGET, G = 16, 8  # groups wanted per step, completions per group


def sample_group(rng: random.Random, pass_rate: float) -> dict[str, list[float]]:
    """A composite reward: binary accuracy plus a brevity term on a 0.05 grid."""
    accuracy = [float(rng.random() < pass_rate) for _ in range(G)]
    brevity = [round(rng.random() * 20) / 20 for _ in range(G)]
    return {"accuracy": accuracy, "brevity": brevity}


def main() -> None:
    rng = random.Random(0)
    rates = [rng.betavariate(0.6, 0.6) for _ in range(1000)]  # many tasks all-pass or all-fail
    policy = GroupAdmissionPolicy(GroupAdmissionConfig(min_reward_std=1e-6, gate_on=["accuracy"]))
    controller = SamplingBudgetController(
        SamplingBudgetConfig(max_extra_groups=TARGET, max_resample_rounds=2, mode="confidence")
    )
    state = controller.new_state()
    decisions = [policy.evaluate(sample_group(rng, rng.choice(rates))) for _ in range(TARGET)]
    controller.observe_round(state, decisions, num_generations=G)
    print("round 0:", group_admission_metrics(decisions))
    all_decisions = list(decisions)
    while True:
        plan = controller.plan_resampling(state, target_groups=TARGET, num_generations=G)
        print("plan:", plan)
        if plan.extra_groups == 0:
            break
        decisions = [policy.evaluate(sample_group(rng, rng.choice(rates))) for _ in range(plan.extra_groups)]
        controller.observe_round(state, decisions, num_generations=G)
        all_decisions += decisions
    admitted = min(TARGET, state.admitted_groups)
    print(
        f"admitted {admitted}/{TARGET} groups from {state.generated_groups} generated "
        f"(cost x{state.generated_groups / TARGET:.2f}); exhausted={plan.exhausted}"
    )
    print("step:", group_admission_metrics(all_decisions))


if __name__ == "__main__":
    main()
