"""
``SessionConfig``: everything a session and its prompt history are built from, as one block.

One YAML block (or mapping) holds the policy, the budget, the drop limits, the prompt
history and the loss scale, so that a host's config names the whole admission setup in
one place; ``preset:`` starts from a named configuration (:data:`PRESETS`), which the
other keys then override section by section::

    group_admission:
      preset: recommended
      policy: {gate_on: [accuracy]}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from ._budget import SamplingBudgetConfig
from ._config import GroupAdmissionConfig
from ._history import PromptHistory
from ._history_config import PromptHistoryConfig
from ._limits import DropLimits
from ._loading import MappingConfig, coerce_config, from_mapping
from ._loss_scale import DEFAULT_LOSS_SCALE, LOSS_SCALES, LossScale
from ._session import AdmissionSession
from ._validation import check_choice, check_count, check_one_of, describe

__all__ = ["PRESETS", "SessionConfig"]

#: The named configurations ``preset:`` starts from. ``recommended`` is the configuration
#: the learning bench chose (docs/evidence.md): gate on the outcome, keep the loss at the
#: target's scale, and skip prompts the history predicts dead (its wrong skips bounded);
#: no resampling, which bought no accuracy per generated token there. Name the outcome
#: component with ``policy.gate_on`` when rewards have several components.
PRESETS: Mapping[str, Mapping[str, Any]] = {
    "recommended": {
        "policy": {"min_reward_std": 1e-6},
        "history": {"half_life": 150},
        "loss_scale": "target",
    },
    # The zero-std filter of slime, DAPO and verl: no resampling, no skipping.
    "zero_std": {"policy": {"min_reward_std": 1e-6}, "loss_scale": "kept"},
}
_SECTIONS = ("policy", "budget", "limits", "history")
#: The history's ``group_size`` is the host's ``num_generations``: given when it is built.
_HISTORY_PLACEHOLDER_SIZE = 2


def _history_fields(value: object) -> dict[str, Any] | None:
    """``PromptHistoryConfig`` fields other than ``group_size`` (checked by building one), or ``None``."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        msg = f"'history' must be a mapping of PromptHistoryConfig fields or None (got {describe(value)})"
        raise TypeError(msg)
    if "group_size" in value:
        msg = "'history.group_size' is the host's group size: pass it to prompt_history(group_size=...)"
        raise ValueError(msg)
    fields = dict(value)
    PromptHistoryConfig.from_mapping({**fields, "group_size": _HISTORY_PLACEHOLDER_SIZE})
    return fields


def _as_policy(value: object) -> GroupAdmissionConfig:
    return coerce_config(GroupAdmissionConfig, value, name="policy")


def _as_budget(value: object) -> SamplingBudgetConfig:
    return coerce_config(SamplingBudgetConfig, value, name="budget")


def _as_limits(value: object) -> DropLimits:
    return coerce_config(DropLimits, value, name="limits")


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

    policy: GroupAdmissionConfig = attrs.field(factory=GroupAdmissionConfig, converter=_as_policy)
    budget: SamplingBudgetConfig = attrs.field(factory=SamplingBudgetConfig, converter=_as_budget)
    limits: DropLimits = attrs.field(factory=DropLimits, converter=_as_limits)
    history: Mapping[str, Any] | None = attrs.field(default=None, converter=_history_fields)
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
        if not isinstance(mapping, Mapping):
            msg = f"'SessionConfig mapping' must be a mapping of fields (got {describe(mapping)})"
            raise TypeError(msg)
        fields = dict(mapping)
        if "preset" in fields:
            name = check_choice(fields.pop("preset"), "preset", tuple(PRESETS))
            fields = _overlay(PRESETS[name], fields)
        return from_mapping(cls, fields, source="SessionConfig mapping")

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


def _overlay(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides``: a section given as a mapping updates the preset's section."""
    merged = {key: dict(value) if isinstance(value, Mapping) else value for key, value in base.items()}
    for key, value in overrides.items():
        if key in _SECTIONS and isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged
