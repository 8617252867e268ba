"""
slime adapter: a ``--dynamic-sampling-filter-path`` filter backed by the admission policy.

This module never imports slime at import time, and it holds no gate logic of its own.
"""

from __future__ import annotations

__all__ = ["should_drop"]


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

    This is the one definition that the adapter's documentation and the simulator's
    slime strategy share.

    .. versionadded:: 0.1.0
    """
    if keep:
        return False
    return not (keep_when_insufficient and remaining_batch_size <= target_data_size)
