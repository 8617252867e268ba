"""
``ChallengerAdmission``: twinkle's Challenger group hand-off, judged by an ``AdmissionSession``.

A hand-off is one ``Challenger._complete`` call: the finished groups of both sides
(proposing, solving), of any sizes. It is one round of the batch's sampling budget.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import attrs
import numpy as np

from ..._budget import ResamplePlan, SamplingBudgetConfig, SamplingBudgetController, SamplingBudgetState
from ..._config import GroupAdmissionConfig
from ..._exceptions import StepLifecycleError
from ..._metrics import AdmissionStats
from ..._policy import GroupAdmissionPolicy
from ..._reasons import RejectionReason
from ..._session import AdmissionSession, AdmissionVerdict
from ..._validation import describe

__all__ = [
    "CHECK_CHALLENGER_SPREAD",
    "NON_NUMERIC_REWARD",
    "SUPPORTED_VERSIONS",
    "ChallengerAdmission",
    "Group",
    "Trajectory",
    "last_assistant_text",
]

#: The twinkle versions the adapter is written and tested against: the Challenger of pull
#: request #288, which adds the ``_admitted_groups`` hook (a base without it works as well).
SUPPORTED_VERSIONS: tuple[str, ...] = ("modelscope/twinkle#288",)

Trajectory = Mapping[str, Any]
Group = Sequence[Trajectory]
#: The failed-check name of a group the Challenger's own spread check dropped after admission.
CHECK_CHALLENGER_SPREAD = "challenger_spread_check"
#: The external reason of a trajectory whose ``rewards`` value is not a number.
NON_NUMERIC_REWARD = "non_numeric_reward"


def last_assistant_text(trajectory: Trajectory) -> str | None:
    """
    The content of the trajectory's last assistant message (twinkle's ``assistant_text``).

    Returns ``None`` when there is no assistant message at all (the rollout produced no
    reply; the redundancy gate counts it as a missing completion), ``""`` for an
    assistant message without content. Content given as parts is joined.

    .. versionadded:: 0.1.0
    """
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


class ChallengerAdmission:
    """
    The Challenger's group hand-off hook: admission per complete group, plus a batch budget.

    Call :meth:`admitted_groups` with one side's complete groups and the ``Counter`` the
    Challenger logs; it returns the admitted groups (the same objects, in order) and adds
    one count per rejected group under its primary reason. Rewards are read from each
    trajectory's ``rewards`` value: a missing or ``None`` reward, or a non-number, rejects
    its group as ``external`` (it is never read as 0.0). Completions (the last assistant
    text) are extracted only when the redundancy gate is on.

    With a budget, each hand-off (both sides of one ``_complete``, grouped by
    :meth:`hand_off`; a call outside one is a hand-off of its own) is one round of the
    batch's step in the session: samples are the members of its groups, tokens come from
    ``tokens_of``. After each hand-off :attr:`plan` holds the plan towards the batch's
    target and :attr:`exhausted` says whether the caps leave room for another group (the
    Challenger then stops launching work). Call :meth:`begin_batch` before each batch and
    :meth:`end_batch` after it; :attr:`stopped_by_budget` then tells the caller that the
    batch came out short because the budget ran out.

    Args:
        policy: The admission policy (or a config / mapping for one; ``None`` admits every
            group with finite rewards).
        budget: The sampling budget (a controller, a :class:`SamplingBudgetConfig` or a
            mapping of its fields), or ``None`` for no budget. ``max_resample_rounds``
            bounds the hand-offs per batch after the first.
        tokens_of: Returns the generated tokens of one trajectory; required when the
            budget caps tokens.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        policy: GroupAdmissionPolicy | GroupAdmissionConfig | Mapping[str, Any] | None = None,
        *,
        budget: SamplingBudgetController | SamplingBudgetConfig | Mapping[str, Any] | None = None,
        tokens_of: Callable[[Trajectory], int] | None = None,
    ) -> None:
        if policy is not None and not isinstance(
            policy, (GroupAdmissionPolicy, GroupAdmissionConfig, Mapping)
        ):
            msg = (
                "'group_admission_policy' must be a GroupAdmissionPolicy, a GroupAdmissionConfig, "
                f"a mapping or None (got {describe(policy)})"
            )
            raise TypeError(msg)
        if tokens_of is not None and not callable(tokens_of):
            msg = f"'tokens_of' must be a callable tokens_of(trajectory) -> int (got {describe(tokens_of)})"
            raise TypeError(msg)
        self._session = AdmissionSession(policy, budget=budget, host="twinkle Challenger")
        self._budgeted = budget is not None
        self._check_budget(self._session.controller.config, tokens_of)
        self._tokens_of = tokens_of
        self._lock = threading.RLock()
        self._depth = 0  # nesting of hand_off() on the thread that holds the lock
        self._largest = 0  # the largest group of the hand-off in progress
        self._room = True
        self._stopped = False

    def _check_budget(self, config: SamplingBudgetConfig, tokens_of: object) -> None:
        if not self._budgeted:
            return
        if config.max_total_tokens is not None and tokens_of is None:
            msg = (
                "'tokens_of' is required when the budget caps tokens "
                f"(max_total_tokens={config.max_total_tokens})"
            )
            raise ValueError(msg)
        if config.max_resample_rounds == 0:
            msg = (
                "'max_resample_rounds' must be >= 1 for the Challenger (got 0): every hand-off "
                "after the first is a resample round, so 0 would stop the batch after one unit; "
                "use a large value to cap only samples, tokens and extra groups"
            )
            raise ValueError(msg)

    @property
    def session(self) -> AdmissionSession:
        """The session that judges, counts and plans."""
        return self._session

    @property
    def policy(self) -> GroupAdmissionPolicy:
        """The admission policy."""
        return self._session.policy

    @property
    def controller(self) -> SamplingBudgetController | None:
        """The budget controller, or ``None``."""
        return self._session.controller if self._budgeted else None

    @property
    def stats(self) -> AdmissionStats:
        """A copy of the admission counts over every hand-off."""
        return self._session.stats

    @property
    def state(self) -> SamplingBudgetState | None:
        """A copy of the batch's budget state (``None`` before :meth:`begin_batch` or without a budget)."""
        return self._session.budget_state if self._budgeted else None

    @property
    def plan(self) -> ResamplePlan | None:
        """The plan after the latest hand-off of the current batch (``None`` before any)."""
        return self._session.last_plan if self._budgeted else None

    @property
    def exhausted(self) -> bool:
        """
        Whether the budget leaves no room for another group in the current batch.

        It asks the caps, whatever the target: admitted groups may exceed the batch target
        while a side is still short (the proposing side's surplus, which the batch drops).
        :attr:`plan` keeps the true target.
        """
        return not self._room

    @property
    def stopped_by_budget(self) -> bool:
        """Whether the last batch ended short of its target because the budget ran out."""
        return self._stopped

    def begin_batch(self, target_groups: int) -> None:
        """
        Start a new batch: a new step of the session (keeping the rate estimate) aiming at ``target_groups``.

        Raises:
            ValueError: ``target_groups`` is not a non-negative integer.
        """
        if isinstance(target_groups, bool) or not isinstance(target_groups, int) or target_groups < 0:
            msg = f"'target_groups' must be an integer >= 0 (got {describe(target_groups)})"
            raise ValueError(msg)
        with self._lock:
            self._room = True
            self._stopped = False
            if self._budgeted:
                self._session.begin_step(target_groups)

    def end_batch(self, *, complete: bool) -> bool:
        """
        Close the current batch; return (and remember) whether the budget cut it short.

        Args:
            complete: Whether the batch reached its target.
        """
        with self._lock:
            self._stopped = not complete and not self._room
            return self._stopped

    @contextlib.contextmanager
    def hand_off(self) -> Iterator[None]:
        """
        Group the :meth:`admitted_groups` calls of one hand-off into one round of the budget.

        The mixin wraps each ``Challenger._complete`` in it. Hand-offs from different
        worker threads take turns, so each is exactly one round.
        """
        with self._lock:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if not self._depth:
                    self._close_hand_off()

    def _close_hand_off(self) -> None:
        size, self._largest = self._largest, 0
        if not (self._budgeted and size and self._session.step_open):
            return
        self._session.plan(num_generations=size)
        self._room = self._session.can_launch(1, num_generations=size)

    def admitted_groups(
        self,
        groups: Sequence[Group],
        rejection_reasons: MutableMapping[str, int],
        *,
        spread_check: Callable[[Group], bool] | None = None,
    ) -> list[list[Trajectory]]:
        """
        Judge the complete groups of one side; return the admitted ones.

        Args:
            groups: The side's complete groups (lists of trajectory dicts).
            rejection_reasons: The Challenger's ``Counter``; each rejected group adds one
                to its primary reason (``external``, ``exact_dead``, ``near_tie``,
                ``redundant``).
            spread_check: The Challenger's own legacy check (``Challenger._has_spread``),
                applied to admitted groups as both Challenger versions do; a group it
                fails is counted as ``exact_dead``.

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
            if self._budgeted and not self._session.step_open:
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
        rewards: list[float | None] = []
        external: list[str] = []
        for member in group:
            reward, numeric = _reward(member.get("rewards"))
            rewards.append(reward)
            if not numeric and NON_NUMERIC_REWARD not in external:
                external.append(NON_NUMERIC_REWARD)
        completions = None
        if self.policy.config.similarity_gate_enabled:
            completions = [last_assistant_text(member) for member in group]
        decision = self.policy.evaluate(rewards, completions, external_reasons=external)
        if decision.admitted and spread_check is not None and not spread_check(group):
            # The Challenger drops it anyway; count it where twinkle#288 counts it.
            decision = attrs.evolve(
                decision,
                reason=RejectionReason.EXACT_DEAD,
                failed_checks=(*decision.failed_checks, CHECK_CHALLENGER_SPREAD),
            )
        return self._session.record(decision, generated_tokens=self._tokens(group))

    def _tokens(self, group: Group) -> int:
        if self._tokens_of is None:
            return 0
        total = 0
        for member in group:
            tokens = self._tokens_of(member)
            if isinstance(tokens, bool) or not isinstance(tokens, numbers.Integral):
                msg = f"'tokens_of' must return an integer for each trajectory (got {describe(tokens)})"
                raise TypeError(msg)
            if tokens < 0:
                msg = f"'tokens_of' must return >= 0 for each trajectory (got {tokens})"
                raise ValueError(msg)
            total += int(tokens)
        return total
