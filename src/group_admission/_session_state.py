"""
What an ``AdmissionSession`` holds between calls, and its JSON form that restores exactly or is refused.

:class:`SessionParts` is everything a checkpoint restores (the lifetime counts, the drop
limits' counts, the :class:`StepBook` and the token tally); :func:`restore_session` builds
it through constructors, and the session takes it in one documented hook
(``AdmissionSession._restore``), so that a renamed field fails instead of silently becoming
a new attribute.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ._budget import SamplingBudgetState
from ._drop_state import drops_state, restore_drops
from ._drop_tracker import DropTracker
from ._exceptions import CheckpointError
from ._limits import DropLimits
from ._metrics import AdmissionStats
from ._plan_call import PlanCall
from ._state_checks import StateFormat, check_written_back, exactly_equal, state_int
from ._step_book import StepBook
from ._tokens import TokenTally
from ._validation import describe

__all__ = ["FORMAT", "SessionParts", "restore_session", "session_state"]

#: The ``format`` tag of a session state; the version changes whenever the layout does.
FORMAT = "group-admission/session"
VERSION = 2
_KEYS = (
    "format",
    "version",
    "config",
    "stats",
    "tokens",
    "step_stats",
    "round",
    "step",
    "budget",
    "windows",
    "evicted",
    "streak",
)
_FORMAT = StateFormat("the session", "state_dict()", _KEYS, tag=FORMAT, version=VERSION, kind="session state")
_fail = _FORMAT.fail


@attrs.frozen(kw_only=True)
class SessionParts:
    """Everything a session checkpoint restores: the lifetime counts, the drop limits' counts, the step."""

    stats: AdmissionStats
    drops: DropTracker
    book: StepBook
    tokens: TokenTally


def session_state(config: dict[str, Any], parts: SessionParts) -> dict[str, Any]:
    """The session's state as plain JSON types; ``config`` is the session's configuration."""
    book = parts.book
    return {
        "format": FORMAT,
        "version": VERSION,
        "config": config,
        "stats": parts.stats.to_dict(),
        "tokens": parts.tokens.to_dict(),
        "step_stats": book.stats.to_dict(),
        "round": {"stats": book.round.to_dict(), "samples": book.round_samples, "tokens": book.round_tokens},
        "step": {
            "index": book.index,
            "open": book.open,
            "target_groups": book.target,
            "last_call": None if book.call is None else book.call.to_dict(),
            "charged": book.charged.to_dict(),
        },
        "budget": None if book.state is None else book.state.to_dict(),
        **drops_state(parts.drops),
    }


def _int(value: object, name: str, minimum: int = 0) -> int:
    return state_int(value, name, _fail, minimum)


def _mapping(value: object, name: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    """A mapping with exactly ``keys``: an unknown key would be dropped, and a restore must not drop."""
    if not isinstance(value, Mapping):
        _fail(f"'{name}' must be a mapping (got {describe(value)})")
    if set(value) != set(keys):
        _fail(f"'{name}' must have exactly the keys {list(keys)!r} (got {sorted(map(str, value))!r})")
    return value


def _check_config(saved: object, current: dict[str, Any]) -> None:
    # Exactly equal: a saved False where the config says 0.0 is a state edited by hand, not ours.
    if not exactly_equal(saved, current):
        changed = sorted(
            key
            for key in current
            if not isinstance(saved, Mapping) or not exactly_equal(saved.get(key), current[key])
        )
        _fail(
            f"it was saved under a different {', '.join(changed) or 'configuration'} configuration; "
            "restoring it would not reproduce later verdicts and plans "
            "(build the session with the saved settings)"
        )


def _stats(value: object, name: str) -> AdmissionStats:
    _mapping(value, name, ("counts", "external_details"))
    try:
        return AdmissionStats.from_dict(value)  # type: ignore[arg-type]
    except CheckpointError as exc:
        _fail(f"'{name}': {exc}")


def _within(part: AdmissionStats, whole: AdmissionStats, names: str) -> None:
    """Every count (and external detail) of ``part`` at most that of ``whole``, which includes it."""
    small, large = part.to_dict(), whole.to_dict()
    for group in ("counts", "external_details"):
        above = [key for key, count in small[group].items() if count > large[group].get(key, 0)]
        if above:
            key = above[0]
            _fail(f"{names}: '{key}' is {small[group][key]} in it, {large[group].get(key, 0)} in the whole")


def _tally(value: object, name: str) -> TokenTally:
    try:
        return TokenTally.from_dict(value, name)
    except CheckpointError as exc:
        _fail(str(exc))


def _check_tokens(book: StepBook, tokens: TokenTally) -> None:
    """The step's tokens are a part of the lifetime's; judged groups' tokens live in the budget state."""
    if book.charged.generated:
        _fail("'step.charged.generated' must be 0: judged groups' tokens are in the budget state")
    if book.index == -1 and book.charged.decoded:
        _fail("before the first step (step.index -1) no tokens are charged to a step")
    step = book.charged.to_dict()
    step["generated"] = book.round_tokens + (0 if book.state is None else book.state.generated_tokens)
    for kind, count in step.items():
        if count > getattr(tokens, kind):
            whole = getattr(tokens, kind)
            _fail(f"the step's {kind} tokens ({count}) exceed the session's lifetime's ({whole})")


def _check_book(book: StepBook, lifetime: AdmissionStats) -> None:
    """The relations every state a session writes satisfies (see :class:`StepBook`)."""
    _within(book.round, book.stats, "the round in progress counts more than its step")
    _within(book.stats, lifetime, "the step counts more than the session's lifetime")
    if book.round_samples < book.round.candidates:
        _fail("the round in progress has fewer samples than groups")
    if not book.round.candidates and (book.round_samples or book.round_tokens):
        _fail("the round in progress has samples or tokens but no groups")
    if (book.index == -1) != (book.state is None):
        _fail("a budget state belongs to a step: 'budget' is null exactly before the first (step.index -1)")
    if book.index == -1 and (
        book.open or book.target or book.stats.candidates or book.stats.fallback_admitted
    ):
        _fail("before the first step (step.index -1) no step is open, targeted or counted")
    if not book.open and book.round.candidates:
        _fail("a closed step has no round in progress (end_step folds it)")
    state = book.state
    if state is not None and (
        state.generated_groups + book.round.candidates != book.stats.candidates
        or state.admitted_groups + book.round.admitted != book.stats.admitted
    ):
        _fail(
            f"the budget state's groups ({state.generated_groups}, {state.admitted_groups} admitted) and "
            f"the round's ({book.round.candidates}, {book.round.admitted}) do not add up to the step's "
            f"({book.stats.candidates}, {book.stats.admitted})"
        )


def _book(state: Mapping[str, Any]) -> StepBook:
    step = _mapping(state["step"], "step", ("index", "open", "target_groups", "last_call", "charged"))
    round_ = _mapping(state["round"], "round", ("stats", "samples", "tokens"))
    budget = state["budget"]
    if not isinstance(step["open"], bool):
        _fail(f"'step.open' must be a bool (got {describe(step['open'])})")
    book = StepBook(
        index=_int(step["index"], "step.index", -1),
        open=step["open"],
        target=_int(step["target_groups"], "step.target_groups"),
        state=None if budget is None else SamplingBudgetState.from_dict(budget),
        stats=_stats(state["step_stats"], "step_stats"),
        round=_stats(round_["stats"], "round.stats"),
        round_samples=_int(round_["samples"], "round.samples"),
        round_tokens=_int(round_["tokens"], "round.tokens"),
        charged=_tally(step["charged"], "step.charged"),
    )
    book.call = _plan_call(step["last_call"], book)
    return book


def _plan_call(value: object, book: StepBook) -> PlanCall | None:
    """The open step's last planning call (``None``: none since the step began)."""
    if value is None:
        return None
    if not book.open:
        _fail(f"'step.last_call' must be null in a closed step (got {describe(value)})")
    fields = _mapping(value, "step.last_call", tuple(field.name for field in attrs.fields(PlanCall)))
    try:
        call = PlanCall(**fields)
    except (TypeError, ValueError) as exc:
        _fail(f"'step.last_call': {exc}")
    check_written_back(fields, call.to_dict(), "step.last_call.", _fail)
    judged = book.stats.candidates
    if call.judged > judged:
        _fail(f"'step.last_call.judged' ({call.judged}) exceeds the step's judged groups ({judged})")
    return call


def restore_session(data: object, config: dict[str, Any], limits: DropLimits) -> SessionParts:
    """
    Check a saved state against the session's ``config`` and build what it restores.

    Raises:
        CheckpointError: naming the first problem found; nothing is built.
    """
    state = _FORMAT.read(data)
    _check_config(state["config"], config)
    stats, book = _stats(state["stats"], "stats"), _book(state)
    tokens = _tally(state["tokens"], "tokens")
    _check_book(book, stats)
    _check_tokens(book, tokens)
    drops = restore_drops(state, limits, stats, _fail)
    return SessionParts(stats=stats, drops=drops, book=book, tokens=tokens)
