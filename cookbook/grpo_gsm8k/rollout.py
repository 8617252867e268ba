"""
One step's sampling: generate G completions per prompt, score them, judge every group with
the admission policy, and resample under the budget controller until the target is met or
the budget says stop. Every round of a step samples from the same weights.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from group_admission import (
    AdmissionStats,
    GroupAdmissionPolicy,
    ResamplePlan,
    SamplingBudgetController,
    SamplingBudgetState,
)
from grpo_gsm8k.data import Problem, autocast, build_prompt
from grpo_gsm8k.grpo import completion_mask, parameter_checksum
from grpo_gsm8k.rewards import score_group

__all__ = ["Group", "ProblemStream", "RoundRecord", "StepSample", "collect_step", "generate_groups"]

ResampleMode = Literal["fresh", "retry"]


@dataclass
class Group:
    """G completions of one prompt, their rewards and their admission verdict."""

    problem: Problem
    prompt_ids: list[int]
    completion_ids: list[list[int]]  # each cut just after its first EOS
    texts: list[str]
    truncated: list[bool]
    rewards: dict[str, list[float | None]] = field(default_factory=dict)
    reason: str | None = None

    @property
    def total_reward(self) -> list[float]:
        """The reward GRPO trains on: the sum of the components (missing members count 0)."""
        columns = list(self.rewards.values())
        return [float(sum(c[i] or 0.0 for c in columns)) for i in range(len(self.texts))]


@dataclass
class RoundRecord:
    """What one sampling round generated and admitted, and the policy it sampled from."""

    groups: int
    admitted: int
    reasons: dict[str, int]
    tokens: int
    checksum: float
    policy_version: int
    plan: dict[str, Any] | None = None


@dataclass
class StepSample:
    """Everything one step sampled: the admitted groups, every round, and the timings."""

    admitted: list[Group]
    rounds: list[RoundRecord]
    first_round: list[Group]
    stats: AdmissionStats
    state: SamplingBudgetState
    final_plan: ResamplePlan
    phantom_rejected: int
    seconds: dict[str, float]


class ProblemStream:
    """An endless, reshuffled-every-epoch stream of problems."""

    def __init__(self, problems: Sequence[Problem], seed: int) -> None:
        if not problems:
            raise ValueError("'problems' must not be empty")
        self._problems = list(problems)
        self._rng = random.Random(seed)
        self._iterator = self._cycle()

    def _cycle(self) -> Iterator[Problem]:
        while True:
            order = list(range(len(self._problems)))
            self._rng.shuffle(order)
            yield from (self._problems[i] for i in order)

    def take(self, count: int) -> list[Problem]:
        return [next(self._iterator) for _ in range(count)]


@torch.no_grad()
def generate_groups(
    model: Any,
    tokenizer: Any,
    problems: Sequence[Problem],
    *,
    num_generations: int,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    eos_ids: Sequence[int],
    system_prompt: str | None,
    generation_batch_size: int,
    device: str,
    dtype: str = "float32",
) -> list[Group]:
    """Sample ``num_generations`` completions for each problem (prompts batched, left-padded)."""
    groups: list[Group] = []
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(problems), generation_batch_size):
            chunk = problems[start : start + generation_batch_size]
            prompts = [build_prompt(tokenizer, p.question, system_prompt) for p in chunk]
            encoded = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
            encoded = {k: v.to(device) for k, v in encoded.items()}
            with autocast(device, dtype):
                output = model.generate(
                    **encoded,
                    do_sample=True,
                    temperature=temperature,
                    top_p=top_p,
                    top_k=0,
                    max_new_tokens=max_new_tokens,
                    num_return_sequences=num_generations,
                    eos_token_id=list(eos_ids),
                    pad_token_id=tokenizer.pad_token_id,
                )
            completions = output[:, encoded["input_ids"].shape[1] :]
            keep = completion_mask(completions, eos_ids)
            lengths = keep.sum(dim=1).tolist()
            eos = torch.tensor(list(eos_ids), device=completions.device)
            ends_with_eos = torch.isin(completions, eos).any(dim=1).tolist()
            rows_ids = completions.cpu().tolist()
            for index, problem in enumerate(chunk):
                mask = encoded["attention_mask"][index].bool()
                prompt_ids = encoded["input_ids"][index][mask].tolist()
                rows = range(index * num_generations, (index + 1) * num_generations)
                ids = [rows_ids[r][: lengths[r]] for r in rows]
                groups.append(
                    Group(
                        problem=problem,
                        prompt_ids=prompt_ids,
                        completion_ids=ids,
                        texts=tokenizer.batch_decode(ids, skip_special_tokens=True),
                        truncated=[not ends_with_eos[r] for r in rows],
                    )
                )
    finally:
        model.train(was_training)
    return groups


def score_groups(
    groups: Sequence[Group], *, brevity_weight: float, free_chars: int, lenient: bool = False
) -> None:
    """Fill every group's composite reward; a member whose scoring fails gets ``None``."""
    for group in groups:
        try:
            scored = score_group(
                group.texts,
                group.problem.gold,
                brevity_weight=brevity_weight,
                free_chars=free_chars,
                lenient=lenient,
            )
        except Exception:  # a broken scorer must reject the group (external), not stop training
            group.rewards = {"accuracy": [None] * len(group.texts), "brevity": [None] * len(group.texts)}
            continue
        group.rewards = {name: list[float | None](values) for name, values in scored.items()}


def collect_step(
    *,
    sample: Callable[[Sequence[Problem]], list[Group]],
    score: Callable[[Sequence[Group]], None],
    stream: ProblemStream,
    policy: GroupAdmissionPolicy,
    controller: SamplingBudgetController,
    target_groups: int,
    num_generations: int,
    max_new_tokens: int,
    resample: ResampleMode,
    model: Any,
    policy_version: int,
    previous_state: SamplingBudgetState | None = None,
    on_round: Callable[[Any, ResamplePlan], None] | None = None,
) -> StepSample:
    """
    Sample one step: round 0 on ``target_groups`` fresh prompts, then resampling rounds.

    ``resample="fresh"`` draws new prompts for each extra group; ``"retry"`` re-queues the
    rejected prompts, each at most once per round (so a round may use less than the plan
    allows). The token cap is planned with the worst case of ``G * max_new_tokens`` tokens
    per group, so no cap can be overshot. ``on_round(decisions, plan)`` sees each round
    (the Prometheus exporter hooks here).
    """
    seconds = {"generation": 0.0, "reward": 0.0, "admission": 0.0}
    state = controller.new_state(carry_rate_from=previous_state)
    stats = AdmissionStats()
    admitted: list[Group] = []
    rounds: list[RoundRecord] = []
    retry_queue: list[Problem] = []
    first_round: list[Group] = []
    phantom = 0
    problems = stream.take(target_groups)
    worst_tokens_per_group = float(num_generations * max_new_tokens)
    while True:
        checksum = parameter_checksum(model)
        tick = time.perf_counter()
        groups = sample(problems)
        seconds["generation"] += time.perf_counter() - tick
        tick = time.perf_counter()
        score(groups)
        seconds["reward"] += time.perf_counter() - tick
        if not first_round:
            first_round = groups

        tick = time.perf_counter()
        decisions = policy.evaluate_batch(
            {name: [g.rewards[name] for g in groups] for name in groups[0].rewards},
            [g.texts for g in groups] if policy.config.similarity_gate_enabled else None,
        )
        tokens = sum(len(ids) for g in groups for ids in g.completion_ids)
        controller.observe_round(state, decisions, num_generations=num_generations, generated_tokens=tokens)
        stats.add_many(decisions)
        reasons: dict[str, int] = {}
        for group, reason in zip(groups, decisions.reasons(), strict=True):
            group.reason = reason
            if reason is None:
                admitted.append(group)
                continue
            reasons[reason] = reasons.get(reason, 0) + 1
            # Plain GRPO (zero-std filter on the total reward) would have trained on this group.
            if reason == "exact_dead" and np.std(group.total_reward) > 0:
                phantom += 1
            retry_queue.append(group.problem)
        plan = controller.plan_resampling(
            state,
            target_groups=target_groups,
            num_generations=num_generations,
            estimated_tokens_per_group=worst_tokens_per_group,
        )
        seconds["admission"] += time.perf_counter() - tick
        if on_round is not None:
            on_round(decisions, plan)
        rounds.append(
            RoundRecord(
                groups=len(groups),
                admitted=len(groups) - sum(reasons.values()),
                reasons=reasons,
                tokens=tokens,
                checksum=checksum,
                policy_version=policy_version,
                plan=plan.to_dict(),
            )
        )
        if resample == "retry":
            problems, retry_queue = retry_queue[: plan.extra_groups], retry_queue[plan.extra_groups :]
        else:
            problems = stream.take(plan.extra_groups)
        if not problems:
            break
    return StepSample(
        admitted=admitted,
        rounds=rounds,
        first_round=first_round,
        stats=stats,
        state=state,
        final_plan=plan,
        phantom_rejected=phantom,
        seconds=seconds,
    )
