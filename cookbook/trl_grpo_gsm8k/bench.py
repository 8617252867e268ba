"""
This recipe benchmarked: plain GRPOTrainer vs AdmissionGRPOTrainer (gated on accuracy), same seeds.

Offline: the embedded easy GSM8K-format data and warm-started tiny Qwen2 of the cookbook, with
this recipe's reward functions (``train.accuracy`` and ``train.brevity``).
Reports, per configuration: the share of trained groups that are dead (accuracy without
spread) and phantom (dead, but the shaped reward has spread), the informative rate of the
update, the groups generated per target group, the wall time, and the adapter's own time
(time in the override minus time in TRL's generation and scoring) relative to training. The
report is written beside this file, to ``results/bench.json`` (``--out`` another path).

    python -m cookbook.trl_grpo_gsm8k.bench [--steps 10] [--seeds 0 1] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# ruff: noqa: E402  (the offline environment is set before these imports)
import torch
from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer

from cookbook.grpo_gsm8k.offline.prepare_demo import prepare_demo
from cookbook.trl_grpo_gsm8k.train import accuracy, brevity
from group_admission.adapters.trl import AdmissionGRPOTrainer

GATE = {"min_reward_std": 1e-6, "gate_on": ["accuracy"]}
BUDGET = {"max_extra_groups": 4, "max_resample_rounds": 2}


class Measured:
    """
    Counts dead and phantom groups in what each update trains on, and times the override.

    A mixin before a TRL trainer: ``super()`` is the trainer (untyped: TRL is not followed).
    """

    num_generations: int  # the trainer's
    bench: dict[str, int]
    bench_last: Any
    bench_inner: float
    bench_outer: float

    def _calculate_rewards(self, *args: Any) -> Any:
        rewards = super()._calculate_rewards(*args)  # type: ignore[misc]
        self.bench_last = rewards
        return rewards

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        started = time.perf_counter()
        before = self.bench_inner
        output = super()._generate_and_score_completions(inputs)  # type: ignore[misc]
        self.bench_outer += time.perf_counter() - started
        if before == self.bench_inner:  # plain trainer: the override is TRL's own
            self.bench_inner += time.perf_counter() - started
        self._bench_count(output)
        return output

    def _bench_count(self, output: Any) -> None:
        n = self.num_generations
        trained = (output["completion_mask"].sum(dim=1) > 0).view(-1, n).any(dim=1)
        if isinstance(self, AdmissionGRPOTrainer):
            # Dead groups never reach the update: they are masked (trained is False for them).
            self.bench["trained"] += int(trained.sum())
            self.bench["dead"] += 0
            self.bench["phantom"] += 0
            return
        acc = self.bench_last[:, 0].view(-1, n)
        total = self.bench_last.nansum(dim=1).view(-1, n)
        dead = (acc.amax(1) - acc.amin(1)) == 0
        phantom = dead & ((total.amax(1) - total.amin(1)) > 0)
        self.bench["trained"] += int(trained.sum())
        self.bench["dead"] += int((dead & trained).sum())
        self.bench["phantom"] += int((phantom & trained).sum())


class InnerTimed:
    """Times TRL's own generation and scoring, called by the adapter once per round."""

    bench_inner: float

    def _generate_round(self, inputs: Any) -> Any:
        started = time.perf_counter()
        output = super()._generate_round(inputs)  # type: ignore[misc]
        self.bench_inner += time.perf_counter() - started
        return output


class PlainBench(Measured, GRPOTrainer):  # type: ignore[misc]  # TRL is untyped here
    """TRL's GRPO trainer, measured."""


class AdmissionBench(Measured, InnerTimed, AdmissionGRPOTrainer):
    """The admission trainer, measured, with TRL's own generation timed apart."""


def run(kind: str, seed: int, steps: int, model: str, dataset: Any) -> dict[str, Any]:
    """Train one configuration for ``steps`` steps; what it trained on and what it cost."""
    config = GRPOConfig(
        output_dir=f"/tmp/bench_trl/{kind}-{seed}",
        max_steps=steps,
        per_device_train_batch_size=16,
        num_generations=8,
        max_completion_length=24,
        learning_rate=1e-3,
        beta=0.0,
        bf16=False,
        gradient_checkpointing=False,
        use_cpu=True,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=seed,
        disable_tqdm=True,
    )
    common = {"model": model, "reward_funcs": [accuracy, brevity], "args": config, "train_dataset": dataset}
    torch.manual_seed(seed)
    if kind == "plain":
        trainer = PlainBench(**common)
    else:
        trainer = AdmissionBench(**common, admission=GATE, budget=BUDGET if kind == "budget" else None)
    trainer.bench = {"trained": 0, "dead": 0, "phantom": 0}
    trainer.bench_outer = trainer.bench_inner = 0.0
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    logs = [row for row in trainer.state.log_history if "group_admission/sampling_rounds" in row]
    target = steps * 2
    generated = sum(row["group_admission/generated_groups"] for row in logs) if logs else target
    informative = (
        sum(row["group_admission/trained_group_rate"] for row in logs) / len(logs)
        if logs
        else 1 - trainer.bench["dead"] / max(1, trainer.bench["trained"])
    )
    before = (
        sum(row["group_admission/informative_rate_before"] for row in logs) / len(logs)
        if logs
        else informative
    )
    return {
        "kind": kind,
        "seed": seed,
        "wall_s": round(wall, 2),
        "dead_share": trainer.bench["dead"] / max(1, trainer.bench["trained"]),
        "phantom_share": trainer.bench["phantom"] / max(1, trainer.bench["trained"]),
        "informative_rate_before": round(before, 4),
        "informative_rate_after": round(informative, 4),
        "generated_groups_per_target": round(generated / target, 3),
        "adapter_overhead": round((trainer.bench_outer - trainer.bench_inner) / wall, 5),
    }


def main() -> None:
    """Run both configurations on every seed and write the report (the flags: ``--help``)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--out", default=str(HERE / "results" / "bench.json"))
    args = parser.parse_args()
    data, model = prepare_demo(ROOT / ".cache" / "grpo_gsm8k")
    dataset = load_dataset(str(data), "main", split="train")
    dataset = dataset.map(lambda row: {"prompt": [{"role": "user", "content": row["question"]}]})
    results = [
        run(kind, seed, args.steps, str(model), dataset)
        for seed in args.seeds
        for kind in ("plain", "masking", "budget")
    ]
    for row in results:
        print(json.dumps(row))
    Path(args.out).write_text(json.dumps({"steps": args.steps, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
