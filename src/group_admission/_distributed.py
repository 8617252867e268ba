"""All-reduce of ``AdmissionStats`` across ``torch.distributed`` ranks (torch is optional)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._loading import require_extra

if TYPE_CHECKING:
    from ._metrics import AdmissionStats

__all__ = ["all_reduce_stats"]


def all_reduce_stats(stats: AdmissionStats, group: Any = None) -> AdmissionStats:
    """Return the sum of ``stats`` over every rank of ``group`` (default: the world)."""
    from ._metrics import AdmissionStats  # noqa: PLC0415  (circular import)

    torch = require_extra("torch", "torch", "AdmissionStats.all_reduce")
    dist = torch.distributed
    if not dist.is_available() or not dist.is_initialized():
        msg = "AdmissionStats.all_reduce needs an initialised torch.distributed process group"
        raise RuntimeError(msg)
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, stats.to_dict(), group=group)
    total = AdmissionStats()
    for snapshot in gathered:
        total = total.merge(AdmissionStats.from_dict(snapshot))
    return total
