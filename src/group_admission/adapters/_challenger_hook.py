"""
The Challenger's group hand-off hook: ``ChallengerAdmission`` (admission plus a batch budget).

Kept apart from the mixin in ``challenger.py``; import both from there.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

import attrs

from .._budget import ResamplePlan, SamplingBudgetConfig, SamplingBudgetController, SamplingBudgetState
from .._config import GroupAdmissionConfig
from .._decision import GroupAdmissionDecision
from .._metrics import AdmissionStats
from .._policy import GroupAdmissionPolicy
from .._reasons import RejectionReason
from .._validation import describe

__all__ = [
    "CHECK_CHALLENGER_SPREAD",
    "NON_NUMERIC_REWARD",
    "ChallengerAdmission",
    "Group",
    "Trajectory",
    "last_assistant_text",
]

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
    messages = trajectory.get("messages") or []
    for message in reversed(list(messages)):
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
    if isinstance(value, (str, bytes)):
        return math.nan, False
    try:
        return float(value), True
    except (TypeError, ValueError):
        return math.nan, False


def _as_policy(policy: Any) -> GroupAdmissionPolicy:
    if isinstance(policy, GroupAdmissionPolicy):
        return policy
    if policy is None or isinstance(policy, (GroupAdmissionConfig, Mapping)):
        return GroupAdmissionPolicy(policy)
    msg = (
        "'group_admission_policy' must be a GroupAdmissionPolicy, a GroupAdmissionConfig, "
        f"a mapping or None (got {describe(policy)})"
    )
    raise TypeError(msg)


def _as_controller(budget: Any) -> SamplingBudgetController | None:
    if budget is None or isinstance(budget, SamplingBudgetController):
        return budget
    if isinstance(budget, (SamplingBudgetConfig, Mapping)):
        return SamplingBudgetController(budget)
    msg = (
        "'budget' must be a SamplingBudgetController, a SamplingBudgetConfig, a mapping or "
        f"None (got {describe(budget)})"
    )
    raise TypeError(msg)


class ChallengerAdmission:
    """
    The Challenger's group hand-off hook: admission per complete group, plus a batch budget.

    Call :meth:`admitted_groups` once per side with the side's complete groups and the
    ``Counter`` the Challenger logs; it returns the admitted groups (the same objects, in
    order) and adds one count per rejected group under its primary reason. Rewards are
    read from each trajectory's ``rewards`` value: a missing or ``None`` reward, or a
    non-number, rejects its group as ``external`` (it is never read as 0.0).
    Completions (the last assistant text) are extracted only when the redundancy gate
    is on.

    With a budget, each hand-off is one observed round of the batch's
    :class:`SamplingBudgetState` (samples = group members, tokens from ``tokens_of``).
    After each hand-off :attr:`plan` holds the controller's plan towards the batch's
    target and :attr:`exhausted` says whether the caps leave room for another group (the
    Challenger then stops launching work). Call :meth:`begin_batch` before each batch
    and :meth:`end_batch` after it; :attr:`stopped_by_budget` then tells the caller that
    the batch came out short because the budget ran out.

    Args:
        policy: The admission policy (or a config / mapping for one; ``None`` admits every
            group with finite rewards).
        budget: The sampling budget (a controller, a :class:`SamplingBudgetConfig` or a
            mapping of its fields), or ``None`` for no budget. Each hand-off counts as one
            round, so ``max_resample_rounds`` bounds the hand-offs per batch after the
            first.
        tokens_of: Returns the generated tokens of one trajectory; required when the
            budget caps tokens.

    Attributes:
        stats: Admission counts over every hand-off (thread-safe).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        policy: GroupAdmissionPolicy | GroupAdmissionConfig | Mapping[str, Any] | None = None,
        *,
        budget: SamplingBudgetController | SamplingBudgetConfig | Mapping[str, Any] | None = None,
        tokens_of: Callable[[Trajectory], int] | None = None,
    ) -> None:
        self._policy = _as_policy(policy)
        self._controller = _as_controller(budget)
        if tokens_of is not None and not callable(tokens_of):
            msg = f"'tokens_of' must be a callable tokens_of(trajectory) -> int (got {describe(tokens_of)})"
            raise TypeError(msg)
        if (
            self._controller is not None
            and self._controller.config.max_total_tokens is not None
            and not tokens_of
        ):
            msg = (
                "'tokens_of' is required when the budget caps tokens "
                f"(max_total_tokens={self._controller.config.max_total_tokens})"
            )
            raise ValueError(msg)
        if self._controller is not None and self._controller.config.max_resample_rounds == 0:
            msg = (
                "'max_resample_rounds' must be >= 1 for the Challenger (got 0): every hand-off "
                "after the first is a resample round, so 0 would stop the batch after one unit; "
                "use a large value to cap only samples, tokens and extra groups"
            )
            raise ValueError(msg)
        self._tokens_of = tokens_of
        self._lock = threading.Lock()
        self._state: SamplingBudgetState | None = None
        self._target = 0
        self._plan: ResamplePlan | None = None
        self._room = True
        self._stopped = False
        self.stats = AdmissionStats()

    @property
    def policy(self) -> GroupAdmissionPolicy:
        """The admission policy."""
        return self._policy

    @property
    def controller(self) -> SamplingBudgetController | None:
        """The budget controller, or ``None``."""
        return self._controller

    @property
    def state(self) -> SamplingBudgetState | None:
        """The current batch's budget state (``None`` before :meth:`begin_batch` or without a budget)."""
        return self._state

    @property
    def plan(self) -> ResamplePlan | None:
        """The plan after the latest hand-off of the current batch (``None`` before any)."""
        return self._plan

    @property
    def exhausted(self) -> bool:
        """
        Whether the budget leaves no room for another group in the current batch.

        Admitted groups may exceed the batch target while a side is still short (the
        proposing side's surplus, which the batch drops), so this asks for room for one
        more group whenever the target looks met; :attr:`plan` keeps the true target.
        """
        return not self._room

    @property
    def stopped_by_budget(self) -> bool:
        """Whether the last batch ended short of its target because the budget ran out."""
        return self._stopped

    def begin_batch(self, target_groups: int) -> None:
        """
        Start a new batch: a fresh budget state (keeping the rate estimate) aiming at ``target_groups``.

        Raises:
            ValueError: ``target_groups`` is not a non-negative integer.
        """
        if isinstance(target_groups, bool) or not isinstance(target_groups, int) or target_groups < 0:
            msg = f"'target_groups' must be an integer >= 0 (got {describe(target_groups)})"
            raise ValueError(msg)
        with self._lock:
            self._target = target_groups
            self._plan = None
            self._room = True
            self._stopped = False
            if self._controller is not None:
                self._state = self._controller.new_state(carry_rate_from=self._state)

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
            RuntimeError: a budget is set and :meth:`begin_batch` was never called.
        """
        if not isinstance(rejection_reasons, MutableMapping):
            msg = f"'rejection_reasons' must be a Counter of reason names (got {describe(rejection_reasons)})"
            raise TypeError(msg)
        checked = self._check_groups(groups)
        decisions = [self._decide(group, spread_check) for group in checked]
        admitted = [
            list(group) for group, decision in zip(checked, decisions, strict=True) if decision.admitted
        ]
        for decision in decisions:
            if decision.primary_rejection_reason is not None:
                rejection_reasons[decision.primary_rejection_reason] = (
                    rejection_reasons.get(decision.primary_rejection_reason, 0) + 1
                )
        self.stats.add_many(decisions)
        self._observe(checked, decisions)
        return admitted

    # -- internals ---------------------------------------------------------------------
    @staticmethod
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

    def _decide(self, group: Group, spread_check: Callable[[Group], bool] | None) -> GroupAdmissionDecision:
        rewards: list[float | None] = []
        external: list[str] = []
        for member in group:
            reward, numeric = _reward(member.get("rewards"))
            rewards.append(reward)
            if not numeric and NON_NUMERIC_REWARD not in external:
                external.append(NON_NUMERIC_REWARD)
        completions = None
        if self._policy.config.similarity_gate_enabled:
            completions = [last_assistant_text(member) for member in group]
        decision = self._policy.evaluate(rewards, completions, external_reasons=external)
        if decision.admitted and spread_check is not None and not spread_check(group):
            # The Challenger drops it anyway; count it where the pull request counts it.
            decision = attrs.evolve(
                decision,
                reason=RejectionReason.EXACT_DEAD,
                failed_checks=(*decision.failed_checks, CHECK_CHALLENGER_SPREAD),
            )
        return decision

    def _observe(self, groups: list[Group], decisions: list[GroupAdmissionDecision]) -> None:
        controller = self._controller
        if controller is None or not groups:
            return
        sizes: dict[int, list[int]] = {}
        for index, group in enumerate(groups):
            sizes.setdefault(len(group), []).append(index)
        with self._lock:
            if self._state is None:
                msg = "call begin_batch(target_groups) before admitted_groups() when a sampling budget is set"
                raise RuntimeError(msg)
            for size, indices in sizes.items():
                tokens = 0
                if self._tokens_of is not None:
                    tokens = sum(int(self._tokens_of(member)) for i in indices for member in groups[i])
                controller.observe_round(
                    self._state,
                    [decisions[i] for i in indices],
                    num_generations=size,
                    generated_tokens=tokens,
                )
            size = max(sizes)
            self._plan = controller.plan_resampling(
                self._state, target_groups=self._target, num_generations=size
            )
            room = self._plan
            if not room.remaining_target_groups:
                # The proposing side's surplus counts as admitted but the batch drops it:
                # with the target apparently met, the caps decide whether one more fits.
                room = controller.plan_resampling(
                    self._state, target_groups=self._state.admitted_groups + 1, num_generations=size
                )
            self._room = not room.exhausted

    def end_batch(self, *, complete: bool) -> bool:
        """
        Close the current batch; return (and remember) whether the budget cut it short.

        Args:
            complete: Whether the batch reached its target.
        """
        with self._lock:
            self._stopped = not complete and not self._room
            return self._stopped
