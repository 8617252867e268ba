"""
GRPO on GSM8K with group admission and bounded resampling: a hand-written training loop.

Each step samples G completions for a batch of prompts, scores them with a composite reward
(accuracy + brevity), judges every group with ``GroupAdmissionPolicy`` (gated on accuracy),
resamples under ``SamplingBudgetController`` until the target of informative groups is met
or the budget stops it, and takes clipped policy-gradient updates on the admitted groups.

    python cookbook/grpo_gsm8k/train.py --config cookbook/grpo_gsm8k/config.yaml
    python cookbook/grpo_gsm8k/train.py --model Qwen/Qwen2.5-0.5B-Instruct --device cuda
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the grpo_gsm8k package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import torch

from group_admission import GroupAdmissionPolicy, SamplingBudgetController
from grpo_gsm8k.config import TrainConfig, parse_config
from grpo_gsm8k.data import (
    Problem,
    autocast,
    build_prompt,
    eos_token_ids,
    load_policy,
    load_problems,
    resolve_device,
)
from grpo_gsm8k.grpo import (
    clipped_pg_loss,
    collate,
    group_advantages,
    parameter_checksum,
    token_logprobs,
)
from grpo_gsm8k.report import JsonlLog, format_step, format_summary, start_prometheus, summarise, write_plot
from grpo_gsm8k.rewards import answers_match, extract_answer
from grpo_gsm8k.rollout import Group, ProblemStream, StepSample, collect_step, generate_groups, score_groups

__all__ = ["RunResult", "main", "train"]


@dataclass
class RunResult:
    """What a run produced: one record per step, the summary, and where the files are."""

    steps: list[dict[str, Any]]
    summary: dict[str, Any]
    output_dir: Path
    eval_accuracy: dict[str, float] = field(default_factory=dict)
    initial_checksum: float = 0.0
    final_checksum: float = 0.0


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def update_policy(
    model: Any,
    optimizer: torch.optim.Optimizer,
    groups: Sequence[Group],
    config: TrainConfig,
    *,
    pad_id: int,
    device: str,
) -> dict[str, float]:
    """
    Clipped policy-gradient updates on the admitted groups; returns loss and diagnostics.

    The old log-probabilities are taken once, from the sampling snapshot, before the first
    update; mini-batches of ``mini_batch_groups`` groups each take one optimizer step, for
    ``ppo_epochs`` passes, so the clip binds from the second mini-batch on.
    """
    rewards = torch.tensor([g.total_reward for g in groups], dtype=torch.float32)
    advantages = group_advantages(rewards, config.advantage_scale)  # type: ignore[arg-type]
    rows = [
        (g.prompt_ids, ids, float(advantages[i, j]))
        for i, g in enumerate(groups)
        for j, ids in enumerate(g.completion_ids)
    ]
    size = config.num_generations
    micro = config.micro_batch_size

    per_update = (config.mini_batch_groups or len(groups)) * size
    # Old log-probs come from the sampling snapshot. The first mini-batch is scored before
    # any update, so its own forward pass provides them; only later rows need a pass now.
    old: list[torch.Tensor | None] = [None] * len(rows)
    with torch.no_grad():
        later = list(range(per_update if config.ppo_epochs == 1 else 0, len(rows)))
        for part in _chunks(later, micro):
            batch = collate([rows[i][0] for i in part], [rows[i][1] for i in part], pad_id).to(device)
            with autocast(device, config.dtype):
                logprobs = token_logprobs(model, batch, temperature=config.temperature)
            for k, i in enumerate(part):
                old[i] = logprobs[k, : len(rows[i][1])]
    losses, clip_fractions, norms = [], [], []
    for _ in range(config.ppo_epochs):
        for start in range(0, len(rows), per_update):
            indices = list(range(start, min(start + per_update, len(rows))))
            if config.loss_aggregation == "token":
                normaliser = float(sum(len(rows[i][1]) for i in indices))
            else:
                normaliser = float(len(indices))
            optimizer.zero_grad(set_to_none=True)
            loss_total = 0.0
            for part in _chunks(indices, micro):
                batch = collate([rows[i][0] for i in part], [rows[i][1] for i in part], pad_id).to(device)
                with autocast(device, config.dtype):
                    logprobs = token_logprobs(model, batch, temperature=config.temperature)
                old_padded = torch.zeros_like(logprobs)
                for k, i in enumerate(part):
                    cached = old[i]
                    if cached is None:  # first mini-batch, first epoch: the weights are the snapshot
                        cached = old[i] = logprobs[k, : len(rows[i][1])].detach()
                    old_padded[k, : len(cached)] = cached
                adv = torch.tensor([rows[i][2] for i in part], device=logprobs.device)
                loss, stats = clipped_pg_loss(
                    logprobs,
                    old_padded,
                    adv,
                    batch.completion_mask,
                    clip_low=config.clip_eps,
                    clip_high=config.clip_eps_high,
                    aggregation=config.loss_aggregation,  # type: ignore[arg-type]
                    normaliser=normaliser,
                )
                loss.backward()
                loss_total += float(loss.detach())
                clip_fractions.append(stats["clip_fraction"])
            norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)))
            optimizer.step()
            losses.append(loss_total)
    return {
        "loss": float(np.mean(losses)),
        "clip_fraction": float(np.mean(clip_fractions)),
        "grad_norm": float(np.mean(norms)),
        "updates": float(len(losses)),
    }


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
    for part in _chunks(problems, config.generation_batch_size):
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


def step_record(
    step: int, sample: StepSample, config: TrainConfig, update: dict[str, float]
) -> dict[str, Any]:
    """The JSON record of one step (also what the per-step line and the plot read)."""
    first = sample.first_round
    target = config.batch_size
    reasons = {"exact_dead": 0, "near_tie": 0, "external": 0, "redundant": 0}
    for record in sample.rounds:
        for reason, count in record.reasons.items():
            reasons[reason] += count
    stats = sample.stats
    lengths = [len(ids) for g in first for ids in g.completion_ids]
    return {
        "step": step,
        "reward": float(np.mean([r for g in first for r in g.total_reward])),
        "accuracy": float(np.mean([r or 0.0 for g in first for r in g.rewards["accuracy"]])),
        "reward_admitted": float(np.mean([r for g in sample.admitted for r in g.total_reward]))
        if sample.admitted
        else None,
        "informative_before": sample.rounds[0].admitted / sample.rounds[0].groups,
        "informative_after": min(len(sample.admitted), target) / target,
        "target": target,
        "admitted": len(sample.admitted),
        "candidates": stats.candidates,
        "generated_groups": sample.state.generated_groups,
        "generated_samples": sample.state.generated_samples,
        "generated_tokens": sample.state.generated_tokens,
        "rounds": len(sample.rounds),
        "cost": sample.state.generated_groups / target,
        "exhausted": sample.final_plan.exhausted,
        "limited_by": list(sample.final_plan.limited_by),
        "rejections": reasons,
        "phantom_rejected": sample.phantom_rejected,
        "completion_tokens_mean": float(np.mean(lengths)),
        "round_detail": [vars(r) for r in sample.rounds],
        "snapshot_checksums": [r.checksum for r in sample.rounds],
        "policy_version": sample.rounds[0].policy_version,
        **update,
    }


def train(config: TrainConfig) -> RunResult:
    """Run the whole recipe; returns the per-step records and the summary."""
    from tqdm.auto import tqdm

    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    device = resolve_device(config.device)
    model, tokenizer = load_policy(config.model, device=device)
    eos = eos_token_ids(tokenizer, model)
    problems = load_problems(
        config.dataset,
        config.subset,
        config.split,
        question_field=config.question_field,
        answer_field=config.answer_field,
        limit=config.max_train_problems,
    )
    held_out = (
        load_problems(
            config.dataset,
            config.subset,
            config.eval_split,
            question_field=config.question_field,
            answer_field=config.answer_field,
            limit=config.eval_problems,
        )
        if config.eval_problems
        else []
    )
    policy = GroupAdmissionPolicy(config.admission_config())
    controller = SamplingBudgetController(config.budget_config())
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    stream = ProblemStream(problems, config.seed)
    on_round = start_prometheus(config.prometheus_port) if config.prometheus_port else None
    output = Path(config.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    (output / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    log = JsonlLog(output / "steps.jsonl")

    sample_fn = partial(
        generate_groups,
        model,
        tokenizer,
        num_generations=config.num_generations,
        max_new_tokens=config.max_new_tokens,
        temperature=config.temperature,
        top_p=config.top_p,
        eos_ids=eos,
        system_prompt=config.system_prompt,
        generation_batch_size=config.generation_batch_size,
        device=device,
        dtype=config.dtype,
    )
    score_fn = partial(
        score_groups,
        brevity_weight=config.brevity_weight,
        free_chars=config.brevity_chars,
        lenient=config.lenient_answers,
    )
    result = RunResult(steps=[], summary={}, output_dir=output, initial_checksum=parameter_checksum(model))
    if held_out:
        result.eval_accuracy["before"] = greedy_accuracy(model, tokenizer, held_out, config, eos, device)
    previous_state = None
    version = 0
    bar = tqdm(total=config.steps, desc="GRPO", unit="step", disable=not config.progress, dynamic_ncols=True)
    try:
        for step in range(1, config.steps + 1):
            started = time.perf_counter()
            sample = collect_step(
                sample=sample_fn,
                score=score_fn,
                stream=stream,
                policy=policy,
                controller=controller,
                target_groups=config.batch_size,
                num_generations=config.num_generations,
                max_new_tokens=config.max_new_tokens,
                resample=config.resample,  # type: ignore[arg-type]
                model=model,
                policy_version=version,
                previous_state=previous_state if config.carry_rate else None,
                on_round=on_round,
            )
            previous_state = sample.state
            tick = time.perf_counter()
            update = {"loss": 0.0, "clip_fraction": 0.0, "grad_norm": 0.0, "updates": 0.0}
            if sample.admitted:
                update = update_policy(
                    model, optimizer, sample.admitted, config, pad_id=tokenizer.pad_token_id, device=device
                )
                version += int(update["updates"])
            seconds = dict(sample.seconds, training=time.perf_counter() - tick)
            seconds["step"] = time.perf_counter() - started
            record = step_record(step, sample, config, update)
            record["seconds"] = seconds
            record["admission_share"] = seconds["admission"] / seconds["step"]
            log.write(record)
            result.steps.append(record)
            bar.write(format_step(record))
            bar.set_postfix(
                reward=f"{record['reward']:.2f}", informative=f"{record['informative_after']:.0%}"
            )
            bar.update(1)
    finally:
        bar.close()
        log.close()
    result.final_checksum = parameter_checksum(model)
    if held_out:
        result.eval_accuracy["after"] = greedy_accuracy(model, tokenizer, held_out, config, eos, device)
    result.summary = summarise(result.steps)
    result.summary["eval_accuracy"] = result.eval_accuracy
    (output / "summary.json").write_text(json.dumps(result.summary, indent=2))
    if config.plot and result.steps:
        write_plot(result.steps, output / "curves.png")
    if config.save_model:
        model.save_pretrained(output / "model")
        tokenizer.save_pretrained(output / "model")
    return result


def main(argv: Sequence[str] | None = None) -> RunResult:
    """Parse the config, train, and print the summary."""
    config = parse_config(argv)
    result = train(config)
    print(format_summary(result.summary))
    if result.eval_accuracy:
        print(
            "held-out greedy accuracy: "
            + " -> ".join(f"{v:.3f}" for v in result.eval_accuracy.values())
            + f" on {config.eval_problems} problems"
        )
    print(f"log: {result.output_dir / 'steps.jsonl'}  plot: {result.output_dir / 'curves.png'}")
    return result


if __name__ == "__main__":
    main()
