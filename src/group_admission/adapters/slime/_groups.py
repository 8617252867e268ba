"""
Reading one slime group for the policy: the translation the filter and the streaming rollout share.

A group is ``list[Sample]``, or ``list[list[Sample]]`` when a custom generate function fans
one rollout out into segments. No slime import, no gate rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .._kit import GroupInput, scalar_reward

__all__ = [
    "FLOAT32_OVERFLOW",
    "GENERATION_FAILED",
    "WRONG_GROUP_SIZE",
    "failed_group",
    "leaves",
    "read_group",
    "response_tokens",
]

#: External reason of a group whose generation or reward raised: its samples never came back.
GENERATION_FAILED = "generation_failed"

#: External reason of a group that does not hold ``n_samples_per_prompt`` members.
WRONG_GROUP_SIZE = "wrong_group_size"
#: External reason of a group whose rewards (or their sum) are not finite in float32, the
#: dtype slime's ``_post_process_rewards`` normalises them in: they would train on NaN.
FLOAT32_OVERFLOW = "reward_overflows_float32"


def leaves(group: Any) -> Iterator[Any]:
    """The samples of a slime group, the segments of a fan-out rollout included."""
    for member in group:
        yield from member if isinstance(member, (list, tuple)) else (member,)


def _read_member(args: Any, sample: Any, reject: tuple[str, ...], slot: int, out: GroupInput) -> None:
    if not hasattr(sample, "get_reward_value"):
        out.reject("malformed_member", slot)
        return
    status = getattr(sample, "status", None)
    status = getattr(status, "value", status)
    if isinstance(status, str) and status in reject:
        out.external.append(status)
    reward: float | None = None
    if getattr(sample, "reward", None) is not None:
        try:
            raw = sample.get_reward_value(args)
        except KeyError:
            out.external.append("reward_key_missing")
        except Exception:  # a bad member rejects its group; it must never stop training
            out.external.append("unreadable_reward")
        else:
            reward, problem = scalar_reward(raw)
            if problem is not None:
                out.external.append(problem)
    response = getattr(sample, "response", None)
    out.add(reward, response if isinstance(response, str) else None, slot)


def failed_group(size: int, detail: str) -> GroupInput:
    """A group of ``size`` members none of which came back, rejected for ``detail``."""
    out = GroupInput()
    out.reject(detail, 0)
    for slot in range(1, size):
        out.add(None, None, slot)
    return out


def _overflows_float32(rewards: list[float | None]) -> bool:
    """Whether the finite rewards, or their sum, leave float32's range."""
    finite = [reward for reward in rewards if reward is not None and math.isfinite(reward)]
    with np.errstate(over="ignore"):
        values = np.asarray(finite, dtype=np.float32)
        return not (np.isfinite(values).all() and np.isfinite(values.sum()))


def read_group(
    args: Any, samples: Any, reject_statuses: tuple[str, ...], *, size: int | None = None
) -> GroupInput:
    """
    One slime group for the policy; the segments of a fan-out rollout share its rollout id.

    ``size`` is ``n_samples_per_prompt`` where the caller knows it (slime's own loop
    asserts it before its filter): a group of another size is ``external``.
    """
    out = GroupInput()
    if isinstance(samples, (str, bytes)) or not isinstance(samples, Sequence) or not samples:
        out.reject("malformed_group", 0)
        return out
    if size is not None and len(samples) != size:
        out.external.append(WRONG_GROUP_SIZE)
    for slot, member in enumerate(samples):
        segments = member if isinstance(member, (list, tuple)) else (member,)
        if not segments:
            out.reject("empty_rollout", slot)
        for segment in segments:
            if out.group_key is None:
                out.group_key = getattr(segment, "group_index", None)
            _read_member(args, segment, reject_statuses, slot, out)
    if _overflows_float32(out.rewards):
        out.external.append(FLOAT32_OVERFLOW)
    out.tokens = response_tokens(samples)
    return out


def response_tokens(group: Any) -> int:
    """The response tokens a group's samples hold (``response_length``; 0 for a malformed member)."""
    total = 0
    for sample in leaves(group):
        length = getattr(sample, "response_length", 0)
        total += length if isinstance(length, int) and not isinstance(length, bool) and length > 0 else 0
    return total
