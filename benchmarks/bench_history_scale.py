"""Benchmark a PromptHistory holding a million prompt ids (issue 20, section 5).

Prints each figure against its limit and writes benchmarks/results/bench_history_scale.json.
Not a test: run it with
    OMP_NUM_THREADS=1 nice python -m benchmarks.bench_history_scale [--prompts 1000000]
Limits: with 1,000,000 prompts held, recording a step of 1,000 groups and picking from 1,000
candidates each under 10 ms (the 95th percentile of the steps timed); state_dict (to_dict)
and from_dict under 2 s each; the JSON state under 32 MB; peak RSS under 500 MB.

Each scenario runs in a fresh subprocess, so that its peak RSS is its own: the figure is
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at the end, minus the same figure taken after
the imports (numpy and group_admission loaded, nothing built); both are printed.

Scenarios:
- ``steady``: one epoch of 1,000-group steps over every prompt (each step picks from the next
  1,000 of a shuffled order, judges a group of each picked prompt and records it), then a
  part of the next epoch, with forgetting (``half_life=150``), so evidence decays; the steps
  of the second epoch are timed. Then the state is saved, written as JSON, read back and
  restored, and the restored history must replay the original's picks.
- ``bulk``: a million groups recorded at one step, then the first pick (which folds them
  all), the state, and the restore: the case issue 20 measured at 12.7 s for that pick.
``--compare DIR`` runs the scenarios against another checkout's ``src`` as well (the code
before, e.g. ``git archive <commit> src | tar -x -C /tmp/before``) and records its figures
under ``before``, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "bench_history_scale.json"
STEP = 1000
LIMITS = {
    "record_step_ms_p95": 10.0,
    "pick_step_ms_p95": 10.0,
    "state_dict_s": 2.0,
    "from_dict_s": 2.0,
    "state_mb": 32.0,
    "peak_rss_mb": 500.0,
}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux


def _timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def _save_and_restore(history: Any, candidates: list[int], step: int) -> dict[str, float]:
    from group_admission import PromptHistory

    state, state_s = _timed(history.to_dict)
    text, dumps_s = _timed(partial(json.dumps, state))
    del state
    loaded, loads_s = _timed(partial(json.loads, text))
    restored, from_dict_s = _timed(partial(PromptHistory.from_dict, loaded))
    del loaded
    steps = (step, step + 7)
    replays = all(restored.pick(candidates, step=s) == history.pick(candidates, step=s) for s in steps)
    return {
        "state_dict_s": state_s,
        "json_dumps_s": dumps_s,
        "state_mb": len(text.encode()) / 1e6,
        "json_loads_s": loads_s,
        "from_dict_s": from_dict_s,
        "restored_replays_picks": replays,
        "prompts_restored": len(restored),
    }


def _steady(prompts: int, extra_steps: int) -> dict[str, Any]:
    import numpy as np

    from group_admission import GroupAdmissionPolicy, PromptHistory

    baseline = _rss_mb()
    rng = np.random.default_rng(0)
    rates = rng.beta(0.3, 0.3, prompts)  # a polarised pool: many prompts never or always solved
    policy = GroupAdmissionPolicy({"min_reward_std": 1e-6})
    history = PromptHistory({"group_size": 8, "half_life": 150, "seed": 0})
    order = np.concatenate([rng.permutation(prompts), rng.permutation(prompts)])
    steps = prompts // STEP + extra_steps
    record_ms, pick_ms = [], []
    for step in range(steps):
        candidates = order[step * STEP : (step + 1) * STEP].tolist()
        picks, pick_s = _timed(lambda c=candidates, s=step: history.pick(c, step=s))
        rows = np.array(picks.picked, dtype=np.int64)
        result = policy.evaluate_batch((rng.random((len(rows), 8)) < rates[rows, None]).astype(float))
        _, record_s = _timed(lambda p=picks.picked, r=result, s=step: history.observe_batch(p, r, step=s))
        if step >= prompts // STEP:  # the second epoch: the history holds every prompt
            pick_ms.append(pick_s * 1e3)
            record_ms.append(record_s * 1e3)
    figures: dict[str, Any] = {
        "prompts_held": len(history),
        "steps": steps,
        "timed_steps": len(pick_ms),
        "record_step_ms_median": statistics.median(record_ms),
        "record_step_ms_p95": float(np.percentile(record_ms, 95)),
        "record_step_ms_max": max(record_ms),
        "pick_step_ms_median": statistics.median(pick_ms),
        "pick_step_ms_p95": float(np.percentile(pick_ms, 95)),
        "pick_step_ms_max": max(pick_ms),
    }
    figures.update(_save_and_restore(history, order[:STEP].tolist(), steps))
    figures["peak_rss_mb"] = _rss_mb() - baseline
    figures["peak_rss_absolute_mb"] = _rss_mb()
    figures["rss_after_imports_mb"] = baseline
    return figures


def _bulk(prompts: int) -> dict[str, Any]:
    import numpy as np

    from group_admission import GroupAdmissionPolicy, PromptHistory

    baseline = _rss_mb()
    rng = np.random.default_rng(1)
    policy = GroupAdmissionPolicy({"min_reward_std": 1e-6})
    history = PromptHistory({"group_size": 8, "half_life": 150, "seed": 0})
    for start in range(0, prompts, 100_000):  # a million groups judged at step 0
        ids = list(range(start, min(prompts, start + 100_000)))
        rewards = (rng.random((len(ids), 8)) < rng.beta(0.3, 0.3, (len(ids), 1))).astype(float)
        history.observe_batch(ids, policy.evaluate_batch(rewards), step=0)
    candidates = rng.permutation(prompts)[:STEP].tolist()
    _, first_pick_s = _timed(lambda: history.pick(candidates, step=1))
    _, next_pick_s = _timed(lambda: history.pick(candidates, step=2))
    figures: dict[str, Any] = {
        "prompts_held": len(history),
        "first_pick_s": first_pick_s,
        "next_pick_ms": next_pick_s * 1e3,
    }
    figures.update(_save_and_restore(history, candidates, 3))
    figures["peak_rss_mb"] = _rss_mb() - baseline
    figures["peak_rss_absolute_mb"] = _rss_mb()
    figures["rss_after_imports_mb"] = baseline
    return figures


def _child(scenario: str, prompts: int, extra_steps: int) -> None:
    import numpy  # noqa: F401  # the baseline RSS includes the imports

    import group_admission  # noqa: F401

    figures = _steady(prompts, extra_steps) if scenario == "steady" else _bulk(prompts)
    print(json.dumps(figures))


def _run(scenario: str, prompts: int, extra_steps: int, source: str | None) -> dict[str, Any]:
    environment = dict(os.environ, OMP_NUM_THREADS="1")
    if source is not None:
        environment["PYTHONPATH"] = os.pathsep.join([source, environment.get("PYTHONPATH", "")])
    command = [sys.executable, __file__, "--child", scenario, "--prompts", str(prompts)]
    command += ["--extra-steps", str(extra_steps)]
    output = subprocess.run(command, env=environment, check=True, capture_output=True, text=True).stdout
    figures: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return figures


def _report(title: str, figures: dict[str, Any]) -> dict[str, bool]:
    print(f"\n{title}")
    verdicts = {}
    for name, value in figures.items():
        limit = LIMITS.get(name)
        shown = f"{value:10.3f}" if isinstance(value, float) else f"{value!s:>10}"
        if limit is None:
            print(f"  {name:28s} {shown}")
            continue
        verdicts[name] = value < limit
        print(f"  {name:28s} {shown}   limit {limit:g}   {'ok' if value < limit else 'OVER'}")
    return verdicts


def main() -> None:
    """Measure the history at scale and write the report (the flags: ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1_000_000)
    parser.add_argument("--extra-steps", type=int, default=200, help="steps of the second epoch timed")
    parser.add_argument("--compare", help="another checkout's src directory, measured as 'before'")
    parser.add_argument("--child", choices=["steady", "bulk"], help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        _child(arguments.child, arguments.prompts, arguments.extra_steps)
        return
    load_before = os.getloadavg()
    steady = _run("steady", arguments.prompts, arguments.extra_steps, None)
    bulk = _run("bulk", arguments.prompts, arguments.extra_steps, None)
    before = None
    if arguments.compare:
        before = {
            "source": arguments.compare,
            "steady": _run("steady", arguments.prompts, arguments.extra_steps, arguments.compare),
            "bulk": _run("bulk", arguments.prompts, arguments.extra_steps, arguments.compare),
        }
    load_after = os.getloadavg()
    verdicts = _report(f"steady state, {arguments.prompts:,} prompts (second epoch timed)", steady)
    _report(f"bulk: {arguments.prompts:,} groups recorded at one step, then the first pick", bulk)
    if before is not None:
        _report(f"before ({arguments.compare}): steady state", before["steady"])
        _report(f"before ({arguments.compare}): bulk", before["bulk"])
    print(f"\nload average (1, 5, 15 min) before {load_before}, after {load_after}; {os.cpu_count()} CPUs")
    results = {
        "machine": {
            "python": platform.python_version(),
            "numpy": __import__("numpy").__version__,
            "cpus": os.cpu_count(),
            "load_before": load_before,
            "load_after": load_after,
        },
        "prompts": arguments.prompts,
        "limits": LIMITS,
        "steady": steady,
        "bulk": bulk,
        "limits_met": verdicts,
        "all_limits_met": all(verdicts.values()),
        "before": before,
    }
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
