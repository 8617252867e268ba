"""
Admission counts: ``group_admission_metrics`` and the mergeable ``AdmissionStats``.

Everything is a raw count so that distributed callers sum across workers before they
divide; the only ratio, ``effective_group_rate``, is derived from the summed counts.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias, overload

import numpy as np

from . import _checks
from ._checks import Family
from ._decision import BatchAdmissionResult, GroupAdmissionDecision
from ._distributed import all_gather_snapshots
from ._exceptions import CheckpointError
from ._reasons import REASONS_BY_CODE, RejectionReason
from ._validation import check_count, describe

__all__ = ["AdmissionStats", "group_admission_metrics"]

Decisions: TypeAlias = Iterable[GroupAdmissionDecision] | BatchAdmissionResult

_REASON_FIELDS = tuple(reason.value for reason in RejectionReason)
#: The count of groups where a check of each family failed, whatever the primary reason.
_FAMILY_COUNTS: dict[Family, str] = {"reward": "reward_rejected", "similarity": "near_duplicate_rejected"}
_COUNT_FIELDS = (
    "candidates",
    "admitted",
    *_REASON_FIELDS,
    "reward_rejected",
    "near_duplicate_rejected",
    "fallback_admitted",
)


def _fallback_flag(value: object) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    msg = f"'fallback_admitted' must be a bool (got {describe(value)})"
    raise TypeError(msg)


def _batch_delta(result: BatchAdmissionResult) -> tuple[dict[str, int], Counter[str]]:
    """Count a batch from its reason codes and check flags, without building decisions."""
    delta = dict.fromkeys(_COUNT_FIELDS, 0)
    by_code = np.bincount(result.reason_codes.astype(np.intp), minlength=len(REASONS_BY_CODE)).tolist()
    delta["candidates"] = len(result)
    delta["admitted"] = by_code[0]
    for code, reason in enumerate(REASONS_BY_CODE[1:], start=1):
        delta[reason.value] = by_code[code]  # type: ignore[union-attr]
    flags = result.check_flags
    for family, field in _FAMILY_COUNTS.items():
        delta[field] = int(np.count_nonzero(flags & _checks.TABLE.family_bits(family)))
    details: Counter[str] = Counter()
    for reasons in result.external_reasons.values():
        details.update(reasons)
    return delta, details


class _Count:
    """
    One count of :class:`AdmissionStats`, read-only: an attribute named after its field.

    Every count is one of :data:`_COUNT_FIELDS` and reads the same way; only its docstring
    differs. A reason's count is named after its :class:`RejectionReason` (:func:`_reason_count`).
    """

    def __init__(self, doc: str, field: str = "") -> None:
        self.field = field  # "": the attribute's own name, set when the class is made
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        if not self.field:
            self.field = name
        if name != self.field or name not in _COUNT_FIELDS:
            msg = f"the count of {self.field!r} must be a count field named after it (got {name!r})"
            raise TypeError(msg)

    @overload
    def __get__(self, stats: None, owner: type) -> _Count: ...
    @overload
    def __get__(self, stats: AdmissionStats, owner: type) -> int: ...
    def __get__(self, stats: AdmissionStats | None, owner: type) -> _Count | int:
        return self if stats is None else stats._counts[self.field]


def _reason_count(reason: RejectionReason) -> _Count:
    """The count of groups rejected for ``reason``, an attribute named after it."""
    return _Count(f"Groups rejected as ``{reason.value}``.", reason.value)


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
    candidates = _Count("Groups judged.")
    admitted = _Count("Groups admitted by the policy.")
    # One count per RejectionReason, named after it (tests/test_metrics.py checks every reason has one).
    external = _reason_count(RejectionReason.EXTERNAL)
    exact_dead = _reason_count(RejectionReason.EXACT_DEAD)
    near_tie = _reason_count(RejectionReason.NEAR_TIE)
    redundant = _reason_count(RejectionReason.REDUNDANT)
    reward_rejected = _Count("Groups where a reward check failed, whatever the primary reason.")
    near_duplicate_rejected = _Count("Groups where the redundancy check failed, whatever the primary reason.")
    fallback_admitted = _Count("Rejected groups that a framework trained on anyway.")

    @property
    def rejected(self) -> int:
        """Groups rejected for any reason (including those admitted by a fallback)."""
        with self._lock:
            return self._counts["candidates"] - self._counts["admitted"]

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

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        # Pickling and deep copies go through the checked JSON form (a lock cannot be pickled).
        return (AdmissionStats.from_dict, (self.to_dict(),))

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
            TypeError: ``decision`` is not a decision, or ``fallback_admitted`` not a bool.
            ValueError: ``fallback_admitted`` is set for an admitted decision.
        """
        if not isinstance(decision, GroupAdmissionDecision):
            msg = f"'decision' must be a GroupAdmissionDecision (got {describe(decision)})"
            raise TypeError(msg)
        self.add_many((decision,), fallback_admitted=fallback_admitted)

    def add_many(self, decisions: Decisions, *, fallback_admitted: bool = False) -> None:
        """Count many decisions (an iterable of decisions or a ``BatchAdmissionResult``)."""
        fallback = _fallback_flag(fallback_admitted)
        if isinstance(decisions, (str, bytes, Mapping)) or not isinstance(
            decisions, (Iterable, BatchAdmissionResult)
        ):
            msg = (
                "'decisions' must be an iterable of GroupAdmissionDecision objects or a "
                f"BatchAdmissionResult (got {describe(decisions)})"
            )
            raise TypeError(msg)
        if isinstance(decisions, BatchAdmissionResult):
            delta, details = _batch_delta(decisions)
            if fallback and delta["admitted"]:
                msg = "'fallback_admitted' applies only to rejected groups (got admitted groups)"
                raise ValueError(msg)
        else:
            delta, details = self._decision_delta(decisions, fallback)
        if fallback:
            delta["fallback_admitted"] = delta["candidates"] - delta["admitted"]
        with self._lock:
            for key, value in delta.items():
                self._counts[key] += value
            self._details.update(details)

    @staticmethod
    def _decision_delta(
        decisions: Iterable[GroupAdmissionDecision], fallback: bool
    ) -> tuple[dict[str, int], Counter[str]]:
        delta = dict.fromkeys(_COUNT_FIELDS, 0)
        details: Counter[str] = Counter()
        for decision in decisions:
            if not isinstance(decision, GroupAdmissionDecision):
                msg = f"'decisions' must hold GroupAdmissionDecision objects (got {describe(decision)})"
                raise TypeError(msg)
            problem = decision._contradiction()
            if problem:
                # Counted, it would leave counts that from_dict refuses as not conserving.
                msg = f"'decisions' must hold decisions a policy could take (got {problem})"
                raise ValueError(msg)
            delta["candidates"] += 1
            if decision.reason is None:
                if fallback:
                    msg = "'fallback_admitted' applies only to rejected groups (got an admitted decision)"
                    raise ValueError(msg)
                delta["admitted"] += 1
            else:
                delta[decision.reason.value] += 1
            delta["reward_rejected"] += decision.reward_rejected
            delta["near_duplicate_rejected"] += decision.near_duplicate_rejected
            details.update(decision.external_reasons)
        return delta, details

    def record_fallback(self, count: int = 1) -> None:
        """
        Count rejected groups that a framework trained on anyway, after the fact.

        Raises:
            TypeError: ``count`` is not an integer.
            ValueError: ``count`` is negative, or this would count more fallbacks than rejections.
        """
        count = check_count(count, "count")
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

    def difference(self, earlier: AdmissionStats) -> AdmissionStats:
        """
        The counts added since ``earlier``, a snapshot of this accumulator taken before.

        For reporting per-interval counts from running totals. An interval is a report,
        not a checkpoint: a fallback recorded in it for a group rejected before it can
        leave ``fallback_admitted`` above the interval's rejections, which
        :meth:`from_dict` refuses as not conserving.

        Raises:
            ValueError: ``earlier`` holds a count larger than this one (not an earlier snapshot).
        """
        if not isinstance(earlier, AdmissionStats):
            msg = f"'earlier' must be an AdmissionStats (got {describe(earlier)})"
            raise TypeError(msg)
        now, then = self.to_dict(), earlier.to_dict()
        delta = AdmissionStats()
        for key, value in now["counts"].items():
            delta._counts[key] = value - then["counts"][key]
        details = Counter(now["external_details"])
        details.subtract(then["external_details"])
        counts_then, details_then = then["counts"], then["external_details"]
        went_down = [
            (key, counts_then[key], value) for key, value in now["counts"].items() if value < counts_then[key]
        ]
        went_down += [
            (f"external_details[{key!r}]", details_then[key], details_then[key] + change)
            for key, change in details.items()
            if change < 0
        ]
        if went_down:
            label, before, after = went_down[0]
            msg = (
                "'earlier' is not an earlier snapshot of these counts "
                f"(a count went down: {label} from {before} to {after})"
            )
            raise ValueError(msg)
        delta._details = +details
        return delta

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
        Rebuild from :meth:`to_dict` output, checking every count and that they conserve.

        Raises:
            CheckpointError: a key is missing or unknown, a count is not a non-negative
                integer, ``external_details`` is malformed, or the counts contradict each
                other (see :meth:`check_conservation`).
        """
        if not isinstance(data, Mapping) or not isinstance(data.get("counts"), Mapping):
            msg = f"'data' must be a mapping with a 'counts' mapping (got {describe(data)})"
            raise CheckpointError(msg)
        unknown = sorted(map(str, set(data) - {"counts", "external_details"}))
        counts = data["counts"]
        unknown += [f"counts.{key}" for key in sorted(map(str, set(counts) - set(_COUNT_FIELDS)))]
        if unknown:
            msg = f"'data' has unknown key(s) {unknown!r} (known: counts.{', counts.'.join(_COUNT_FIELDS)})"
            raise CheckpointError(msg)
        stats = cls()
        for key in _COUNT_FIELDS:
            value = counts.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                msg = f"'counts.{key}' must be a non-negative integer (got {describe(value)})"
                raise CheckpointError(msg)
            stats._counts[key] = int(value)
        details = data.get("external_details", {})
        if not isinstance(details, Mapping):
            msg = f"'external_details' must be a mapping of reason to count (got {describe(details)})"
            raise CheckpointError(msg)
        for key, value in details.items():
            if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, int) or value < 1:
                msg = f"'external_details' must map strings to positive integers (got {key!r}: {value!r})"
                raise CheckpointError(msg)
        stats._details.update(details)
        stats.check_conservation()
        return stats

    def check_conservation(self) -> None:
        """
        Check that the counts are ones that judging groups could have produced.

        ``candidates == admitted + external + exact_dead + near_tie + redundant``;
        ``near_tie <= reward_rejected <= rejections`` and ``redundant <=
        near_duplicate_rejected <= rejections`` (a reason that only one family of checks
        gives counts under that family: ``_checks.CheckTable.reasons_only_of``; an
        ``exact_dead`` group may carry a host's own check instead of a gate check, as the
        twinkle Challenger's spread check does); ``fallback_admitted <= rejections``; and
        every external rejection has at least one external detail (none without one).

        Raises:
            CheckpointError: naming the first relation that fails.
        """
        with self._lock:
            c = dict(self._counts)
            detail_total = sum(self._details.values())
        rejected = sum(c[field] for field in _REASON_FIELDS)
        external = c[RejectionReason.EXTERNAL.value]
        relations = [
            (
                c["candidates"] == c["admitted"] + rejected,
                f"candidates ({c['candidates']}) != admitted ({c['admitted']}) + rejections ({rejected})",
            ),
            *(_family_relation(c, family, field, rejected) for family, field in _FAMILY_COUNTS.items()),
            (
                c["fallback_admitted"] <= rejected,
                f"fallback_admitted ({c['fallback_admitted']}) > rejections ({rejected})",
            ),
            (
                detail_total >= external and (detail_total == 0 or external > 0),
                f"external_details ({detail_total} reasons) do not match external ({external} groups)",
            ),
        ]
        for holds, message in relations:
            if not holds:
                msg = f"counts do not conserve: {message}"
                raise CheckpointError(msg)

    def metrics(self) -> dict[str, int | float]:
        """
        The counts under the metric names of :func:`group_admission_metrics`, plus ours.

        The pull request's keys, then ``fallback_admitted_group_count`` (rejected groups a
        framework trained on anyway), which only an accumulator can know.
        """
        with self._lock:  # one snapshot: the fallback count agrees with the others
            counts = dict(self._counts)
        metrics = _metrics_of_counts(counts)
        metrics["fallback_admitted_group_count"] = counts["fallback_admitted"]
        return metrics

    def _pull_request_metrics(self) -> dict[str, int | float]:
        """Exactly the keys of twinkle#288's ``group_admission_metrics``."""
        with self._lock:
            counts = dict(self._counts)
        return _metrics_of_counts(counts)

    def all_reduce(self, group: Any = None) -> AdmissionStats:
        """
        Sum the stats of every ``torch.distributed`` rank; every rank gets the total.

        Uses ``all_gather_object`` so that external reason names may differ between
        ranks. Needs torch (``pip install 'group-admission[torch]'`` beside your torch pin)
        and an initialised process group.
        """
        total = AdmissionStats()
        for snapshot in all_gather_snapshots(self.to_dict(), group, feature="AdmissionStats.all_reduce"):
            total = total.merge(AdmissionStats.from_dict(snapshot))
        return total


def _family_relation(c: Mapping[str, int], family: Family, field: str, rejected: int) -> tuple[bool, str]:
    """``field`` lies between the rejections only ``family``'s checks give and all rejections."""
    reasons = _checks.TABLE.reasons_only_of(family)
    given = sum(c[reason.value] for reason in reasons)
    names = " + ".join(reason.value for reason in reasons) or "0"
    message = f"{field} ({c[field]}) must lie between {names} ({given}) and the rejections ({rejected})"
    return given <= c[field] <= rejected, message


def _metrics_of_counts(c: Mapping[str, int]) -> dict[str, int | float]:
    """Exactly the keys of twinkle#288's ``group_admission_metrics``, from a snapshot of the counts."""
    metrics: dict[str, int | float] = {
        "candidate_group_count": c["candidates"],
        "admitted_group_count": c["admitted"],
        "rejected_group_count": c["candidates"] - c["admitted"],
        "effective_group_rate": c["admitted"] / c["candidates"] if c["candidates"] else 0.0,
        "reward_rejected_group_count": c["reward_rejected"],
        "near_duplicate_rejected_group_count": c["near_duplicate_rejected"],
    }
    for reason in RejectionReason:
        metrics[reason.metric_name] = c[reason.value]
    return metrics


def group_admission_metrics(decisions: Decisions) -> dict[str, int | float]:
    """
    Count a round of decisions under stable metric names.

    Returns exactly the keys of the group-admission pull request (twinkle#288): raw counts
    (``candidate_group_count``, ``admitted_group_count``, ``rejected_group_count``,
    ``reward_rejected_group_count``, ``near_duplicate_rejected_group_count``,
    ``externally_rejected_group_count``, ``exact_dead_group_count``,
    ``near_tie_group_count``, ``redundant_group_count``) and ``effective_group_rate`` =
    admitted / candidates (0.0 when empty). Sum the counts across workers before dividing.
    :meth:`AdmissionStats.metrics` adds ``fallback_admitted_group_count``.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.2.0
        No ``fallback_admitted_group_count`` (always 0 here); it is in
        :meth:`AdmissionStats.metrics`.
    """
    stats = AdmissionStats()
    stats.add_many(decisions)
    return stats._pull_request_metrics()
