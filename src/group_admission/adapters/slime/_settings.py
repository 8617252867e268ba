"""The slime adapter's settings, the slime versions it supports, and the names it writes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..._config import GroupAdmissionConfig
from ..._limits import DropLimits
from ..._validation import check_ge, check_int, check_names_in, check_optional
from .._adapter_runtime import (
    HostSupport,
    as_policy_config,
    check_bool,
    check_gate_on_unset,
    settings_from,
    to_str_tuple,
)

__all__ = ["HOST_SUPPORT", "METRIC_PREFIX", "SETTINGS_ATTR", "SlimeAdmissionSettings"]

#: The slime versions the adapter supports.
HOST_SUPPORT = HostSupport(
    host="THUDM/slime",
    versions=(
        (">=0.3.1", "everything; gate rejections carry keep_when_insufficient"),
        ("0.3.0", "no keep_when_insufficient: rejections are dropped strictly, with one warning"),
    ),
    checked_commit="624b824a898ab0ec1fcb4d373004c7f3852bf515",
)
#: The ``args`` attribute that ``--custom-config-path`` sets from the YAML's top-level key.
SETTINGS_ATTR = "group_admission"
#: Prefix of the metrics the log hook adds beside slime's ``rollout/dynamic_filter/...``.
METRIC_PREFIX = "rollout/group_admission/"

_STATUSES = ("pending", "completed", "truncated", "aborted", "failed")


@attrs.frozen(kw_only=True)
class SlimeAdmissionSettings:
    """
    The slime adapter's settings: the ``group_admission`` mapping of ``--custom-config-path``.

    Args:
        policy: The :class:`GroupAdmissionConfig` fields (``gate_on`` is not supported:
            slime gives one scalar reward per sample; pick a component with
            ``--reward-key``).
        keep_when_insufficient: Mark gate rejections (``exact_dead``, ``near_tie``,
            ``redundant``) with slime's ``keep_when_insufficient``, so slime keeps them
            rather than start another over-sampling wave. External rejections are always
            dropped. slime before v0.3.1 lacks the field: the adapter then drops strictly
            and warns once.
        max_consecutive_failed_groups: Stop the run with
            :class:`ConsecutiveFailedGroupsError` after this many consecutive external
            rejections (``None``: never).
        reject_statuses: Sample statuses that make a group ``external``.

    .. versionadded:: 0.1.0
    """

    policy: GroupAdmissionConfig = attrs.field(
        factory=GroupAdmissionConfig, converter=as_policy_config, validator=check_gate_on_unset
    )
    keep_when_insufficient: bool = attrs.field(default=True, validator=check_bool)
    max_consecutive_failed_groups: int | None = attrs.field(
        default=8, validator=check_optional(check_int, check_ge(1))
    )
    reject_statuses: tuple[str, ...] = attrs.field(
        default=("aborted", "failed"),
        converter=to_str_tuple,
        validator=check_names_in(_STATUSES, "sample status"),
    )

    @property
    def limits(self) -> DropLimits:
        """The session's drop limits: slime keeps no drop budget, only the failure streak."""
        return DropLimits(max_consecutive_failed_groups=self.max_consecutive_failed_groups)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None) -> SlimeAdmissionSettings:
        """
        Build the settings from the ``group_admission`` mapping (``None``: all defaults).

        Raises:
            TypeError: the value is not a mapping, or a setting has the wrong type.
            ValueError: a key is unknown or a value is out of range.
        """
        return settings_from(
            cls,
            mapping,
            f"'{SETTINGS_ATTR}' (set on slime's args by --custom-config-path)",
            where=f"'{SETTINGS_ATTR}' settings",
        )
