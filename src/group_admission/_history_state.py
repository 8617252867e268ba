"""
The evidence a ``PromptHistory`` keeps, what it makes of it, and its JSON state.

The records, the pool's moments and the priors fitted to them, the informative probability
of a Beta posterior, and the state that restores exactly or is refused. Kept apart from the
history so that the picking logic reads on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import attrs

from ._history_config import PromptHistoryConfig
from ._state_checks import StateFormat, state_int
from ._validation import check_count, describe, is_finite, is_real

__all__ = [
    "FORMAT",
    "GRESO_BOUNDS",
    "GRESO_EASY_MEAN",
    "GRESO_FLOOR",
    "GRESO_HARD_MEAN",
    "GRESO_NUDGE",
    "HistoryParts",
    "Observation",
    "PoolStats",
    "Record",
    "history_state",
    "informative_chance",
    "informative_probability",
    "restore_history",
]

#: The ``format`` tag of a history state; the version changes whenever the layout does.
FORMAT = "group-admission/prompt-history"
VERSION = 1
_KEYS = ("format", "version", "config", "rank", "sequence", "greso", "pool", "folded", "records", "pending")
#: Observed groups before the pool's prior is fitted, and Jeffreys' prior before that.
_MIN_FIT_WEIGHT = 32.0
_JEFFREYS = (0.5, 0.5)
#: Bounds of a fitted prior's concentration ``alpha + beta``.
_MIN_CONCENTRATION, _MAX_CONCENTRATION = 0.05, 1000.0

# GRESO's published constants (Infini-AI-Lab/GRESO, ``presampling_selector.py`` and
# ``ray_trainer.py``): what counts as all-correct and all-wrong, the keep floor, and how
# the keep bases move each step.
GRESO_EASY_MEAN = 0.98
GRESO_HARD_MEAN = 0.11
GRESO_FLOOR = 0.01
GRESO_NUDGE = 0.01
GRESO_BOUNDS = (0.05, 0.95)

Decay = Callable[[int], float]


#: Groups up to this size take the exact product; larger ones its closed form, so that the
#: cost of a pick never grows with an absurd group size.
_PRODUCT_GROUP_SIZE = 256


def informative_chance(alpha: float, beta: float, group_size: int) -> float:
    """:func:`informative_probability` of arguments already checked (the picks' hot path)."""
    if group_size < 2:
        return 0.0  # one completion has nothing to compare with
    if group_size <= _PRODUCT_GROUP_SIZE:
        all_pass = all_fail = 1.0
        for i in range(group_size):
            total = alpha + beta + i
            all_pass *= (alpha + i) / total
            all_fail *= (beta + i) / total
    else:  # E[p^G] = B(alpha + G, beta) / B(alpha, beta), in log-gamma
        base = math.lgamma(alpha + beta) - math.lgamma(alpha + beta + group_size)
        all_pass = math.exp(base + math.lgamma(alpha + group_size) - math.lgamma(alpha))
        all_fail = math.exp(base + math.lgamma(beta + group_size) - math.lgamma(beta))
    return max(0.0, 1.0 - all_pass - all_fail)


def _shape(value: object, name: str) -> float:
    if not is_real(value):
        msg = f"'{name}' must be a real number (got {describe(value)})"
        raise TypeError(msg)
    if not (is_finite(value) and value > 0):  # type: ignore[operator]  # is_real checked it
        msg = f"'{name}' must be a finite number > 0 (got {describe(value)})"
        raise ValueError(msg)
    return float(value)  # type: ignore[arg-type]


def informative_probability(alpha: float, beta: float, group_size: int) -> float:
    """
    ``1 - E[p^G] - E[(1 - p)^G]`` for ``p ~ Beta(alpha, beta)``: the chance a group of ``G`` splits.

    The expectations are the Beta-Binomial probabilities of ``G`` passes and of ``G``
    failures, so uncertainty about ``p`` counts: a prompt seen once all-wrong is not yet
    known to be dead. A group of one has no split (0). Groups above 256 members use the
    closed form in log-gamma, so the cost does not grow with ``G``.

    Raises:
        TypeError: an argument is not a number (``group_size`` not an integer).
        ValueError: ``alpha`` or ``beta`` is not a finite number > 0, or ``group_size < 1``.

    .. versionadded:: 0.2.0
    """
    return informative_chance(
        _shape(alpha, "alpha"), _shape(beta, "beta"), check_count(group_size, "group_size", 1)
    )


class Observation(NamedTuple):
    """One observed group, waiting to be folded (fields in canonical fold order)."""

    step: int
    key: str
    rank: int
    sequence: int
    successes: float
    failures: float
    admitted: bool


class Record:
    """One prompt's evidence: decayed successes, failures and verdicts, and GRESO's streaks."""

    __slots__ = ("admitted", "easy", "failures", "groups", "hard", "rejected", "step", "successes")

    def __init__(self) -> None:
        self.successes = self.failures = self.admitted = self.rejected = 0.0
        self.step = 0
        self.groups = self.easy = self.hard = 0

    def add(self, observation: Observation, decay: Decay) -> None:
        """Fold one observation, discounting whichever side is older."""
        old, new = 1.0, 1.0
        if observation.step >= self.step:
            old = decay(observation.step - self.step) if self.groups else 1.0
            self.step = observation.step
        else:  # a late observation of an earlier step
            new = decay(self.step - observation.step)
        self.successes = old * self.successes + new * observation.successes
        self.failures = old * self.failures + new * observation.failures
        self.admitted = old * self.admitted + new * observation.admitted
        self.rejected = old * self.rejected + new * (not observation.admitted)
        self.groups += 1
        rate = observation.successes / (observation.successes + observation.failures)
        self.easy = self.easy + 1 if rate >= GRESO_EASY_MEAN else 0
        self.hard = self.hard + 1 if rate <= GRESO_HARD_MEAN else 0

    def pass_rate(self) -> float:
        """The decayed share of successes."""
        total = self.successes + self.failures
        return self.successes / total if total else math.nan

    def greso_keep(self, p_easy: float, p_hard: float, floor: float) -> float:
        """GRESO's keep probability ``max(p^k, floor)`` after ``k`` zero-variance groups in a row."""
        if self.easy:
            return max(p_easy**self.easy, floor)
        if self.hard:
            return max(p_hard**self.hard, floor)
        return 1.0

    def to_list(self, key: str) -> list[Any]:
        """``[key, successes, failures, admitted, rejected, step, groups, easy, hard]``."""
        return [
            key,
            self.successes,
            self.failures,
            self.admitted,
            self.rejected,
            self.step,
            self.groups,
            self.easy,
            self.hard,
        ]


class PoolStats:
    """Decayed moments of every observed group, to fit the pool's prior."""

    __slots__ = ("admitted", "inverse_size", "step", "sum_rate", "sum_square", "weight")

    def __init__(self) -> None:
        self.weight = self.sum_rate = self.sum_square = self.inverse_size = self.admitted = 0.0
        self.step = 0

    def add(self, observation: Observation, decay: Decay) -> None:
        """Fold one observation."""
        if observation.step > self.step:
            factor = decay(observation.step - self.step)
            self.weight *= factor
            self.sum_rate *= factor
            self.sum_square *= factor
            self.inverse_size *= factor
            self.admitted *= factor
            self.step = observation.step
        weight = decay(self.step - observation.step)
        size = observation.successes + observation.failures
        rate = observation.successes / size
        self.weight += weight
        self.sum_rate += weight * rate
        self.sum_square += weight * rate * rate
        self.inverse_size += weight / size
        self.admitted += weight * observation.admitted

    def fitted_prior(self, factor: float) -> tuple[float, float]:
        """
        The Beta prior whose Beta-Binomial moments match the pool's (Jeffreys' until enough data).

        A group of ``n`` of a prompt with ``p ~ Beta(a, b)`` has a success share ``r`` of
        mean ``m = a / (a + b)`` and variance ``m (1 - m) (1/n + (1 - 1/n) rho)`` with
        ``rho = 1 / (a + b + 1)``; averaging over the groups observed gives ``rho``.
        """
        if self.weight * factor < _MIN_FIT_WEIGHT:
            return _JEFFREYS
        mean = self.sum_rate / self.weight
        spread = mean * (1.0 - mean)
        inverse = self.inverse_size / self.weight
        if spread <= 1e-12 or inverse >= 1.0:
            return _JEFFREYS
        variance = max(0.0, self.sum_square / self.weight - mean * mean)
        rho = (variance / spread - inverse) / (1.0 - inverse)
        concentration = 1.0 / min(max(rho, 1e-6), 1.0) - 1.0
        concentration = min(max(concentration, _MIN_CONCENTRATION), _MAX_CONCENTRATION)
        return max(mean * concentration, 1e-3), max((1.0 - mean) * concentration, 1e-3)

    def admission_prior(self, factor: float) -> tuple[float, float]:
        """A prior worth two groups at the pool's admission rate (uniform until enough data)."""
        if self.weight * factor < _MIN_FIT_WEIGHT:
            return 1.0, 1.0
        rate = min(max(self.admitted / self.weight, 0.01), 0.99)
        return 2.0 * rate, 2.0 * (1.0 - rate)

    def to_list(self) -> list[float | int]:
        """``[weight, sum_rate, sum_square, inverse_size, admitted, step]``."""
        return [self.weight, self.sum_rate, self.sum_square, self.inverse_size, self.admitted, self.step]


@attrs.frozen(kw_only=True)
class HistoryParts:
    """
    Everything of a :class:`PromptHistory` beside its config and rank: what a checkpoint restores.

    The history takes it in one documented hook (``PromptHistory._restore``), built empty
    by ``__init__`` and from a checked state by :func:`restore_history`.
    """

    sequence: int = 0
    p_easy: float
    p_hard: float
    pool: PoolStats = attrs.field(factory=PoolStats)
    folded: int = 0
    digest: str = ""
    records: dict[str, Record] = attrs.field(factory=dict)
    pending: dict[tuple[int, int], Observation] = attrs.field(factory=dict)


def history_state(config: PromptHistoryConfig, rank: int, parts: HistoryParts) -> dict[str, Any]:
    """The history's state as plain JSON types."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "config": config.to_dict(),
        "rank": rank,
        "sequence": parts.sequence,
        "greso": [parts.p_easy, parts.p_hard],
        "pool": parts.pool.to_list(),
        "folded": [parts.folded, parts.digest],
        "records": [record.to_list(key) for key, record in parts.records.items()],
        "pending": [list(observation) for observation in parts.pending.values()],
    }


_FORMAT = StateFormat(
    "the PromptHistory", "to_dict()", _KEYS, tag=FORMAT, version=VERSION, kind="prompt history"
)
_fail = _FORMAT.fail


def _int(value: object, name: str) -> int:
    return state_int(value, name, _fail)


def _float(value: object, name: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        _fail(f"'{name}' must be a finite number >= 0 (got {describe(value)})")
    return float(value)


def _key(value: object, name: str) -> str:
    if not isinstance(value, str) or len(value) < 1 or value[0] not in "is":
        _fail(f"'{name}' must be a prompt key such as 'i7' or 'sname' (got {describe(value)})")
    if value[0] == "i":
        try:
            int(value[1:])
        except ValueError:
            _fail(f"'{name}' must be a prompt key such as 'i7' or 'sname' (got {describe(value)})")
    return value


def _list(value: object, name: str, length: int | None = None) -> list[Any]:
    if not isinstance(value, list) or (length is not None and len(value) != length):
        size = "" if length is None else f" of {length} items"
        _fail(f"'{name}' must be a list{size} (got {describe(value)})")
    return value


def _record(entry: object) -> tuple[str, Record]:
    items = _list(entry, "records[]", 9)
    record = Record()
    key = _key(items[0], "records[].key")
    record.successes, record.failures, record.admitted, record.rejected = (
        _float(items[i], f"records[].{name}")
        for i, name in enumerate(("successes", "failures", "admitted", "rejected"), start=1)
    )
    record.step, record.groups, record.easy, record.hard = (
        _int(items[i], f"records[].{name}")
        for i, name in enumerate(("step", "groups", "easy", "hard"), start=5)
    )
    if (
        record.groups == 0
        or max(record.easy, record.hard) > record.groups
        or min(record.easy, record.hard) > 0
    ):
        _fail(
            f"record {key!r} has contradictory counts "
            f"(groups {record.groups}, streaks {record.easy}/{record.hard})"
        )
    return key, record


def _pending(entry: object) -> Observation:
    items = _list(entry, "pending[]", 7)
    successes, failures = _float(items[4], "pending[].successes"), _float(items[5], "pending[].failures")
    if successes + failures <= 0 or not isinstance(items[6], bool):
        _fail(f"pending observation {items!r} has no samples or a non-bool verdict")
    return Observation(
        _int(items[0], "pending[].step"),
        _key(items[1], "pending[].key"),
        _int(items[2], "pending[].rank"),
        _int(items[3], "pending[].sequence"),
        successes,
        failures,
        items[6],
    )


def _pool(value: object) -> PoolStats:
    items = _list(value, "pool", 6)
    pool = PoolStats()
    pool.weight, pool.sum_rate, pool.sum_square, pool.inverse_size, pool.admitted = (
        _float(items[i], f"pool[{i}]") for i in range(5)
    )
    pool.step = _int(items[5], "pool.step")
    return pool


def restore_history(data: object) -> tuple[PromptHistoryConfig, int, HistoryParts]:
    """
    Check a saved state and return the config, the rank and the parts of the history to build.

    Raises:
        CheckpointError: naming the first problem found.
    """
    data = _FORMAT.read(data)
    try:
        config = PromptHistoryConfig.from_mapping(data["config"])
    except (TypeError, ValueError) as exc:
        _fail(f"'config': {exc}")
    greso = _list(data["greso"], "greso", 2)
    folded = _list(data["folded"], "folded", 2)
    if not isinstance(folded[1], str):
        _fail(f"'folded' must be [count, digest] (got {describe(folded)})")
    records = dict(_record(entry) for entry in _list(data["records"], "records"))
    pending = {}
    for entry in _list(data["pending"], "pending"):
        observation = _pending(entry)
        pending[(observation.rank, observation.sequence)] = observation
    rank, sequence = _int(data["rank"], "rank"), _int(data["sequence"], "sequence")
    if any(r == rank and s >= sequence for r, s in pending):
        _fail(f"a pending observation of rank {rank} is numbered at or past 'sequence' ({sequence})")
    parts = HistoryParts(
        sequence=sequence,
        p_easy=_float(greso[0], "greso[0]"),
        p_hard=_float(greso[1], "greso[1]"),
        pool=_pool(data["pool"]),
        folded=_int(folded[0], "folded[0]"),
        digest=folded[1],
        records=records,
        pending=pending,
    )
    return config, rank, parts
