"""
What the ROLL adapter's two paths share: reading rows, the rejection budget, the metrics.

ROLL replaces every dropped group with a new prompt (RLVR) or a new episode (agentic),
without any cap. The adapter therefore honours a rejection only while a budget allows it;
past the budget it keeps the group and counts it as ``fallback_admitted``. External
rejections (unusable data) are always dropped, because training on them would be worse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._decision import GroupAdmissionDecision
from .._loading import from_mapping
from .._metrics import AdmissionStats
from .._validation import describe

__all__ = [
    "METRIC_PREFIX",
    "Reporter",
    "flat",
    "keeps",
    "response_text",
    "rows",
    "settings_from",
]

#: Prefix of the admission metrics written into kept groups' ``meta_info["metrics"]``.
METRIC_PREFIX = "group_admission/"


def settings_from(cls: type[Any], raw: Any, source: str) -> Any:
    """Build the settings ``cls`` from a raw mapping (``None``: the defaults); errors name ``source``."""
    if raw is None:
        return cls()
    if not isinstance(raw, Mapping):
        msg = f"{source} must be a mapping (got {describe(raw)})"
        raise TypeError(msg)
    return from_mapping(cls, raw, source=source)


def flat(values: Any) -> list[Any]:
    """A tensor, array or list as a flat Python list."""
    if hasattr(values, "detach"):
        return list(values.detach().reshape(-1).tolist())
    if hasattr(values, "reshape"):
        return list(values.reshape(-1).tolist())
    return list(values)


def response_text(data: Any, row: int) -> str | None:
    """The response tokens of one row, as text for the redundancy gate (token ids joined by spaces)."""
    try:
        ids = data.batch["input_ids"][row]
        mask = data.batch["response_mask"][row]
        return " ".join(str(token) for token in ids[mask.bool()].tolist())
    except (KeyError, IndexError, AttributeError, TypeError, RuntimeError):
        return None


def rows(data: Any) -> int | None:
    """``len(data)``, or ``None`` when it has none."""
    try:
        return len(data)
    except TypeError:
        return None


def _drop_allowed(window: AdmissionStats, ratio: float | None, cap: int | None) -> bool:
    """Whether one more drop fits the budget; ``window`` does not count the group at hand yet."""
    drops = window.rejected - window.fallback_admitted + 1
    if ratio is not None and drops / (window.candidates + 1) > ratio:
        return False
    return cap is None or drops <= cap


def keeps(
    decision: GroupAdmissionDecision,
    window: AdmissionStats,
    *,
    ratio: float | None,
    cap: int | None,
    budgeted: bool,
) -> bool:
    """Whether the group is kept: admitted, or rejected past the budget of ``window``."""
    if decision.admitted:
        return True
    return budgeted and not _drop_allowed(window, ratio, cap)


class Reporter:
    """
    Counts since the last kept group, written onto that group for ROLL's metric reduction.

    ROLL reduces each ``meta_info["metrics"]`` key over the batch, choosing the reducer from
    an ``@<reducer>`` suffix, so counts written as ``group_admission/<name>@sum`` on one
    DataProto per kept group add up to the groups judged for the batch.
    """

    def __init__(self) -> None:
        self.total = AdmissionStats()
        self._unreported = AdmissionStats()

    def add(self, decision: GroupAdmissionDecision, *, fallback_admitted: bool) -> None:
        """Count one decision."""
        self.total.add(decision, fallback_admitted=fallback_admitted)
        self._unreported.add(decision, fallback_admitted=fallback_admitted)

    def report(self, leaves: Sequence[Any]) -> None:
        """Write the unreported counts onto one of ``leaves`` (a single-row one if any)."""
        carriers = [leaf for leaf in leaves if isinstance(getattr(leaf, "meta_info", None), dict)]
        if not carriers:
            return
        carrier = next((leaf for leaf in carriers if rows(leaf) == 1), carriers[0])
        metrics: dict[str, Any] = {
            f"{METRIC_PREFIX}{name}@sum": value
            for name, value in self._unreported.metrics().items()
            if name != "effective_group_rate"
        }
        metrics[f"{METRIC_PREFIX}cumulative_effective_group_rate"] = self.total.effective_group_rate
        self._unreported.reset()
        # Rows of one prompt share a meta_info dict: give the carrier its own, so that the
        # counts appear once in the batch rather than once per row.
        meta = carrier.meta_info
        existing = meta.get("metrics")
        carrier.meta_info = {
            **meta,
            "metrics": {**(existing if isinstance(existing, Mapping) else {}), **metrics},
        }
