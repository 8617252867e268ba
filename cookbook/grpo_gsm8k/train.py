"""
GRPO on GSM8K with group admission and bounded resampling: a hand-written training loop.

Each step samples G completions for a batch of prompts, scores them with a composite reward
(accuracy + brevity), and runs the recipe (``grpo_gsm8k.recipe.collect_step``): an
``AdmissionSession`` judges every group (gated on accuracy) and plans resampling until the
target of informative groups is met or the budget stops it. The step then takes clipped
policy-gradient updates on exactly the target groups (the surplus is discarded).

    python -m cookbook.grpo_gsm8k.train --config cookbook/grpo_gsm8k/offline/config.yaml
    python -m cookbook.grpo_gsm8k.train --model Qwen/Qwen2.5-0.5B-Instruct --device cuda
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cookbook.grpo_gsm8k.compare import Baseline, finish_comparison
from cookbook.grpo_gsm8k.config import ConfigError, TrainConfig, parse_config
from cookbook.grpo_gsm8k.data import (
    Problem,
    autocast,
    build_prompt,
    eos_token_ids,
    load_policy,
    load_problems,
    resolve_device,
)
from cookbook.grpo_gsm8k.grpo import parameter_checksum
from cookbook.grpo_gsm8k.observers import RoundLog, Stopwatch
from cookbook.grpo_gsm8k.recipe import (
    Resample,
    StepObserver,
    StepSample,
    collect_step,
    fresh_problems,
    retry_rejected,
)
from cookbook.grpo_gsm8k.report import (
    JsonlLog,
    RunResult,
    StepLines,
    format_summary,
    start_prometheus,
    summarise,
    write_plot,
)
from cookbook.grpo_gsm8k.rewards import answers_match, extract_answer
from cookbook.grpo_gsm8k.rollout import Group, ProblemStream, generate_groups, score_groups
from cookbook.grpo_gsm8k.skipping import SkippingStream
from cookbook.grpo_gsm8k.update import chunks, update_policy
from group_admission import AdmissionSession, RejectionReason

__all__ = ["RunResult", "main", "train", "update_policy"]


@torch.no_grad()
def greedy_accuracy(
    model: Any, tokenizer: Any, problems: Sequence[Problem], config: TrainConfig, eos: list[int], device: str
) -> float:
    """Greedy-decoding accuracy on held-out problems."""
    if not problems:
        return float("nan")
    was_training = model.training
    model.eval()
    correct = 0
    for part in chunks(problems, config.generation_batch_size):
        prompts = [build_prompt(tokenizer, p.question, config.system_prompt) for p in part]
        encoded = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        with autocast(device, config.dtype):
            output = model.generate(
                **encoded,
                do_sample=False,
                max_new_tokens=config.max_new_tokens,
                eos_token_id=eos,
                pad_token_id=tokenizer.pad_token_id,
            )
        texts = tokenizer.batch_decode(output[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
        correct += sum(
            answers_match(extract_answer(t, lenient=config.lenient_answers), p.gold)
            for t, p in zip(texts, part, strict=True)
        )
    model.train(was_training)
    return correct / len(problems)


def _spread(values: Sequence[float | None]) -> bool:
    return len(set(values)) > 1


def trained_kinds(groups: Sequence[Group]) -> dict[str, int]:
    """
    How many trained groups carried no signal.

    ``dead``: no spread in the total reward, so every advantage is 0; ``phantom``: no spread
    in accuracy, the advantages come from brevity alone; ``phantom_wrong``: the phantom
    groups whose members are all wrong.
    """
    phantom = [g for g in groups if not _spread(g.rewards["accuracy"]) and _spread(g.total_reward)]
    return {
        "trained_dead": sum(not _spread(g.total_reward) for g in groups),
        "trained_phantom": len(phantom),
        "trained_phantom_wrong": sum(not g.rewards["accuracy"][0] for g in phantom),
    }


def step_record(
    step: int, sample: StepSample, log: RoundLog, session: AdmissionSession, update: dict[str, float]
) -> dict[str, Any]:
    """The JSON record of one step (also what the per-step line and the plot read)."""
    report, first = sample.report, log.first_round
    counts, step_metrics = session.step_stats.metrics(), report.metrics()
    lengths = [len(ids) for g in first for ids in g.completion_ids]
    return {
        "step": step,
        "reward": float(np.mean([r for g in first for r in g.total_reward])),
        "accuracy": float(np.mean([r or 0.0 for g in first for r in g.rewards["accuracy"]])),
        "reward_trained": float(np.mean([r for g in sample.trained for r in g.total_reward]))
        if sample.trained
        else None,
        "informative_before": log.rounds[0].admitted / log.rounds[0].groups,
        "informative_after": step_metrics["trained_group_rate"],
        "target": report.target_groups,
        "admitted": report.admitted_groups,
        "trained": len(sample.trained),
        "surplus": report.surplus_groups,
        **trained_kinds(sample.trained),
        "candidates": counts["candidate_group_count"],
        "generated_groups": report.generated_groups,
        "generated_samples": report.generated_samples,
        "generated_tokens": report.generated_tokens,
        "rounds": report.sampling_rounds,
        "cost": step_metrics["sampling_cost_multiplier"],
        "loss_scale": report.loss_scale,
        "exhausted": report.exhausted,
        "limited_by": list(report.limited_by),
        "rejections": {reason.value: counts[reason.metric_name] for reason in RejectionReason},
        "phantom_rejected": log.phantom,
        "completion_tokens_mean": float(np.mean(lengths)),
        "round_detail": [vars(r) for r in log.rounds],
        "snapshot_checksums": [r.checksum for r in log.rounds],
        "policy_version": log.rounds[0].policy_version,
        **update,
    }


@dataclass
class _Run:
    """What a run works with: the policy being trained, its data, and where it reports."""

    config: TrainConfig
    device: str
    model: Any
    tokenizer: Any
    eos: list[int]
    stream: ProblemStream  # a SkippingStream (also an observer) with a history section
    held_out: list[Problem]
    optimizer: torch.optim.Optimizer
    log: JsonlLog
    observers: list[StepObserver]

    def generate(self) -> Callable[[Sequence[Problem]], list[Group]]:
        c = self.config
        return partial(
            generate_groups,
            self.model,
            self.tokenizer,
            num_generations=c.num_generations,
            max_new_tokens=c.max_new_tokens,
            temperature=c.temperature,
            top_p=c.top_p,
            eos_ids=self.eos,
            system_prompt=c.system_prompt,
            generation_batch_size=c.generation_batch_size,
            device=self.device,
            dtype=c.dtype,
        )

    def score(self) -> Callable[[Sequence[Group]], None]:
        c = self.config
        return partial(
            score_groups,
            brevity_weight=c.brevity_weight,
            free_chars=c.brevity_chars,
            lenient=c.lenient_answers,
        )

    def resample(self) -> Resample:
        return retry_rejected() if self.config.resample == "retry" else fresh_problems(self.stream)


def _load(config: TrainConfig, dataset: str, split: str, limit: int | None) -> list[Problem]:
    return load_problems(
        dataset,
        config.subset,
        split,
        question_field=config.question_field,
        answer_field=config.answer_field,
        limit=limit,
    )


def _start(config: TrainConfig, output: Path) -> _Run:
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    device = resolve_device(config.device)
    model, tokenizer = load_policy(config.model, device=device)
    problems = _load(config, config.dataset, config.split, config.max_train_problems)
    held_out = config.eval_dataset or config.dataset
    output.mkdir(parents=True, exist_ok=True)
    (output / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    stream = ProblemStream(problems, config.seed)
    observers = [start_prometheus(config.prometheus_port)] if config.prometheus_port else []
    # A history section (the recommended preset has one) skips prompts it expects to be dead.
    history = config.session_config().prompt_history(config.num_generations, seed=config.seed)
    if history is not None:
        stream = SkippingStream(problems, config.seed, history)
        observers.append(stream)
    return _Run(
        config=config,
        device=device,
        model=model,
        tokenizer=tokenizer,
        eos=eos_token_ids(tokenizer, model),
        stream=stream,
        held_out=_load(config, held_out, config.eval_split, config.eval_problems)
        if config.eval_problems
        else [],
        optimizer=torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay),
        log=JsonlLog(output / "steps.jsonl"),
        observers=observers,
    )


def _session(config: TrainConfig) -> AdmissionSession:
    return config.session_config().session(host="grpo_gsm8k")


def _skipped(run: _Run) -> int:
    """Prompts skipped so far (0 without prompt skipping)."""
    return run.stream.skipped if isinstance(run.stream, SkippingStream) else 0


def _step(run: _Run, session: AdmissionSession, step: int, version: int) -> dict[str, Any]:
    """Sample one step with the recipe, train on its groups, and return the step's record."""
    config, started = run.config, time.perf_counter()
    skipped = _skipped(run)
    stopwatch, rounds = Stopwatch(), RoundLog(run.model, version)
    sample = collect_step(
        session,
        run.stream.take(config.batch_size),
        run.generate(),
        run.score(),
        run.resample(),
        num_generations=config.num_generations,
        tokens_per_group=float(config.num_generations * config.max_new_tokens),
        observers=[stopwatch, rounds, *run.observers],
    )
    tick = time.perf_counter()
    update = {"loss": 0.0, "clip_fraction": 0.0, "grad_norm": 0.0, "updates": 0.0}
    if sample.trained:
        pad = run.tokenizer.pad_token_id
        update = update_policy(
            run.model,
            run.optimizer,
            sample.trained,
            config,
            pad_id=pad,
            device=run.device,
            loss_scale=sample.report.loss_scale,
        )
    seconds = dict(stopwatch.seconds, training=time.perf_counter() - tick)
    seconds["step"] = time.perf_counter() - started
    record = step_record(step, sample, rounds, session, update)
    record["seconds"] = seconds
    record["prompts_skipped"] = _skipped(run) - skipped
    record["admission_share"] = seconds["admission"] / seconds["step"]
    return record


def _evaluate(run: _Run, result: RunResult, step: int, samples: int) -> float:
    """Held-out greedy accuracy now, appended to the run's curve."""
    accuracy = greedy_accuracy(run.model, run.tokenizer, run.held_out, run.config, run.eos, run.device)
    result.eval_curve.append({"step": step, "samples": samples, "accuracy": accuracy})
    return accuracy


def _due(config: TrainConfig, before: int, after: int) -> bool:
    """Whether the samples of a step passed a multiple of ``eval_every_samples``."""
    every = config.eval_every_samples
    return every is not None and after // every > before // every


def train(config: TrainConfig) -> RunResult:
    """Run the whole recipe; returns the per-step records and the summary."""
    progress = StepLines(config)  # before anything loads: it decides between a bar and plain lines
    output = Path(config.output_dir)
    run = _start(config, output)
    result = RunResult(
        steps=[], summary={}, output_dir=output, initial_checksum=parameter_checksum(run.model)
    )
    if run.held_out:
        result.eval_accuracy["before"] = _evaluate(run, result, 0, 0)
    session, version, samples = _session(config), 0, 0
    try:
        for step in range(1, config.steps + 1):
            # One session carries its rate estimate from step to step; carry_rate=false starts afresh.
            session = session if config.carry_rate else _session(config)
            record = _step(run, session, step, version)
            version += int(record["updates"])
            samples, before = samples + record["generated_samples"], samples
            record["samples_total"] = samples
            run.log.write(record)
            result.steps.append(record)
            progress.show(record)
            if run.held_out and _due(config, before, samples):
                _evaluate(run, result, step, samples)
            if config.max_samples is not None and samples >= config.max_samples:
                break
    finally:
        progress.close()
        run.log.close()
    result.final_checksum = parameter_checksum(run.model)
    if run.held_out:
        last = result.eval_curve[-1]
        done = last["step"] == len(result.steps)  # the last checkpoint was the last step
        after = last["accuracy"] if done else _evaluate(run, result, len(result.steps), samples)
        result.eval_accuracy["after"] = after
    _finish(run, result)
    return result


def _finish(run: _Run, result: RunResult) -> None:
    """Write the summary, the plot and (if asked) the model."""
    config, output = run.config, result.output_dir
    result.summary = summarise(result.steps)
    result.summary["eval_accuracy"] = result.eval_accuracy
    result.summary["eval_curve"] = result.eval_curve
    (output / "summary.json").write_text(json.dumps(result.summary, indent=2))
    if config.plot and result.steps:
        write_plot(result.steps, output / "curves.png", result.eval_curve)
    if config.save_model:
        run.model.save_pretrained(output / "model")
        run.tokenizer.save_pretrained(output / "model")


def _run(config: TrainConfig) -> tuple[RunResult, RunResult | None]:
    """Train, and with ``baseline`` plain GRPO beside it in a second process; return both."""
    if not config.baseline:
        return train(config), None
    torch.set_num_threads(1)  # two runs on two cores: one thread each
    baseline = Baseline(config, train)
    try:
        result = train(config)
        return result, baseline.result()
    finally:
        baseline.close()


def main(argv: Sequence[str] | None = None) -> RunResult:
    """
    Parse the config, train, and print the summary.

    A setting that cannot be used stops the script before anything loads, with one line
    on stderr that names it and exit status 2.
    """
    try:
        config = parse_config(argv)
    except ConfigError as exc:
        print(f"grpo_gsm8k: error: {' '.join(str(exc).split())}", file=sys.stderr)
        raise SystemExit(2) from None
    result, plain = _run(config)
    print(format_summary(result.summary))
    if result.eval_accuracy:
        print(
            "held-out greedy accuracy: "
            + " -> ".join(f"{v:.3f}" for v in result.eval_accuracy.values())
            + f" on {config.eval_problems} problems"
        )
    files = [f"log: {result.output_dir / 'steps.jsonl'}"]
    if config.plot:
        files.append(f"plot: {result.output_dir / 'curves.png'}")
    if plain is not None:
        print(finish_comparison(plain, result, config))
        files.append(f"comparison: {result.output_dir / 'comparison.json'}")
        if config.plot:
            files.append(f"{result.output_dir / 'comparison.png'}")
    print("  ".join(files))
    return result


if __name__ == "__main__":
    main()
