"""``PromptHistoryConfig``: how a :class:`PromptHistory` estimates prompts and which it skips."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ._loading import MappingConfig
from ._validation import (
    as_float,
    as_int,
    check_ge,
    check_int,
    check_one_of,
    check_range,
    describe,
    int_field,
    is_finite,
    is_real,
    real_field,
)

__all__ = ["Evidence", "HistoryMode", "PromptHistoryConfig"]

#: ``"posterior"``: skip on the Beta-Binomial estimate; ``"greso"``: GRESO's published rule.
HistoryMode = Literal["posterior", "greso"]
#: What the estimate is built from: the reward means, or the admission verdicts.
Evidence = Literal["rewards", "admissions"]


def _as_pair(value: Any) -> Any:
    """Lists (as YAML and JSON give them) become tuples; anything else goes to the validator."""
    return tuple(as_float(item) for item in value) if isinstance(value, list | tuple) else value


def _check_pair(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or len(value) != 2 or not all(is_real(v) for v in value):
        msg = f"'{attribute.name}' must be a pair of numbers (got {describe(value)})"
        raise TypeError(msg)


def _check_prior(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    _check_pair(inst, attribute, value)
    assert isinstance(value, tuple)  # for mypy; the pair check raised otherwise
    if not all(0.0 < v < float("inf") for v in value):
        msg = f"'{attribute.name}' must hold two finite numbers > 0 (got {value!r})"
        raise ValueError(msg)


def _check_reward_range(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _check_pair(inst, attribute, value)
    assert isinstance(value, tuple)
    low, high = value
    if not (float("-inf") < low < high < float("inf")):
        msg = f"'{attribute.name}' must be (low, high) with finite low < high (got {value!r})"
        raise ValueError(msg)
    if not is_finite(high - low):  # the width scales every reward mean into [0, 1]
        msg = f"'{attribute.name}' must have a finite width high - low (got {value!r})"
        raise ValueError(msg)


def _check_half_life(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not is_real(value):
        msg = f"'{attribute.name}' must be None or a number of steps (got {describe(value)})"
        raise TypeError(msg)
    if not 0 < float(value) < float("inf"):  # type: ignore[arg-type]
        msg = f"'{attribute.name}' must be None or a finite number of steps > 0 (got {value!r})"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class PromptHistoryConfig(MappingConfig):
    """
    How a :class:`PromptHistory` estimates each prompt, and which prompts it skips.

    Args:
        group_size: Completions per group (``num_generations``, ``n_samples_per_prompt``),
            the ``G`` of the informative probability ``1 - p^G - (1 - p)^G``.
        mode: ``"posterior"`` skips a prompt whose estimated probability of an
            informative group is below ``skip_below``; ``"greso"`` applies GRESO's
            published rule (skip with probability ``1 - max(p^k, 0.01)`` after ``k``
            consecutive all-correct or all-wrong groups, ``p`` nudged each step towards a
            target share of zero-variance groups), for comparison.
        skip_below: The informative probability below which ``"posterior"`` skips.
        max_wrong_skip_share: The bound on the share of skipped prompts whose group would
            have been informative (``"posterior"``; ``None``: no bound). The history
            measures that share on its re-checks (the prompts it would have skipped and
            picked anyway, through ``exploration``): while the estimate exceeds the bound,
            the skip threshold shrinks to ``skip_below x bound / estimate``.
        exploration: The probability that a prompt ``"posterior"`` would skip is picked
            anyway, so that no prompt is starved forever.
        prior: The Beta prior ``(alpha, beta)`` of every pass rate. ``None`` fits it to
            the pool's observed outcomes (method of moments, after 32 groups; Jeffreys'
            ``(0.5, 0.5)`` before), so that one all-wrong group of a pool full of
            unsolvable prompts says more than one of a pool of middling ones.
        half_life: Forgetting: evidence loses half its weight every ``half_life`` steps,
            so a prompt that became solvable is noticed (``None``: never forget). Choose
            a few epochs' worth of steps.
        evidence: ``"rewards"`` estimates the pass rate from the gated reward means
            (exact for pass/fail rewards); ``"admissions"`` estimates the probability of
            an admitted group directly from the verdicts (for graded rewards, or gates
            beyond zero variance).
        reward_range: The ``(low, high)`` bounds of the gated reward; means are scaled
            into ``[0, 1]`` with them (and clipped).
        seed: Seed of the picks' randomness, a hash of ``(seed, prompt id, step)``.
        greso_p_easy: GRESO's initial keep base for all-correct prompts.
        greso_p_hard: GRESO's initial keep base for all-wrong prompts.
        greso_target_zero_variance: GRESO's target share of zero-variance groups (a third
            all-correct, two thirds all-wrong).

    .. versionadded:: 0.2.0
    """

    group_size: int = attrs.field(converter=as_int, validator=(check_int, check_ge(1)))
    mode: HistoryMode = attrs.field(default="posterior", validator=check_one_of(("posterior", "greso")))
    skip_below: float = real_field(0.1, check_range(0, 1))
    exploration: float = real_field(0.05, check_range(0, 1))
    max_wrong_skip_share: float | None = real_field(0.1, check_range(0, 1, low_open=True), optional=True)
    prior: tuple[float, float] | None = attrs.field(default=None, converter=_as_pair, validator=_check_prior)
    half_life: float | None = attrs.field(
        default=None, converter=attrs.converters.optional(as_float), validator=_check_half_life
    )
    evidence: Evidence = attrs.field(default="rewards", validator=check_one_of(("rewards", "admissions")))
    reward_range: tuple[float, float] = attrs.field(
        default=(0.0, 1.0), converter=_as_pair, validator=_check_reward_range
    )
    seed: int = int_field(0, check_ge(0))
    greso_p_easy: float = real_field(0.5, check_range(0, 1))
    greso_p_hard: float = real_field(0.5, check_range(0, 1))
    greso_target_zero_variance: float = real_field(0.25, check_range(0, 1))

    def to_dict(self) -> dict[str, Any]:
        """Return the config as a plain, YAML- and JSON-safe dict."""
        data = attrs.asdict(self)
        data["prior"] = None if self.prior is None else list(self.prior)
        data["reward_range"] = list(self.reward_range)
        return data
