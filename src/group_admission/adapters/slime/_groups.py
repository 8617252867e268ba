"""
Reading one slime group for the policy: the translation the filter and the streaming rollout share.

A group is ``list[Sample]``, or ``list[list[Sample]]`` when a custom generate function fans
one rollout out into segments. No slime import, no gate rule.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .._adapter_runtime import GroupInput, scalar_reward

__all__ = ["leaves", "read_group"]


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


def read_group(args: Any, samples: Any, reject_statuses: tuple[str, ...]) -> GroupInput:
    """One slime group for the policy; the segments of a fan-out rollout share its rollout id."""
    out = GroupInput()
    if isinstance(samples, (str, bytes)) or not isinstance(samples, Sequence) or not samples:
        out.reject("malformed_group", 0)
        return out
    for slot, member in enumerate(samples):
        segments = member if isinstance(member, (list, tuple)) else (member,)
        if not segments:
            out.reject("empty_rollout", slot)
        for segment in segments:
            if out.group_key is None:
                out.group_key = getattr(segment, "group_index", None)
            _read_member(args, segment, reject_statuses, slot, out)
    return out
