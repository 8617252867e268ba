"""
The OpenRLHF adapter's settings, read from one environment variable (OpenRLHF's parser takes no extra flags).

This module does not import OpenRLHF.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from typing import Any

import attrs

from ... import DropLimits, GroupAdmissionConfig, SamplingBudgetConfig
from .._kit import (
    LossScale,
    OnExhausted,
    as_budget,
    as_limits,
    as_policy_config,
    check_bool,
    loss_scale_field,
    on_exhausted_field,
    read_settings_env,
    settings_from,
    token_ids_only,
)

__all__ = [
    "DEFAULT_POLICY",
    "SCORES",
    "SETTINGS_ENV",
    "OpenRLHFAdmissionSettings",
    "current_settings",
    "forget_settings",
]

#: The environment variable holding the settings: inline JSON, or a ``.json``/``.yaml`` file path.
SETTINGS_ENV = "GROUP_ADMISSION_OPENRLHF"
#: The policy fields the adapter sets unless the settings override them: a zero-spread gate,
#: so a tied group (all 0.5, all 0, all 1) is rejected out of the box.
DEFAULT_POLICY: Mapping[str, Any] = {"min_reward_std": 1e-6}
#: The component read from ``Experience.scores`` (what OpenRLHF's own filter reads).
SCORES = "scores"


def _as_policy(value: Any) -> GroupAdmissionConfig:
    if value is None:
        return GroupAdmissionConfig.from_mapping(DEFAULT_POLICY)
    if isinstance(value, Mapping):
        return as_policy_config({**DEFAULT_POLICY, **value})
    return as_policy_config(value)


@attrs.frozen(kw_only=True)
class OpenRLHFAdmissionSettings:
    """
    The settings of the OpenRLHF adapter (the mapping in ``GROUP_ADMISSION_OPENRLHF``).

    Args:
        policy: :class:`GroupAdmissionConfig` fields, over the adapter's default
            ``min_reward_std: 1e-6``. Without ``gate_on`` the gate reads each
            experience's ``scores`` (what OpenRLHF's filter reads); ``gate_on`` names
            ``info`` keys instead: ``reward``, ``score``, or any key of the reward
            function's ``extra_logs``. The redundancy gate is refused.
        budget: :class:`SamplingBudgetConfig` fields: the hard caps on replacement groups
            (``max_extra_groups``, ``max_total_samples``, ``max_total_tokens``) and the
            streaming plan's ``confidence``. The defaults allow no replacement.
        limits: :class:`DropLimits` fields (``None``: none).
        apply_dynamic_filtering_range: Also apply OpenRLHF's own rule after the gates: a
            group whose mean score is not strictly inside ``--algo.dynamic_filtering_range``
            is rejected.
        on_exhausted: When the caps stop replacements short of the target: ``"train"``
            returns the kept groups (OpenRLHF trains on a short batch, or skips an empty
            one); ``"raise"`` stops with :class:`group_admission.BudgetExhaustedError`.
        metrics_in_info: Write the call's metrics into every returned experience's
            ``info``, so that OpenRLHF logs them beside its own (``train/group_admission/...``).
        loss_scale: The loss scale the step metrics report (``loss_scale``); OpenRLHF
            0.11.2 averages over the batch it trains on whatever ``--actor.loss_agg_mode``,
            which is ``"kept"`` on a short step (docs/adapters/openrlhf.md).

    .. versionadded:: 0.2.0
    """

    policy: GroupAdmissionConfig = attrs.field(
        default=None, converter=_as_policy, validator=token_ids_only("OpenRLHF", "its experiences hold")
    )
    budget: SamplingBudgetConfig = attrs.field(factory=SamplingBudgetConfig, converter=as_budget)
    limits: DropLimits = attrs.field(factory=DropLimits, converter=as_limits)
    apply_dynamic_filtering_range: bool = attrs.field(default=False, validator=check_bool)
    on_exhausted: OnExhausted = on_exhausted_field()
    metrics_in_info: bool = attrs.field(default=True, validator=check_bool)
    loss_scale: LossScale = loss_scale_field()

    @property
    def components(self) -> tuple[str, ...]:
        """What the gate reads per experience: the ``gate_on`` info keys, else ``scores``."""
        return self.policy.gate_on or (SCORES,)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None) -> OpenRLHFAdmissionSettings:
        """
        Build the settings from a mapping (``None``: all defaults).

        Raises:
            TypeError: the value is not a mapping, or a setting has the wrong type.
            ValueError: a key is unknown or a value is out of range.
        """
        return settings_from(cls, mapping, f"the {SETTINGS_ENV} settings")

    @classmethod
    def from_env(cls, value: str | None) -> OpenRLHFAdmissionSettings:
        """
        Build the settings from the value of ``GROUP_ADMISSION_OPENRLHF`` (``None`` or empty: defaults).

        Read by :func:`~group_admission.adapters._kit.read_settings_env`: inline JSON or
        YAML, or the path of a ``.json`` or YAML file (YAML needs pyyaml).

        Raises:
            ConfigurationError: the text is invalid, or does not hold a mapping.
            FileNotFoundError: the file does not exist.
            TypeError, ValueError: as :meth:`from_mapping`.
        """
        return cls.from_mapping(read_settings_env(SETTINGS_ENV, value))


@cache
def _settings_for(value: str | None) -> OpenRLHFAdmissionSettings:
    return OpenRLHFAdmissionSettings.from_env(value)


def current_settings() -> OpenRLHFAdmissionSettings:
    """The settings in this process's ``GROUP_ADMISSION_OPENRLHF`` (each distinct value is read once)."""
    return _settings_for(os.environ.get(SETTINGS_ENV))


def forget_settings() -> None:
    """Forget the settings read so far (a changed file is read again)."""
    _settings_for.cache_clear()
