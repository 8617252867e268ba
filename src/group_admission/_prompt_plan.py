"""
Round plans sized for the prompts actually chosen: per-prompt probabilities, not one batch rate.

The round planner asks for ``remaining / rate`` groups with one rate for the whole batch.
When a :class:`PromptHistory` has skipped the likely-dead prompts, the prompts left are
better than the batch average (and each differs), so the plan walks the picked prompts in
order and stops at the shortest prefix whose informative groups reach the target with the
planned confidence (a Poisson-binomial bound), under the controller's caps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from ._budget import BudgetLimit, SamplingBudgetController, SamplingBudgetState, budget_caps
from ._history import PromptHistory, PromptId
from ._validation import check_count, describe

__all__ = ["PromptPlan", "plan_prompts", "prompts_needed"]


def prompts_needed(probabilities: Sequence[float], remaining: int, confidence: float | None = None) -> int:
    """
    The shortest prefix of ``probabilities`` expected to give ``remaining`` informative groups.

    With ``confidence``, the smallest ``n`` with ``P[X_1 + ... + X_n >= remaining] >=
    confidence`` for independent ``X_i ~ Bernoulli(probabilities[i])``; without it, the
    smallest ``n`` whose probabilities sum to ``remaining``. When no prefix suffices,
    all of them: ``len(probabilities)``.

    .. versionadded:: 0.2.0
    """
    if remaining <= 0:
        return 0
    if confidence is None:
        total = 0.0
        for index, probability in enumerate(probabilities, start=1):
            total += probability
            if total >= remaining - 1e-9:
                return index
        return len(probabilities)
    # dist[k]: P[k informative so far], with the last cell holding ">= remaining".
    dist = [1.0] + [0.0] * remaining
    for index, probability in enumerate(probabilities, start=1):
        reached = dist[remaining] + dist[remaining - 1] * probability
        for k in range(remaining - 1, 0, -1):
            dist[k] = dist[k] * (1.0 - probability) + dist[k - 1] * probability
        dist[0] *= 1.0 - probability
        dist[remaining] = reached
        if reached >= confidence:
            return index
    return len(probabilities)


@attrs.frozen(kw_only=True)
class PromptPlan:
    """
    Which candidate prompts to generate this round, sized by their own informative probabilities.

    Attributes:
        generate: The prompts to generate a group of now, in the order offered.
        deferred: Prompts the history kept but this round does not need: offer them again.
        skipped: Prompts the history skipped at this step.
        informative_probabilities: The informative probability of each prompt in ``generate``.
        remaining_target_groups: Admitted groups still missing from the target.
        exhausted: The target is not met and no cap leaves room for another group.
        limited_by: ``("target_met",)``, or every cap that cut the round.
        requested_groups: The prompts the confidence bound asked for, before the caps
            (at most the prompts picked: offer more candidates when it equals them).

    .. versionadded:: 0.2.0
    """

    generate: tuple[PromptId, ...]
    deferred: tuple[PromptId, ...]
    skipped: tuple[PromptId, ...]
    informative_probabilities: tuple[float, ...]
    remaining_target_groups: int
    exhausted: bool
    limited_by: tuple[BudgetLimit, ...] = ()
    requested_groups: int = 0

    @property
    def expected_informative(self) -> float:
        """The informative groups the round expects: the sum of its probabilities."""
        return float(sum(self.informative_probabilities))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot."""
        data = attrs.asdict(self)
        for name in ("generate", "deferred", "skipped", "informative_probabilities", "limited_by"):
            data[name] = list(data[name])
        return data


def _check_arguments(controller: object, state: object, history: object, target_groups: object) -> None:
    if not isinstance(controller, SamplingBudgetController):
        msg = f"'controller' must be a SamplingBudgetController (got {describe(controller)})"
        raise TypeError(msg)
    if not isinstance(history, PromptHistory):
        msg = f"'history' must be a PromptHistory (got {describe(history)})"
        raise TypeError(msg)
    if not isinstance(state, SamplingBudgetState):
        msg = f"'state' must be a SamplingBudgetState (got {describe(state)})"
        raise TypeError(msg)
    check_count(target_groups, "target_groups")


def plan_prompts(
    controller: SamplingBudgetController,
    state: SamplingBudgetState,
    history: PromptHistory,
    prompt_ids: Sequence[PromptId],
    *,
    step: int,
    target_groups: int,
    num_generations: int,
    estimated_tokens_per_group: float | None = None,
) -> PromptPlan:
    """
    Pick prompts with ``history`` and size the next round from their probabilities, under caps.

    The controller's ``mode`` decides the bound: ``"confidence"`` uses its
    ``confidence``, ``"expected"`` the sum of probabilities. Its caps and round limit
    apply as to :meth:`SamplingBudgetController.plan_resampling`; ``state`` holds the
    step's rounds so far (none for the first round, which is sized the same way).

    .. versionadded:: 0.2.0
    """
    _check_arguments(controller, state, history, target_groups)
    config = controller.config
    remaining = max(0, target_groups - state.admitted_groups)
    picks = history.pick(prompt_ids, step=step)
    rounds_spent = state.sampling_rounds > 0 and state.resample_rounds >= config.max_resample_rounds
    if remaining == 0 or rounds_spent:
        return PromptPlan(
            generate=(),
            deferred=picks.picked,
            skipped=picks.skipped,
            informative_probabilities=(),
            remaining_target_groups=remaining,
            exhausted=remaining > 0,
            limited_by=("target_met",) if remaining == 0 else ("resample_round_budget",),
        )
    bound = config.confidence if config.mode == "confidence" else None
    requested = prompts_needed(picks.informative_probabilities, remaining, bound)
    caps = budget_caps(controller.config, state, target_groups, num_generations, estimated_tokens_per_group)
    granted = min([requested, *caps.values()])
    limited_by: tuple[BudgetLimit, ...] = tuple(
        name for name, cap in caps.items() if cap == granted and cap <= requested and requested
    )
    return PromptPlan(
        generate=picks.picked[:granted],
        deferred=picks.picked[granted:],
        skipped=picks.skipped,
        informative_probabilities=picks.informative_probabilities[:granted],
        remaining_target_groups=remaining,
        exhausted=min(caps.values()) == 0,
        limited_by=limited_by,
        requested_groups=requested,
    )
