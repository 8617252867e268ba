"""
A reference bound for prompt histories: skipping with the posterior of the pool's own generative model.

``PromptPool`` draws each prompt's pass rate as ``sigmoid(l + g * step / 100)``, with
``l ~ Normal(logit_mean, logit_std)`` and ``g = 0`` for the prompts the model never learns,
``g ~ Exponential(learning_rate)`` for the others. :class:`ModelSkipping` knows that model
(not any prompt's ``l`` or ``g``): it keeps each prompt's posterior over ``(l, g)`` on a
grid, updated with every group it sees, and skips a prompt when the posterior probability
that its next group is informative is below a threshold. No history that learns from the
same groups can estimate better, since this one uses the very model the groups come from;
what it cannot reach, no history can. Rounds are sized like :class:`OracleSkipping`'s, by
``prompts_needed`` on the probabilities, under the same budget.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt

from group_admission import AdmissionSession, SamplingBudgetConfig, prompts_needed
from group_admission.simulation import PoolContext, PromptPoolConfig

# The pool strategies' base: one session step per pool step, their default budget (written once).
from group_admission.simulation._planning_strategies import SessionPoolStrategy

FloatArray = npt.NDArray[np.float64]

#: Grid points for the initial logit (over +-5 std) and quantiles of the learning gain.
LOGIT_POINTS, GAIN_POINTS = 161, 20


class Posterior:
    """Every prompt's log posterior over the ``(logit, gain)`` grid of one pool."""

    def __init__(self, config: PromptPoolConfig) -> None:
        spread = max(config.logit_std, 1e-9)
        logits = np.linspace(config.logit_mean - 5 * spread, config.logit_mean + 5 * spread, LOGIT_POINTS)
        quantiles = (np.arange(GAIN_POINTS) + 0.5) / GAIN_POINTS
        gains = np.concatenate([[0.0], -config.learning_rate * np.log1p(-quantiles)]) / 100.0
        weights = np.concatenate(
            [[1.0 - config.learnable_share], np.full(GAIN_POINTS, config.learnable_share / GAIN_POINTS)]
        )
        density = np.exp(-0.5 * ((logits - config.logit_mean) / spread) ** 2)
        prior = density[:, None] / density.sum() * weights[None, :]
        self._logits, self._gains = logits[:, None], gains[None, :]
        self._prior: FloatArray = np.log(prior + 1e-300).ravel()
        self._group_size = config.group_size
        self._log_posterior: dict[int, FloatArray] = {}

    def _logit(self, step: int) -> FloatArray:
        logit: FloatArray = (self._logits + self._gains * step).ravel()
        return logit

    def observe(self, prompt: int, successes: float, size: int, step: int) -> None:
        """Fold one group of ``size`` completions with ``successes`` passes, judged at ``step``."""
        z = self._logit(step)
        log_posterior = self._log_posterior.get(prompt, self._prior)
        self._log_posterior[prompt] = (
            log_posterior - successes * np.logaddexp(0, -z) - (size - successes) * np.logaddexp(0, z)
        )

    def informative(self, prompts: list[int], step: int) -> FloatArray:
        """The posterior probability that each prompt's next group (at ``step``) is informative."""
        rates = 1.0 / (1.0 + np.exp(-self._logit(step)))
        size = self._group_size
        useful = 1.0 - rates**size - (1.0 - rates) ** size
        table = (
            np.stack([self._log_posterior.get(p, self._prior) for p in prompts])
            if prompts
            else np.zeros((0, len(useful)))
        )
        weights = np.exp(table - table.max(axis=1, keepdims=True))
        weights /= weights.sum(axis=1, keepdims=True)
        result: FloatArray = weights @ useful
        return result


@attrs.frozen(kw_only=True)
class ModelSkipping(SessionPoolStrategy):
    """
    Skip prompts by the posterior of the pool's generative model (a bound, see the module).

    Its session has the pool strategies' budget (``budget``: ``None``, their default).
    """

    kind: ClassVar[str] = "model_skip"
    skip_below: float = 0.1
    budget: SamplingBudgetConfig | None = None
    name: str = "model_skip"

    def rounds(self, context: PoolContext, session: AdmissionSession) -> None:
        """The step's rounds: prompts whose chance of being informative is too low are skipped."""
        posterior = context.memory.setdefault("posterior", Posterior(context.pool.config))
        size, confidence = context.group_size, session.controller.config.confidence
        while remaining := session.plan(num_generations=size).remaining_target_groups:
            kept: list[int] = []
            chances: list[float] = []
            while prompts_needed(chances, remaining, confidence) >= len(kept):
                batch = context.next_prompts(context.target_groups)
                useful = posterior.informative(batch, context.step).tolist()
                context.skip([p for p, u in zip(batch, useful, strict=True) if u < self.skip_below])
                kept += [p for p, u in zip(batch, useful, strict=True) if u >= self.skip_below]
                chances += [u for u in useful if u >= self.skip_below]
            count = prompts_needed(chances, remaining, confidence)
            while count and not session.can_launch(count, num_generations=size):
                count -= 1
            context.put_back(kept[count:])
            if not count:
                break
            result = context.generate(kept[:count], session)
            for prompt, mean in zip(kept[:count], result.reward_mean.tolist(), strict=True):
                posterior.observe(prompt, mean * size, size, context.step)

    def to_dict(self) -> dict[str, Any]:
        """The strategy as the report records it."""
        return {"kind": self.kind, "skip_below": self.skip_below, "name": self.name}
