"""The Challenger's group hand-off (one ``_complete``: both sides' complete groups), judged by a session."""

from __future__ import annotations

import contextlib
import inspect
import math
import numbers
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import attrs
import numpy as np

from ... import (
    AdmissionSession,
    AdmissionVerdict,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    RejectionReason,
    ResamplePlan,
    SamplingBudgetConfig,
    SamplingBudgetController,
    SamplingBudgetState,
    SessionConfig,
    StepLifecycleError,
    StepReport,
)
from .._kit import (
    AdapterSession,
    HoldsAdmission,
    check_count,
    check_versions,
    coerce_instance,
    describe,
    host_versions,
    unpack_block,
)

#: The twinkle version the adapter is written and tested against: the Challenger of pull
#: request #288, whose commit ``28a4fc57`` adds the ``_admitted_groups`` hook (a base
#: without it works as well). No twinkle-kit release has that Challenger (0.5.1 does not).
SUPPORTED_VERSIONS = host_versions({"twinkle-kit": "modelscope/twinkle@28a4fc57"})
#: The failed-check name of a group the Challenger's own spread check dropped after admission.
CHECK_CHALLENGER_SPREAD = "challenger_spread_check"
#: The external reason of a trajectory whose ``rewards`` value is not a number.
NON_NUMERIC_REWARD = "non_numeric_reward"

Trajectory = Mapping[str, Any]
Group = Sequence[Trajectory]


def last_assistant_text(trajectory: Trajectory) -> str | None:
    """
    The content of the trajectory's last assistant message (twinkle's ``assistant_text``).

    Returns ``None`` when there is no assistant message (a missing completion for the
    redundancy gate), ``""`` for one without content; content given as parts is joined.

    Raises:
        TypeError: ``trajectory`` is not a mapping.

    .. versionadded:: 0.1.0
    """
    if not isinstance(trajectory, Mapping):
        msg = f"'trajectory' must be a trajectory dict (got {describe(trajectory)})"
        raise TypeError(msg)
    messages = trajectory.get("messages")
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        return None
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
            return "" if content is None else str(content)
    return None


def _reward(value: Any) -> tuple[float | None, bool]:
    """A member's reward (``None`` when missing) and whether the value was a number at all."""
    if value is None:
        return None, True
    try:
        if isinstance(value, (str, bytes)) or np.ndim(value):  # text, or an array of several values
            return math.nan, False
        return float(value), True
    except OverflowError:  # an int or a fraction beyond the float range: a non-finite reward
        return (math.inf if value > 0 else -math.inf), True
    except (TypeError, ValueError):
        return math.nan, False


def _check_groups(groups: Any) -> list[Group]:
    if isinstance(groups, (str, bytes, Mapping)) or not isinstance(groups, Sequence):
        msg = f"'groups' must be a list of groups (lists of trajectory dicts) (got {describe(groups)})"
        raise TypeError(msg)
    for index, group in enumerate(groups):
        if isinstance(group, (str, bytes, Mapping)) or not isinstance(group, Sequence):
            msg = f"'groups' entry {index} must be a list of trajectory dicts (got {describe(group)})"
            raise TypeError(msg)
        if not group:
            msg = f"'groups' entry {index} must hold at least one trajectory (got an empty group)"
            raise ValueError(msg)
        for member in group:
            if not isinstance(member, Mapping):
                msg = f"'groups' entry {index} must hold trajectory dicts (got {describe(member)})"
                raise TypeError(msg)
    return list(groups)


class ChallengerAdmission(HoldsAdmission):
    """
    The Challenger's group hand-off hook: admission per complete group, plus a batch budget.

    :meth:`admitted_groups` judges one side's groups and counts each rejected one in the
    Challenger's ``Counter``; with a budget, each :meth:`hand_off` is one round of the
    batch's step, bracketed by :meth:`begin_batch` and :meth:`end_batch`.

    Args:
        policy: The admission policy (or a config / mapping for one; ``None`` admits every
            group with finite rewards), or a whole :class:`SessionConfig` block
            (``{"preset": "recommended"}``): its policy, limits, loss scale and, when it
            resamples, budget.
        budget: The sampling budget (a controller, config or mapping), or ``None``.
            ``max_resample_rounds`` (>= 1) bounds the hand-offs per batch after the first.
        tokens_of: Returns the generated tokens of one trajectory; required when the
            budget caps tokens.

    Raises:
        TypeError, ValueError: an argument is invalid; the message names it.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        policy: GroupAdmissionPolicy | GroupAdmissionConfig | SessionConfig | Mapping[str, Any] | None = None,
        *,
        budget: SamplingBudgetController | SamplingBudgetConfig | Mapping[str, Any] | None = None,
        tokens_of: Callable[[Trajectory], int] | None = None,
    ) -> None:
        policy, budget, limits, loss_scale = unpack_block(policy, budget=budget)
        # Named as the Challenger's keyword (GroupAdmissionChallengerMixin) names it.
        judge = coerce_instance(
            policy, GroupAdmissionPolicy, GroupAdmissionConfig, name="group_admission_policy"
        )
        if tokens_of is not None and not callable(tokens_of):
            msg = f"'tokens_of' must be a callable tokens_of(trajectory) -> int (got {describe(tokens_of)})"
            raise TypeError(msg)
        session = AdmissionSession(
            judge, budget=budget, limits=limits, host="twinkle Challenger", loss_scale=loss_scale
        )
        self.admission = AdapterSession(None, host="twinkle Challenger", session=session)
        self._budgeted = budget is not None
        config = self.session.controller.config
        if self._budgeted and config.max_total_tokens is not None and tokens_of is None:
            msg = (
                "'tokens_of' is required when the budget caps tokens "
                f"(max_total_tokens={config.max_total_tokens})"
            )
            raise ValueError(msg)
        if self._budgeted and config.max_resample_rounds == 0:
            msg = (
                "'max_resample_rounds' must be >= 1 for the Challenger (got 0): every hand-off "
                "after the first is a resample round, so 0 would stop the batch after one unit; "
                "use a large value to cap only samples, tokens and extra groups"
            )
            raise ValueError(msg)
        self._tokens_of = tokens_of
        self._lock = threading.RLock()
        self._depth = 0  # nesting of hand_off() on the thread that holds the lock
        self._largest = 0  # the largest group of the hand-off in progress
        self._room = True
        self._stopped = False

    @property
    def controller(self) -> SamplingBudgetController | None:
        """The budget controller, or ``None``."""
        return self.session.controller if self._budgeted else None

    @property
    def state(self) -> SamplingBudgetState | None:
        """A copy of the batch's budget state (``None`` before :meth:`begin_batch` or without a budget)."""
        return self.session.budget_state if self._budgeted else None

    @property
    def plan(self) -> ResamplePlan | None:
        """The plan after the latest hand-off of the current batch (``None`` before any)."""
        return self.session.last_plan if self._budgeted else None

    @property
    def exhausted(self) -> bool:
        """Whether the budget's caps leave no room for another group, whatever the batch target."""
        return not self._room

    @property
    def stopped_by_budget(self) -> bool:
        """Whether the last batch ended short of its target because the budget ran out."""
        return self._stopped

    @property
    def last_report(self) -> StepReport | None:
        """
        The :class:`StepReport` of the batch before the current one (``None`` until a second batch).

        A batch's step ends when the next batch begins (see :meth:`begin_batch`).

        .. versionadded:: 0.2.0
        """
        return self.admission.last_report

    def begin_batch(self, target_groups: int) -> None:
        """Start a batch: a new session step (keeping the rate estimate) aiming at ``target_groups``."""
        target_groups = check_count(target_groups, "target_groups")
        with self._lock:
            self._room = True
            self._stopped = False
            if self._budgeted:
                # end_batch leaves the step open, so that state and plan stay readable after it,
                # and a batch that raised never reaches end_batch: the next batch ends the step.
                if self.session.step_open:
                    self.admission.last_report = self.session.end_step()
                self.session.begin_step(target_groups)

    def end_batch(self, *, complete: bool) -> bool:
        """Close the batch (``complete``: it reached its target); return whether the budget cut it short."""
        with self._lock:
            self._stopped = not complete and not self._room
            return self._stopped

    @contextlib.contextmanager
    def hand_off(self) -> Iterator[None]:
        """Make the :meth:`admitted_groups` calls inside one round of the budget; threads take turns."""
        with self._lock:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if not self._depth:
                    size, self._largest = self._largest, 0
                    if self._budgeted and size and self.session.step_open:
                        self.session.plan(num_generations=size)
                        self._room = self.session.can_launch(1, num_generations=size)

    def admitted_groups(
        self,
        groups: Sequence[Group],
        rejection_reasons: MutableMapping[str, int],
        *,
        spread_check: Callable[[Group], bool] | None = None,
    ) -> list[list[Trajectory]]:
        """
        Judge the complete groups of one side; return the admitted ones (same objects, in order).

        Each rejected group adds one to ``rejection_reasons`` under its primary reason.
        ``spread_check`` is the Challenger's own ``_has_spread``, applied to admitted groups;
        a group it fails is counted as ``exact_dead``.

        Raises:
            TypeError, ValueError: ``groups`` is not a sequence of non-empty sequences of
                trajectory dicts, or ``rejection_reasons`` is not a mutable mapping.
            StepLifecycleError: a budget is set and :meth:`begin_batch` was never called.
        """
        if not isinstance(rejection_reasons, MutableMapping):
            msg = f"'rejection_reasons' must be a Counter of reason names (got {describe(rejection_reasons)})"
            raise TypeError(msg)
        checked = _check_groups(groups)
        admitted: list[list[Trajectory]] = []
        with self.hand_off():
            if self._budgeted and not self.session.step_open:
                msg = "call begin_batch(target_groups) before admitted_groups() when a sampling budget is set"
                raise StepLifecycleError(msg)
            for group in checked:
                verdict = self._judge(group, spread_check)
                self._largest = max(self._largest, len(group))
                reason = verdict.decision.primary_rejection_reason
                if verdict.keep:
                    admitted.append(list(group))
                elif reason is not None:
                    rejection_reasons[reason] = rejection_reasons.get(reason, 0) + 1
        return admitted

    def _judge(self, group: Group, spread_check: Callable[[Group], bool] | None) -> AdmissionVerdict:
        rewards, numeric = zip(*(_reward(member.get("rewards")) for member in group), strict=True)
        completions = None
        if self.policy.config.similarity_gate_enabled:
            completions = [last_assistant_text(member) for member in group]
        external = [] if all(numeric) else [NON_NUMERIC_REWARD]
        decision = self.policy.evaluate(list(rewards), completions, external_reasons=external)
        if decision.admitted and spread_check is not None and not spread_check(group):
            # The Challenger drops it anyway; count it where twinkle#288 counts it.
            decision = attrs.evolve(
                decision,
                reason=RejectionReason.EXACT_DEAD,
                failed_checks=(*decision.failed_checks, CHECK_CHALLENGER_SPREAD),
            )
        return self.session.record(decision, generated_tokens=self._tokens(group))

    def _tokens(self, group: Group) -> int:
        return sum(_token_count(self._tokens_of(member)) for member in group) if self._tokens_of else 0


def _token_count(tokens: object) -> int:
    if isinstance(tokens, bool) or not isinstance(tokens, numbers.Integral):
        msg = f"'tokens_of' must return an integer for each trajectory (got {describe(tokens)})"
        raise TypeError(msg)
    if tokens < 0:
        msg = f"'tokens_of' must return >= 0 for each trajectory (got {tokens})"
        raise ValueError(msg)
    return int(tokens)


def _accepts_keyword(function: Callable[..., Any], name: str) -> bool:
    """Whether ``function`` names ``name`` as a parameter (``**kwargs`` does not count)."""
    try:
        parameter = inspect.signature(function).parameters.get(name)
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind in (
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )


class GroupAdmissionChallengerMixin:
    """
    Makes a twinkle Challenger accept ``group_admission_policy=`` (and a sampling budget).

    Put it first in the bases (or use :func:`with_group_admission`); it takes its keyword
    arguments out before the base ``__init__`` runs and routes each ``_complete`` through
    one :meth:`ChallengerAdmission.hand_off` of ``self.group_admission``, with or without
    the base's ``_admitted_groups`` hook. Without a policy and a budget the Challenger
    behaves exactly as before.

    Keyword Args:
        group_admission_policy: A policy, config or mapping (see :class:`ChallengerAdmission`).
        sampling_budget: A budget controller, config or mapping.
        tokens_of: Counts a trajectory's generated tokens (needed for a token cap).

    .. versionadded:: 0.1.0
    """

    group_admission: ChallengerAdmission | None

    def __init__(
        self,
        *args: Any,
        group_admission_policy: Any = None,
        sampling_budget: Any = None,
        tokens_of: Callable[[Trajectory], int] | None = None,
        **kwargs: Any,
    ) -> None:
        check_versions("group_admission.adapters.challenger", SUPPORTED_VERSIONS)
        admission = None
        if group_admission_policy is not None or sampling_budget is not None:
            admission = ChallengerAdmission(
                group_admission_policy, budget=sampling_budget, tokens_of=tokens_of
            )
        self.group_admission = admission
        base_init = super().__init__
        # Forward the policy only to a base that names it: a **kwargs catch-all may not pass it on.
        if group_admission_policy is not None and _accepts_keyword(base_init, "group_admission_policy"):
            kwargs["group_admission_policy"] = admission.policy if admission else None
        base_init(*args, **kwargs)
        if admission is not None:
            self.group_admission_policy = admission.policy

    def _admitted_groups(
        self, groups: Sequence[Group], rejection_reasons: Counter[str]
    ) -> list[list[Trajectory]]:
        if self.group_admission is None:
            base: Any = super()
            return list(base._admitted_groups(groups, rejection_reasons))
        check = getattr(self, "_has_spread", None)
        return self.group_admission.admitted_groups(
            groups, rejection_reasons, spread_check=check if callable(check) else None
        )

    def _complete(self, challenger: Sequence[Group], solver: Sequence[Group]) -> None:
        base: Any = super()
        if self.group_admission is None:
            base._complete(challenger, solver)
            return
        with self.group_admission.hand_off():  # both sides: one round of the budget
            if callable(getattr(base, "_admitted_groups", None)):
                # twinkle#288's base calls self._admitted_groups itself, once per side.
                base._complete(challenger, solver)
                return
            reasons: Counter[str] = Counter()
            proposing = self._admitted_groups(challenger, reasons)
            base._complete(proposing, self._admitted_groups(solver, reasons))

    def _launch(self) -> bool:
        base: Any = super()
        if self.group_admission is not None and self.group_admission.exhausted:
            return False
        return bool(base._launch())

    def _fill(self, want_challenger: int, want_solver: int) -> Any:
        base: Any = super()
        admission = self.group_admission
        if admission is None:
            return base._fill(want_challenger, want_solver)
        admission.begin_batch(want_challenger + want_solver)
        batch = base._fill(want_challenger, want_solver)
        admission.end_batch(
            complete=batch is not None
            and len(batch.challenger) >= want_challenger
            and len(batch.solver) >= want_solver
        )
        return batch


def with_group_admission(challenger_cls: type) -> type:
    """
    Return ``class <name>WithGroupAdmission(GroupAdmissionChallengerMixin, challenger_cls)``.

    Raises:
        TypeError: ``challenger_cls`` is not a class.

    .. versionadded:: 0.1.0
    """
    if not isinstance(challenger_cls, type):
        msg = f"'challenger_cls' must be a Challenger class (got {describe(challenger_cls)})"
        raise TypeError(msg)
    name = f"{challenger_cls.__name__}WithGroupAdmission"
    return type(
        name, (GroupAdmissionChallengerMixin, challenger_cls), {"__module__": challenger_cls.__module__}
    )
