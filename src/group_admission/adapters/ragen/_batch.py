"""
Reading RAGEN's rollout batch (a verl ``DataProto``) the way RAGEN's reward filter reads it.

Rows are grouped by position: ``num_groups`` contiguous blocks, or, in RAGEN's turn-level
context modes, episodes (first-seen order of ``non_tensor_batch["episode_ids"]``) grouped
in contiguous blocks. The reward of a row is ``original_rm_scores.sum(-1)``; an episode
takes the reward of its first row. Unlike RAGEN, every structural assumption is checked
and reported by name instead of failing inside ``view`` or silently mixing groups.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from ..._validation import describe

__all__ = ["GroupLayout", "apply_row_mask", "assistant_text", "non_tensor_column", "read_layout"]

IntArray = npt.NDArray[np.int64]


@attrs.frozen(kw_only=True, eq=False)
class GroupLayout:
    """
    How the rows of one batch form groups.

    Attributes:
        rewards: ``(num_groups, group_size)`` tensor of member rewards (a member is a row,
            or an episode in turn-level modes).
        row_group: The group of every row.
        member_last_row: For every member (group-major), the last row that belongs to it.
        group_keys: The RAGEN group id of every group (``non_tensor_batch["group_ids"]``),
            or the group's index when the batch carries none.
    """

    rewards: Any
    row_group: IntArray
    member_last_row: IntArray
    group_keys: tuple[Hashable, ...]

    @property
    def group_size(self) -> int:
        """Members per group."""
        return int(self.rewards.shape[1])


def _score_rows(torch: Any, batch: Any) -> Any:
    tensors = getattr(batch, "batch", None)
    # TensorDict refuses `key in td`; membership goes through keys().
    if tensors is None or "original_rm_scores" not in tensors.keys():  # noqa: SIM118
        msg = (
            "the RAGEN batch must hold batch.batch['original_rm_scores'] (the per-token scores "
            "RAGEN's ContextManager writes) (got keys "
            f"{[] if tensors is None else sorted(tensors.keys())})"
        )
        raise ValueError(msg)
    scores = tensors["original_rm_scores"]
    where = "batch.batch['original_rm_scores']"
    if not torch.is_tensor(scores):
        msg = f"{where} must be a torch tensor (rows, tokens) (got {describe(scores)})"
        raise TypeError(msg)
    if scores.ndim != 2:
        msg = f"{where} must be a 2-D tensor (rows, tokens) (got {tuple(scores.shape)})"
        raise ValueError(msg)
    if not scores.is_floating_point():
        # Integer or bool scores (a 0/1 verifier) are rewards too; torch's std refuses them.
        scores = scores.to(torch.get_default_dtype())
    return scores.sum(dim=-1)


def non_tensor_column(batch: Any, key: str, rows: int) -> Any:
    """``batch.non_tensor_batch[key]`` (``None`` when absent), checked to hold one entry per row."""
    values = (getattr(batch, "non_tensor_batch", None) or {}).get(key)
    if values is not None and (not hasattr(values, "__len__") or len(values) != rows):
        got = len(values) if hasattr(values, "__len__") else describe(values)
        msg = f"non_tensor_batch['{key}'] must have one entry per row ({rows}) (got {got})"
        raise ValueError(msg)
    return values


def _ids(batch: Any, key: str, rows: int) -> list[Hashable] | None:
    """A per-row id column (``episode_ids``, ``group_ids``) as Python values usable as keys."""
    values = non_tensor_column(batch, key, rows)
    if values is None:
        return None
    ids: list[Hashable] = np.asarray(values).tolist()
    for row, value in enumerate(ids):
        if not isinstance(value, Hashable):
            msg = f"non_tensor_batch['{key}'] must hold one id per row (row {row} has {describe(value)})"
            raise TypeError(msg)
    return ids


def _episodes(episode_ids: list[Hashable], num_groups: int) -> tuple[IntArray, IntArray, IntArray]:
    """Return each row's episode (first-seen order), each episode's first and last row."""
    slot: dict[Hashable, int] = {}
    first: list[int] = []
    last: list[int] = []
    row_episode = np.empty(len(episode_ids), dtype=np.int64)
    for row, episode in enumerate(episode_ids):
        index = slot.get(episode)
        if index is None:
            index = slot[episode] = len(first)
            first.append(row)
            last.append(row)
        last[index] = row
        row_episode[row] = index
    if len(first) % num_groups:
        msg = (
            f"Number of episodes ({len(first)}) must be divisible by num_groups ({num_groups}): "
            "in RAGEN's turn-level modes (non_tensor_batch['episode_ids'] present) every group "
            "must hold the same number of episodes; an episode without an LLM turn has no row "
            "and unbalances its group"
        )
        raise ValueError(msg)
    return row_episode, np.asarray(first, dtype=np.int64), np.asarray(last, dtype=np.int64)


def _check_group_ids(
    ids: list[Hashable], row_group: IntArray, num_groups: int, block: str
) -> tuple[Hashable, ...]:
    """Require one RAGEN group id per positional group, distinct across groups."""
    keys: list[Hashable] = [None] * num_groups
    seen = [False] * num_groups
    for row, (group, key) in enumerate(zip(row_group.tolist(), ids, strict=True)):
        if not seen[group]:
            keys[group], seen[group] = key, True
        elif key != keys[group]:
            rows = np.flatnonzero(row_group == group)
            found = sorted({ids[r] for r in rows.tolist()}, key=repr)
            msg = (
                f"non_tensor_batch['group_ids'] disagrees with RAGEN's positional grouping: "
                f"group {group} of {num_groups} ({block}) holds rows with group ids {found} "
                f"(row {row} has {key!r}, expected {keys[group]!r}); RAGEN assigns rows to groups "
                "by position, so the batch must be ordered by group"
            )
            raise ValueError(msg)
    owner: dict[Hashable, int] = {}
    for group, key in enumerate(keys):
        if key in owner:
            msg = (
                f"non_tensor_batch['group_ids'] disagrees with RAGEN's positional grouping: "
                f"groups {owner[key]} and {group} both hold group id {key!r}, and GRPO would "
                "merge them (it groups rows by uid = group_ids)"
            )
            raise ValueError(msg)
        owner[key] = group
    return tuple(keys)


def read_layout(torch: Any, batch: Any, num_groups: int) -> GroupLayout:
    """
    Group the rows of ``batch`` exactly as RAGEN's reward filter does, checking every step.

    Raises:
        ValueError: a required key is missing, the rows or episodes do not divide into
            ``num_groups`` groups, or ``group_ids`` disagree with the positional groups.
        TypeError: ``original_rm_scores`` is not a tensor, or an id is not hashable.
    """
    row_rewards = _score_rows(torch, batch)
    rows = int(row_rewards.shape[0])
    episode_ids = _ids(batch, "episode_ids", rows)
    if episode_ids is None:
        if rows == 0 or rows % num_groups:
            msg = (
                f"the batch has {rows} rows, which do not divide into num_groups={num_groups} "
                "groups (es_manager.train.env_groups): RAGEN groups contiguous rows, so every "
                "group must have the same number of rows"
            )
            raise ValueError(msg)
        size = rows // num_groups
        rewards = row_rewards.view(num_groups, size)
        row_group = np.arange(rows, dtype=np.int64) // size
        member_last_row = np.arange(rows, dtype=np.int64)
        block = f"a contiguous block of {size} rows"
    else:
        row_episode, first, member_last_row = _episodes(episode_ids, num_groups)
        size = len(first) // num_groups
        # RAGEN collects episode rewards in a default-dtype tensor; so do we, for parity.
        picked = row_rewards[torch.as_tensor(first, device=row_rewards.device)]
        rewards = picked.to(torch.get_default_dtype()).view(num_groups, size)
        row_group = row_episode // size
        block = f"a block of {size} episodes"
    group_ids = _ids(batch, "group_ids", rows)
    if group_ids is None:
        keys: tuple[Hashable, ...] = tuple(range(num_groups))
    else:
        keys = _check_group_ids(group_ids, row_group, num_groups, block)
    return GroupLayout(
        rewards=rewards,
        row_group=row_group,
        member_last_row=member_last_row,
        group_keys=keys,
    )


def assistant_text(messages: Any) -> str | None:
    """
    Join the assistant turns of one conversation (``messages_list`` entry) with newlines.

    Returns ``None`` when the conversation has no assistant message (the rollout produced
    no reply), which the redundancy gate counts as a missing completion.
    """
    if not isinstance(messages, (list, tuple, np.ndarray)):
        return None
    parts: list[str] = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, list):  # OpenAI-style content parts
                content = "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            parts.append("" if content is None else str(content))
    return "\n".join(parts) if parts else None


def apply_row_mask(batch: Any, row_mask: Any) -> Any:
    """Keep the masked rows of ``batch`` in place (tensors, numpy and list columns), as RAGEN does."""
    batch.batch = batch.batch[row_mask]
    non_tensor = getattr(batch, "non_tensor_batch", None)
    if non_tensor:
        keep = row_mask.cpu().numpy()
        for key, value in list(non_tensor.items()):
            if isinstance(value, np.ndarray):
                non_tensor[key] = value[keep]
            else:
                non_tensor[key] = [item for item, kept in zip(value, keep, strict=True) if kept]
    return batch
