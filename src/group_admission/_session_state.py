"""
What an ``AdmissionSession`` holds between calls, and its JSON form that restores exactly or is refused.

:class:`StepBook` keeps the step the session is in: its target, its budget state, its
counts and the round in progress. :class:`SessionParts` is everything a checkpoint
restores; :func:`restore_session` builds it through constructors, and the session takes it
in one documented hook (``AdmissionSession._restore``), so that a renamed field fails
instead of silently becoming a new attribute. Neither is thread-safe: the session calls
them under its lock.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Mapping
from typing import Any

import attrs

from ._batch import BatchAdmissionResult
from ._budget import ResamplePlan, SamplingBudgetController, SamplingBudgetState
from ._decision import GroupAdmissionDecision
from ._drop_tracker import DropTracker
from ._exceptions import CheckpointError, StepLifecycleError
from ._limits import DropLimits
from ._metrics import AdmissionStats
from ._plan_call import PlanCall
from ._session_types import StepReport
from ._state_checks import StateFormat, state_int
from ._validation import check_count, describe

__all__ = ["FORMAT", "SessionParts", "StepBook", "restore_session", "session_state"]

#: The ``format`` tag of a session state; the version changes whenever the layout does.
FORMAT = "group-admission/session"
VERSION = 1
_KEYS = ("format", "version", "config", "stats", "step_stats", "round", "step", "budget", "windows", "streak")
_FORMAT = StateFormat("the session", "state_dict()", _KEYS, tag=FORMAT, version=VERSION, kind="session state")
_fail = _FORMAT.fail


@attrs.define(kw_only=True)
class StepBook:
    """
    The session's step: index, target, budget state, counts, and the round in progress.

    Groups count here only while a step is open; the session counts every group in its
    lifetime counts as well. The round in progress is every group judged since the last
    plan; a plan, ``pick_prompts`` and ``end_step`` fold it into the budget state.
    """

    index: int = -1
    open: bool = False
    target: int = 0
    state: SamplingBudgetState | None = None
    stats: AdmissionStats = attrs.field(factory=AdmissionStats)
    round: AdmissionStats = attrs.field(factory=AdmissionStats)
    round_samples: int = 0
    round_tokens: int = 0
    plan: ResamplePlan | None = None
    #: The step's last planning call, which the report asks again (see ``_plan_call``).
    call: PlanCall | None = None

    def begin(self, target: int, controller: SamplingBudgetController) -> None:
        """Open the next step with a fresh budget state that keeps the last step's rate."""
        if self.open:
            msg = (
                f"begin_step() while step {self.index} is open: call end_step() first (it returns the report)"
            )
            raise StepLifecycleError(msg)
        self.index += 1
        self.open = True
        self.target = target
        self.state = controller.new_state(carry_rate_from=self.state)
        self.stats, self.round, self.round_samples, self.round_tokens = (
            AdmissionStats(),
            AdmissionStats(),
            0,
            0,
        )
        self.plan = self.call = None

    def require(self, what: str) -> SamplingBudgetState:
        """The open step's budget state, or ``StepLifecycleError`` naming the call ``what``."""
        if not self.open or self.state is None:
            msg = f"call begin_step(target_groups) before {what}()"
            raise StepLifecycleError(msg)
        return self.state

    def count(
        self,
        judged: GroupAdmissionDecision | BatchAdmissionResult,
        samples: int,
        tokens: int,
        *,
        fallback: bool = False,
    ) -> None:
        """Count judged groups in the open step and its round; outside a step, nowhere."""
        if not self.open:
            return
        for stats in (self.stats, self.round):
            if isinstance(judged, BatchAdmissionResult):
                stats.add_many(judged)
            else:
                stats.add(judged, fallback_admitted=fallback)
        self.round_samples += samples
        self.round_tokens += tokens

    def fold_round(self, controller: SamplingBudgetController) -> SamplingBudgetState:
        """Close the round in progress: fold it into the step's budget state, and return that."""
        state = self.state
        assert state is not None  # for mypy; require() ran first
        if self.round.candidates:
            controller.observe_round(
                state,
                groups=self.round.candidates,
                admitted=self.round.admitted,
                generated_samples=self.round_samples,
                generated_tokens=self.round_tokens,
            )
            self.round, self.round_samples, self.round_tokens = AdmissionStats(), 0, 0
        return state

    def group_size(self, num_generations: int | None) -> int:
        """``num_generations``, or the mean group size seen this step, rounded up (1 before any)."""
        if num_generations is not None:
            return check_count(num_generations, "num_generations", 1)
        assert self.state is not None
        samples = self.state.generated_samples + self.round_samples
        groups = self.state.generated_groups + self.round.candidates
        return max(1, -(-samples // groups)) if groups else 1

    def with_round(self) -> SamplingBudgetState:
        """The step's budget state with the round in progress counted in, without closing it."""
        state, round_ = self.state, self.round
        assert state is not None
        return attrs.evolve(
            state,
            sampling_rounds=state.sampling_rounds + (1 if round_.candidates else 0),
            generated_groups=state.generated_groups + round_.candidates,
            generated_samples=state.generated_samples + self.round_samples,
            generated_tokens=state.generated_tokens + self.round_tokens,
            admitted_groups=state.admitted_groups + round_.admitted,
            rejected_groups=state.rejected_groups + round_.rejected,
        )

    def end(self, controller: SamplingBudgetController) -> StepReport:
        """
        Fold the last round, close the step, and report what it cost and kept.

        Whether it was exhausted, and what bound it, is what the step's last planning call
        says on the final counts (a step never planned: the round planner's default).
        """
        call = self.call or PlanCall(kind="round", judged=self.stats.candidates)
        # A streaming step is one round in progress: its planner sees the counts unfolded.
        unfolded, size = self.with_round(), self.group_size(call.num_generations)
        state = self.fold_round(controller)
        target = self.target
        final = call.replay(
            controller,
            unfolded if call.kind == "stream" else state,
            target_groups=target,
            num_generations=size,
            judged=self.stats.candidates,
        )
        kept = self.stats.admitted + self.stats.fallback_admitted
        self.open, self.call = False, None
        return StepReport(
            step=self.index,
            target_groups=target,
            admitted_groups=state.admitted_groups,
            kept_groups=kept,
            trained_groups=min(kept, target),
            surplus_groups=max(0, kept - target),
            short_groups=max(0, target - kept),
            exhausted=kept < target and final.exhausted,
            generated_groups=state.generated_groups,
            generated_samples=state.generated_samples,
            generated_tokens=state.generated_tokens,
            sampling_rounds=state.sampling_rounds,
            limited_by=final.limited_by,
        )


@attrs.frozen(kw_only=True)
class SessionParts:
    """Everything a session checkpoint restores: the lifetime counts, the drop limits' counts, the step."""

    stats: AdmissionStats
    drops: DropTracker
    book: StepBook


def session_state(config: dict[str, Any], parts: SessionParts) -> dict[str, Any]:
    """The session's state as plain JSON types; ``config`` is the session's configuration."""
    book = parts.book
    return {
        "format": FORMAT,
        "version": VERSION,
        "config": config,
        "stats": parts.stats.to_dict(),
        "step_stats": book.stats.to_dict(),
        "round": {"stats": book.round.to_dict(), "samples": book.round_samples, "tokens": book.round_tokens},
        "step": {
            "index": book.index,
            "open": book.open,
            "target_groups": book.target,
            "last_plan": None if book.call is None else book.call.to_dict(),
        },
        "budget": None if book.state is None else book.state.to_dict(),
        "windows": [[key, judged, dropped] for key, (judged, dropped) in parts.drops.windows.items()],
        "streak": dict(parts.drops.streak),
    }


def _int(value: object, name: str, minimum: int = 0) -> int:
    return state_int(value, name, _fail, minimum)


def _mapping(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, Mapping):
        _fail(f"'{key}' must be a mapping (got {describe(value)})")
    return value


def _check_config(saved: object, current: dict[str, Any]) -> None:
    if saved != current:
        changed = sorted(
            key for key in current if not isinstance(saved, Mapping) or saved.get(key) != current[key]
        )
        _fail(
            f"it was saved under a different {', '.join(changed) or 'configuration'} configuration; "
            "restoring it would not reproduce later verdicts and plans "
            "(build the session with the saved settings)"
        )


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


def _book(state: Mapping[str, Any]) -> StepBook:
    step, round_ = _mapping(state, "step"), _mapping(state, "round")
    budget = state["budget"]
    is_open = step.get("open")
    if not isinstance(is_open, bool) or (is_open and budget is None):
        _fail(
            f"'step.open' must be a bool, and an open step needs its budget state (got {describe(is_open)})"
        )
    book = StepBook(
        index=_int(step.get("index"), "step.index", -1),
        open=is_open,
        target=_int(step.get("target_groups"), "step.target_groups"),
        state=None if budget is None else SamplingBudgetState.from_dict(budget),
        stats=_stats(state["step_stats"], "step_stats"),
        round=_stats(round_.get("stats"), "round.stats"),
        round_samples=_int(round_.get("samples"), "round.samples"),
        round_tokens=_int(round_.get("tokens"), "round.tokens"),
    )
    if book.round_samples < book.round.candidates:
        _fail("the round in progress has fewer samples than groups")
    book.call = _plan_call(step.get("last_plan"), book)
    return book


def _plan_call(value: object, book: StepBook) -> PlanCall | None:
    """The open step's last planning call (``None``: none, or a state saved before it was kept)."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not book.open:
        _fail(f"'step.last_plan' must be null or, in an open step, a mapping (got {describe(value)})")
    try:
        call = PlanCall(**value)
    except (TypeError, ValueError) as exc:
        _fail(f"'step.last_plan': {exc}")
    judged = book.stats.candidates
    if call.judged > judged:
        _fail(f"'step.last_plan.judged' ({call.judged}) exceeds the step's judged groups ({judged})")
    return call


def restore_session(data: object, config: dict[str, Any], limits: DropLimits) -> SessionParts:
    """
    Check a saved state against the session's ``config`` and build what it restores.

    Raises:
        CheckpointError: naming the first problem found; nothing is built.
    """
    state = _FORMAT.read(data)
    _check_config(state["config"], config)
    return SessionParts(
        stats=_stats(state["stats"], "stats"),
        drops=DropTracker(limits, _windows(state["windows"]), _streak(state["streak"])),
        book=_book(state),
    )
