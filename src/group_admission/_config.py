"""``GroupAdmissionConfig``: the thresholds of the admission gates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from . import _checks
from ._exceptions import recommended_instead, warn_half_configured
from ._loading import MappingConfig
from ._validation import (
    check_ge,
    check_gt,
    check_nonempty_strings,
    check_range,
    describe,
    int_field,
    real_field,
)

__all__ = ["GroupAdmissionConfig"]


def _as_gate_on(value: Sequence[str] | str | None) -> tuple[str, ...] | None:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return tuple(value)
    return value


def _check_gate_on(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, tuple):
        msg = f"'{attribute.name}' must be a list of reward component names (got {describe(value)})"
        raise TypeError(msg)
    if not value:
        msg = f"'{attribute.name}' must name at least one reward component (got [])"
        raise ValueError(msg)
    check_nonempty_strings(value, attribute.name)
    if len(set(value)) != len(value):
        msg = f"'{attribute.name}' must not repeat a component (got {list(value)!r})"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class GroupAdmissionConfig(MappingConfig):
    """
    Thresholds for the admission gates. Every gate is off by default.

    With the defaults, :class:`GroupAdmissionPolicy` admits every well-formed group (a group
    of one rollout included: the default is a no-op); each threshold you set adds one
    check, which identical rewards, and so a group of one rollout, always fail. A
    statistic that meets its threshold within float rounding (a relative ``1e-12`` of the
    reward scale) passes, so ``[0.1, 0.1, 0.12]`` meets ``min_reward_range=0.02``.

    Args:
        min_reward_std: Minimum **population** standard deviation of the gated reward.
            GRPO advantages usually divide by the *sample* std, which is larger by
            ``sqrt(n / (n - 1))``. ``1e-6`` reproduces the zero-std filter of slime and DAPO.
        min_reward_range: Minimum ``max - min`` of the gated reward: the reward's effective
            resolution, below which differences are noise.
        min_nontrivial_advantages: Minimum number of members whose reward differs from the
            group mean by more than ``advantage_tolerance``.
        advantage_tolerance: Deviation from the mean that counts as a non-trivial advantage.
        max_mean_pairwise_similarity: Reject when the mean pairwise similarity of the
            completions exceeds this value (in ``[0, 1]``). ``None`` turns the gate off.
        similarity_ngram_size: Token n-gram size of the default Jaccard scorer. A
            completion with fewer tokens is one gram of all its tokens, so a huge n
            compares whole completions; the cost does not grow with n.
        gate_on: For composite rewards (a mapping of component name to values), the
            components whose sum the reward gate measures. ``None`` measures the sum of all
            components. Gate on the outcome component (e.g. ``["accuracy"]``) so that a
            shaping term cannot make an all-wrong group look informative. Only the gated
            components' data problems (``None`` or non-finite values) make a group
            ``external``: a component outside ``gate_on`` may be ``None`` for members it
            does not apply to. Structural mistakes raise for every component.

    .. versionadded:: 0.1.0
    """

    min_reward_std: float = real_field(0.0, check_ge(0))
    min_reward_range: float = real_field(0.0, check_ge(0))
    min_nontrivial_advantages: int = int_field(0, check_ge(0))
    advantage_tolerance: float = real_field(1e-8, check_ge(0))
    max_mean_pairwise_similarity: float | None = real_field(None, check_range(0, 1), optional=True)
    similarity_ngram_size: int = int_field(3, check_gt(0))
    gate_on: tuple[str, ...] | None = attrs.field(
        default=None, converter=_as_gate_on, validator=_check_gate_on
    )

    def __attrs_post_init__(self) -> None:
        warn_half_configured(self._half_configured())

    def _half_configured(self) -> list[str]:
        """What this config sets that its other fields leave without effect, one sentence each."""
        problems = []
        if self.gate_on is not None and not self.reward_gate_enabled:
            gate_on = list(self.gate_on)
            problems.append(
                f"'gate_on' is {gate_on} but every reward gate is off (min_reward_std, min_reward_range "
                "and min_nontrivial_advantages are 0), so every group is admitted, an all-wrong group "
                "with shaping spread too: set a reward gate (min_reward_std=1e-6 is the zero-std "
                f"filter), or {recommended_instead(policy={'gate_on': gate_on})}"
            )
        return problems

    @property
    def reward_gate_enabled(self) -> bool:
        """Whether any reward threshold (std, range, non-trivial advantages) is set."""
        return any(check.enabled(self) for check in _checks.TABLE.reward)

    @property
    def similarity_gate_enabled(self) -> bool:
        """Whether the redundancy gate is on."""
        return _checks.TABLE.similarity.enabled(self)

    def to_dict(self) -> dict[str, Any]:
        """Return the config as a plain, YAML- and JSON-safe dict."""
        data = attrs.asdict(self)
        if self.gate_on is not None:
            data["gate_on"] = list(self.gate_on)
        return data
