"""
The values of an ``AdmissionStream``: settings, a group's verdict, the counts beside the session's.

:class:`StreamSettings` is the ``stream:`` section of a host's admission block;
:class:`StreamVerdict` is what the host does with one finished group; :class:`StreamLedger`
holds what a stream counts that a session does not (skipped prompts, stale drops, version
spans, exhausted windows), with its checked JSON form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

import attrs

from ._decision import GroupAdmissionDecision
from ._exceptions import CheckpointError
from ._loading import MappingConfig
from ._session_types import StepReport
from ._validation import check_count, check_ge, check_one_of, describe, int_field

__all__ = [
    "ON_EXHAUSTED",
    "OnExhausted",
    "StreamLedger",
    "StreamSettings",
    "StreamVerdict",
    "version_numbers",
]

#: What a stream does when a window cannot afford another rejection, and a host when the budget
#: stops a step short of its target: train on what it has (a stream's group counted as
#: ``fallback_admitted``) or raise ``BudgetExhaustedError``.
OnExhausted = Literal["train", "raise"]
ON_EXHAUSTED: tuple[OnExhausted, ...] = get_args(OnExhausted)


@attrs.frozen(kw_only=True)
class StreamSettings(MappingConfig):
    """
    How an :class:`AdmissionStream` cuts a host's stream into windows: the ``stream:`` section.

    Args:
        window_groups: Groups kept per window (one window is one session step with this
            target; set it to the groups the trainer consumes per step). A window
            generates at most ``window_groups + budget.max_extra_groups`` groups that
            are not ``external`` (and stays under the budget's sample and token caps).
        max_staleness: A group that finishes more than this many versions past the first
            policy version that generated it is stale: it is not judged, its tokens are
            charged as ``aborted``, and it counts in ``arrived_stale`` (``None``: only the
            host's own rule, whose drops of kept groups ``drop_stale`` counts).
        on_exhausted: When a window cannot afford another rejection: ``"train"`` keeps
            the group (``fallback_admitted``, so every window ends at its target);
            ``"raise"`` raises :class:`BudgetExhaustedError` instead (the group dropped, the
            window closed, the next one opened).

    .. versionadded:: 0.2.0
    """

    window_groups: int = int_field(8, check_ge(1))
    max_skips_in_a_row: int = int_field(64, check_ge(0))
    max_staleness: int | None = int_field(None, check_ge(0), optional=True)
    on_exhausted: OnExhausted = attrs.field(default="train", validator=check_one_of(ON_EXHAUSTED))

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain, YAML- and JSON-safe types."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class StreamVerdict:
    """
    What the host does with one finished group: train on it (``keep``) or drop it.

    Attributes:
        keep: Train on it: admitted, or kept by a limit or an exhausted window.
        decision: The policy's verdict (``None`` for a stale group, which is not judged).
        fallback_admitted: Rejected, but kept by a drop limit or an exhausted window.
        stale: Older than ``max_staleness``: dropped unjudged.
        staleness: Versions between the first that generated it and the host's current one.
        version_span: Versions its tokens span (last minus first; ``None`` without versions).
        window: The window it counted in.
        report: The window's report, when this group closed it.

    .. versionadded:: 0.2.0
    """

    keep: bool
    decision: GroupAdmissionDecision | None
    window: int
    fallback_admitted: bool = False
    stale: bool = False
    staleness: int | None = None
    version_span: int | None = None
    report: StepReport | None = None


def version_numbers(versions: object, current_version: object) -> tuple[int | None, int | None]:
    """
    A group's version span and staleness from the host's version numbers (each ``None`` when unknown).

    ``versions`` are the policy versions that generated the group's tokens (any order, at
    least one); ``current_version`` is the host's version now.

    Raises:
        TypeError: ``versions`` is not a sequence of integers, or ``current_version`` not an integer.
        ValueError: a version is negative, ``versions`` is empty, or ``current_version`` is
            below the group's first version.
    """
    if versions is None:
        if current_version is not None:
            check_count(current_version, "current_version")
        return None, None
    if isinstance(versions, (str, bytes)) or not isinstance(versions, Sequence):
        msg = f"'versions' must be a sequence of policy version numbers (got {describe(versions)})"
        raise TypeError(msg)
    numbers = [check_count(version, "versions") for version in versions]
    if not numbers:
        msg = "'versions' must hold at least one policy version (got [])"
        raise ValueError(msg)
    first, span = min(numbers), max(numbers) - min(numbers)
    if current_version is None:
        return span, None
    current = check_count(current_version, "current_version")
    if current < first:
        msg = f"'current_version' must be >= the group's first version {first} (got {current})"
        raise ValueError(msg)
    return span, current - first


_LEDGER_FIELDS = (
    "skipped_prompts",
    "skips_in_a_row",
    "arrived_stale",
    "dropped_stale",
    "versioned_groups",
    "version_span_total",
    "version_span_max",
    "exhausted_windows",
)


@attrs.frozen(kw_only=True)
class StreamLedger:
    """
    The counts a stream keeps beside its session's (the session counts every judged group).

    Attributes:
        skipped_prompts: Prompts skipped before generation (never generated, never charged).
        skips_in_a_row: Prompts skipped since the last judged group.
        arrived_stale: Groups that finished older than ``max_staleness`` (never judged).
        dropped_stale: Kept groups the host dropped as stale by its own rule (``drop_stale``).
        versioned_groups: Judged groups that came with version numbers.
        version_span_total, version_span_max: Their version spans, summed and the largest.
        exhausted_windows: Windows that ran out of budget before their target.
    """

    skipped_prompts: int = 0
    skips_in_a_row: int = 0
    arrived_stale: int = 0
    dropped_stale: int = 0
    versioned_groups: int = 0
    version_span_total: int = 0
    version_span_max: int = 0
    exhausted_windows: int = 0

    def add(self, **counts: int) -> StreamLedger:
        """This ledger with ``counts`` added (``version_span_max`` takes the larger)."""
        values = self.to_dict()
        for name, count in counts.items():
            values[name] = max(values[name], count) if name == "version_span_max" else values[name] + count
        return StreamLedger(**values)

    def to_dict(self) -> dict[str, int]:
        """The counts as plain ints."""
        return {name: getattr(self, name) for name in _LEDGER_FIELDS}

    @classmethod
    def from_dict(cls, data: object) -> StreamLedger:
        """
        Rebuild from :meth:`to_dict` output.

        Raises:
            CheckpointError: not exactly the counts, a count is not a non-negative
                integer, or the spans contradict the versioned groups.
        """
        if not isinstance(data, Mapping) or set(data) != set(_LEDGER_FIELDS):
            msg = f"'ledger' must map exactly {list(_LEDGER_FIELDS)!r} to counts (got {describe(data)})"
            raise CheckpointError(msg)
        for name in _LEDGER_FIELDS:
            value = data[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                msg = f"'ledger.{name}' must be a non-negative integer (got {describe(value)})"
                raise CheckpointError(msg)
        ledger = cls(**dict(data))
        if ledger.version_span_max > ledger.version_span_total or (
            ledger.version_span_total and not ledger.versioned_groups
        ):
            msg = (
                f"'ledger' spans ({ledger.version_span_total} in all, {ledger.version_span_max} at most) "
                f"contradict its {ledger.versioned_groups} versioned group(s)"
            )
            raise CheckpointError(msg)
        return ledger

    def metrics(self, prefix: str = "") -> dict[str, int | float]:
        """The counts (``stale_groups``: both kinds), and ``version_span_mean`` over the versioned groups."""
        values: dict[str, int | float] = {
            "skipped_prompts": self.skipped_prompts,
            "stale_groups": self.arrived_stale + self.dropped_stale,
            "exhausted_windows": self.exhausted_windows,
            "version_span_max": self.version_span_max,
            "version_span_mean": self.version_span_total / max(1, self.versioned_groups),
        }
        return {f"{prefix}{name}": value for name, value in values.items()}
