"""
``DropLimits``: how many rejections a host that replaces every dropped group may honour.

And ``StepLabel``, the step a group counts in for step-scoped limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs
import numpy as np

from ._decision import GroupAdmissionDecision
from ._loading import from_mapping
from ._reasons import RejectionReason
from ._validation import (
    check_ge,
    check_nonempty_strings,
    check_one_of,
    check_range,
    describe,
    int_field,
    real_field,
)

__all__ = ["DropLimits", "LimitScope", "StepLabel", "check_step_label"]

LimitScope = Literal["step", "run"]
#: The training step a group is counted in by step-scoped limits: a host's own label or index.
StepLabel = int | str | None


def check_step_label(step: object) -> StepLabel:
    """A step label as given (numpy integers as ``int``); ``TypeError`` for anything else."""
    if step is None or isinstance(step, str) or (isinstance(step, int) and not isinstance(step, bool)):
        return step
    if isinstance(step, np.integer):
        return int(step)
    msg = f"'step' must be an int, a str or None (got {describe(step)})"
    raise TypeError(msg)


def _as_names(value: Any) -> Any:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return value


def _check_names(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple):
        msg = f"'{attribute.name}' must be a list of external reason names (got {describe(value)})"
        raise TypeError(msg)
    check_nonempty_strings(value, attribute.name)  # an empty name is a ValueError, as everywhere


@attrs.frozen(kw_only=True)
class DropLimits:
    """
    Caps on the rejections a session honours, for hosts that replace every dropped group.

    slime, ROLL and RAGEN's agentic loops sample a replacement for each dropped group
    with no cap of their own, so a stream of rejections costs without bound. Past a limit,
    :class:`AdmissionSession` keeps a gate rejection anyway and counts it as
    ``fallback_admitted``. External rejections (unusable data) are never forced through,
    except those whose every external reason is listed in ``forceable_external``. The
    defaults set no limit.

    Args:
        max_rejection_ratio: A rejection is honoured only while the dropped groups stay
            within this share of the judged groups, counting the group at hand:
            ``(dropped + 1) / (judged + 1) <= ratio``.
        max_rejected_groups: At most this many dropped groups.
        scope: ``"step"`` counts both limits per training step, ``"run"`` over the
            session's lifetime.
        forceable_external: External reasons that a limit may force through (for
            example ROLL's ``drop_flag`` placeholder, which is trainable).
        max_consecutive_failed_groups: Raise :class:`ConsecutiveFailedGroupsError` after
            this many dropped external rejections in a row.

    .. versionadded:: 0.2.0
    """

    max_rejection_ratio: float | None = real_field(None, check_range(0, 1), optional=True)
    max_rejected_groups: int | None = int_field(None, check_ge(0), optional=True)
    scope: LimitScope = attrs.field(default="step", validator=check_one_of(("step", "run")))
    forceable_external: tuple[str, ...] = attrs.field(default=(), converter=_as_names, validator=_check_names)
    max_consecutive_failed_groups: int | None = int_field(None, check_ge(1), optional=True)

    @property
    def caps_drops(self) -> bool:
        """Whether a ratio or count limit is set."""
        return self.max_rejection_ratio is not None or self.max_rejected_groups is not None

    def forceable(self, decision: GroupAdmissionDecision) -> bool:
        """Whether a limit may keep this rejected group (never an unusable external one)."""
        if decision.reason is not RejectionReason.EXTERNAL:
            return True
        return bool(decision.external_reasons) and set(decision.external_reasons) <= set(
            self.forceable_external
        )

    def drop_allowed(self, judged: int, dropped: int) -> bool:
        """Whether one more drop fits, given the groups judged and dropped so far in the scope."""
        drops = dropped + 1
        if self.max_rejection_ratio is not None and drops / (judged + 1) > self.max_rejection_ratio:
            return False
        return self.max_rejected_groups is None or drops <= self.max_rejected_groups

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> DropLimits:
        """Build limits from a mapping of field names, rejecting unknown keys."""
        return from_mapping(cls, mapping, source="DropLimits mapping")

    def to_dict(self) -> dict[str, Any]:
        """Return the limits as a plain, YAML- and JSON-safe dict."""
        data = attrs.asdict(self)
        data["forceable_external"] = list(self.forceable_external)
        return data
