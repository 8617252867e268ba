"""Gathering JSON-safe snapshots across ``torch.distributed`` ranks (torch is optional)."""

from __future__ import annotations

from typing import Any

from ._loading import require_extra

__all__ = ["all_gather_snapshots"]


def all_gather_snapshots(snapshot: Any, group: Any = None, *, feature: str) -> list[Any]:
    """Return every rank's ``snapshot`` (any picklable value), in rank order; ``feature`` names the caller."""
    torch = require_extra("torch", "torch", feature)
    dist = torch.distributed
    if not dist.is_available() or not dist.is_initialized():
        msg = f"{feature} needs an initialised torch.distributed process group"
        raise RuntimeError(msg)
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, snapshot, group=group)
    return gathered
