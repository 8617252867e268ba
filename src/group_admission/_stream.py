"""
``AdmissionStream``: admission where RL runs asynchronously (TRL's ``AsyncGRPOTrainer``, AReaL, SkyRL).

In an asynchronous stream there is no round to plan: groups finish in any order, a
rejected group is simply not trained on, and the host's stream refills. What the stream
owns is what a session owns elsewhere, run on an :class:`AdmissionSession` (whose counting
it does not repeat):

- **the decision**, group by group as they finish (outcome gating, near-tie, external
  failures counted once);
- **the cost bound**: the stream is cut into windows of ``window_groups`` kept groups,
  each one session step. A window drops a rejected group only while it can still afford
  its missing groups under the budget's caps (``window_groups + budget.max_extra_groups``
  groups, and the sample and token caps); past that it keeps the group as
  ``fallback_admitted`` (``on_exhausted: train``) or raises :class:`BudgetExhaustedError`
  (``raise``). A host's refill therefore never runs unbounded;
- **staleness**, from the host's own policy version numbers: how many versions a group's
  tokens span; a group older than ``max_staleness`` is not judged (its tokens charged as
  ``aborted``), and the host's own stale drops of kept groups are reported with
  :meth:`~AdmissionStream.drop_stale`: both counted as stale, never as rejections;
- **the loss scale** of each window (:attr:`StepReport.loss_scale`) and **every decoded
  token** (the judged groups' and :meth:`~AdmissionStream.charge`);
- **pre-generation skipping** where the host lets us choose prompts
  (:meth:`~AdmissionStream.pick`, a :class:`PromptHistory` whose step is the window);
- **checkpoints** that restore exactly or are refused.
"""

from __future__ import annotations

import threading
import typing
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import attrs

from ._budget import SamplingBudgetConfig
from ._exceptions import BudgetExhaustedError, CheckpointError
from ._history import PromptHistory, PromptPicks
from ._history_ids import PromptId, check_prompt_id
from ._loading import coerce_config
from ._metrics import AdmissionStats
from ._session import AdmissionSession, SessionConfig, StepReport
from ._state_checks import StateFormat, exactly_equal
from ._stream_types import StreamLedger, StreamSettings, StreamVerdict, version_numbers
from ._tokens import TokenTally
from ._validation import check_count, describe

__all__ = ["AdmissionStream"]

FORMAT = "group-admission/stream"
VERSION = 1
_KEYS = ("format", "version", "config", "settings", "session", "history", "ledger", "last_report")
_FORMAT = StateFormat("the stream", "state_dict()", _KEYS, tag=FORMAT, version=VERSION, kind="stream state")
_fail = _FORMAT.fail


def _windowed(config: SessionConfig, window_groups: int) -> SessionConfig:
    """
    ``config`` with a window's budget: its own, or ``for_target(window_groups)`` when left at the defaults.

    The default budget allows no extra group, which in a stream would keep every rejected
    group as a fallback; like the other hosts that derive a budget from a target (slime's
    streaming rollout, the simulator), a stream without one gets
    ``SamplingBudgetConfig.for_target``.
    """
    if config.budget != SamplingBudgetConfig():
        return config
    return attrs.evolve(config, budget=SamplingBudgetConfig.for_target(window_groups))


class AdmissionStream:
    """
    Admission for a host that generates and trains at once: judge groups as they finish.

    Args:
        config: The admission setup (:class:`SessionConfig`, or a mapping with an optional
            ``preset``): policy, budget (the window's caps; left at its defaults, which
            allow no extra group, it is ``SamplingBudgetConfig.for_target(window_groups)``),
            drop limits, prompt history and loss scale.
        stream: The :class:`StreamSettings` (or a mapping): window size, staleness, exhaustion.
        host: The host's name, used in messages.
        group_size: The host's samples per group, for the prompt history (``None``: no
            history, so no skipping, even if ``config.history`` is set).
        seed: Seeds the prompt history's picks unless its section sets a seed.
        rank: This worker's rank, for the prompt history.

    Every call is thread-safe. A window is always open: the first opens here, and each
    opens the next as it closes. ``AdmissionStream.from_mapping(block)`` reads one block
    whose ``stream`` key holds the stream settings and whose other keys are a
    :class:`SessionConfig` mapping (``preset: recommended`` included).

    .. versionadded:: 0.2.0
    """

    def __init__(
        self,
        config: SessionConfig | Mapping[str, Any] | None = None,
        *,
        stream: StreamSettings | Mapping[str, Any] | None = None,
        host: str = "host",
        group_size: int | None = None,
        seed: int = 0,
        rank: int = 0,
    ) -> None:
        self._settings = coerce_config(StreamSettings, stream, name="stream")
        # SessionConfig reads its own mappings: a ``preset`` fills the sections it names.
        session_config = coerce_config(SessionConfig, config, build=SessionConfig.from_mapping)
        self._config = _windowed(session_config, self._settings.window_groups)
        self._session = self._config.session(host=host)
        size = None if group_size is None else check_count(group_size, "group_size", 1)
        self._history = None if size is None else self._config.prompt_history(size, seed=seed, rank=rank)
        self._ledger = StreamLedger()
        self._last_report: StepReport | None = None
        self._lock = threading.RLock()
        self._session.begin_step(self._settings.window_groups)

    @classmethod
    def from_mapping(
        cls, block: Mapping[str, Any], *, host: str = "host", group_size: int | None = None, seed: int = 0
    ) -> AdmissionStream:
        """
        Build from one block: :class:`SessionConfig` keys (``preset`` too) plus a ``stream`` section.

        Raises:
            TypeError, ValueError: a section or field is invalid (named).
        """
        if not isinstance(block, Mapping):
            msg = f"'block' must be a mapping of admission settings (got {describe(block)})"
            raise TypeError(msg)
        fields = dict(block)
        stream = fields.pop("stream", None)
        return cls(fields, stream=stream, host=host, group_size=group_size, seed=seed)

    def __repr__(self) -> str:
        return f"AdmissionStream({self._config!r}, stream={self._settings!r})"

    # -- reading ---------------------------------------------------------------------
    @property
    def session(self) -> AdmissionSession:
        """The session that judges and counts (its step is the open window)."""
        return self._session

    @property
    def settings(self) -> StreamSettings:
        """The stream settings."""
        return self._settings

    @property
    def config(self) -> SessionConfig:
        """The admission setup the session was built from."""
        return self._config

    @property
    def history(self) -> PromptHistory | None:
        """The prompt history behind :meth:`pick` (``None``: no skipping)."""
        return self._history

    @property
    def ledger(self) -> StreamLedger:
        """The counts kept beside the session's."""
        return self._ledger

    @property
    def window(self) -> int:
        """The index of the open window (0 for the first)."""
        return self._session.step

    @property
    def last_report(self) -> StepReport | None:
        """The report of the last window closed (``None`` before one)."""
        return self._last_report

    @property
    def loss_scale(self) -> float:
        """The last closed window's loss scale, for the groups of the open one (1.0 before one)."""
        return 1.0 if self._last_report is None else self._last_report.loss_scale

    @property
    def stats(self) -> AdmissionStats:
        """The admission counts over the stream's life."""
        return self._session.stats

    @property
    def tokens(self) -> TokenTally:
        """Every token decoded over the stream's life, by kind."""
        return self._session.tokens

    def trained_groups(self) -> int:
        """Groups sent to training: kept (admitted or fallback) and not dropped as stale."""
        stats = self._session.stats
        return stats.admitted + stats.fallback_admitted - self._ledger.dropped_stale

    # -- before generation ---------------------------------------------------------------
    def pick(self, prompt_ids: Sequence[PromptId]) -> PromptPicks:
        """
        Split candidate prompts into those to generate and those to skip, with the prompt history.

        Without a history every prompt is picked. Skipped prompts are counted
        (``skipped_prompts``) and cost nothing: they are never generated. Once
        ``max_skips_in_a_row`` prompts were skipped with no group judged since, the next
        ones are picked, so that a stream always moves on.
        """
        ids = list(prompt_ids)
        with self._lock:
            if self._history is None:
                picked = tuple(map(check_prompt_id, ids))
                return PromptPicks(picked=picked, skipped=(), informative_probabilities=())
            picks = self._history.pick(ids, step=self.window)
            room = self._settings.max_skips_in_a_row - self._ledger.skips_in_a_row
            if len(picks.skipped) > room:
                picks = self._history_pick_forced(ids, picks, max(0, room))
            self._ledger = self._ledger.add(
                skipped_prompts=len(picks.skipped), skips_in_a_row=len(picks.skipped)
            )
            return picks

    def _history_pick_forced(self, ids: list[PromptId], picks: PromptPicks, room: int) -> PromptPicks:
        """``picks`` keeping only the first ``room`` skips, in order: the later skipped prompts are picked."""
        assert self._history is not None
        skips = set(picks.skipped)  # a prompt's pick is fixed within a window: skipped is skipped
        chances = dict(zip(picks.picked, picks.informative_probabilities, strict=True))
        picked: list[PromptId] = []
        skipped: list[PromptId] = []
        for prompt in map(check_prompt_id, ids):
            if prompt in skips and len(skipped) < room:
                skipped.append(prompt)
                continue
            picked.append(prompt)
            if prompt not in chances:
                estimate = self._history.estimate(prompt, step=self.window)
                chances[prompt] = estimate.informative_probability
        return PromptPicks(
            picked=tuple(picked),
            skipped=tuple(skipped),
            informative_probabilities=tuple(chances[p] for p in picked),
        )

    def charge(self, tokens: int, *, kind: str) -> None:
        """Count tokens decoded outside a judged group (see :meth:`AdmissionSession.charge`)."""
        self._session.charge(tokens, kind=kind)

    # -- judging ---------------------------------------------------------------------------
    def judge(
        self,
        rewards: Any,
        completions: Sequence[str | None] | None = None,
        *,
        external_reasons: Sequence[str] | str = (),
        rollout_ids: Sequence[Hashable] | None = None,
        prompt_id: PromptId | None = None,
        generated_tokens: int = 0,
        versions: Sequence[int] | None = None,
        current_version: int | None = None,
    ) -> StreamVerdict:
        """
        Judge one finished group in the open window, count it, and say whether to train on it.

        Args:
            rewards: The members' rewards (as in :meth:`AdmissionSession.judge`).
            completions: Their completions, for the redundancy gate.
            external_reasons: Problems the host found with the group (``external``).
            rollout_ids: One id per member (members of one rollout must agree).
            prompt_id: The group's prompt (a ``str`` or ``int``): its ``group_key``, and
                what the prompt history observes.
            generated_tokens: The tokens the group decoded.
            versions: The host's policy versions that generated its tokens.
            current_version: The host's policy version now (for ``max_staleness``).

        Raises:
            BudgetExhaustedError: ``on_exhausted`` is ``"raise"``, this group was rejected,
                and the window cannot afford the rejection: its caps leave no room for the
                groups it still needs (the group is counted and dropped, the window closed;
                the stream goes on in the next window).
            ConsecutiveFailedGroupsError: the drop limits' streak of external rejections.
        """
        span, staleness = version_numbers(versions, current_version)
        key = None if prompt_id is None else check_prompt_id(prompt_id)
        limit = self._settings.max_staleness
        if staleness is not None and limit is not None and staleness > limit:
            return self._arrived_stale(generated_tokens, span, staleness)
        with self._lock:
            session, window = self._session, self.window
            affordable = session.can_launch(self._missing() + 1)
            verdict = session.judge(
                rewards,
                completions,
                external_reasons=external_reasons,
                rollout_ids=rollout_ids,
                group_key=key,
                generated_tokens=generated_tokens,
            )
            keep, fallback = verdict.keep, verdict.fallback_admitted
            spent = not keep and not affordable and session.limits.forceable(verdict.decision)
            if spent and self._settings.on_exhausted == "train":
                session.record_fallback(1)
                keep = fallback = True
            if self._history is not None and key is not None:
                self._history.observe(key, verdict.decision, step=window)
            self._note(span)
            report = None
            if spent and not keep:
                report = self._close(exhausted=True)
                raise BudgetExhaustedError(self._exhausted_message(report))
            if self._missing() == 0:
                report = self._close()
        return StreamVerdict(
            keep=keep,
            decision=verdict.decision,
            window=window,
            fallback_admitted=fallback,
            staleness=staleness,
            version_span=span,
            report=report,
        )

    def drop_stale(self, groups: int = 1) -> None:
        """
        Count kept groups the host dropped as stale by its own rule (TRL's ``max_staleness``).

        Raises:
            ValueError: more stale groups than groups sent to training.
        """
        count = check_count(groups, "groups", 1)
        with self._lock:
            trained = self.trained_groups()
            if count > trained:
                msg = f"'groups' must be <= the {trained} groups sent to training (got {count})"
                raise ValueError(msg)
            self._ledger = self._ledger.add(dropped_stale=count)

    def _missing(self) -> int:
        """Groups the open window still needs."""
        stats = self._session.step_stats
        return max(0, self._session.target_groups - stats.admitted - stats.fallback_admitted)

    def _arrived_stale(self, tokens: int, span: int | None, staleness: int) -> StreamVerdict:
        """A group older than ``max_staleness``: never judged, its tokens charged as aborted."""
        with self._lock:
            self._session.charge(tokens, kind="aborted")
            self._note(span)
            self._ledger = self._ledger.add(arrived_stale=1)
            return StreamVerdict(
                keep=False,
                decision=None,
                window=self.window,
                stale=True,
                staleness=staleness,
                version_span=span,
            )

    def _note(self, span: int | None) -> None:
        """A group arrived: the run of skips ends; its version span is counted."""
        self._ledger = attrs.evolve(self._ledger, skips_in_a_row=0)
        if span is not None:
            self._ledger = self._ledger.add(
                versioned_groups=1, version_span_total=span, version_span_max=span
            )

    def _close(self, *, exhausted: bool = False) -> StepReport:
        """Close the open window, open the next, and return the closed one's report."""
        report = self._session.end_step()
        if exhausted or report.exhausted:
            self._ledger = self._ledger.add(exhausted_windows=1)
        self._last_report = report
        self._session.begin_step(self._settings.window_groups)
        return report

    def _exhausted_message(self, report: StepReport) -> str:
        return (
            f"group admission ({self._session.host}): window {report.step} kept {report.kept_groups} of "
            f"{report.target_groups} groups after {report.generated_groups} generated groups, and its budget "
            "cannot afford another rejection. Raise 'budget.max_extra_groups' (now "
            f"{self._config.budget.max_extra_groups}), or set 'stream.on_exhausted: train' to keep "
            "rejected groups once a window is spent."
        )

    # -- reporting ---------------------------------------------------------------------------
    def metrics(self, prefix: str = "group_admission/") -> dict[str, int | float]:
        """
        The stream's metrics, as ints and floats.

        The last closed window's :meth:`StepReport.metrics` under ``window/``, the lifetime
        counts (:meth:`AdmissionStats.metrics`) and decoded tokens (:meth:`TokenTally.metrics`)
        under ``total/``, then ``skipped_prompts``, ``stale_groups``, ``exhausted_windows``,
        ``version_span_mean``, ``version_span_max``, ``trained_groups``, ``windows`` (closed
        windows) and ``loss_scale`` (the one the open window's groups get).
        """
        with self._lock:
            values: dict[str, int | float] = {}
            if self._last_report is not None:
                values.update(self._last_report.metrics(prefix=f"{prefix}window/"))
            values.update({f"{prefix}total/{name}": v for name, v in self._session.stats.metrics().items()})
            values.update(self._session.tokens.metrics(f"{prefix}total/"))
            values.update(self._ledger.metrics(prefix))
            values[f"{prefix}trained_groups"] = self.trained_groups()
            values[f"{prefix}windows"] = self.window
            values[f"{prefix}loss_scale"] = self.loss_scale
            return values

    # -- persistence -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot: the settings, the session (open window included), the history, the ledger."""
        with self._lock:
            return {
                "format": FORMAT,
                "version": VERSION,
                "config": self._config.to_dict(),
                "settings": self._settings.to_dict(),
                "session": self._session.state_dict(),
                "history": None if self._history is None else self._history.to_dict(),
                "ledger": self._ledger.to_dict(),
                "last_report": None if self._last_report is None else self._last_report.to_dict(),
            }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """
        Restore :meth:`state_dict` output exactly, or refuse it and change nothing.

        Raises:
            CheckpointError: the state is malformed, contradictory, or was saved under other
                settings, another admission setup, or with(out) a prompt history.
        """
        data = _FORMAT.read(state)
        for key, current in (("config", self._config.to_dict()), ("settings", self._settings.to_dict())):
            if not exactly_equal(data[key], current):
                _fail(
                    f"it was saved under different {key} ({describe(data[key])}); build the stream with them"
                )
        session = self._config.session(host=self._session.host)
        try:
            session.load_state_dict(data["session"])
        except CheckpointError as exc:
            _fail(f"'session': {exc}")
        if not session.step_open or session.target_groups != self._settings.window_groups:
            _fail(f"'session' must have a window of {self._settings.window_groups} groups open")
        history = self._restored_history(data["history"])
        try:
            ledger = StreamLedger.from_dict(data["ledger"])
        except CheckpointError as exc:
            _fail(str(exc))
        stats = session.stats
        kept = stats.admitted + stats.fallback_admitted
        if ledger.dropped_stale > kept:
            _fail(f"'ledger.dropped_stale' ({ledger.dropped_stale}) exceeds the groups kept ({kept})")
        if ledger.skips_in_a_row > self._settings.max_skips_in_a_row:
            _fail(f"'ledger.skips_in_a_row' ({ledger.skips_in_a_row}) exceeds 'max_skips_in_a_row'")
        if ledger.versioned_groups > stats.candidates + ledger.arrived_stale:
            _fail(f"'ledger.versioned_groups' ({ledger.versioned_groups}) exceeds the groups that arrived")
        report = _report(data["last_report"], session.step)
        with self._lock:
            self._session, self._history, self._ledger, self._last_report = session, history, ledger, report

    def _restored_history(self, saved: object) -> PromptHistory | None:
        if (saved is None) != (self._history is None):
            _fail(f"'history' must be {'null' if self._history is None else 'a prompt history state'}")
        if saved is None or self._history is None:
            return None
        try:
            history = PromptHistory.from_dict(saved)  # type: ignore[arg-type]
        except CheckpointError as exc:
            _fail(f"'history': {exc}")
        if history.config != self._history.config or history.rank != self._history.rank:
            _fail("'history' was saved under another prompt history config or rank")
        return history


def _written_as(value: object, annotation: Any) -> bool:
    """Whether ``value`` is what ``StepReport.to_dict`` writes for a field of this type (exactly)."""
    if typing.get_origin(annotation) is tuple:
        return isinstance(value, list)  # to_dict writes tuples as lists
    options = typing.get_args(annotation) or (annotation,)
    return any(type(value) is option for option in options)


def _report(value: object, window: int) -> StepReport | None:
    """The last closed window's report: ``None`` exactly before the first window closed."""
    if value is None:
        if window != 0:
            _fail(f"'last_report' must be the report of window {window - 1} (got None)")
        return None
    if not isinstance(value, Mapping):
        _fail(f"'last_report' must be a mapping from StepReport.to_dict() (got {describe(value)})")
    names = [field.name for field in attrs.fields(StepReport)]
    if sorted(value) != sorted(names) or not isinstance(value["limited_by"], list):
        _fail(f"'last_report' must have exactly the StepReport fields {names!r}")
    # get_type_hints, not attrs.resolve_types: that one rewrites the class's fields for everyone.
    for name, annotation in typing.get_type_hints(StepReport).items():
        if not _written_as(value[name], annotation):
            kind = getattr(annotation, "__name__", str(annotation))
            _fail(f"'last_report.{name}' must be of type {kind} (got {describe(value[name])})")
    report = StepReport(**{**value, "limited_by": tuple(value["limited_by"])})
    if not exactly_equal(report.to_dict(), dict(value)) or report.step != window - 1:
        _fail(f"'last_report' must be the written report of window {window - 1}")
    return report
