"""Reading ROLL's DataProtos; what is unusable becomes a named external reason, never an error."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from ..._validation import describe
from .._adapter_runtime import GroupInput, scalar_reward

__all__ = ["domain_of", "global_step", "leaves", "read_responses", "read_trajectories", "rows"]


def leaves(data: Any) -> list[Any]:
    """The DataProtos of a (possibly nested) list, as ROLL's ``expand_responses`` accepts."""
    if not isinstance(data, list):
        return [data]
    return [leaf for item in data for leaf in leaves(item)]


def rows(data: Any) -> int | None:
    """``len(data)``, or ``None`` when it has none."""
    try:
        return len(data)
    except TypeError:
        return None


def _damage(data: Any) -> str | None:
    """Why ``data`` is not a usable DataProto (``"malformed"`` when it is none at all)."""
    if not (hasattr(data, "batch") and hasattr(data, "non_tensor_batch")):
        return "malformed"
    for part in ("batch", "non_tensor_batch"):
        if getattr(data, part) is None:  # ROLL allows either half to be None
            return f"missing_{part}"
    return None if rows(data) else "malformed"


def _column(container: Any, key: str, count: int | None = None) -> tuple[list[Any] | None, str | None]:
    """``container[key]`` as a flat list (of ``count`` values, when given), or a named problem."""
    try:
        values = container[key]
    except KeyError:
        return None, f"missing_{key}"
    except (TypeError, IndexError, AttributeError):
        return None, f"malformed_{key}"
    try:
        if hasattr(values, "detach"):
            values = values.detach()
        flat = list(values.reshape(-1).tolist()) if hasattr(values, "reshape") else list(values)
    except (TypeError, ValueError, AttributeError, RuntimeError):
        return None, f"malformed_{key}"
    if count is not None and len(flat) != count:
        return None, f"malformed_{key}"
    return flat, None


def response_text(data: Any, row: int) -> str | None:
    """The response tokens of one row, as text for the redundancy gate (token ids joined by spaces)."""
    try:
        ids = data.batch["input_ids"][row]
        mask = data.batch["response_mask"][row]
        return " ".join(str(token) for token in ids[mask.bool()].tolist())
    except (KeyError, IndexError, AttributeError, TypeError, RuntimeError):
        return None


def _add(out: GroupInput, value: Any, text: str | None, slot: int) -> None:
    reward, problem = scalar_reward(value)
    if problem is not None:
        out.external.append(problem)
    out.add(reward, text, slot)


def read_responses(data_list: Any, *, texts: bool = False) -> GroupInput:
    """
    One RLVR prompt's responses for the policy: a member per row of each DataProto.

    Rewards are ``batch["response_level_rewards"]``; with ``texts``, each row's response
    token ids feed the redundancy gate.
    """
    out = GroupInput()
    for data in leaves(data_list):
        damage = _damage(data)
        if damage == "malformed":
            out.reject("malformed_response", len(out.rewards))
            continue
        count = rows(data) or 1
        values, problem = (None, damage) if damage else _column(data.batch, "response_level_rewards", count)
        if problem is not None:
            out.external.append(problem)
        for row, value in enumerate(values or [None] * count):
            _add(out, value, response_text(data, row) if texts else None, len(out.rewards))
    if not out.rewards:
        out.reject("malformed_group", 0)
    return out


def _token_sum(batch: Any) -> tuple[float | None, str | None]:
    """Token-level scores hold each step's reward at its last token: their sum is the episode score."""
    scores, problem = _column(batch, "scores")
    total = 0.0
    for value in scores or ():
        score, issue = scalar_reward(value)
        if score is None:
            return None, issue or "missing_token_score"
        total += score
    return (None, problem) if problem else (total, None)


def _trajectory(out: GroupInput, slot: int, data: Any, texts: bool) -> None:
    damage = _damage(data)
    if damage is not None:
        out.reject("malformed_trajectory" if damage == "malformed" else damage, slot)
        return
    meta = getattr(data, "meta_info", None)
    if isinstance(meta, Mapping) and meta.get("drop_flag", False):
        out.external.append("drop_flag")
    text = None
    if texts:
        parts = [response_text(data, row) for row in range(rows(data) or 0)]
        text = None if None in parts else " ".join(parts)  # type: ignore[arg-type]
    # Every row of a multi-step trajectory carries the episode score; the policy checks they agree.
    values, problem = _column(data.non_tensor_batch, "episode_scores")
    if problem == "missing_episode_scores":
        total, problem = _token_sum(data.batch)
        values = [total]
    if problem is not None:
        out.external.append(problem)
    for value in values if problem is None and values else [None]:
        _add(out, value, text, slot)


def read_trajectories(group: Any, *, texts: bool = False) -> GroupInput:
    """
    One agentic group for the policy: a rollout per trajectory.

    The reward is ``non_tensor_batch["episode_scores"]``, else ``batch["scores"]`` summed;
    a ``None`` trajectory or a ``meta_info["drop_flag"]`` makes the group external.
    """
    out = GroupInput()
    if isinstance(group, (str, bytes)) or not isinstance(group, Sequence) or not group:
        out.reject("malformed_group", 0)
        return out
    for slot, data in enumerate(group):
        if data is None:
            out.reject("missing_trajectory", slot)
        else:
            _trajectory(out, slot, data, texts)
    return out


def domain_of(data_list: Any, domains: Sequence[str] = ()) -> str:
    """
    The reward domain the responses name; if none does (damaged data), the only one of ``domains``.

    Raises:
        ValueError: no response names a domain and ``domains`` does not settle it.
    """
    found = leaves(data_list)
    for data in found:
        names, _ = _column(getattr(data, "non_tensor_batch", None), "domain")
        if names:
            return str(names[0])
    if found and len(domains) == 1:
        return domains[0]
    msg = f"'data_list' must hold DataProtos with a non_tensor_batch 'domain' (got {describe(data_list)})"
    raise ValueError(msg)


def global_step(value: Any) -> int | str | None:
    """A step label for the session: ``meta_info["global_step"]`` of a context or the first response."""
    if not isinstance(value, Mapping):
        value = getattr(next(iter(leaves(value)), None), "meta_info", None)
    step = value.get("global_step") if isinstance(value, Mapping) else None
    if step is None or isinstance(step, str):
        return step
    if isinstance(step, numbers.Integral) and not isinstance(step, bool):
        return int(step)
    return repr(step)  # any other label still keeps its own step window
