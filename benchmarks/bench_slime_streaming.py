r"""
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

The engine, the clock and slime's host are test doubles, so this benchmark is a pytest module
(pytest's ``pythonpath`` puts ``tests/`` on the path; nothing outside pytest imports them).
It needs slime's import dependencies: run it with the venv of ``.ci/slime-contracts``:

    SLIME_SRC=/path/to/slime PYTHONPATH=src .cache/slime-contracts-venv/bin/python -m pytest \
        -s -p no:cacheprovider benchmarks/bench_slime_streaming.py [--slime-steps 100]

Writes benchmarks/results/bench_slime_streaming.json.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest
import structlog

from adapters.slime.scripted_engine import simulated_script
from adapters.slime.stream_hosts import CHECKED_COMMIT, RealSlimeHost, make_args, real_slime
from adapters.slime.virtual_clock import VirtualLoopRunner
from benchmarks._settings import (
    SLIME_TASKS,
    slime_config,
)
from group_admission import GroupAdmissionConfig, SamplingBudgetConfig
from group_admission.adapters import slime as slime_adapter
from group_admission.simulation import (
    BinaryTaskModel,
    SimulationConfig,
    SlimeWaves,
    StreamingLaunches,
    simulate,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_slime_streaming.json"
PREFIX = "rollout/group_admission/"
POLICY = {"policy": {"min_reward_std": 1e-6}, "max_consecutive_failed_groups": None}
BUDGET = {"max_extra_groups": 32}
SLIME_FILTER = "slime.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std"
#: Streaming settings: (confidence, race, partial rollout).
STREAMING = [(0.99, 1.0, False), (0.99, 1.0, True), (0.999, 1.0, True), (0.99, 2.0, True)]
#: A strategy: its name, its simulator model, slime's args for it, whether slime's default loop runs it.
Row = tuple[str, Any, dict[str, Any], bool]


def strategies() -> list[Row]:
    """Slime's default loop (with and without partial rollout) and the streaming settings."""
    waves = {"over_sampling_batch_size": 32, "dynamic_sampling_filter_path": SLIME_FILTER}
    rows: list[Row] = [
        ("slime", SlimeWaves(over_sampling_batch_size=32, name="slime"), waves, True),
        (
            "slime+partial",
            SlimeWaves(over_sampling_batch_size=32, partial_rollout=True, name="slime+partial"),
            {**waves, "partial_rollout": True},
            True,
        ),
    ]
    for confidence, race, partial in STREAMING:
        strategy = StreamingLaunches(
            budget=SamplingBudgetConfig.from_mapping(BUDGET),
            confidence=confidence,
            race=race,
            partial_rollout=partial,
        )
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


def compare_setting(label: str, tasks: BinaryTaskModel, steps: int) -> dict[str, dict[str, Any]]:
    """Every strategy on slime's tree and in the simulator for one task setting; printed as a table."""
    config = slime_config(tasks, steps)
    rows = strategies()
    simulated = simulate(
        config, policy=GroupAdmissionConfig(min_reward_std=1e-6), strategies=[r[1] for r in rows]
    )
    print(f"\n{label}: slime's default setting (16 groups of 8, waves of 32), {steps} steps")
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
    for name, real in results.items():
        real["time_vs_slime"] = real["time_per_step"] / results["slime"]["time_per_step"]
        real["tokens_vs_slime"] = real["tokens"] / results["slime"]["tokens"]
        print(f"    {_line(name, real)}")
    return results


def _line(name: str, real: dict[str, Any]) -> str:
    """One strategy's row: its ratios to slime's default and whether it equals the simulator."""
    same = all(real[key] == real[f"simulated_{key}"] for key in ("time_per_step", "tokens", "resumed_share"))
    shares = ""
    if "reported_token_share" in real:
        reported, judged = real["reported_token_share"], real["judged_token_share"]
        shares = f", tokens reported {reported:.0%} (judged {judged:.0%})"
    return (
        f"{name:32s} {real['time_vs_slime']:10.3f} {real['tokens_vs_slime']:12.3f} "
        f"{real['resumed_share']:8.0%}   {'yes' if same else 'NO'} ({real['time_per_step']:.1f} vs "
        f"{real['simulated_time_per_step']:.1f}, {real['tokens']} vs {real['simulated_tokens']})"
        f"{shares}"
    )


def best_streaming(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The fastest streaming setting that generated no more tokens than the simulator predicts."""
    return min(
        (r for n, r in results.items() if n.startswith("streaming") and r["tokens"] <= r["simulated_tokens"]),
        key=lambda r: r["time_vs_slime"],
    )


@pytest.fixture
def slime_steps(request: pytest.FixtureRequest) -> int:
    """The rollouts per strategy (``--slime-steps``, benchmarks/conftest.py)."""
    return int(request.config.getoption("--slime-steps"))


def test_streaming_beats_slime_default_waves(slime_steps: int) -> None:
    """Writes the report; the goal: streaming's time below slime's waves at <= the simulator's tokens."""
    slime = real_slime()
    if isinstance(slime, str):
        pytest.skip(slime)
    os.environ.setdefault("TQDM_DISABLE", "1")  # slime's default loop draws a progress bar per rollout
    logging.disable(logging.INFO)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    report: dict[str, Any] = {"slime_commit": CHECKED_COMMIT, "steps": slime_steps, "settings": {}}
    goal = "streaming's time below slime's default waves at <= the simulator's tokens"
    missed = []
    for label, tasks in SLIME_TASKS.items():
        results = report["settings"][label] = compare_setting(label, tasks, slime_steps)
        best = best_streaming(results)["time_vs_slime"]
        print(f"    [{'met ' if best < 1.0 else 'MISS'}] {goal}: {best:.3f}x")
        missed += [label] if best >= 1.0 else []
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")
    assert not missed, f"{goal}: missed on {missed}"
