"""
Saving and restoring an ``AdmissionSession``: a JSON-safe dict that restores exactly or is refused.

Kept apart from the session so that the loop reads on its own; both functions work on the
session's private fields, under the session's lock.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Mapping
from typing import Any, NoReturn

from ._budget import SamplingBudgetState
from ._drop_tracker import DropTracker
from ._exceptions import CheckpointError
from ._metrics import AdmissionStats
from ._state_checks import check_header, state_int
from ._validation import describe

# The session is typed ``Any`` here: naming its class would close an import cycle with
# ``_session``, which imports these functions.
AdmissionSession = Any

__all__ = ["FORMAT", "restore_session", "session_state"]

#: The ``format`` tag of a session state; the version changes whenever the layout does.
FORMAT = "group-admission/session"
VERSION = 1
_KEYS = ("format", "version", "config", "stats", "step_stats", "round", "step", "budget", "windows", "streak")


def _config(session: AdmissionSession) -> dict[str, Any]:
    return {
        "policy": session.policy.config.to_dict(),
        "budget": session.controller.config.to_dict(),
        "limits": session.limits.to_dict(),
    }


def session_state(session: AdmissionSession) -> dict[str, Any]:
    """The session's state as plain JSON types."""
    s = session
    return {
        "format": FORMAT,
        "version": VERSION,
        "config": _config(s),
        "stats": s._stats.to_dict(),
        "step_stats": s._step_stats.to_dict(),
        "round": {"stats": s._round.to_dict(), "samples": s._round_samples, "tokens": s._round_tokens},
        "step": {"index": s._step, "open": s._step_open, "target_groups": s._target},
        "budget": None if s._state is None else s._state.to_dict(),
        "windows": [[key, judged, dropped] for key, (judged, dropped) in s._drops.windows.items()],
        "streak": dict(s._drops.streak),
    }


def _fail(message: str) -> NoReturn:
    msg = f"cannot restore the session: {message}"
    raise CheckpointError(msg)


def _int(value: object, name: str, minimum: int = 0) -> int:
    return state_int(value, name, _fail, minimum)


def _mapping(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, Mapping):
        _fail(f"'{key}' must be a mapping (got {describe(value)})")
    return value


def _check_header(data: object, session: AdmissionSession) -> Mapping[str, Any]:
    data = check_header(
        data,
        keys=_KEYS,
        format_=FORMAT,
        version=VERSION,
        kind="session state",
        source="state_dict()",
        fail=_fail,
    )
    saved, current = data["config"], _config(session)
    if saved != current:
        changed = sorted(
            key for key in current if not isinstance(saved, Mapping) or saved.get(key) != current[key]
        )
        _fail(
            f"it was saved under a different {', '.join(changed) or 'configuration'} configuration; "
            "restoring it would not reproduce later verdicts and plans "
            "(build the session with the saved settings)"
        )
    return data


def _windows(value: object) -> OrderedDict[Any, list[int]]:
    if not isinstance(value, list):
        _fail(f"'windows' must be a list (got {describe(value)})")
    windows: OrderedDict[Any, list[int]] = OrderedDict()
    for entry in value:
        if not isinstance(entry, list) or len(entry) != 3 or not isinstance(entry[0], (int, str, type(None))):
            _fail(f"'windows' entries must be [step, judged, dropped] (got {describe(entry)})")
        judged, dropped = _int(entry[1], "windows.judged"), _int(entry[2], "windows.dropped")
        if dropped > judged:
            _fail(f"a window dropped more groups ({dropped}) than it judged ({judged})")
        windows[entry[0]] = [judged, dropped]
    return windows


def _streak(value: object) -> Counter[str]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        _fail(f"'streak' must map external reasons to counts (got {describe(value)})")
    return Counter({key: _int(count, f"streak.{key}", 1) for key, count in value.items()})


def _stats(value: object, name: str) -> AdmissionStats:
    try:
        return AdmissionStats.from_dict(value)  # type: ignore[arg-type]
    except CheckpointError as exc:
        _fail(f"'{name}': {exc}")


def restore_session(data: object, session: AdmissionSession) -> dict[str, Any]:
    """
    Check a saved state against ``session`` and return the private fields to assign.

    Raises:
        CheckpointError: naming the first problem found; nothing is assigned.
    """
    state = _check_header(data, session)
    step, round_ = _mapping(state, "step"), _mapping(state, "round")
    budget = state["budget"]
    fields: dict[str, Any] = {
        "_stats": _stats(state["stats"], "stats"),
        "_step_stats": _stats(state["step_stats"], "step_stats"),
        "_round": _stats(round_.get("stats"), "round.stats"),
        "_round_samples": _int(round_.get("samples"), "round.samples"),
        "_round_tokens": _int(round_.get("tokens"), "round.tokens"),
        "_step": _int(step.get("index"), "step.index", -1),
        "_target": _int(step.get("target_groups"), "step.target_groups"),
        "_state": None if budget is None else SamplingBudgetState.from_dict(budget),
        "_drops": DropTracker(session.limits, _windows(state["windows"]), _streak(state["streak"])),
        "_plan": None,
    }
    is_open = step.get("open")
    if not isinstance(is_open, bool) or (is_open and fields["_state"] is None):
        _fail(
            f"'step.open' must be a bool, and an open step needs its budget state (got {describe(is_open)})"
        )
    fields["_step_open"] = is_open
    if fields["_round_samples"] < fields["_round"].candidates:
        _fail("the round in progress has fewer samples than groups")
    return fields
