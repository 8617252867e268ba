"""
Simulated cost and yield of admission strategies (not a test; figures, not assertions).

(a) The twinkle pull request's experiment setting: 50 tasks per round, groups of 3, at
    most 2 extra groups and 1 resample round per task, 9 samples and 30,000 tokens per
    task, a reward whose initial informative rate is about 0.85-0.90. The per-task retry
    is compared with the published ranges, step by step (one step = one of the PR's rounds).
(b) slime's default setting: 16 groups of 8 per step, over-sampling waves of 32, on two
    task difficulties. Goals: at equal or better final informative rate, the controller
    generates fewer groups than slime's waves and DAPO; its cost is within 10% of the
    oracle's; confidence mode needs fewer rounds than expected mode.

Run:  python -m benchmarks.simulate_strategies   (writes benchmarks/results/)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import _settings as shared
from group_admission import SamplingBudgetConfig
from group_admission.simulation import (
    BinaryTaskModel,
    ControllerResampling,
    DapoDynamicSampling,
    NoFiltering,
    Oracle,
    PerTaskRetry,
    RagenTopP,
    RollResampling,
    SimulationResult,
    SlimeWaves,
    Strategy,
    plot_result,
    simulate,
)

RESULTS = Path(__file__).parent / "results"
SEED = 0

# --- (a) the pull request's experiment ---------------------------------------------------
PR_STEPS = 600  # 100 runs of the PR's 6 rounds
PR_TASK_BUDGET = SamplingBudgetConfig(
    max_extra_groups=2, max_resample_rounds=1, max_total_samples=9, max_total_tokens=30_000
)
#: The published ranges over rounds 0-5 (read from the PR's dashboard, approximate).
PR_PUBLISHED = {
    "initial_informative_rate": (0.85, 0.90, None),
    "final_informative_rate": (0.97, 1.00, None),
    "recovery_rate": (0.61, 1.00, 0.83),
    "sampling_cost_multiplier": (1.21, 1.35, 1.28),
    "budget_exhaustion_rate": (0.02, 0.05, 0.03),
}

# --- (b) slime's default ------------------------------------------------------------------
SLIME_STEPS = 600


def pr_strategies() -> list[Strategy]:
    """The strategies of the pull request's setting."""
    # The step-level controller gets the same total caps as the 50 per-task budgets.
    step_budget = SamplingBudgetConfig(
        max_extra_groups=100, max_resample_rounds=1, max_total_samples=450, max_total_tokens=1_500_000
    )
    return [
        NoFiltering(name="base (no filtering)"),
        PerTaskRetry(budget=PR_TASK_BUDGET, name="per_task_retry (PR)"),
        ControllerResampling(budget=step_budget, mode="expected", name="controller(expected,1 round)"),
        ControllerResampling(budget=step_budget, mode="confidence", name="controller(confidence,1 round)"),
        ControllerResampling(
            budget=SamplingBudgetConfig(max_extra_groups=100, max_resample_rounds=3),
            name="controller(expected,3)",
        ),
        SlimeWaves(over_sampling_batch_size=100, keep_when_insufficient=True),
        DapoDynamicSampling(),
        RollResampling(),
        Oracle(),
    ]


def pr_setting() -> tuple[SimulationResult, dict[str, object]]:
    """(a) The pull request's setting, with the per-task retry checked against its ranges."""
    config = shared.pr_config(PR_STEPS, SEED)
    result = simulate(config, policy=shared.PR_POLICY, strategies=pr_strategies())
    per_task = result.result("per_task_retry (PR)")
    comparison: dict[str, object] = {}
    for metric, (low, high, mean) in PR_PUBLISHED.items():
        per_step = []
        for outcome in per_task.outcomes:
            values = {
                "initial_informative_rate": outcome.first_round_admitted / outcome.first_round_groups,
                "final_informative_rate": outcome.delivered_informative / outcome.target_groups,
                "recovery_rate": (outcome.recovered / outcome.initial_shortfall)
                if outcome.initial_shortfall
                else None,
                "sampling_cost_multiplier": outcome.generated_groups / outcome.target_groups,
                "budget_exhaustion_rate": outcome.exhausted_slots / outcome.target_groups,
            }
            if values[metric] is not None:
                per_step.append(values[metric])
        steps = np.array(per_step)
        comparison[metric] = {
            "published_range": [low, high],
            "published_mean": mean,
            "ours_mean": float(getattr(per_task, metric)),
            "ours_p10_p90": [float(np.quantile(steps, 0.1)), float(np.quantile(steps, 0.9))],
            "share_of_steps_in_published_range": float(
                ((steps >= low - 1e-9) & (steps <= high + 1e-9)).mean()
            ),
        }
    rounds = len(per_task.outcomes)
    comparison["rejections_per_round"] = {
        reason: per_task.rejected[reason] / rounds for reason in ("exact_dead", "near_tie")
    }
    comparison["published_rejections_per_round"] = {"exact_dead": [6, 10], "near_tie": [0, 2]}
    return result, comparison


def slime_setting(tasks: BinaryTaskModel) -> SimulationResult:
    """(b) slime's default setting on ``tasks``."""
    config = shared.slime_config(tasks, SLIME_STEPS, SEED)
    strategies: list[Strategy] = [
        NoFiltering(),
        SlimeWaves(over_sampling_batch_size=32),
        SlimeWaves(over_sampling_batch_size=32, keep_when_insufficient=True),
        DapoDynamicSampling(),
        DapoDynamicSampling(gen_batch_size=48, max_num_gen_batches=10),
        RollResampling(),
        RagenTopP(),
        ControllerResampling(budget=shared.STEP_BUDGET, mode="expected"),
        ControllerResampling(budget=shared.STEP_BUDGET, mode="confidence"),
        ControllerResampling(budget=shared.STEP_BUDGET, mode="expected", carry_rate=True),
        ControllerResampling(budget=shared.STEP_BUDGET, mode="confidence", carry_rate=True),
        Oracle(),
    ]
    return simulate(config, policy=shared.SLIME_POLICY, strategies=strategies)


def goals(result: SimulationResult) -> list[dict[str, object]]:
    """The three goals, for each controller variant, with their margins."""
    oracle = result.result("oracle")
    rivals = [r for r in result.results if r.kind in ("slime", "dapo")]
    checks: list[dict[str, object]] = []
    for mode in ("expected", "confidence"):
        for suffix in ("", ",carry"):
            mine = result.result(f"controller({mode}{suffix})")
            for rival in rivals:
                equal_yield = mine.final_informative_rate >= rival.final_informative_rate - 1e-12
                checks.append(
                    {
                        "goal": f"{mine.name} generates fewer groups than {rival.name} at >= its yield",
                        "met": bool(equal_yield and mine.generated_groups < rival.generated_groups),
                        "detail": f"groups {mine.generated_groups} vs {rival.generated_groups} "
                        f"({mine.generated_groups / rival.generated_groups - 1:+.1%}); final rate "
                        f"{mine.final_informative_rate:.4f} vs {rival.final_informative_rate:.4f}",
                    }
                )
            over = mine.sampling_cost_multiplier / oracle.sampling_cost_multiplier - 1
            checks.append(
                {
                    "goal": f"{mine.name} cost within 10% of the oracle's",
                    "met": bool(over <= 0.10),
                    "detail": f"cost {mine.sampling_cost_multiplier:.3f}x vs oracle "
                    f"{oracle.sampling_cost_multiplier:.3f}x ({over:+.1%})",
                }
            )
    for suffix in ("", ",carry"):
        expected = result.result(f"controller(expected{suffix})")
        confidence = result.result(f"controller(confidence{suffix})")
        checks.append(
            {
                "goal": f"confidence{suffix} needs fewer rounds than expected{suffix}",
                "met": bool(confidence.rounds_per_step < expected.rounds_per_step),
                "detail": f"rounds/step {confidence.rounds_per_step:.2f} vs {expected.rounds_per_step:.2f}; "
                f"cost {confidence.sampling_cost_multiplier:.3f}x "
                f"vs {expected.sampling_cost_multiplier:.3f}x",
            }
        )
    return checks


def main() -> int:
    """Run both settings, print the goals, write the results; non-zero when a goal is missed."""
    started = time.perf_counter()
    RESULTS.mkdir(parents=True, exist_ok=True)
    report: dict[str, object] = {"seed": SEED}

    pr_result, comparison = pr_setting()
    print("(a) twinkle PR experiment setting: 50 tasks x groups of 3, 6-round runs x 100")
    print(pr_result.format_table())
    print("\n    per_task_retry against the published ranges (per round = per step):")
    for metric, row in comparison.items():
        if metric.startswith(("rejections", "published_rej")):
            continue
        assert isinstance(row, dict)
        low, high = row["published_range"]
        mean = "" if row["published_mean"] is None else f" (mean {row['published_mean']:.2f})"
        p10, p90 = row["ours_p10_p90"]
        print(
            f"    {metric:26s} published {low:.2f}-{high:.2f}{mean} | ours mean {row['ours_mean']:.3f}, "
            f"p10-p90 {p10:.3f}-{p90:.3f}, {row['share_of_steps_in_published_range']:.0%} of rounds in range"
        )
    per_round = comparison["rejections_per_round"]
    assert isinstance(per_round, dict)
    print(
        f"    rejections per round: exact_dead {per_round['exact_dead']:.1f}, "
        f"near_tie {per_round['near_tie']:.1f} (published 6-10 and 0-2)"
    )
    report["pr_setting"] = {"simulation": pr_result.to_dict(), "comparison": comparison}

    report["slime_setting"] = {}
    for label, tasks in shared.SLIME_TASKS.items():
        result = slime_setting(tasks)
        checks = goals(result)
        print(f"\n(b) slime default setting: 16 groups of 8, waves of 32, {label} tasks, {SLIME_STEPS} steps")
        print(result.format_table())
        for check in checks:
            print(f"    [{'met ' if check['met'] else 'MISS'}] {check['goal']}: {check['detail']}")
        report["slime_setting"][label] = {"simulation": result.to_dict(), "goals": checks}  # type: ignore[index]
        if label.startswith("polarised"):
            try:
                plot_result(result, RESULTS / "simulate_strategies.png")
            except ImportError as exc:
                print(f"    (no plot: {exc})")

    elapsed = time.perf_counter() - started
    report["elapsed_seconds"] = elapsed
    with (RESULTS / "simulate_strategies.json").open("w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=1)
        handle.write("\n")
    print(f"\nwrote {RESULTS / 'simulate_strategies.json'} in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
