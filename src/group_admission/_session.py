"""
``AdmissionSession``: the admission loop, owned once by the core and run by every integration.

A session holds the policy, the counts, the budget state of the current step, the drop
limits and the failure streak behind one lock. Adapters translate host objects into
:meth:`AdmissionSession.judge` calls and write the verdicts back; the simulator and the
cookbook run the same object, so what they measure is what the hosts run. A
``SessionConfig`` is the whole setup as one value (``preset:`` blocks included, read in
``_presets``), which builds the session and its prompt history.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from ._budget import ResamplePlan, SamplingBudgetConfig, SamplingBudgetController
from ._config import GroupAdmissionConfig
from ._decision import BatchAdmissionResult, GroupAdmissionDecision
from ._drop_tracker import DropTracker
from ._exceptions import ConsecutiveFailedGroupsError
from ._history import PromptHistory, PromptId
from ._history_config import PromptHistoryConfig
from ._history_ids import check_prompt_ids
from ._limits import DropLimits, StepLabel, check_step_label
from ._loading import MappingConfig, coerce_config, coerce_instance, from_mapping
from ._loss_scale import DEFAULT_LOSS_SCALE, LOSS_SCALES, LossScale
from ._metrics import AdmissionStats
from ._plan_call import PlanCall
from ._policy import GroupAdmissionPolicy
from ._presets import PRESETS, as_budget, as_limits, as_policy, history_fields, with_preset
from ._prompt_plan import PromptPlan, plan_prompts
from ._session_state import SessionParts, restore_session, session_state
from ._session_types import AdmissionVerdict, BatchAdmissionVerdict, StepReport
from ._session_views import SessionViews
from ._step_book import StepBook
from ._streaming import StreamPlan
from ._tokens import CHARGE_KINDS, TokenTally
from ._validation import check_choice, check_count, check_one_of, describe

__all__ = ["AdmissionSession", "AdmissionVerdict", "BatchAdmissionVerdict", "SessionConfig", "StepReport"]


class AdmissionSession(SessionViews):
    """
    The admission loop: judge groups, count them, apply drop limits, plan resampling.

    One session serves one training run (or one worker of it). Every call is thread-safe.
    A step with a target runs::

        session.begin_step(target_groups=16)
        verdicts = session.judge_batch(rewards)           # the first round
        while (plan := session.plan(num_generations=8)).extra_groups:
            verdicts = session.judge_batch(sample(plan.extra_groups))
        report = session.end_step()                      # cost, surplus, exhaustion

    Hosts that launch groups one at a time call :meth:`judge` per group and ask
    :meth:`can_launch` before launching another. Hosts without a step target (a filter
    that only keeps or drops) call :meth:`judge` and never begin a step.

    Args:
        policy: The admission policy, or a config or mapping for one (``None``: admit
            every well-formed group).
        budget: The sampling budget: a controller, a :class:`SamplingBudgetConfig` or a
            mapping (``None``: no resampling, so a short step is exhausted at once).
        limits: The drop limits (:class:`DropLimits` or a mapping; ``None``: none).
        host: The host's name, used in error messages.
        loss_scale: How :attr:`StepReport.loss_scale` scales a step's loss after
            admission: ``"target"`` (default: a constant normaliser, the loss a full target
            would have), ``"kept"``, ``"linear"`` or ``"sqrt"`` (see :func:`loss_scale`).

    .. versionadded:: 0.2.0
    """

    def __init__(
        self,
        policy: GroupAdmissionPolicy | GroupAdmissionConfig | Mapping[str, Any] | None = None,
        *,
        budget: SamplingBudgetController | SamplingBudgetConfig | Mapping[str, Any] | None = None,
        limits: DropLimits | Mapping[str, Any] | None = None,
        host: str = "host",
        loss_scale: LossScale = DEFAULT_LOSS_SCALE,
    ) -> None:
        if not isinstance(host, str):
            msg = f"'host' must be a string (got {describe(host)})"
            raise TypeError(msg)
        self._loss_scale: LossScale = check_choice(loss_scale, "loss_scale", LOSS_SCALES)  # type: ignore[assignment]
        self._policy = coerce_instance(policy, GroupAdmissionPolicy, GroupAdmissionConfig, name="policy")
        self._controller = coerce_instance(
            budget, SamplingBudgetController, SamplingBudgetConfig, name="budget"
        )
        self._limits = coerce_config(DropLimits, limits, name="limits")
        self._host = host
        self._lock = threading.RLock()
        self._restore(
            SessionParts(
                stats=AdmissionStats(), drops=DropTracker(self._limits), book=StepBook(), tokens=TokenTally()
            )
        )

    def _restore(self, parts: SessionParts) -> None:
        """Set a checkpoint's parts by name, never from its keys, so a renamed field fails a test."""
        self._stats = parts.stats
        self._drops = parts.drops
        self._book = parts.book
        self._tokens = parts.tokens

    # -- judging -------------------------------------------------------------------
    def judge(
        self,
        rewards: Any,
        completions: Sequence[str | None] | None = None,
        *,
        external_reasons: Sequence[str] | str = (),
        rollout_ids: Sequence[Hashable] | None = None,
        group_key: Hashable | None = None,
        generated_tokens: int = 0,
        step: StepLabel = None,
    ) -> AdmissionVerdict:
        """
        Judge one group, count it, and apply the drop limits.

        The arguments before ``generated_tokens`` are those of
        :meth:`GroupAdmissionPolicy.evaluate`. ``generated_tokens`` feeds the token cap;
        ``step`` labels the training step for step-scoped limits (default: the session's
        current step). A group judged while no step is open counts in :attr:`stats` and
        the drop limits only, never in a step.

        Raises:
            ConsecutiveFailedGroupsError: this group made the streak of dropped external
                rejections reach ``limits.max_consecutive_failed_groups``.
        """
        decision = self._policy.evaluate(
            rewards,
            completions,
            external_reasons=external_reasons,
            rollout_ids=rollout_ids,
            group_key=group_key,
        )
        return self.record(decision, generated_tokens=generated_tokens, step=step)

    def record(
        self,
        decision: GroupAdmissionDecision,
        *,
        samples: int | None = None,
        generated_tokens: int = 0,
        step: StepLabel = None,
    ) -> AdmissionVerdict:
        """
        Count a decision taken elsewhere and apply the drop limits, as :meth:`judge` does.

        For hosts whose own rules amend the policy's decision before it counts.
        ``samples`` is the group's generated samples (default: its size).
        """
        if not isinstance(decision, GroupAdmissionDecision):
            msg = f"'decision' must be a GroupAdmissionDecision (got {describe(decision)})"
            raise TypeError(msg)
        size = decision.group_size if samples is None else check_count(samples, "samples", 1)
        tokens = check_count(generated_tokens, "generated_tokens")
        label = check_step_label(step)
        with self._lock:
            keep, fallback = self._drops.apply(decision, self._book.index if label is None else label)
            self._stats.add(decision, fallback_admitted=fallback)
            self._book.count(decision, size, tokens, fallback=fallback)
            self._tokens = self._tokens.add("generated", tokens)
            failure = self._drops.note_outcome(decision, dropped=not keep, host=self._host)
        if failure is not None:
            raise ConsecutiveFailedGroupsError(failure)
        return AdmissionVerdict(keep=keep, decision=decision, fallback_admitted=fallback)

    def record_fallback(self, count: int = 1) -> None:
        """
        Count rejected groups that the host trained on anyway by a rule of its own.

        For host-side fallbacks the session cannot see (slime's
        ``keep_when_insufficient``); the session's own drop limits count theirs. Outside
        a step they count in :attr:`stats` only.

        Raises:
            ValueError: this would count more fallbacks than this step's rejections.
        """
        with self._lock:
            # The step's counts are a part of the lifetime's: checking them first keeps both in step.
            self._book.count_fallback(count)
            self._stats.record_fallback(count)

    def charge(self, tokens: int, *, kind: str) -> None:
        """
        Count tokens decoded outside a judged group, in the step that decoded them.

        ``kind`` is ``"aborted"`` (a group stopped and discarded before it was judged),
        ``"carried"`` (an unfinished group a host with partial rollout resumes later: judge
        it then with only the tokens decoded in that step) or ``"pilot"`` (pilot members of
        a group that was not completed). They appear in :attr:`StepReport.decoded_tokens`
        and :attr:`tokens`; the caps and the rate estimate count judged groups only. Outside
        a step they count in :attr:`tokens` only.

        Raises:
            ValueError: ``kind`` is not one of them, or ``tokens`` is negative.
            TypeError: ``tokens`` is not an integer.

        .. versionadded:: 0.2.0
        """
        kind = check_choice(kind, "kind", CHARGE_KINDS)
        tokens = check_count(tokens, "tokens")
        with self._lock:
            self._book.charge(kind, tokens)
            self._tokens = self._tokens.add(kind, tokens)

    def judge_batch(
        self,
        rewards: Any,
        completions: Sequence[Sequence[str | None]] | None = None,
        *,
        external_reasons: Sequence[Sequence[str] | str] | None = None,
        rollout_ids: Any = None,
        group_keys: Sequence[Hashable] | None = None,
        generated_tokens: int = 0,
        step: StepLabel = None,
    ) -> BatchAdmissionVerdict:
        """
        Judge G groups of N members at once (see :meth:`GroupAdmissionPolicy.evaluate_batch`).

        Counting is vectorised; with drop limits or a failure streak the limits are
        applied group by group, in order, exactly as :meth:`judge` applies them.
        ``generated_tokens`` is the whole batch's.
        """
        result = self._policy.evaluate_batch(
            rewards,
            completions,
            external_reasons=external_reasons,
            rollout_ids=rollout_ids,
            group_keys=group_keys,
        )
        tokens = check_count(generated_tokens, "generated_tokens")
        label = check_step_label(step)
        if self._limits.caps_drops or self._limits.max_consecutive_failed_groups is not None:
            return self._judge_rows(result, tokens, label)
        with self._lock:
            self._stats.add_many(result)
            self._book.count(result, len(result) * result.group_size, tokens)
            self._tokens = self._tokens.add("generated", tokens)
            self._drops.extend_streak(result)
        keep = result.admitted
        return BatchAdmissionVerdict(
            keep=keep, fallback_admitted=np.zeros(len(result), dtype=bool), result=result
        )

    def _judge_rows(
        self, result: BatchAdmissionResult, tokens: int, label: StepLabel
    ) -> BatchAdmissionVerdict:
        keep = np.zeros(len(result), dtype=bool)
        fallback = np.zeros(len(result), dtype=bool)
        for row in range(len(result)):
            row_tokens = tokens if row == len(result) - 1 else 0  # the batch's tokens, counted once
            verdict = self.record(result.decision(row), generated_tokens=row_tokens, step=label)
            keep[row], fallback[row] = verdict.keep, verdict.fallback_admitted
        return BatchAdmissionVerdict(keep=keep, fallback_admitted=fallback, result=result)

    # -- the step ------------------------------------------------------------------
    def begin_step(self, target_groups: int) -> None:
        """
        Start a step that needs ``target_groups`` kept groups.

        The budget state starts afresh but keeps the rate estimate of the previous step.

        Raises:
            StepLifecycleError: a step is open: end it first (:meth:`end_step` returns
                its report).

        .. versionchanged:: 0.2.0
            An open step is an error; it used to be ended silently, its report discarded.
        """
        target = check_count(target_groups, "target_groups")
        with self._lock:
            self._book.begin(target, self._controller)

    def plan(
        self, num_generations: int | None = None, *, estimated_tokens_per_group: float | None = None
    ) -> ResamplePlan:
        """
        Close the round in progress and plan the next one towards the step's target.

        Args:
            num_generations: Samples per group of the next round (default: the mean
                group size seen this step, rounded up).
            estimated_tokens_per_group: An upper bound of tokens per group, which makes
                the token cap hard (default: the observed mean).

        Raises:
            StepLifecycleError: no step is open.
        """
        with self._lock:
            self._book.require("plan")
            return self._book.plan_round(self._controller, num_generations, estimated_tokens_per_group)

    def can_launch(
        self,
        groups: int = 1,
        *,
        in_flight: int = 0,
        num_generations: int | None = None,
        estimated_tokens_per_group: float | None = None,
    ) -> bool:
        """
        Whether ``groups`` more groups fit under the caps, beside ``in_flight`` already launched.

        Groups judged since the last :meth:`plan` belong to the round in progress, and so
        do the new ones; with no round in progress they open one (the round cap applies).

        Raises:
            StepLifecycleError: no step is open.
        """
        wanted = check_count(groups, "groups", 1) + check_count(in_flight, "in_flight")
        with self._lock:
            self._book.require("can_launch")
            return self._book.can_launch(
                self._controller, wanted, num_generations, estimated_tokens_per_group
            )

    def stream_plan(
        self,
        in_flight: int = 0,
        *,
        num_generations: int | None = None,
        confidence: float | None = None,
        top_up_below: float = 0.5,
        race: float = 1.0,
        estimated_tokens_per_group: float | None = None,
    ) -> StreamPlan:
        """
        For hosts that launch groups asynchronously: launch, abort, or wait (see :func:`plan_stream`).

        Groups judged this step count as finished; ``in_flight`` are launched and not
        finished, including groups a host with partial rollout carried from the last step
        (instead of aborting what its ``abort`` named). A streaming step is one round: the
        carried rate stays until :meth:`end_step` folds the step. Loop ``while not plan.done``.

        Raises:
            StepLifecycleError: no step is open.

        .. versionadded:: 0.2.0
        """
        with self._lock:
            self._book.require("stream_plan")
            call = PlanCall(
                kind="stream",
                judged=self._book.stats.candidates,
                num_generations=num_generations,
                estimated_tokens_per_group=estimated_tokens_per_group,
                in_flight=in_flight,
                confidence=confidence,
                top_up_below=top_up_below,
                race=race,
            )
            return self._book.plan_stream(call, self._controller)

    def pick_prompts(
        self,
        history: PromptHistory,
        prompt_ids: Sequence[PromptId],
        *,
        num_generations: int | None = None,
        estimated_tokens_per_group: float | None = None,
    ) -> PromptPlan:
        """
        Close the round in progress; pick prompts with ``history`` and size the next round by them.

        Like :meth:`plan`, with per-prompt informative probabilities for one batch rate
        (:func:`plan_prompts`); the history picks at :attr:`step`: observe with that step.

        Raises:
            StepLifecycleError: no step is open.
            TypeError, ValueError: an entry of ``prompt_ids`` is no prompt id (see
                :class:`PromptHistory`) or a size is refused; the round in progress is left open.

        .. versionadded:: 0.2.0
        """
        ids = check_prompt_ids(prompt_ids)  # ids and sizes before the round closes: a refusal changes nothing
        with self._lock:
            book = self._book
            book.require("pick_prompts")
            call = book.round_call(num_generations, estimated_tokens_per_group)
            size = book.group_size(call.num_generations)
            plan = plan_prompts(
                self._controller,
                book.fold_round(self._controller),
                history,
                ids,
                step=book.index,
                target_groups=book.target,
                num_generations=size,
                estimated_tokens_per_group=call.estimated_tokens_per_group,
            )
            book.call = call
            return plan

    def end_step(self) -> StepReport:
        """
        Close the step: fold the last round and report what it cost and kept.

        ``exhausted`` and ``limited_by`` are those of the last planner the host called
        (:meth:`plan`, :meth:`can_launch`, :meth:`pick_prompts`: rounds; :meth:`stream_plan`:
        a stream), asked again with its arguments on the final counts (with nothing in
        flight if groups finished since); a step never planned asks the round planner.

        Raises:
            StepLifecycleError: no step is open.

        .. versionchanged:: 0.2.0
            It used to ask the round planner, without ``estimated_tokens_per_group``.
        """
        with self._lock:
            self._book.require("end_step")
            return self._book.end(self._controller, self._loss_scale)

    # -- persistence and distribution ---------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """
        A JSON-safe snapshot of everything that shapes later verdicts and plans.

        It includes the configuration, so that :meth:`load_state_dict` can refuse a
        state saved under different settings.
        """
        with self._lock:
            parts = SessionParts(stats=self._stats, drops=self._drops, book=self._book, tokens=self._tokens)
            return session_state(self._config(), parts)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """
        Restore :meth:`state_dict` output exactly, or refuse it.

        Raises:
            CheckpointError: the state is malformed, contradictory, or was saved under a
                different policy, budget or limits configuration. The session is left
                unchanged.
        """
        parts = restore_session(state, self._config(), self._limits)
        with self._lock:
            self._restore(parts)


@attrs.frozen(kw_only=True)
class SessionConfig(MappingConfig):
    """
    A whole admission setup: policy, budget, drop limits, prompt history and loss scale.

    Args:
        policy: The :class:`GroupAdmissionConfig` (or a mapping of its fields).
        budget: The :class:`SamplingBudgetConfig` (or a mapping).
        limits: The :class:`DropLimits` (or a mapping).
        history: :class:`PromptHistoryConfig` fields without ``group_size`` (``None``: no
            prompt history, so no skipping).
        loss_scale: The session's loss-scale mode (see :func:`loss_scale`).

    Build a named configuration with :meth:`preset`, or from a mapping or YAML block
    whose ``preset`` key names one (the other keys override its sections field by field).

    .. versionadded:: 0.2.0
    """

    policy: GroupAdmissionConfig = attrs.field(factory=GroupAdmissionConfig, converter=as_policy)
    budget: SamplingBudgetConfig = attrs.field(factory=SamplingBudgetConfig, converter=as_budget)
    limits: DropLimits = attrs.field(factory=DropLimits, converter=as_limits)
    history: Mapping[str, Any] | None = attrs.field(default=None, converter=history_fields)
    loss_scale: LossScale = attrs.field(default=DEFAULT_LOSS_SCALE, validator=check_one_of(LOSS_SCALES))
    #: The named configurations :meth:`preset` and ``preset:`` start from.
    PRESETS: ClassVar[Mapping[str, Mapping[str, Any]]] = PRESETS

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> SessionConfig:
        """
        The configuration ``name`` of :data:`PRESETS`, with ``overrides`` (sections as mappings).

        ``SessionConfig.preset("recommended", policy={"gate_on": ["accuracy"]})``.

        Raises:
            ValueError: ``name`` is no preset, or an override is invalid.
            TypeError: an override has the wrong type.
        """
        return cls.from_mapping({"preset": name, **overrides})

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> SessionConfig:
        """
        Build from a mapping of the fields, or ``preset`` plus overrides, rejecting unknown keys.

        Raises:
            ValueError: a key is unknown, the preset is not one of :data:`PRESETS`, or a value
                is out of range.
            TypeError: a value has the wrong type.
        """
        return from_mapping(cls, with_preset(mapping), source="SessionConfig mapping")

    def session(self, *, host: str = "host") -> AdmissionSession:
        """A new :class:`AdmissionSession` with this policy, budget, limits and loss scale."""
        return AdmissionSession(
            self.policy, budget=self.budget, limits=self.limits, host=host, loss_scale=self.loss_scale
        )

    def prompt_history(self, group_size: int, *, seed: int = 0, rank: int = 0) -> PromptHistory | None:
        """
        A new :class:`PromptHistory` for groups of ``group_size`` (``None`` without ``history``).

        ``seed`` seeds its picks unless the ``history`` section sets one.
        """
        if self.history is None:
            return None
        fields = {"seed": seed, **self.history, "group_size": check_count(group_size, "group_size", 1)}
        return PromptHistory(PromptHistoryConfig.from_mapping(fields), rank=rank)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain, YAML- and JSON-safe types."""
        return {
            "policy": self.policy.to_dict(),
            "budget": self.budget.to_dict(),
            "limits": self.limits.to_dict(),
            "history": None if self.history is None else dict(self.history),
            "loss_scale": self.loss_scale,
        }
