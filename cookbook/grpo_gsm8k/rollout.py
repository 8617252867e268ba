"""
Sampling: prompts, G completions per prompt, and their rewards.

A stream of prompts, G completions per prompt from ``model.generate``, and the composite
reward of every completion. What to do with the groups is the recipe's job
(``grpo_gsm8k.recipe``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from cookbook.grpo_gsm8k.data import Problem, autocast, build_prompt
from cookbook.grpo_gsm8k.grpo import completion_mask
from cookbook.grpo_gsm8k.rewards import score_group

__all__ = ["Group", "ProblemStream", "generate_groups", "score_groups"]


@dataclass
class Group:
    """G completions of one prompt, their rewards and their admission verdict."""

    problem: Problem
    prompt_ids: list[int]
    completion_ids: list[list[int]]  # each cut just after its first EOS
    texts: list[str]
    truncated: list[bool]
    rewards: dict[str, list[float | None]] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Completion tokens generated for the group."""
        return sum(len(ids) for ids in self.completion_ids)

    @property
    def total_reward(self) -> list[float]:
        """The reward GRPO trains on: the sum of the components (missing members count 0)."""
        columns = list(self.rewards.values())
        return [float(sum(c[i] or 0.0 for c in columns)) for i in range(len(self.texts))]


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
        """The next ``count`` problems."""
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
