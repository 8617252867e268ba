"""The ROLL adapter's settings, where ROLL's configs hold them, and the ROLL versions supported."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs

from ... import DropLimits, GroupAdmissionConfig
from .._kit import (
    check_ge,
    check_int,
    check_names_in,
    check_optional,
    check_range,
    check_real,
    deprecated,
    describe,
    failed_streak_field,
    host_versions,
    read_settings_env,
    scalar_policy_config,
    settings_from,
    to_str_tuple,
)

#: The ROLL commit the adapter was checked against. ROLL's package version is no range to
#: check (v0.2.0 and v0.2.1 call themselves 0.1.0); the tags that work are in the docs.
SUPPORTED_VERSIONS = host_versions({"roll": "alibaba/ROLL@8eb27cc2dc34c4d1310b169d9b86d339004d811a"})
#: Key of the RLVR settings inside ``rewards.<domain>.query_filter_config.filter_args``.
RLVR_SETTINGS_KEY = "group_admission"
#: Environment variable (or ``system_envs`` entry) with the agentic settings: a YAML path or inline YAML.
AGENTIC_SETTINGS_ENV = "GROUP_ADMISSION_ROLL_CONFIG"

_MODES = ("train", "val")
#: ``max_rejection_ratio``: ``null`` or a number in [0, 1], checked as :class:`DropLimits` checks it.
_RATIO = check_optional(check_real, check_range(0, 1))


@attrs.frozen(kw_only=True)
class RollRLVRSettings:
    """
    Settings of the RLVR loop and ``query_filter``, in ``filter_args.group_admission`` of a reward domain.

    ``max_rejection_ratio`` and ``max_rejected_groups_per_step`` cap the drops per training
    step, ``max_consecutive_failed_groups`` stops the run (``null``: no cap); see docs/adapters/roll.md.

    .. versionadded:: 0.1.0
    """

    policy: GroupAdmissionConfig = attrs.field(factory=GroupAdmissionConfig, converter=scalar_policy_config)
    max_rejection_ratio: float | None = attrs.field(default=0.5, validator=_RATIO)
    max_rejected_groups_per_step: int | None = attrs.field(
        default=None, validator=check_optional(check_int, check_ge(0))
    )
    max_consecutive_failed_groups: int | None = failed_streak_field()

    @property
    def limits(self) -> DropLimits:
        """The session's drop limits, counted per training step."""
        return DropLimits(
            max_rejection_ratio=self.max_rejection_ratio,
            max_rejected_groups=self.max_rejected_groups_per_step,
            scope="step",
            max_consecutive_failed_groups=self.max_consecutive_failed_groups,
        )


_DEPRECATED_RATIO = "max_drop_ratio"


def _renamed(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` with the deprecated ``max_drop_ratio`` renamed ``max_rejection_ratio`` (with a warning)."""
    fields = dict(fields)
    if _DEPRECATED_RATIO not in fields:
        return fields
    # From here: this function, the constructor, and its caller.
    deprecated(
        "'max_drop_ratio'",
        "name the setting 'max_rejection_ratio', as the RLVR settings and DropLimits do",
        stacklevel=4,
    )
    if "max_rejection_ratio" in fields:
        msg = (
            "'max_rejection_ratio' must be given alone: 'max_drop_ratio' is its deprecated name "
            f"(got both: {fields['max_rejection_ratio']!r} and {fields[_DEPRECATED_RATIO]!r})"
        )
        raise ValueError(msg)
    fields["max_rejection_ratio"] = fields.pop(_DEPRECATED_RATIO)
    return fields


@attrs.frozen(kw_only=True, init=False)
class RollAgenticSettings:
    """
    Settings of the agentic group filter, read from ``GROUP_ADMISSION_ROLL_CONFIG``.

    ``max_rejection_ratio`` caps the drops over the filter's lifetime, ``modes`` are the
    scheduler modes judged (the others keep everything), ``max_consecutive_failed_groups``
    stops the run (``null``: no cap); see docs/adapters/roll.md.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.2.0
       ``max_drop_ratio`` is named ``max_rejection_ratio``; the old name still works, with a
       ``DeprecationWarning``, until it is removed in 0.3.0.
    """

    policy: GroupAdmissionConfig = attrs.field(factory=GroupAdmissionConfig, converter=scalar_policy_config)
    max_rejection_ratio: float | None = attrs.field(default=0.5, validator=_RATIO)
    modes: tuple[str, ...] = attrs.field(
        default=("train",), converter=to_str_tuple, validator=check_names_in(_MODES, "scheduler mode")
    )
    max_consecutive_failed_groups: int | None = failed_streak_field()

    def __init__(self, **fields: Any) -> None:
        self.__attrs_init__(**_renamed(fields))

    @property
    def max_drop_ratio(self) -> float | None:
        """
        Deprecated alias of :attr:`max_rejection_ratio`.

        .. deprecated:: 0.2.0
            Read :attr:`max_rejection_ratio`; removed in 0.3.0.
        """
        deprecated("'max_drop_ratio'", "read 'max_rejection_ratio'")
        return self.max_rejection_ratio

    @property
    def limits(self) -> DropLimits:
        """The session's drop limits: lifetime, and ROLL's trainable ``drop_flag`` placeholder may be kept."""
        return DropLimits(
            max_rejection_ratio=self.max_rejection_ratio,
            scope="run",
            forceable_external=("drop_flag",),
            max_consecutive_failed_groups=self.max_consecutive_failed_groups,
        )


def rlvr_settings(pipeline_config: Any, domain: str) -> tuple[Any, str]:
    """``domain``'s raw RLVR settings, and where they were read (for errors)."""
    rewards = getattr(pipeline_config, "rewards", None)
    if not isinstance(rewards, Mapping) or domain not in rewards:
        known = sorted(rewards) if isinstance(rewards, Mapping) else []
        msg = f"'rewards.{domain}' is missing from the pipeline config (reward domains: {known})"
        raise ValueError(msg)
    source = f"'rewards.{domain}.query_filter_config.filter_args'"
    filter_args = getattr(getattr(rewards[domain], "query_filter_config", None), "filter_args", None)
    if filter_args is not None and not isinstance(filter_args, Mapping):
        msg = f"{source} must be a mapping (got {describe(filter_args)})"
        raise TypeError(msg)
    raw = (filter_args or {}).get(RLVR_SETTINGS_KEY)
    return raw, f"{source[:-1]}.{RLVR_SETTINGS_KEY}'"


def agentic_settings(config: Any, env_manager_config: Any) -> RollAgenticSettings:
    """The agentic settings: ``system_envs`` of the env manager, of the pipeline, or the environment."""
    for owner in (env_manager_config, config):
        envs = getattr(owner, "system_envs", None)
        if isinstance(envs, Mapping) and envs.get(AGENTIC_SETTINGS_ENV):
            value = envs[AGENTIC_SETTINGS_ENV]
            break
    else:
        value = os.environ.get(AGENTIC_SETTINGS_ENV)
    if value is None:
        return RollAgenticSettings()
    if not isinstance(value, str):
        msg = f"'{AGENTIC_SETTINGS_ENV}' must be a YAML file path or inline YAML (got {describe(value)})"
        raise TypeError(msg)
    raw = read_settings_env(AGENTIC_SETTINGS_ENV, value)
    if isinstance(raw, Mapping):
        raw = _renamed(raw)
    return settings_from(RollAgenticSettings, raw, f"'{AGENTIC_SETTINGS_ENV}'")
