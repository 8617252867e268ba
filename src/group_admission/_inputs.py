"""Validation and merging of the per-member inputs that accompany rewards."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from ._config import GroupAdmissionConfig
from ._reasons import CHECK_INCONSISTENT_ROLLOUT
from ._rewards import coerce_group, is_torch_tensor
from ._validation import check_nonempty_strings, describe

__all__ = [
    "check_completions",
    "check_group_keys",
    "check_rollout_ids",
    "completions_required_message",
    "external_reason_tuple",
    "group_inputs",
    "merge_rollouts",
]


# Both messages name the condition as twinkle#288 names it, in our grammar (field, requirement, value).
def completions_required_message(config: GroupAdmissionConfig) -> str:
    """The error for a redundancy (near-duplicate) gate that has no completions to look at."""
    return (
        "'completions' must be given (completions are required when the near-duplicate gate is on: "
        f"max_mean_pairwise_similarity={config.max_mean_pairwise_similarity}) (got None)"
    )


def external_reason_tuple(reasons: Sequence[str] | str | None, name: str) -> tuple[str, ...]:
    """Validate caller-supplied external reasons; a bare string is one reason."""
    if reasons is None:
        return ()
    if isinstance(reasons, str):
        reasons = (reasons,)
    if not isinstance(reasons, Sequence):
        msg = f"'{name}' must be a sequence of strings (got {describe(reasons)})"
        raise TypeError(msg)
    check_nonempty_strings(reasons, name)
    return tuple(dict.fromkeys(reasons))


def check_completions(completions: Any, size: int) -> list[str | None]:
    """Validate a group's completions: ``size`` strings, ``None`` marking a missing one."""
    if isinstance(completions, (str, bytes)) or not isinstance(completions, Sequence):
        msg = f"'completions' must be a sequence of strings (got {describe(completions)})"
        raise TypeError(msg)
    if len(completions) != size:
        msg = (
            "'completions' must describe the same complete group as the rewards: "
            f"one entry per reward ({size}) (got {len(completions)})"
        )
        raise ValueError(msg)
    for index, text in enumerate(completions):
        if text is not None and not isinstance(text, str):
            msg = f"'completions' must hold strings: entry {index} is {describe(text)}"
            raise TypeError(msg)
    return list(completions)


def check_group_keys(keys: tuple[Any, ...], name: str) -> None:
    """Require hashable group keys (``name`` is ``group_key`` or ``group_keys``): decisions are hashable."""
    try:
        hash(keys)  # one call for the whole tuple: the common case costs nothing per key
    except TypeError:
        culprit = next(key for key in keys if _unhashable(key))
        what = f"'{name}' entries" if name.endswith("s") else f"'{name}'"
        msg = f"{what} must be hashable (got {describe(culprit)})"
        raise TypeError(msg) from None


def _unhashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return True
    return False


def check_rollout_ids(rollout_ids: Any, size: int) -> list[Hashable]:
    """
    Validate rollout ids: one hashable id per member (``None`` is a rollout of its own).

    numpy arrays and torch tensors are read with ``tolist``, which keeps integer ids exact.
    """
    if is_torch_tensor(rollout_ids) or isinstance(rollout_ids, np.ndarray):
        ids = rollout_ids.tolist()
    elif isinstance(rollout_ids, (str, bytes)) or not isinstance(rollout_ids, Sequence):
        msg = f"'rollout_ids' must be a sequence with one id per member (got {describe(rollout_ids)})"
        raise TypeError(msg)
    else:
        ids = list(rollout_ids)
    if not isinstance(ids, list):  # a 0-D array or tensor
        msg = f"'rollout_ids' must be a sequence with one id per member (got {describe(rollout_ids)})"
        raise TypeError(msg)
    if len(ids) != size:
        msg = f"'rollout_ids' must have one id per reward ({size}) (got {len(ids)})"
        raise ValueError(msg)
    for rid in ids:
        if not isinstance(rid, Hashable):
            msg = f"'rollout_ids' entries must be hashable (got {describe(rid)})"
            raise TypeError(msg)
    return ids


def merge_rollouts(
    values: list[float], texts: list[str | None] | None, ids: list[Hashable]
) -> tuple[list[float], list[str | None] | None, bool]:
    """
    Collapse members that share a rollout id into one (the first member's reward).

    Returns the per-rollout rewards and completions (segments joined by newlines) and
    whether members of one rollout disagreed on the reward.
    """
    slots: dict[Hashable, int] = {}
    merged: list[float] = []
    segments: list[list[str | None]] = []
    inconsistent = False
    for index, rid in enumerate(ids):
        value = values[index]
        slot = None if rid is None else slots.get(rid)
        if slot is None:
            if rid is not None:
                slots[rid] = len(merged)
            merged.append(value)
            segments.append([None if texts is None else texts[index]])
            continue
        if value != merged[slot] and not (math.isnan(value) and math.isnan(merged[slot])):
            inconsistent = True
        segments[slot].append(None if texts is None else texts[index])
    if texts is None:
        return merged, None, inconsistent
    joined = [
        None if any(part is None for part in parts) else "\n".join(parts)  # type: ignore[arg-type]
        for parts in segments
    ]
    return merged, joined, inconsistent


def group_inputs(
    config: GroupAdmissionConfig,
    rewards: Any,
    completions: Sequence[str | None] | None,
    external_reasons: Sequence[str] | str,
    rollout_ids: Sequence[Hashable] | None,
    group_key: Hashable | None,
) -> tuple[list[float], list[str | None] | None, list[str], list[str], int]:
    """
    ``evaluate``'s arguments checked and merged by rollout, ready for ``judge_group``.

    Returns the gated values and texts (one per rollout), the caller's external reasons,
    the data problems found, and the group's size (its members).
    """
    if group_key is not None:
        check_group_keys((group_key,), "group_key")
    values, problems = coerce_group(rewards, config.gate_on)
    size = len(values)
    external = list(external_reason_tuple(external_reasons, "external_reasons")) if external_reasons else []
    texts: list[str | None] | None = None
    if completions is not None:
        texts = check_completions(completions, size)
    elif config.similarity_gate_enabled:
        raise ValueError(completions_required_message(config))
    if rollout_ids is not None:
        values, texts, inconsistent = merge_rollouts(values, texts, check_rollout_ids(rollout_ids, size))
        if inconsistent:
            problems.append(CHECK_INCONSISTENT_ROLLOUT)
    return values, texts, external, problems, size
