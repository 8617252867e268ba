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

import attrs
import numpy as np

from ._budget import (
    SamplingBudgetController,
    SamplingBudgetState,
    budget_caps,
    check_planner,
    rounds_spent,
)
from ._history import PromptHistory, PromptId
from ._plans import PlanBase, size_plan
from ._validation import check_count, check_probability, describe, is_finite, is_real

__all__ = ["PromptPlan", "plan_prompts", "prompts_needed"]


def _probabilities(values: object) -> list[float]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        msg = f"'probabilities' must be a sequence of probabilities (got {describe(values)})"
        raise TypeError(msg)
    checked = []
    for value in values:
        if not is_real(value):
            msg = f"'probabilities' entries must be real numbers (got {describe(value)})"
            raise TypeError(msg)
        if not (is_finite(value) and 0.0 <= value <= 1.0):
            msg = f"'probabilities' entries must be in [0, 1] (got {describe(value)})"
            raise ValueError(msg)
        checked.append(float(value))
    return checked


def prompts_needed(probabilities: Sequence[float], remaining: int, confidence: float | None = None) -> int:
    """
    The shortest prefix of ``probabilities`` expected to give ``remaining`` informative groups.

    With ``confidence``, the smallest ``n`` with ``P[X_1 + ... + X_n >= remaining] >=
    confidence`` for independent ``X_i ~ Bernoulli(probabilities[i])``; without it, the
    smallest ``n`` whose probabilities sum to ``remaining``. When no prefix suffices,
    all of them: ``len(probabilities)``. The cost grows with ``n x min(n, remaining)``,
    never with a target beyond the ``n`` prompts (each gives at most one group).

    Raises:
        TypeError, ValueError: a probability is not a number in ``[0, 1]``, ``remaining``
            is not an integer >= 0, or ``confidence`` not a number in ``(0, 1)``.

    .. versionadded:: 0.2.0
    """
    values = _probabilities(probabilities)
    remaining = check_count(remaining, "remaining")
    if confidence is not None:
        confidence = check_probability(confidence, "confidence")
    if remaining == 0:
        return 0
    if remaining > len(values):  # each prompt gives at most one group: no prefix can reach it
        return len(values)
    if confidence is None:
        total = 0.0
        for index, probability in enumerate(values, start=1):
            total += probability
            if total >= remaining - 1e-9:
                return index
        return len(values)
    # dist[k]: P[k informative so far], with the last cell holding ">= remaining".
    dist = [1.0] + [0.0] * remaining
    for index, probability in enumerate(values, start=1):
        reached = dist[remaining] + dist[remaining - 1] * probability
        for k in range(remaining - 1, 0, -1):
            dist[k] = dist[k] * (1.0 - probability) + dist[k - 1] * probability
        dist[0] *= 1.0 - probability
        dist[remaining] = reached
        if reached >= confidence:
            return index
    return len(values)


@attrs.frozen(kw_only=True)
class PromptPlan(PlanBase):
    """
    Which candidate prompts to generate this round, sized by their own informative probabilities.

    Attributes:
        generate: The prompts to generate a group of now, in the order offered.
        deferred: Prompts the history kept but this round does not need: offer them again.
        skipped: Prompts the history skipped at this step.
        informative_probabilities: The informative probability of each prompt in ``generate``.
        remaining_target_groups, exhausted, out_of_candidates, limited_by,
            requested_groups, done: As in every plan (``requested_groups``: the
            prompts the confidence bound asked for, before the caps, at most the prompts
            picked: offer more candidates when it equals them; ``out_of_candidates``: no
            prompt was picked, so the loop ``while not plan.done`` ends).

    .. versionadded:: 0.2.0
    """

    generate: tuple[PromptId, ...]
    deferred: tuple[PromptId, ...]
    skipped: tuple[PromptId, ...]
    informative_probabilities: tuple[float, ...]

    @property
    def expected_informative(self) -> float:
        """The informative groups the round expects: the sum of its probabilities."""
        return float(sum(self.informative_probabilities))

    @property
    def effective_rate(self) -> float:
        """
        The admission rate the plan assumed: the mean informative probability of ``generate``.

        As :attr:`ResamplePlan.effective_rate` for one batch rate; 0.0 when nothing is
        generated.

        .. versionadded:: 0.2.0
        """
        chosen = len(self.informative_probabilities)
        return self.expected_informative / chosen if chosen else 0.0


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

    The layer below :meth:`AdmissionSession.pick_prompts`, which keeps ``state`` for you.
    The controller's ``mode`` decides the bound: ``"confidence"`` uses its
    ``confidence``, ``"expected"`` the sum of probabilities. Its caps and round limit
    apply as to :meth:`SamplingBudgetController.plan_resampling`; ``state`` holds the
    step's rounds so far (none for the first round, which is sized the same way).

    .. versionadded:: 0.2.0
    """
    target, size, _ = check_planner(
        controller, state, target_groups, num_generations, estimated_tokens_per_group
    )
    if not isinstance(history, PromptHistory):
        msg = f"'history' must be a PromptHistory (got {describe(history)})"
        raise TypeError(msg)
    config = controller.config
    remaining = max(0, target - state.admitted_groups)
    picks = history.pick(prompt_ids, step=step)  # checks the ids, reading them once
    bound = config.confidence if config.mode == "confidence" else None
    requested = prompts_needed(picks.informative_probabilities, remaining, bound)
    caps = budget_caps(config, state, target, size, estimated_tokens_per_group)
    sizing = size_plan(remaining, requested, requested, caps, rounds_spent=rounds_spent(config, state))
    return PromptPlan(
        generate=picks.picked[: sizing.granted],
        deferred=picks.picked[sizing.granted :],
        skipped=picks.skipped,
        informative_probabilities=picks.informative_probabilities[: sizing.granted],
        **sizing.plan_fields(),
    )
