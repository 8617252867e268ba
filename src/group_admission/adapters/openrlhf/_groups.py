"""
Reading one OpenRLHF group (the ``n`` one-row experiences of one prompt) for the policy.

Pure translation: no OpenRLHF import, no gate rule. A group is whatever one Ray ref of
``_dispatch_prompts_to_vllm`` returned; OpenRLHF's advantages read it as ``n``
consecutive rows, so it is kept or dropped whole.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._kit import WRONG_GROUP_SIZE, scalar_reward
from ._settings import SCORES

__all__ = [
    "EMPTY_GROUP",
    "GENERATION_FAILED",
    "MISSING_INFO_KEY",
    "WRONG_GROUP_SIZE",
    "GroupRead",
    "failed_group",
    "read_group",
]

#: External reason of a group whose generation raised (an engine or reward-function error).
GENERATION_FAILED = "generation_failed"
#: External reason of a group with no experiences at all.
EMPTY_GROUP = "empty_group"
#: External reason of a member whose ``info`` lacks a ``gate_on`` key.
MISSING_INFO_KEY = "missing_info_key"


@attrs.frozen(kw_only=True)
class GroupRead:
    """One group for the session: each component's value per member, problems, OpenRLHF's scores, tokens."""

    components: dict[str, list[float | None]]
    external: tuple[str, ...]
    scores: tuple[float | None, ...]
    generated_tokens: int


def _first(value: Any) -> Any:
    """The one value of a one-row field (``tensor([x])``, ``[x]``), or the value itself."""
    if value is None or isinstance(value, (str, bytes, Mapping)):
        return value
    try:
        return value[0] if len(value) == 1 else value
    except TypeError:  # a number, or a 0-d tensor
        return value


def _component(experience: Any, name: str) -> tuple[Any, str | None]:
    if name == SCORES:
        return _first(getattr(experience, "scores", None)), None
    info = getattr(experience, "info", None)
    if not isinstance(info, Mapping) or name not in info:
        return None, MISSING_INFO_KEY
    return _first(info[name]), None


def _tokens(experience: Any) -> int:
    value, _ = scalar_reward(_first(getattr(experience, "response_length", None)))
    return int(value) if value is not None and math.isfinite(value) and value > 0 else 0


def _note(problems: list[str], problem: str | None) -> None:
    if problem is not None and problem not in problems:
        problems.append(problem)


def read_group(experiences: Sequence[Any], names: Sequence[str], size: int | None = None) -> GroupRead:
    """
    Translate one group's experiences: the values of ``names`` per member, in order.

    A value that is not a number becomes a missing member with a named external reason
    (the policy adds ``missing_reward`` or ``non_finite_reward`` itself); a group of other
    than ``size`` members (``n_samples_per_prompt``, when known) is ``wrong_group_size``.
    """
    if not experiences:
        return failed_group(1, names, EMPTY_GROUP)
    components: dict[str, list[float | None]] = {name: [] for name in names}
    problems: list[str] = [] if size is None or len(experiences) == size else [WRONG_GROUP_SIZE]
    for experience in experiences:
        for name in names:
            raw, missing = _component(experience, name)
            value, problem = scalar_reward(raw)
            _note(problems, missing)
            _note(problems, problem)
            components[name].append(value)
    scores = tuple(scalar_reward(_first(getattr(e, "scores", None)))[0] for e in experiences)
    tokens = sum(_tokens(e) for e in experiences)
    return GroupRead(components=components, external=tuple(problems), scores=scores, generated_tokens=tokens)


def failed_group(size: int, names: Sequence[str], reason: str) -> GroupRead:
    """A group with no usable member: ``size`` missing values per component and ``reason``."""
    return GroupRead(
        components={name: [None] * size for name in names},
        external=(reason,),
        scores=(None,) * size,
        generated_tokens=0,
    )
