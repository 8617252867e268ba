"""A minute with group-admission: judge a step's groups, then resample within a budget.

Runs offline in well under a second; no model, no data download.
"""

from __future__ import annotations

import random

from group_admission import AdmissionSession, SamplingBudgetConfig

TARGET, G = 16, 8  # groups wanted per step, completions per group


def sample_groups(rng: random.Random, rates: list[float], count: int) -> dict[str, list[list[float]]]:
    """``count`` groups of a composite reward: binary accuracy plus a brevity term on a 0.05 grid."""
    accuracy, brevity = [], []
    for _ in range(count):
        pass_rate = rng.choice(rates)
        accuracy.append([float(rng.random() < pass_rate) for _ in range(G)])
        brevity.append([round(rng.random() * 20) / 20 for _ in range(G)])
    return {"accuracy": accuracy, "brevity": brevity}


def main() -> None:
    """Judge simulated groups and print what admission kept."""
    rng = random.Random(0)
    rates = [rng.betavariate(0.6, 0.6) for _ in range(1000)]  # many tasks all-pass or all-fail
    session = AdmissionSession(
        {"min_reward_std": 1e-6, "gate_on": ["accuracy"]},
        budget=SamplingBudgetConfig(max_extra_groups=TARGET, max_resample_rounds=2, mode="confidence"),
    )
    session.begin_step(target_groups=TARGET)
    verdicts = session.judge_batch(sample_groups(rng, rates, TARGET))
    print(f"round 0: {int(verdicts.keep.sum())} of {len(verdicts)} groups admitted")
    while (plan := session.plan(num_generations=G)).extra_groups:
        print("plan:", plan)
        verdicts = session.judge_batch(sample_groups(rng, rates, plan.extra_groups))
    report = session.end_step()
    print(
        f"admitted {report.admitted_groups}, trained on {report.trained_groups}/{TARGET} "
        f"({report.surplus_groups} surplus) from {report.generated_groups} generated "
        f"(cost x{report.generated_groups / TARGET:.2f}); exhausted={report.exhausted}"
    )
    print("step:", session.step_stats.metrics())


if __name__ == "__main__":
    main()
