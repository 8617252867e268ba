"""
The adapter runtime: one admission loop per configuration, report windows, and reading host data.

An adapter translates; this module owns what adapters would otherwise each rebuild:

- :class:`AdapterSession`: the one way to hold a session. One configuration's
  :class:`AdmissionSession` (built from the settings, or given), its :class:`ReportWindow`,
  ``last_report``, a lock for the host's own per-configuration state, and
  :meth:`~AdapterSession.warn_once`. Subclass it to add that state.
- :class:`SessionRegistry`: for hosts that load a function by import path and call it with
  their config (slime, ROLL's RLVR loop), and for OpenRLHF's generator (one per trainer
  actor, its settings read from the environment): one :class:`AdapterSession` per distinct
  settings mapping, built on first use, for the life of the process; ``reset()`` forgets them.
- :class:`HoldsAdmission`: for hook objects a host builds with their settings (the
  Challenger's hand-off, RAGEN's filter, twinkle's step): they hold an
  :class:`AdapterSession` as ``admission`` and show ``session``, ``policy``, ``stats``,
  ``last_report``.
- :class:`ReportWindow`: for hosts that report counts in batches (slime once per rollout,
  ROLL on each kept group): the counts judged since the last report under their metric
  names, plus the session's ``cumulative_effective_group_rate``.
- Reading helpers: :func:`scalar_reward`, :class:`GroupInput` (the one way to judge a
  group a host translated), :func:`chunk`, and the settings fields and coercers every
  adapter's settings class uses (``_settings``, where :func:`settings_from` also reads a
  :class:`SessionConfig` block, ``preset: recommended``, into them).

A step is ``with runtime.step(target) as step:`` (:func:`~._step.admission_step`, which
also keeps ``last_report``); every host logs it with the one step vocabulary
(:func:`~._step.step_metrics`), slime's per-rollout window aside::

    _SESSIONS: SessionRegistry[AdapterSession[MySettings]] = SessionRegistry()

    def generate(config, prompts):                          # the host's entry point
        runtime = _SESSIONS.get(config, lambda: AdapterSession(MySettings.from_mapping(config), host="my"))
        with runtime.step(len(prompts)) as step:
            plan = ...                                      # judge groups, session.plan(...)
        return step_metrics(runtime.session, step.report, effective_rate=plan.effective_rate)
"""

from __future__ import annotations

import contextlib
import math
import numbers
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

import attrs

from ..._budget import SamplingBudgetConfig
from ..._config import GroupAdmissionConfig
from ..._decision import GroupAdmissionDecision
from ..._exceptions import StepLifecycleError
from ..._limits import DropLimits
from ..._loss_scale import DEFAULT_LOSS_SCALE, LossScale
from ..._metrics import AdmissionStats
from ..._policy import GroupAdmissionPolicy
from ..._reasons import CUMULATIVE_EFFECTIVE_GROUP_RATE
from ..._session import AdmissionSession, AdmissionVerdict, SessionConfig, StepReport
from ..._tokens import TOKEN_KINDS, TokenTally
from ._settings import settings_key
from ._step import OpenStep, admission_step

R = TypeVar("R")

#: The external reason of a group with a row whose reward the host trains on is not finite in
#: the dtype it trains in (twinkle's, TRL's and verl's sums are float32), although the gated
#: values are: the host would compute NaN advantages.
UNSUMMABLE_REWARD = "unsummable_reward"
#: The external reason of a group of another size than the host's group size: hosts that view
#: their rewards as groups of exactly that size (OpenRLHF, twinkle) must not receive it.
WRONG_GROUP_SIZE = "wrong_group_size"


class AdapterSettings(Protocol):
    """
    What an adapter's settings give the runtime: the policy's config and the drop limits.

    Settings of an adapter that resamples also have a ``budget`` (a
    :class:`SamplingBudgetConfig`); :class:`AdapterSession` passes it to the session.
    """

    @property
    def policy(self) -> GroupAdmissionConfig:
        """The policy's config."""

    @property
    def limits(self) -> DropLimits:
        """The session's drop limits."""


S = TypeVar("S")
A = TypeVar("A", bound="AdapterSession[Any]")


class ReportWindow:
    """
    The counts of a session that the host has not been told yet.

    Each :meth:`close` reports the counts judged since the previous one, so that what the
    host sums over reports equals the session's counts, whatever it does with each report.
    """

    def __init__(self, session: AdmissionSession) -> None:
        self._session = session
        self._reported = AdmissionStats()
        self._tokens = TokenTally()
        self._lock = threading.Lock()

    def pending(self) -> AdmissionStats:
        """The counts judged since the last report (the window stays open)."""
        return self._session.stats.difference(self._reported)

    def close(
        self, prefix: str = "", *, count_suffix: str = "", rates: bool = True
    ) -> dict[str, int | float]:
        """
        Close the window and open the next: its counts under metric names, and the lifetime rate.

        Args:
            prefix: Put before every name (``"rollout/group_admission/"``).
            count_suffix: Put after the names of counts (ROLL's ``"@sum"`` reducer).
            rates: Also give the window's own ``effective_group_rate`` (a host that sums
                the values of several reports has no use for it).

        Returns:
            The :meth:`AdmissionStats.metrics` counts of the window, the tokens decoded in
            it (:meth:`TokenTally.metrics`: ``decoded_tokens`` and the charged kinds), and
            ``cumulative_effective_group_rate``: admitted / judged over the session's life.
        """
        with self._lock:
            total, tokens = self._session.stats, self._session.tokens
            window, self._reported = total.difference(self._reported), total
            decoded = TokenTally(
                **{kind: getattr(tokens, kind) - getattr(self._tokens, kind) for kind in TOKEN_KINDS}
            )
            self._tokens = tokens
        values = {**window.metrics(), **decoded.metrics()}
        metrics: dict[str, int | float] = {
            f"{prefix}{name}{count_suffix if isinstance(value, int) else ''}": value
            for name, value in values.items()
            if rates or isinstance(value, int)
        }
        metrics[f"{prefix}{CUMULATIVE_EFFECTIVE_GROUP_RATE}"] = total.effective_group_rate
        return metrics


class AdapterSession(Generic[S]):
    """
    One configuration's admission loop in an adapter: settings, session, report window, last report.

    The one way an adapter holds a session. Hosts that call a function with their config
    keep one per configuration in a :class:`SessionRegistry`; hook objects a host builds
    hold one as ``self.admission`` and show it through :class:`HoldsAdmission`.

    Args:
        settings: The adapter's settings. Unless ``session`` is given, the session is built
            from them: a :class:`SessionConfig` builds it with :meth:`SessionConfig.session`;
            any other settings give ``policy`` and ``limits``, and optionally ``budget``
            and ``loss_scale``.
        host: The host's name, for the session's messages.
        session: A session built by the adapter (from a policy object, a controller...).
        budget: Overrides the settings' ``budget``.
        loss_scale: Overrides the settings' ``loss_scale``.

    Attributes:
        settings: The adapter's settings.
        session: The :class:`AdmissionSession` that judges, counts and plans.
        window: The :class:`ReportWindow` over ``session``.
        lock: Guards the host state a subclass adds (one configuration may be called
            from several threads).
        last_report: The :class:`StepReport` of the latest step :meth:`step` ended
            (``None`` before one).
    """

    def __init__(
        self,
        settings: S,
        *,
        host: str,
        session: AdmissionSession | None = None,
        budget: SamplingBudgetConfig | None = None,
        loss_scale: LossScale | None = None,
    ) -> None:
        self.settings = settings
        self.session = session if session is not None else _build_session(settings, host, budget, loss_scale)
        self.window = ReportWindow(self.session)
        self.lock = threading.RLock()
        self.last_report: StepReport | None = None
        self._warned: set[str] = set()

    @property
    def stats(self) -> AdmissionStats:
        """A copy of the admission counts over the session's life."""
        return self.session.stats

    @property
    def texts(self) -> bool:
        """Whether the policy reads completions (its redundancy gate is on)."""
        return self.session.policy.config.similarity_gate_enabled

    @contextlib.contextmanager
    def step(self, target_groups: int) -> Iterator[OpenStep]:
        """:func:`admission_step` on :attr:`session`, keeping its report as :attr:`last_report`."""
        opened: OpenStep | None = None
        try:
            with admission_step(self.session, target_groups) as opened:
                yield opened
        finally:
            if opened is not None:
                with contextlib.suppress(StepLifecycleError):  # ending it failed: no report
                    self.last_report = opened.report

    def warn_once(self, key: str) -> bool:
        """True the first time ``key`` is asked: for a warning or log line given once per configuration."""
        with self.lock:
            first = key not in self._warned
            self._warned.add(key)
        return first


def _build_session(
    settings: Any, host: str, budget: SamplingBudgetConfig | None, loss_scale: LossScale | None
) -> AdmissionSession:
    if isinstance(settings, SessionConfig):
        return settings.session(host=host)
    scale: LossScale = (
        getattr(settings, "loss_scale", DEFAULT_LOSS_SCALE) if loss_scale is None else loss_scale
    )
    return AdmissionSession(
        settings.policy,
        budget=getattr(settings, "budget", None) if budget is None else budget,
        limits=settings.limits,
        host=host,
        loss_scale=scale,
    )


class HoldsAdmission:
    """
    A hook object a host builds, holding its :class:`AdapterSession` as ``admission``.

    Shows the session, its policy, its counts and the last step's report; set
    ``self.admission`` in ``__init__``.
    """

    admission: AdapterSession[Any]

    @property
    def session(self) -> AdmissionSession:
        """The session that judges, counts and plans."""
        return self.admission.session

    @property
    def policy(self) -> GroupAdmissionPolicy:
        """The admission policy."""
        return self.admission.session.policy

    @property
    def stats(self) -> AdmissionStats:
        """A copy of the admission counts over the object's life."""
        return self.admission.stats

    @property
    def last_report(self) -> StepReport | None:
        """The :class:`StepReport` of the latest step that ended (``None`` before one)."""
        return self.admission.last_report


class SessionRegistry(Generic[A]):
    """
    An adapter's sessions for hosts that call a module function with their config: one per configuration.

    ``get(raw, build)`` returns the session of the raw settings mapping ``raw`` (compared
    by its canonical JSON), calling ``build()`` on first use; ``scope`` separates
    configurations that share settings but not counts (ROLL's reward domains).

    Args:
        on_reset: Also run by :meth:`reset` (to forget what the adapter detected of its host).
    """

    def __init__(self, on_reset: Callable[[], None] | None = None) -> None:
        self._sessions: dict[tuple[str, str], A] = {}
        self._on_reset = on_reset

    def get(self, raw: Any, build: Callable[[], A], *, scope: str = "") -> A:
        """The session of ``raw`` in ``scope``, built by ``build`` on first use."""
        key = (scope, settings_key(raw))
        # dict operations are atomic: two first calls may both build, and one session wins.
        found = self._sessions.get(key)
        return found if found is not None else self._sessions.setdefault(key, build())

    def sessions(self, scope: str | None = None) -> list[A]:
        """The sessions built so far (of ``scope``, when given)."""
        return [found for (where, _), found in list(self._sessions.items()) if scope in (None, where)]

    def stats(self, scope: str | None = None) -> AdmissionStats:
        """The counts of every session (of ``scope``, when given), merged."""
        total = AdmissionStats()
        for found in self.sessions(scope):
            total = total.merge(found.session.stats)
        return total

    def reset(self) -> None:
        """Forget every session and its counts (for tests and notebooks)."""
        self._sessions.clear()
        if self._on_reset is not None:
            self._on_reset()


def chunk(values: Sequence[R], size: int) -> list[list[R]]:
    """``values`` cut into consecutive lists of ``size``, rows into groups (the length is a multiple)."""
    return [list(values[start : start + size]) for start in range(0, len(values), size)]


def scalar_reward(value: Any) -> tuple[float | None, str | None]:
    """
    Read one reward as a float: ``(value, None)``, or ``(None, detail)`` when it is unusable.

    ``None`` reads as ``(None, None)`` (the policy reports ``missing_reward``); non-finite
    numbers and ints too large for a float (as infinities) pass for the policy to reject.
    """
    if value is None:
        return None, None
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
        value = value.item()  # a 0-d tensor or array holds one number
    if isinstance(value, numbers.Real):
        try:
            return float(value), None
        except OverflowError:
            return (-math.inf if value < 0 else math.inf), None
    if isinstance(value, Mapping):
        return None, "dict_reward_without_key"
    if isinstance(value, (str, bytes)) or not (hasattr(value, "__len__") or hasattr(value, "ndim")):
        return None, "non_numeric_reward"
    return None, "non_scalar_reward"


@attrs.define
class GroupInput:
    """One group translated for the policy: a reward, completion and rollout id per member, and problems."""

    group_key: Hashable | None = None
    #: The tokens the group decoded, counted with it when it is judged.
    tokens: int = 0
    rewards: list[float | None] = attrs.Factory(list)
    completions: list[str | None] = attrs.Factory(list)
    rollout_ids: list[Hashable] = attrs.Factory(list)
    external: list[str] = attrs.Factory(list)

    def add(self, reward: float | None, completion: str | None, rollout_id: Hashable) -> None:
        """Add one member."""
        self.rewards.append(reward)
        self.completions.append(completion)
        self.rollout_ids.append(rollout_id)

    def reject(self, detail: str, rollout_id: Hashable) -> None:
        """Add a member that has no usable data, and name why."""
        self.external.append(detail)
        self.add(None, None, rollout_id)

    def evaluate(self, policy: GroupAdmissionPolicy) -> GroupAdmissionDecision:
        """The policy's decision on this group, counted nowhere (for a host that records it later)."""
        return policy.evaluate(
            self.rewards,
            self.completions if policy.config.similarity_gate_enabled else None,
            external_reasons=self.external,
            rollout_ids=self.rollout_ids,
            group_key=self.group_key,
        )

    def judge(self, session: AdmissionSession, *, step: int | str | None = None) -> AdmissionVerdict:
        """The session's verdict on this group (:meth:`AdmissionSession.judge`): counted, limits applied."""
        return session.judge(
            self.rewards,
            self.completions if session.policy.config.similarity_gate_enabled else None,
            external_reasons=self.external,
            rollout_ids=self.rollout_ids,
            group_key=self.group_key,
            generated_tokens=self.tokens,
            step=step,
        )
