"""Reading slime's objects: a group of ``Sample``s, and the live ``remaining_batch_size``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from .._adapter_runtime import GroupInput, scalar_reward

__all__ = ["live_remaining_batch_size", "read_group"]


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
    """
    Translate one slime group (``list[Sample]``, or ``list[list[Sample]]`` with fan-out) for the policy.

    Each inner list of a fan-out group is one rollout: its segments share one rollout id,
    so the policy counts the rollout once. Unusable members become external reasons.
    """
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


def live_remaining_batch_size() -> int | None:
    """
    Read slime's live ``GenerateState.remaining_batch_size`` (``None`` when it cannot be read).

    This reads private state of the module that calls the filter, without importing or
    constructing anything (``GenerateState`` is a singleton whose constructor loads a
    tokenizer). It tells the filter whether slime's fallback will keep a rejected group.
    """
    module = sys.modules.get("slime.rollout.sglang_rollout")
    state_cls = getattr(module, "GenerateState", None)
    instances = getattr(state_cls, "_instances", None)
    state = instances.get(state_cls) if isinstance(instances, dict) else None
    value = getattr(state, "remaining_batch_size", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
