"""
Groups in generation, decoded token by token, with every token's policy version and log-probability.

A decoding tick advances every running member of the groups it is given by one token,
with the current policy. Round-based arms decode a round's groups until all are done;
the streaming arm ticks an engine of limited slots, launches groups as its plan says, and
carries the groups still running at the end of a step into the next one, where the updated
policy finishes them.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
import torch

from cookbook.learning_bench.model import Policy, uniforms
from cookbook.learning_bench.task import DOT, PAD, Scores, Task, completion_lengths, score

__all__ = ["Group", "decode", "new_group", "tick"]


@attrs.define(eq=False)
class Group:
    """One prompt's group of completions, possibly still being decoded."""

    prompt_id: int
    prompt: np.ndarray  # (prompt_length,)
    noise: np.ndarray  # (members, max_new) uniforms
    tokens: np.ndarray  # (members, max_new), PAD until decoded
    logp: np.ndarray  # (members, max_new) log-probability under the decoding policy
    version: np.ndarray  # (members, max_new) policy version that decoded each token; -1: none
    progress: np.ndarray  # (members,) tokens decoded
    done: np.ndarray  # (members,) bool: ended with the end mark or the length limit
    tokens_by_step: dict[int, int] = attrs.field(factory=dict)
    finished_step: int | None = None

    @property
    def started_step(self) -> int | None:
        """The step that decoded its first token (a launched group may wait for a slot)."""
        return min(self.tokens_by_step) if self.tokens_by_step else None

    @property
    def finished(self) -> bool:
        """Every member is done."""
        return bool(self.done.all())

    @property
    def decoded_tokens(self) -> int:
        """Tokens decoded so far, over all members."""
        return int(self.progress.sum())

    @property
    def resumed(self) -> bool:
        """Its generation began in an earlier step than the one it finished in."""
        started = self.started_step
        return self.finished_step is not None and started is not None and self.finished_step > started

    @property
    def versions(self) -> set[int]:
        """The policy versions that decoded its tokens."""
        return {int(v) for v in np.unique(self.version) if v >= 0}


def new_group(
    task: Task, prompt_id: int, prompt: np.ndarray, *, members: int, seed: int, key: Sequence[int]
) -> Group:
    """A group about to be decoded; its uniforms are a pure function of ``(seed, key)``."""
    shape = (members, task.max_new_tokens)
    return Group(
        prompt_id=prompt_id,
        prompt=prompt,
        noise=uniforms(seed, key, shape),
        tokens=np.full(shape, PAD, dtype=np.int64),
        logp=np.zeros(shape, dtype=np.float32),
        version=np.full(shape, -1, dtype=np.int32),
        progress=np.zeros(members, dtype=np.int64),
        done=np.zeros(members, dtype=bool),
    )


def tick(policy: Policy, groups: Sequence[Group], step: int, *, slots: int | None = None) -> int:
    """
    Decode one token for every running member of ``groups`` with ``policy``; the tokens decoded.

    With fewer ``slots`` than members, the first ``slots`` of them, in order.
    """
    picked: list[tuple[Group, np.ndarray]] = []
    room = slots
    for group in groups:
        running = np.flatnonzero(~group.done)
        if room is not None:
            running = running[:room]
            room -= len(running)
        if len(running):
            picked.append((group, running))
        if room == 0:
            break
    if not picked:
        return 0
    width = len(picked[0][0].prompt)
    longest = max(int(g.progress[m].max()) for g, m in picked)
    context = np.full((sum(len(m) for _, m in picked), width + longest), PAD, dtype=np.int64)
    positions, noise, row = [], [], 0
    for group, members in picked:
        context[row : row + len(members), :width] = group.prompt
        context[row : row + len(members), width:] = group.tokens[members, :longest]
        positions.append(width - 1 + group.progress[members])
        noise.append(group.noise[members, group.progress[members]])
        row += len(members)
    token, logp = policy.sample_next(
        torch.as_tensor(context, device=policy.device),
        torch.as_tensor(np.concatenate(positions), device=policy.device),
        torch.as_tensor(np.concatenate(noise), device=policy.device),
    )
    tokens, logps, row = token.cpu().numpy(), logp.float().cpu().numpy(), 0
    for group, members in picked:
        at = group.progress[members]
        group.tokens[members, at] = tokens[row : row + len(members)]
        group.logp[members, at] = logps[row : row + len(members)]
        group.version[members, at] = policy.version
        group.progress[members] += 1
        group.done[members] |= (tokens[row : row + len(members)] == DOT) | (
            group.progress[members] >= group.tokens.shape[1]
        )
        group.tokens_by_step[step] = group.tokens_by_step.get(step, 0) + len(members)
        row += len(members)
    return row


def decode(policy: Policy, groups: Sequence[Group], step: int) -> int:
    """Decode fresh ``groups`` to the end, in lockstep with a key/value cache; returns the tokens decoded."""
    if not groups:
        return 0
    members, max_new = groups[0].tokens.shape
    device = policy.device
    prompts = torch.as_tensor(np.repeat(np.stack([g.prompt for g in groups]), members, axis=0), device=device)
    noise = torch.as_tensor(np.concatenate([g.noise for g in groups]), device=device)
    tokens, logp = policy.decode(prompts, max_new, noise)
    tokens_np, logp_np = tokens.cpu().numpy(), logp.float().cpu().numpy()
    lengths = completion_lengths(tokens_np)
    total = 0
    for index, group in enumerate(groups):
        rows = slice(index * members, (index + 1) * members)
        group.tokens[:] = tokens_np[rows]
        group.logp[:] = logp_np[rows]
        group.progress[:] = lengths[rows]
        group.version[:] = np.where(np.arange(max_new)[None, :] < group.progress[:, None], policy.version, -1)
        group.done[:] = True
        group.finished_step = step
        decoded = int(group.progress.sum())
        group.tokens_by_step[step] = group.tokens_by_step.get(step, 0) + decoded
        total += decoded
    return total


def group_scores(task: Task, group: Group) -> Scores:
    """The rewards of a finished group's members."""
    return score(task, np.full(len(group.tokens), group.prompt_id), group.tokens)
