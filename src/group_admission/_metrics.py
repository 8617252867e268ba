"""
Admission counts: ``group_admission_metrics`` and the mergeable ``AdmissionStats``.

Everything is a raw count so that distributed callers sum across workers before they
divide; the only ratio, ``effective_group_rate``, is derived from the summed counts.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ._batch import BatchAdmissionResult
from ._decision import GroupAdmissionDecision
from ._reasons import RejectionReason
from ._validation import describe

if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = ["AdmissionStats", "group_admission_metrics"]

Decisions: TypeAlias = Iterable[GroupAdmissionDecision] | BatchAdmissionResult

_REASON_FIELD = {
    RejectionReason.EXTERNAL: "external",
    RejectionReason.EXACT_DEAD: "exact_dead",
    RejectionReason.NEAR_TIE: "near_tie",
    RejectionReason.REDUNDANT: "redundant",
}
_COUNT_FIELDS = (
    "candidates",
    "admitted",
    "external",
    "exact_dead",
    "near_tie",
    "redundant",
    "reward_rejected",
    "near_duplicate_rejected",
    "fallback_admitted",
)


class AdmissionStats:
    """
    A thread-safe accumulator of admission counts, mergeable across workers.

    Counts conserve: ``candidates == admitted + external + exact_dead + near_tie +
    redundant``. ``reward_rejected`` and ``near_duplicate_rejected`` count groups where
    that check failed whatever the primary reason, so they overlap the exclusive counts.
    ``external_details`` counts each external reason string. ``fallback_admitted`` counts
    rejected groups a framework trained on anyway (slime's ``keep_when_insufficient``, a
    ROLL budget fallback); it is part of the rejections, not of ``admitted``.

    Updates take a lock, so threads may share one instance; asyncio tasks may too, since
    no update awaits.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_counts", "_details", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(_COUNT_FIELDS, 0)
        self._details: Counter[str] = Counter()

    # -- reading ---------------------------------------------------------------------
    @property
    def candidates(self) -> int:
        """Groups judged."""
        return self._counts["candidates"]

    @property
    def admitted(self) -> int:
        """Groups admitted by the policy."""
        return self._counts["admitted"]

    @property
    def external(self) -> int:
        """Groups rejected as ``external``."""
        return self._counts["external"]

    @property
    def exact_dead(self) -> int:
        """Groups rejected as ``exact_dead``."""
        return self._counts["exact_dead"]

    @property
    def near_tie(self) -> int:
        """Groups rejected as ``near_tie``."""
        return self._counts["near_tie"]

    @property
    def redundant(self) -> int:
        """Groups rejected as ``redundant``."""
        return self._counts["redundant"]

    @property
    def reward_rejected(self) -> int:
        """Groups where a reward check failed, whatever the primary reason."""
        return self._counts["reward_rejected"]

    @property
    def near_duplicate_rejected(self) -> int:
        """Groups where the redundancy check failed, whatever the primary reason."""
        return self._counts["near_duplicate_rejected"]

    @property
    def fallback_admitted(self) -> int:
        """Rejected groups that a framework trained on anyway."""
        return self._counts["fallback_admitted"]

    @property
    def rejected(self) -> int:
        """Groups rejected for any reason (including those admitted by a fallback)."""
        return self.candidates - self.admitted

    @property
    def effective_group_rate(self) -> float:
        """``admitted / candidates``, or 0.0 before any candidate."""
        with self._lock:
            candidates = self._counts["candidates"]
            return self._counts["admitted"] / candidates if candidates else 0.0

    @property
    def external_details(self) -> dict[str, int]:
        """How often each external reason occurred."""
        with self._lock:
            return dict(self._details)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AdmissionStats):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value}" for key, value in self.to_dict()["counts"].items())
        return f"AdmissionStats({fields})"

    # -- updating --------------------------------------------------------------------
    def add(self, decision: GroupAdmissionDecision, *, fallback_admitted: bool = False) -> None:
        """
        Count one decision.

        Args:
            decision: The policy's decision on one group.
            fallback_admitted: The group was rejected but a framework trained on it anyway.

        Raises:
            ValueError: ``fallback_admitted`` is set for an admitted decision.
        """
        self.add_many((decision,), fallback_admitted=fallback_admitted)

    def add_many(self, decisions: Decisions, *, fallback_admitted: bool = False) -> None:
        """Count many decisions (an iterable of decisions or a ``BatchAdmissionResult``)."""
        delta = dict.fromkeys(_COUNT_FIELDS, 0)
        details: Counter[str] = Counter()
        if isinstance(decisions, BatchAdmissionResult):
            decisions = decisions.decisions()
        for decision in decisions:
            if not isinstance(decision, GroupAdmissionDecision):
                msg = f"'decisions' must hold GroupAdmissionDecision objects (got {describe(decision)})"
                raise TypeError(msg)
            delta["candidates"] += 1
            if decision.reason is None:
                if fallback_admitted:
                    msg = "'fallback_admitted' applies only to rejected groups (got an admitted decision)"
                    raise ValueError(msg)
                delta["admitted"] += 1
            else:
                delta[_REASON_FIELD[decision.reason]] += 1
                delta["fallback_admitted"] += fallback_admitted
            delta["reward_rejected"] += decision.reward_rejected
            delta["near_duplicate_rejected"] += decision.near_duplicate_rejected
            details.update(decision.external_reasons)
        with self._lock:
            for key, value in delta.items():
                self._counts[key] += value
            self._details.update(details)

    def record_fallback(self, count: int = 1) -> None:
        """
        Count rejected groups that a framework trained on anyway, after the fact.

        Raises:
            ValueError: this would count more fallbacks than rejections.
        """
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            msg = f"'count' must be a non-negative integer (got {describe(count)})"
            raise ValueError(msg)
        with self._lock:
            rejected = self._counts["candidates"] - self._counts["admitted"]
            if self._counts["fallback_admitted"] + count > rejected:
                msg = (
                    f"'count' would make fallback_admitted exceed the rejected groups "
                    f"({self._counts['fallback_admitted']} + {count} > {rejected})"
                )
                raise ValueError(msg)
            self._counts["fallback_admitted"] += count

    def merge(self, other: AdmissionStats) -> AdmissionStats:
        """Return a new accumulator holding the sum of ``self`` and ``other``."""
        if not isinstance(other, AdmissionStats):
            msg = f"'other' must be an AdmissionStats (got {describe(other)})"
            raise TypeError(msg)
        merged = AdmissionStats()
        for source in (self, other):
            data = source.to_dict()
            for key, value in data["counts"].items():
                merged._counts[key] += value
            merged._details.update(data["external_details"])
        return merged

    __add__ = merge

    def reset(self) -> dict[str, Any]:
        """Zero the counts and return what they were (:meth:`to_dict` form)."""
        with self._lock:
            snapshot = {"counts": dict(self._counts), "external_details": dict(self._details)}
            self._counts = dict.fromkeys(_COUNT_FIELDS, 0)
            self._details = Counter()
        return snapshot

    # -- conversion ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot: ``{"counts": {...}, "external_details": {...}}``."""
        with self._lock:
            return {"counts": dict(self._counts), "external_details": dict(self._details)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AdmissionStats:
        """
        Rebuild from :meth:`to_dict` output, checking that the counts conserve.

        Raises:
            ValueError: a count is missing, negative or not an integer, or the counts do
                not conserve.
        """
        if not isinstance(data, Mapping) or not isinstance(data.get("counts"), Mapping):
            msg = f"'data' must be a mapping with a 'counts' mapping (got {describe(data)})"
            raise ValueError(msg)
        stats = cls()
        counts = data["counts"]
        for key in _COUNT_FIELDS:
            value = counts.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                msg = f"'counts.{key}' must be a non-negative integer (got {describe(value)})"
                raise ValueError(msg)
            stats._counts[key] = value
        unknown = sorted(set(counts) - set(_COUNT_FIELDS))
        if unknown:
            msg = f"'counts' has unknown key(s) {unknown!r} (known: {', '.join(_COUNT_FIELDS)})"
            raise ValueError(msg)
        details = data.get("external_details", {})
        for key, value in details.items():
            if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, int) or value < 0:
                msg = f"'external_details' must map strings to non-negative integers (got {key!r}: {value!r})"
                raise ValueError(msg)
        stats._details.update(details)
        stats._check_conservation()
        return stats

    def _check_conservation(self) -> None:
        c = self._counts
        rejected = c["external"] + c["exact_dead"] + c["near_tie"] + c["redundant"]
        if c["candidates"] != c["admitted"] + rejected:
            msg = (
                f"counts do not conserve: candidates ({c['candidates']}) != admitted "
                f"({c['admitted']}) + rejections ({rejected})"
            )
            raise ValueError(msg)
        if c["fallback_admitted"] > rejected:
            msg = (
                f"counts do not conserve: fallback_admitted ({c['fallback_admitted']}) "
                f"> rejections ({rejected})"
            )
            raise ValueError(msg)

    def metrics(self) -> dict[str, int | float]:
        """The counts under the metric names of :func:`group_admission_metrics`."""
        with self._lock:
            c = dict(self._counts)
        return {
            "candidate_group_count": c["candidates"],
            "admitted_group_count": c["admitted"],
            "rejected_group_count": c["candidates"] - c["admitted"],
            "effective_group_rate": c["admitted"] / c["candidates"] if c["candidates"] else 0.0,
            "reward_rejected_group_count": c["reward_rejected"],
            "near_duplicate_rejected_group_count": c["near_duplicate_rejected"],
            "externally_rejected_group_count": c["external"],
            "exact_dead_group_count": c["exact_dead"],
            "near_tie_group_count": c["near_tie"],
            "redundant_group_count": c["redundant"],
            "fallback_admitted_group_count": c["fallback_admitted"],
        }

    def all_reduce(self, group: Any = None) -> AdmissionStats:
        """
        Sum the stats of every ``torch.distributed`` rank; every rank gets the total.

        Uses ``all_gather_object`` so that external reason names may differ between
        ranks. Needs torch (``pip install 'group-admission[torch]'``) and an initialised
        process group.
        """
        from ._distributed import all_reduce_stats  # noqa: PLC0415  (torch is optional)

        return all_reduce_stats(self, group)


def group_admission_metrics(decisions: Decisions) -> dict[str, int | float]:
    """
    Count a round of decisions under stable metric names.

    Returns raw counts (``candidate_group_count``, ``admitted_group_count``,
    ``rejected_group_count``, ``reward_rejected_group_count``,
    ``near_duplicate_rejected_group_count``, ``externally_rejected_group_count``,
    ``exact_dead_group_count``, ``near_tie_group_count``, ``redundant_group_count``,
    ``fallback_admitted_group_count``) and ``effective_group_rate`` = admitted /
    candidates (0.0 when empty). Sum the counts across workers before dividing.

    .. versionadded:: 0.1.0
    """
    stats = AdmissionStats()
    stats.add_many(decisions)
    return stats.metrics()
