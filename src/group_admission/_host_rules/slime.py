"""slime's drop rule for filtered groups (``should_drop_dynamic_filter_output``, THUDM/slime v0.3.1+)."""

from __future__ import annotations

__all__ = ["fallback_kept_lower_bound", "should_drop"]


def should_drop(
    keep: bool,
    *,
    keep_when_insufficient: bool,
    remaining_batch_size: int,
    target_data_size: int,
) -> bool:
    """
    Apply slime's drop rule to one filtered group (``should_drop_dynamic_filter_output``).

    A kept group is never dropped. A rejected group marked ``keep_when_insufficient`` is
    kept when dropping it would leave fewer submitted-but-not-dropped groups than the
    target (``remaining_batch_size <= target_data_size``), because that would force
    another over-sampling wave. Every other rejected group is dropped, and slime then
    decrements ``remaining_batch_size``.

    .. versionadded:: 0.1.0
    """
    if keep:
        return False
    return not (keep_when_insufficient and remaining_batch_size <= target_data_size)


def fallback_kept_lower_bound(
    *, unknown: int, gate_rejected: int, known: int, target: int, admitted: int
) -> int:
    """
    How many of ``unknown`` fallback-marked rejections slime surely kept.

    When slime's live ``remaining_batch_size`` could not be read, a rollout still trained
    on ``target`` groups: the ones the policy admitted, the known fallbacks, and at least
    as many unknown fallbacks as it takes to fill the rest, but never more than were marked
    or were gate rejections.
    """
    return max(0, min(unknown, gate_rejected - known, target - admitted - known))
