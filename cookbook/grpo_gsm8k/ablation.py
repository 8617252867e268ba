r"""
The evidence ablation: does the policy learn more per generated sample with admission?

Trains the same model on the same data with the same seeds under each arm, every run for the
same number of generated samples (an arm that resamples is charged for it and takes fewer
steps), and evaluates held-out greedy accuracy every ``--eval-every`` samples:

- ``grpo``: plain GRPO, every group trained on (as TRL does);
- ``zero_std``: groups with no spread in the *total* reward dropped (slime's and verl DAPO's
  criterion; all-wrong groups with brevity spread get through);
- ``gate``: admission gated on accuracy (the run's ``admission`` block, the main job's)
  without its prompt history: no resampling, no skipping;
- ``gate_resample``: the same plus bounded resampling (2 extra groups per target group over
  2 rounds, under the run's own budget fields);
- ``gate_resample_skip``: the same, plus prompt skipping: a ``PromptHistory`` (the block's
  ``history``, the recommended preset's) skips the prompts it expects to be dead, before
  generating them.

Every arm draws from the same pool (``--pool``: the first 64 training problems offline),
revisited epoch after epoch, so the history has earlier visits to learn from.

    python -m cookbook.grpo_gsm8k.ablation        # the embedded tiny setup: 5 arms x 5 seeds
    python -m cookbook.grpo_gsm8k.ablation --model Qwen/Qwen2.5-0.5B-Instruct \
        --dataset openai/gsm8k --device cuda --dtype bfloat16 --samples 25600 --eval-every 2560

Without ``--config`` or ``--model`` it runs the offline demo's config on its assets (built
under ``.cache/grpo_gsm8k/`` if missing) and a held-out set of its own; every other flag is a
flag of ``train.py`` and applies to every arm. It writes ``ablation.json``, ``ablation.md``
and ``ablation.png`` under ``--out``, and every run's ``steps.jsonl`` under ``--out/runs/``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from cookbook.grpo_gsm8k.ablation_report import format_table, summarise_arms, write_plot
from cookbook.grpo_gsm8k.config import PLAIN_GRPO, TrainConfig, merge_admission, parse_config
from cookbook.pool import cpu_seconds, run_pool
from group_admission import SamplingBudgetConfig

__all__ = ["ARMS", "Arm", "arm_config", "main", "run_ablation"]

OFFLINE_CONFIG = Path(__file__).resolve().parent / "offline" / "config.yaml"
OFFLINE_POOL = 64  # small enough that a run revisits every problem a few times
WARM_START_ROWS = 2000  # the demo policy was fine-tuned on every training row
HELD_OUT_SEED = 2_000_003  # neither the training split's seed (0) nor the demo test split's
#: A finished run's progress line (a template of its record).
PROGRESS = (
    "{arm:<14} seed {seed}: held-out {accuracy_before:.3f} -> {accuracy_after:.3f} after {samples} samples "
    "({steps} steps) in {wall_s:.0f}s wall, {cpu_s:.0f}s CPU"
)


@attrs.frozen
class Arm:
    """
    One arm: its admission block (a ``SessionConfig`` block) over the run's, or instead of it.

    ``admission`` updates the run's block section by section (``None``: the run's own); with
    ``replace`` it is the whole block. ``resample`` adds bounded resampling under the run's
    own budget fields: ``SamplingBudgetConfig.for_target`` extra groups (2 per target group)
    over :data:`RESAMPLE_ROUNDS` rounds.
    """

    name: str
    label: str
    admission: Mapping[str, Any] | None
    replace: bool = False
    resample: bool = False


#: The resampling arms' rounds after the first.
RESAMPLE_ROUNDS = 2

ARMS: tuple[Arm, ...] = (
    Arm("grpo", "plain GRPO (every group)", PLAIN_GRPO, replace=True),
    Arm("zero_std", "zero-std filter on the total reward", {"preset": "zero_std"}, replace=True),
    Arm("gate", "admission gated on accuracy, no resampling", {"history": None}),
    Arm("gate_resample", "admission + bounded resampling", {"history": None}, resample=True),
    Arm("gate_resample_skip", "+ prompt skipping", {"history": {}}, resample=True),
)


def arm_config(base: TrainConfig, arm: Arm, seed: int, output: Path) -> TrainConfig:
    """The config of one run: the base with the arm's admission block, the seed and a folder."""
    if arm.admission is None:
        admission = dict(base.admission)
    elif arm.replace:
        admission = dict(arm.admission)
    else:
        admission = merge_admission(base.admission, arm.admission)
    if arm.resample:
        rounds = SamplingBudgetConfig.for_target(base.batch_size, max_resample_rounds=RESAMPLE_ROUNDS)
        resampling = {key: getattr(rounds, key) for key in ("max_extra_groups", "max_resample_rounds")}
        admission["budget"] = {**resampling, **admission.get("budget", {})}  # the run's own fields win
    return attrs.evolve(
        base,
        admission=admission,
        baseline=None,
        seed=seed,
        output_dir=str(output / "runs" / arm.name / f"seed{seed}"),
        progress=False,
        plot=False,
        prometheus_port=None,
    )


def run_one(job: tuple[str, TrainConfig]) -> dict[str, Any]:
    """Train one arm with one seed; return what the report needs (runs in a worker)."""
    import torch

    from cookbook.grpo_gsm8k.train import train

    torch.set_num_threads(1)  # one thread per run: the runs themselves are the parallelism
    arm, config = job
    wall, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):  # every run's step lines are in its steps.jsonl
        result = train(config)
    steps = result.steps
    trained = sum(s["trained"] for s in steps)
    late = [s for s in steps if s["samples_total"] > 0.75 * steps[-1]["samples_total"]] or steps[-1:]
    return {
        "arm": arm,
        "seed": config.seed,
        "steps": len(steps),
        "samples": steps[-1]["samples_total"],
        "tokens": sum(s["generated_tokens"] for s in steps),
        "groups_generated": sum(s["generated_groups"] for s in steps),
        "groups_trained": trained,
        **{key: sum(s[key] for s in steps) for key in ("trained_dead", "trained_phantom")},
        "prompts_skipped": sum(s["prompts_skipped"] for s in steps),
        "trained_phantom_wrong": sum(s["trained_phantom_wrong"] for s in steps),
        "rejected": sum(sum(s["rejections"].values()) for s in steps),
        "surplus": sum(s["surplus"] for s in steps),
        "updates": sum(int(s["updates"]) for s in steps),
        "exhausted_steps": sum(bool(s["exhausted"]) for s in steps),
        "reward_late": sum(s["reward"] for s in late) / len(late),
        "train_accuracy_late": sum(s["accuracy"] for s in late) / len(late),
        "completion_tokens_late": sum(s["completion_tokens_mean"] for s in late) / len(late),
        "reward_curve": [[s["samples_total"], s["reward"], s["accuracy"]] for s in steps],
        "eval_curve": result.eval_curve,
        "accuracy_before": result.eval_accuracy.get("before"),
        "accuracy_after": result.eval_accuracy.get("after"),
        "accuracy_curve_mean": sum(p["accuracy"] for p in result.eval_curve[1:])
        / max(1, len(result.eval_curve) - 1),
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
    }


def run_ablation(
    base: TrainConfig,
    arms: Sequence[Arm],
    seeds: Sequence[int],
    *,
    output: Path,
    workers: int = 2,
    held_out: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """
    Run every arm with every seed and write ``ablation.json``, ``ablation.md`` and ``ablation.png``.

    ``base`` must set ``max_samples`` (the cost every arm gets), ``eval_problems`` and
    ``eval_every_samples``.

    Returns:
        The report: the setup, every run, and the per-arm summary.
    """
    if base.max_samples is None or base.eval_every_samples is None or not base.eval_problems:
        raise ValueError("'base' must set max_samples, eval_every_samples and eval_problems")
    output.mkdir(parents=True, exist_ok=True)
    # Seed-major order: a run cut short still has every arm for the first seeds.
    jobs = [(arm.name, arm_config(base, arm, seed, output)) for seed in seeds for arm in arms]
    wall, cpu = time.perf_counter(), cpu_seconds()
    runs = sorted(
        run_pool(run_one, jobs, workers, PROGRESS),
        key=lambda r: ([a.name for a in arms].index(r["arm"]), r["seed"]),
    )
    report = {
        "setup": {
            "config": base.to_dict(),
            "arms": [attrs.asdict(arm) | {"resolved": _resolved(base, arm)} for arm in arms],
            "seeds": list(seeds),
            "samples_per_run": base.max_samples,
            "eval_every_samples": base.eval_every_samples,
            "held_out": dict(held_out or {}) | {"problems": base.eval_problems},
            "workers": workers,
        },
        "runs": runs,
        "arms": summarise_arms(runs, [arm.name for arm in arms], base.eval_every_samples),
        "timing": {"wall_s": time.perf_counter() - wall, "cpu_s": cpu_seconds() - cpu},
    }
    (output / "ablation.json").write_text(json.dumps(report, indent=1))
    (output / "ablation.md").write_text(format_table(report) + "\n")
    write_plot(report, output / "ablation.png")
    return report


def _resolved(base: TrainConfig, arm: Arm) -> dict[str, Any]:
    """The arm's admission as the session runs it: every field of its SessionConfig."""
    return arm_config(base, arm, base.seed, Path()).session_config().to_dict()


def write_held_out(path: Path, excluded: Sequence[str], count: int, *, seed: int = HELD_OUT_SEED) -> Path:
    """
    Write ``count`` distinct demo-family problems whose questions are not in ``excluded``.

    The problems come from the offline generator with the demo's recipe and another seed
    (the two-step family has tens of thousands of distinct questions).

    Raises:
        ValueError: fewer than ``count`` unseen questions exist.
    """
    from cookbook.grpo_gsm8k.offline.prepare_demo import DATA_RECIPE
    from cookbook.grpo_gsm8k.offline.problems import generate_problems

    recipe = {k: v for k, v in DATA_RECIPE.items() if k in ("max_value", "terse")}
    seen, rows = set(excluded), []
    for row in generate_problems(20 * count, seed=seed, kinds=tuple(DATA_RECIPE["kinds"]), **recipe):  # type: ignore[arg-type]
        if row["question"] not in seen:
            seen.add(row["question"])
            rows.append(row)
            if len(rows) == count:
                break
    if len(rows) < count:
        raise ValueError(f"'count' must be <= {len(rows)} unseen problems of the demo family (got {count})")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grpo_gsm8k.ablation",
        description="Every arm, every seed, at equal generation cost; other flags go to train.py.",
        epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    names = [arm.name for arm in ARMS]
    parser.add_argument("--arms", default=",".join(names), help=f"comma-separated, of {names}")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--samples", type=int, default=3072, help="generated samples per run")
    parser.add_argument("--eval-every", type=int, default=768, help="samples between evaluations")
    parser.add_argument("--held-out", type=int, default=1000, help="held-out problems")
    parser.add_argument(
        "--pool",
        type=int,
        default=None,
        help="training problems, revisited (default: 64 offline, all otherwise)",
    )
    parser.add_argument("--workers", type=int, default=2, help="runs in parallel (1: in this process)")
    parser.add_argument("--out", default="runs/ablation", help="folder for the report and the runs")
    return parser


def _base_config(args: argparse.Namespace, rest: list[str]) -> tuple[TrainConfig, dict[str, Any]]:
    """The settings every arm shares, and where the held-out problems come from."""
    offline = not any(flag.split("=")[0] in ("--config", "--model") for flag in rest)
    config = parse_config([*(["--config", str(OFFLINE_CONFIG)] if offline else []), *rest])
    per_step = config.batch_size * config.num_generations
    config = attrs.evolve(
        config,
        steps=math.ceil(args.samples / per_step),  # plain GRPO's steps; a resampling arm stops sooner
        max_samples=args.samples,
        eval_every_samples=args.eval_every,
        eval_problems=args.held_out,
        max_train_problems=args.pool or (OFFLINE_POOL if offline else config.max_train_problems),
    )
    if not offline or config.eval_dataset:
        return config, {"source": config.eval_dataset or f"{config.dataset} ({config.eval_split})"}
    from cookbook.grpo_gsm8k.data import load_problems
    from cookbook.grpo_gsm8k.offline.prepare_demo import DEFAULT_CACHE, prepare_demo

    prepare_demo(DEFAULT_CACHE)  # the offline config's model and data, built once
    # Every question the policy was trained on: the warm-start's rows and the pool (its prefix).
    seen = None if config.max_train_problems is None else max(config.max_train_problems, WARM_START_ROWS)
    excluded = [p.question for p in load_problems(config.dataset, config.subset, config.split, limit=seen)]
    path = write_held_out(DEFAULT_CACHE / f"held-out-{args.held_out}-{seen}.jsonl", excluded, args.held_out)
    held_out = {"source": str(path), "seed": HELD_OUT_SEED, "excluded_training_rows": seen or "all"}
    return attrs.evolve(config, eval_dataset=str(path)), held_out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Parse the flags, run the ablation, print the table."""
    args, rest = _parser().parse_known_args(argv)
    if args.samples % args.eval_every:
        raise SystemExit(
            f"--samples must be a multiple of --eval-every (got {args.samples}, {args.eval_every})"
        )
    known = {arm.name: arm for arm in ARMS}
    unknown = [name for name in args.arms.split(",") if name not in known]
    if unknown:
        raise SystemExit(f"--arms: unknown arm(s) {unknown} (known: {list(known)})")
    base, held_out = _base_config(args, rest)
    arms = [known[name] for name in args.arms.split(",")]
    report = run_ablation(
        base, arms, range(args.seeds), output=Path(args.out), workers=args.workers, held_out=held_out
    )
    print(format_table(report))
    print(f"report: {Path(args.out) / 'ablation.json'}  plot: {Path(args.out) / 'ablation.png'}")
    return report


if __name__ == "__main__":
    main()
