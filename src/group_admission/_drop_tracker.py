"""The running counts behind :class:`DropLimits`: drop windows and the streak of failed groups."""

from __future__ import annotations

from collections import Counter, OrderedDict

import attrs
import numpy as np

from ._decision import BatchAdmissionResult, GroupAdmissionDecision
from ._limits import DropLimits, StepLabel
from ._reasons import RejectionReason

__all__ = ["WINDOWS", "DropTracker", "Evicted"]

#: Step windows kept for step-scoped limits (asynchronous hosts overlap only a few steps).
WINDOWS = 16


@attrs.frozen
class Evicted:
    """
    The step labels whose windows were evicted: their counts are gone, so no drop can be shown to fit.

    Integer labels are step indices, which grow: ``through`` is the largest evicted one, and
    every int label at or below it that is not tracked counts as evicted (older than the
    steps the limits track). Text labels have no order, so each evicted one is remembered.

    Attributes:
        through: The largest int label evicted (``None``: none).
        labels: The text labels evicted.
    """

    through: int | None = None
    labels: frozenset[str] = frozenset()

    def __contains__(self, label: object) -> bool:
        if isinstance(label, str):
            return label in self.labels
        return self.through is not None and isinstance(label, int) and label <= self.through

    def add(self, label: StepLabel) -> Evicted:
        """These labels and ``label``."""
        if isinstance(label, str):
            return Evicted(self.through, self.labels | {label})
        if isinstance(label, int):
            return Evicted(label if self.through is None else max(self.through, label), self.labels)
        return self

    def __bool__(self) -> bool:
        return self.through is not None or bool(self.labels)


class DropTracker:
    """
    Apply :class:`DropLimits` group by group, and keep the streak of dropped external groups.

    A step-scoped limit counts each step in a window; the :data:`WINDOWS` most recent steps
    keep theirs. A group of a step whose window was evicted (see :class:`Evicted`) cannot
    show that a drop fits, so the limit holds the only safe way: no rejection of it is
    honoured (a forceable one is kept as a fallback; unusable external data is still dropped).

    Not thread-safe: the :class:`AdmissionSession` that owns it calls it under its lock.

    Args:
        limits: The limits to apply.
        windows: Judged and dropped counts per scope key (a step label, or ``"run"``).
        streak: The current run of dropped external rejections, by external reason.
        evicted: The step labels whose windows were evicted.
    """

    def __init__(
        self,
        limits: DropLimits,
        windows: OrderedDict[StepLabel, list[int]] | None = None,
        streak: Counter[str] | None = None,
        evicted: Evicted | None = None,
    ) -> None:
        self.limits = limits
        self.windows: OrderedDict[StepLabel, list[int]] = windows if windows is not None else OrderedDict()
        self.streak: Counter[str] = streak if streak is not None else Counter()
        self.evicted = evicted if evicted is not None else Evicted()

    def apply(self, decision: GroupAdmissionDecision, step: StepLabel) -> tuple[bool, bool]:
        """Whether the group is kept, and whether a limit forced it, counting it in ``step``'s window."""
        limits = self.limits
        if not limits.caps_drops:
            return decision.admitted, False
        key = "run" if limits.scope == "run" else step
        window = self.windows.get(key)
        if window is None and key in self.evicted:  # its counts are gone: honour no rejection
            keep = decision.admitted or limits.forceable(decision)
            return keep, keep and not decision.admitted
        if window is None:
            window = self.windows[key] = [0, 0]
            while len(self.windows) > WINDOWS:
                self.evicted = self.evicted.add(self.windows.popitem(last=False)[0])
        judged, dropped = window
        keep = decision.admitted or (limits.forceable(decision) and not limits.drop_allowed(judged, dropped))
        window[0] += 1
        window[1] += not keep
        return keep, keep and not decision.admitted

    def extend_streak(self, result: BatchAdmissionResult) -> None:
        """The streak after a batch judged without limits: its trailing run of external rejections."""
        external = result.reason_codes == RejectionReason.EXTERNAL.code
        others = np.flatnonzero(~external)
        if len(others):
            self.streak.clear()
        for row in range(int(others[-1]) + 1 if len(others) else 0, len(result)):
            self.streak[result.external_reasons[row][0]] += 1

    def note_outcome(self, decision: GroupAdmissionDecision, *, dropped: bool, host: str) -> str | None:
        """Fold one outcome into the failure streak; return the error message at the limit."""
        if not dropped or decision.reason is not RejectionReason.EXTERNAL:
            self.streak.clear()
            return None
        self.streak[decision.external_reasons[0] if decision.external_reasons else "external"] += 1
        limit = self.limits.max_consecutive_failed_groups
        count = sum(self.streak.values())
        if limit is None or count < limit:
            return None
        details = ", ".join(f"{reason} x{n}" for reason, n in self.streak.most_common())
        self.streak.clear()
        return (
            f"{count} consecutive groups were rejected as external ({details}): the {host} "
            "rollout is not producing usable groups, so the run stops here. Fix the generation or "
            "reward path that fails, or raise 'max_consecutive_failed_groups' "
            f"(now {limit}) in the group_admission settings."
        )
