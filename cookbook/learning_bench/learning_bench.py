"""
The learning bench: which admission strategy buys the most held-out accuracy per generated token?

Eight arms train the same warm-started policy on the same prompts with the same seeds,
each until the same number of generated tokens, on two tasks of one family (``neutral``:
the shaping term costs nothing; ``conflict``: it pays for skipping a step that helps), and
report held-out greedy accuracy against generated tokens.

    python -m cookbook.learning_bench                # 8 arms x 2 tasks x 5 seeds, CPU
    python -m cookbook.learning_bench --quick        # one seed, a few steps, every arm
    python -m cookbook.learning_bench --device cuda  # a larger model, 3 arms x 3 seeds

It writes ``learning_bench.json``, ``learning_bench.md`` (the tables) and
``learning_bench.png`` (the curves) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from cookbook.learning_bench.arms import ARM_NAMES, KNOWN_ARMS, Profile, profile_for
from cookbook.learning_bench.report import format_tables, runs_from_summary, summarise_task, write_plot
from cookbook.learning_bench.task import TASKS, Split, Task, make_split
from cookbook.pool import cpu_seconds, run_pool

__all__ = ["main", "resummarise", "run_bench", "warm_table"]

WARM_SEED = 0  # one warm start per task, shared by every arm and seed
#: A finished run's progress line (a template of its record).
PROGRESS = (
    "{task:<8} {arm:<22} seed {seed}: {start_accuracy:.3f} -> {final_accuracy:.3f} at {generated_tokens} "
    "tokens ({counts[steps]} steps) {wall_s:.0f}s wall {cpu_s:.0f}s CPU"
)


def warm_table(
    policy: Any, task: Task, problems: np.ndarray, members: int = 8, seed: int = 99
) -> dict[str, Any]:
    """
    The warm start at temperature 1, ``members`` samples per problem.

    Its accuracy and rewards by format, and how its groups split into mixed, all-wrong and
    all-right.
    """
    from cookbook.learning_bench.rollout import decode, group_scores, new_group
    from cookbook.learning_bench.task import prompt_tokens

    prompts = prompt_tokens(task, problems)
    groups = [
        new_group(task, int(p), prompts[i], members=members, seed=seed, key=(i,))
        for i, p in enumerate(problems)
    ]
    decode(policy, groups, 0)
    scores = [group_scores(task, g) for g in groups]
    outcome = np.concatenate([s.outcome for s in scores])
    shaping = np.concatenate([s.shaping for s in scores])
    step = np.concatenate([s.step for s in scores])
    direct = np.concatenate([s.direct for s in scores])
    table = {}
    for name, rows in (("step", step), ("direct", direct), ("other", ~(step | direct))):
        count = int(rows.sum())
        table[name] = {
            "completions": count,
            "accuracy": float(outcome[rows].mean()) if count else None,
            "shaping": float(shaping[rows].mean()) if count else None,
            "total": float((outcome + shaping)[rows].mean()) if count else None,
        }
    means = np.array([s.outcome.mean() for s in scores])
    return {
        "problems": len(problems),
        "members": members,
        "by_format": table,
        "groups": {
            "mixed": float(((means > 0) & (means < 1)).mean()),
            "all_wrong": float((means == 0).mean()),
            "all_right": float((means == 1).mean()),
        },
    }


def prepare_task(profile: Profile, task: Task, split: Split) -> dict[str, Any]:
    """Warm-start the task's policy on the device; measure it; return its weights (on the CPU)."""
    from cookbook.learning_bench.model import build_policy, greedy_accuracy, warm_start

    wall, cpu = time.perf_counter(), time.process_time()
    policy = build_policy(profile.size, lr=profile.warm_lr, device=profile.device, seed=WARM_SEED)
    warm = warm_start(
        policy,
        task,
        split.warm,
        split.validation,
        target=profile.warm_target[task.name],
        max_steps=profile.warm_max_steps,
        seed=WARM_SEED,
    )
    return {
        "weights": {k: v.detach().cpu().clone() for k, v in policy.model.state_dict().items()},
        "warm_start": warm
        | greedy_accuracy(policy, task, split.held_out)
        | {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu},
        "warm_table": warm_table(policy, task, split.held_out, members=profile.members),
    }


Job = tuple[str, str, int, Profile, Split, Mapping[str, Any], float | None]


def run_job(job: Job) -> dict[str, Any] | None:
    """One run (in a worker): one torch thread, the arm, the task, the seed; ``None`` past the deadline."""
    import torch

    from cookbook.learning_bench.runner import run_arm

    torch.set_num_threads(1)
    arm, task, seed, profile, split, weights, deadline = job
    if deadline is not None and time.time() > deadline:
        return None
    return run_arm(KNOWN_ARMS[arm], TASKS[task], seed, profile, split, weights)


def run_bench(
    profile: Profile,
    tasks: Sequence[str],
    arms: Sequence[str],
    seeds: Sequence[int] | None,
    *,
    workers: int,
    deadline_s: float | None = None,
) -> dict[str, Any]:
    """
    Warm-start each task, run every (task, arm, seed), and summarise (``seeds``: the profile's).

    With ``deadline_s``, runs not started that many seconds after the start are left out (the
    report's ``setup.seeds`` says which ran).
    """
    import torch

    torch.set_num_threads(1)
    wall, cpu, load = time.perf_counter(), cpu_seconds(), os.getloadavg()
    deadline = None if deadline_s is None else time.time() + deadline_s
    split = make_split(profile.held_out, profile.pool, profile.warm)
    prepared = {}
    for name in tasks:
        print(
            f"warm start of {name}: supervised until validation accuracy {profile.warm_target[name]}",
            flush=True,
        )
        prepared[name] = prepare_task(profile, TASKS[name], split)
    # Seed-major: a bench cut short still has every arm of the first seeds.
    jobs: list[Job] = [
        (arm, name, seed, profile, split, prepared[name]["weights"], deadline)
        for seed in sorted({s for arm in arms for s in profile.seeds_of(arm, seeds)})
        for name in tasks
        for arm in arms
        if seed in profile.seeds_of(arm, seeds)
    ]
    print(f"{len(jobs)} runs on {workers} worker(s)", flush=True)
    runs = run_pool(run_job, jobs, workers, PROGRESS)
    report: dict[str, Any] = {
        "setup": _setup(profile, tasks, arms, runs, split, left_out=len(jobs) - len(runs), workers=workers),
        "tasks": {},
    }
    for name in tasks:
        extras = {"heldout_size": len(split.held_out)}
        extras |= {key: prepared[name][key] for key in ("warm_start", "warm_table")}
        report["tasks"][name] = summarise(runs, name, arms, extras)
    report["timing"] = {
        "wall_s": time.perf_counter() - wall,
        "cpu_s": cpu_seconds() - cpu,
        "run_cpu_s": sum(r["cpu_s"] for r in runs),
        "load_average_start": list(load),
        "load_average_end": list(os.getloadavg()),
    }
    return report


def _setup(
    profile: Profile,
    tasks: Sequence[str],
    arms: Sequence[str],
    runs: Sequence[Mapping[str, Any]],
    split: Split,
    *,
    left_out: int,
    workers: int,
) -> dict[str, Any]:
    """The report's setup: the profile, tasks and arms, the seeds that ran, the split."""
    return {
        "profile": profile.to_dict(),
        "tasks": {name: attrs.asdict(TASKS[name]) for name in tasks},
        "arms": [KNOWN_ARMS[a].to_dict() for a in arms],
        "seeds": {
            arm: sorted(r["seed"] for r in runs if r["arm"] == arm and r["task"] == tasks[0]) for arm in arms
        },
        "runs_left_out": left_out,
        "limit_arm": "oracle_skip",
        "workers": workers,
        "split": {"held_out": len(split.held_out), "pool": len(split.pool), "warm": len(split.warm)},
    }


def summarise(
    runs: Sequence[dict[str, Any]], task: str, arms: Sequence[str], extras: Mapping[str, Any]
) -> dict[str, Any]:
    """One task's summary (``extras``: its held-out size and warm start), with the gate."""
    summary = summarise_task([r for r in runs if r["task"] == task], arms) | dict(extras)
    if "outcome_only" in summary["arms"]:
        summary["gate"] = _gate(summary["arms"]["outcome_only"]["gain_over_start"])
    return summary


def resummarise(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """
    Published reports summarised again by this code, from their own per-run records.

    Several reports of one profile and warm start become one, their runs together: arms
    measured later (a limit, a diagnostic) are paired seed by seed with the runs already
    published. A run in two reports, another profile or another warm start is refused.
    """
    first = reports[0]
    merged: dict[str, Any] = {"setup": dict(first["setup"]), "tasks": {}, "timing": dict(first["timing"])}
    arms: dict[str, Any] = {}
    runs: dict[str, list[dict[str, Any]]] = {}
    for report in reports:
        profile, base = report["setup"]["profile"], first["setup"]["profile"]
        if any(profile[key] != base[key] for key in profile.keys() & base.keys() - {"arms", "long_arms"}):
            raise SystemExit("--resummarise: the reports ran different profiles")
        arms |= {arm["name"]: arm for arm in report["setup"]["arms"] if arm["name"] not in arms}
        for name, task in report["tasks"].items():
            held = merged["tasks"].setdefault(name, task)
            if _untimed(held["warm_start"]) != _untimed(task["warm_start"]):
                raise SystemExit(f"--resummarise: the reports' warm starts of {name!r} differ")
            known = {(r["arm"], r["seed"]) for r in runs.get(name, [])}
            new = runs_from_summary(task, name)
            if known & {(r["arm"], r["seed"]) for r in new}:
                raise SystemExit(f"--resummarise: a run of {name!r} is in two reports")
            runs.setdefault(name, []).extend(new)
    for name, task_runs in runs.items():
        extras = {key: merged["tasks"][name][key] for key in ("heldout_size", "warm_start", "warm_table")}
        merged["tasks"][name] = summarise(task_runs, name, list(arms), extras)
    merged["setup"]["arms"] = list(arms.values())
    merged["setup"]["runs_left_out"] = sum(r["setup"]["runs_left_out"] for r in reports)
    merged["setup"]["seeds"] = {
        arm: sorted({r["seed"] for task_runs in runs.values() for r in task_runs if r["arm"] == arm})
        for arm in arms
    }
    merged["timing"]["run_cpu_s"] = sum(r["timing"]["run_cpu_s"] for r in reports)
    return merged


def _untimed(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` without its timings (they differ between runs of the same computation)."""
    return {key: value for key, value in record.items() if key not in ("wall_s", "cpu_s")}


def _gate(gain: Mapping[str, float | None]) -> dict[str, Any]:
    """The testbed's gate: outcome_only gains >= +0.10 with the 95% interval's low end >= +0.05."""
    low = gain["ci95_low"]
    mean = gain["mean"]
    return {
        "gain": mean,
        "ci95_low": low,
        "holds": bool(mean is not None and mean >= 0.10 and low is not None and low >= 0.05),
    }


def _check_device(device: str) -> None:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here (torch.cuda.is_available() is False)")


def _names(value: str, known: Sequence[str], flag: str) -> list[str]:
    names = [n for n in value.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise SystemExit(f"{flag}: unknown or empty {unknown or value!r} (known: {list(known)})")
    return names


def _seeds(value: str) -> list[int]:
    try:
        seeds = [int(s) for s in value.split(",")] if "," in value else list(range(int(value)))
    except ValueError:
        raise SystemExit(
            f"--seeds must be a count or a comma-separated list of seeds (got {value!r})"
        ) from None
    if not seeds or min(seeds) < 0:
        raise SystemExit(f"--seeds must name at least one seed >= 0 (got {value!r})")
    return seeds


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="learning_bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seeds", default=None, help="a count (seeds 0..N-1) or a list '0,3,4' (default 5; cuda 3; quick 1)"
    )
    parser.add_argument(
        "--arms", default=None, help=f"comma-separated, of {list(ARM_NAMES)} (default all; cuda 3)"
    )
    parser.add_argument("--tasks", default="neutral,conflict", help="comma-separated, of neutral, conflict")
    parser.add_argument(
        "--workers", type=int, default=None, help="runs in parallel (default 2; cuda and quick 1)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="one seed, a few steps, every arm: the smoke test"
    )
    parser.add_argument(
        "--device", default="cpu", choices=("cpu", "cuda"), help="cuda: the larger model on one GPU"
    )
    parser.add_argument(
        "--tokens", type=int, default=None, help="override the generated-token budget per run"
    )
    parser.add_argument("--out", default="runs/learning_bench", help="folder for the report, tables and plot")
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=None,
        help="start no run later than this many seconds (default: none)",
    )
    parser.add_argument(
        "--resummarise",
        metavar="JSON",
        nargs="+",
        default=None,
        help="rebuild the summary, tables and plot of a report (of several: their runs together)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Parse the flags, run the bench, write and print the report."""
    args = _parser().parse_args(argv)
    if args.resummarise:
        report = resummarise([json.loads(Path(p).read_text()) for p in args.resummarise])
        _write(report, Path(args.out))
        return report
    profile = profile_for(args.device, quick=args.quick)
    if args.tokens is not None:
        if args.tokens < 1:
            raise SystemExit(f"--tokens must be >= 1 (got {args.tokens})")
        profile = attrs.evolve(profile, token_budget=args.tokens)
    arms = _names(args.arms, list(KNOWN_ARMS), "--arms") if args.arms else list(profile.arms)
    tasks = _names(args.tasks, list(TASKS), "--tasks")
    seeds = _seeds(args.seeds) if args.seeds else None
    workers = profile.workers if args.workers is None else args.workers
    if workers < 1:
        raise SystemExit(f"--workers must be >= 1 (got {workers})")
    _check_device(profile.device)
    report = run_bench(profile, tasks, arms, seeds, workers=workers, deadline_s=args.deadline_s)
    _write(report, Path(args.out))
    timing = report["timing"]
    print(f"bench: {timing['wall_s']:.0f}s wall, {timing['cpu_s']:.0f}s CPU; report: {args.out}")
    return report


def _write(report: Mapping[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "learning_bench.json").write_text(json.dumps(report, indent=1) + "\n")
    tables = format_tables(report)
    (out / "learning_bench.md").write_text(tables + "\n")
    write_plot(report, out / "learning_bench.png")
    print(tables)


if __name__ == "__main__":
    main()
