"""
slime's real rollout loops on a scripted engine against the simulator's models of them.

Runs slime's default ``generate_rollout`` (waves of 32, slime's zero-std filter; with and
without ``--partial-rollout``) and ``group_admission.adapters.slime.streaming_rollout`` on
slime's own tree (``SLIME_SRC``), with the scripted engine of the tests
(``tests/adapters/slime/scripted_engine.py``) serving the simulator's groups on a virtual
clock, and the simulator's ``SlimeWaves`` / ``StreamingLaunches`` on the same steps. Goal:
streaming's time to target below slime's default waves at no more tokens than the
simulator predicts for that setting; every real figure equal to the simulator's; and every
token the engine decodes reported by the rollout that decoded it (``reported_token_share``
1.0; ``judged_token_share`` is the judged groups' share, all a rollout reported before the
tokens of aborted and carried groups were charged).

Needs slime's import dependencies: run it with the venv of ``.ci/slime-contracts``:

    SLIME_SRC=/path/to/slime PYTHONPATH=src .cache/slime-contracts-venv/bin/python \\
        benchmarks/bench_slime_streaming.py [--steps 100]

Writes benchmarks/results/bench_slime_streaming.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import structlog

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TQDM_DISABLE", "1")  # slime's default loop draws a progress bar per rollout

from adapters.slime.scripted_engine import simulated_script  # noqa: E402
from adapters.slime.stream_hosts import CHECKED_COMMIT, RealSlimeHost, make_args, real_slime  # noqa: E402
from adapters.slime.virtual_clock import VirtualLoopRunner  # noqa: E402
from group_admission import GroupAdmissionConfig  # noqa: E402
from group_admission.adapters import slime as slime_adapter  # noqa: E402
from group_admission.simulation import (  # noqa: E402
    BinaryTaskModel,
    ResponseLengthModel,
    SimulationConfig,
    SlimeWaves,
    StreamingLaunches,
    simulate,
)

RESULTS = ROOT / "benchmarks" / "results" / "bench_slime_streaming.json"
PREFIX = "rollout/group_admission/"
POLICY = {"policy": {"min_reward_std": 1e-6}, "max_consecutive_failed_groups": None}
BUDGET = {"max_extra_groups": 32}
SLIME_FILTER = "slime.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std"
TASKS = {
    "uniform Beta(1,1)": BinaryTaskModel(alpha=1.0, beta=1.0),
    "polarised Beta(0.5,0.5)": BinaryTaskModel(alpha=0.5, beta=0.5),
}
#: Streaming settings: (confidence, race, partial rollout).
STREAMING = [(0.99, 1.0, False), (0.99, 1.0, True), (0.999, 1.0, True), (0.99, 2.0, True)]


def strategies() -> list[tuple[str, Any, dict[str, Any], bool]]:
    waves = {"over_sampling_batch_size": 32, "dynamic_sampling_filter_path": SLIME_FILTER}
    rows: list[tuple[str, Any, dict[str, Any], bool]] = [
        ("slime", SlimeWaves(over_sampling_batch_size=32, name="slime"), waves, True),
        (
            "slime+partial",
            SlimeWaves(over_sampling_batch_size=32, partial_rollout=True, name="slime+partial"),
            {**waves, "partial_rollout": True},
            True,
        ),
    ]
    for confidence, race, partial in STREAMING:
        strategy = StreamingLaunches(budget=BUDGET, confidence=confidence, race=race, partial_rollout=partial)
        settings = {"budget": BUDGET, "confidence": confidence, "race": race}
        rows.append(
            (
                strategy.name,
                strategy,
                {"partial_rollout": partial, "group_admission_streaming": settings},
                False,
            )
        )
    return rows


def run_real(config: SimulationConfig, overrides: dict[str, Any], default: bool) -> dict[str, Any]:
    """One rollout function on slime's tree for ``config.steps`` rollouts: time, tokens, resumed groups."""
    slime_adapter.reset()
    patch, runner = pytest.MonkeyPatch(), VirtualLoopRunner()
    try:
        host = RealSlimeHost(patch, runner)
        engine = host.install_engine(simulated_script(config), config.group_size)
        args = make_args(
            rollout_batch_size=config.target_groups,
            n_samples_per_prompt=config.group_size,
            group_admission=POLICY,
            **overrides,
        )
        data_source = host.data_source(args)
        elapsed, resumed, delivered = 0.0, 0, 0
        reported = {"judged": 0, "decoded": 0}  # the rollout's generated_tokens and decoded_tokens
        for rollout_id in range(config.steps):
            start = host.now()
            output = (host.default_rollout if default else host.streaming)(args, rollout_id, data_source)
            elapsed += host.now() - start
            delivered += len(output.samples)
            resumed += sum(
                any(s.metadata.get("start_rollout_id", rollout_id) < rollout_id for s in group)
                for group in output.samples
            )
            reported["judged"] += output.metrics.get(f"{PREFIX}generated_tokens", 0)
            reported["decoded"] += output.metrics.get(f"{PREFIX}decoded_tokens", 0)
        host.clear()
        tokens = sum(engine.tokens.values())
        row: dict[str, Any] = {
            "time_per_step": elapsed / config.steps,
            "tokens": tokens,
            "resumed_share": resumed / delivered,
        }
        if not default:
            # Before every token was charged, the rollout reported the judged groups' tokens only.
            row["judged_token_share"] = reported["judged"] / tokens
            row["reported_token_share"] = reported["decoded"] / tokens
        return row
    finally:
        patch.undo()
        runner.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=100)
    options = parser.parse_args()
    slime = real_slime()
    if isinstance(slime, str):
        raise SystemExit(slime)
    logging.disable(logging.INFO)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    report: dict[str, Any] = {"slime_commit": CHECKED_COMMIT, "steps": options.steps, "settings": {}}
    for label, tasks in TASKS.items():
        config = SimulationConfig(
            tasks=tasks,
            lengths=ResponseLengthModel(mean_tokens=1024, cv=0.6),
            group_size=8,
            target_groups=16,
            steps=options.steps,
            seed=0,
        )
        rows = strategies()
        simulated = simulate(
            config, policy=GroupAdmissionConfig(min_reward_std=1e-6), strategies=[r[1] for r in rows]
        )
        print(f"\n{label}: slime's default setting (16 groups of 8, waves of 32), {options.steps} steps")
        header = f"{'strategy':32s} {'time/slime':>10s} {'tokens/slime':>12s} {'resumed':>8s}"
        print(f"    {header}   real = simulated (time, tokens, resumed)")
        results = {}
        for name, _, overrides, default in rows:
            clock = time.perf_counter()
            real = run_real(config, overrides, default)
            sim = simulated.result(name)
            real["simulated_time_per_step"] = sim.time_per_step
            real["simulated_tokens"] = sim.generated_tokens
            real["simulated_resumed_share"] = sim.resumed_groups / sim.delivered_groups
            real["seconds"] = time.perf_counter() - clock
            results[name] = real
        slime_row = results["slime"]
        for name, real in results.items():
            real["time_vs_slime"] = real["time_per_step"] / slime_row["time_per_step"]
            real["tokens_vs_slime"] = real["tokens"] / slime_row["tokens"]
            keys = ("time_per_step", "tokens", "resumed_share")
            same = all(real[key] == real[f"simulated_{key}"] for key in keys)
            shares = ""
            if "reported_token_share" in real:
                reported, judged = real["reported_token_share"], real["judged_token_share"]
                shares = f", tokens reported {reported:.0%} (judged {judged:.0%})"
            print(
                f"    {name:32s} {real['time_vs_slime']:10.3f} {real['tokens_vs_slime']:12.3f} "
                f"{real['resumed_share']:8.0%}   {'yes' if same else 'NO'} ({real['time_per_step']:.1f} vs "
                f"{real['simulated_time_per_step']:.1f}, {real['tokens']} vs {real['simulated_tokens']})"
                f"{shares}"
            )
        best = min(
            (
                r
                for n, r in results.items()
                if n.startswith("streaming") and r["tokens"] <= r["simulated_tokens"]
            ),
            key=lambda r: r["time_vs_slime"],
        )
        met = best["time_vs_slime"] < 1.0
        goal = "streaming's time below slime's default waves at <= the simulator's tokens"
        print(f"    [{'met ' if met else 'MISS'}] {goal}: {best['time_vs_slime']:.3f}x")
        report["settings"][label] = results
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
