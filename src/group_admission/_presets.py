"""
The named configurations a ``SessionConfig`` starts from, and how its sections are read.

One YAML block (or mapping) holds the policy, the budget, the drop limits, the prompt
history and the loss scale; ``preset:`` starts from a named configuration (:data:`PRESETS`),
which the other keys then override section by section::

    group_admission:
      preset: recommended
      policy: {gate_on: [accuracy]}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._budget import SamplingBudgetConfig
from ._config import GroupAdmissionConfig
from ._history_config import PromptHistoryConfig
from ._limits import DropLimits
from ._loading import coerce_config
from ._validation import check_choice, describe

__all__ = ["PRESETS", "as_budget", "as_limits", "as_policy", "history_fields", "with_preset"]

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


def history_fields(value: object) -> dict[str, Any] | None:
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


def as_policy(value: object) -> GroupAdmissionConfig:
    """The ``policy`` section: a :class:`GroupAdmissionConfig` or a mapping of its fields."""
    return coerce_config(GroupAdmissionConfig, value, name="policy")


def as_budget(value: object) -> SamplingBudgetConfig:
    """The ``budget`` section: a :class:`SamplingBudgetConfig` or a mapping of its fields."""
    return coerce_config(SamplingBudgetConfig, value, name="budget")


def as_limits(value: object) -> DropLimits:
    """The ``limits`` section: :class:`DropLimits` or a mapping of its fields."""
    return coerce_config(DropLimits, value, name="limits")


def with_preset(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """
    The fields of ``mapping``, over the preset its ``preset`` key names (if any).

    A section given as a mapping updates the preset's section field by field; any other
    value replaces it.

    Raises:
        TypeError: ``mapping`` is not a mapping.
        ValueError: ``preset`` names no preset of :data:`PRESETS`.
    """
    if not isinstance(mapping, Mapping):
        msg = f"'SessionConfig mapping' must be a mapping of fields (got {describe(mapping)})"
        raise TypeError(msg)
    fields = dict(mapping)
    if "preset" not in fields:
        return fields
    base = PRESETS[check_choice(fields.pop("preset"), "preset", tuple(PRESETS))]
    merged = {key: dict(value) if isinstance(value, Mapping) else value for key, value in base.items()}
    for key, value in fields.items():
        if key in _SECTIONS and isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged
