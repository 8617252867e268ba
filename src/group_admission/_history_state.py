"""
The evidence a ``PromptHistory`` keeps, and its JSON state that restores exactly or is refused.

Kept apart from the history so that the picking logic reads on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn

from ._exceptions import CheckpointError
from ._history_config import PromptHistoryConfig
from ._state_checks import check_header, state_int
from ._validation import describe

__all__ = [
    "FORMAT",
    "GRESO_BOUNDS",
    "GRESO_EASY_MEAN",
    "GRESO_FLOOR",
    "GRESO_HARD_MEAN",
    "GRESO_NUDGE",
    "Observation",
    "PoolStats",
    "Record",
    "history_state",
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


# The history is typed ``Any`` here: naming its class would close an import cycle.
def history_state(history: Any) -> dict[str, Any]:
    """The history's state as plain JSON types."""
    h = history
    return {
        "format": FORMAT,
        "version": VERSION,
        "config": h._config.to_dict(),
        "rank": h._rank,
        "sequence": h._sequence,
        "greso": [h._p_easy, h._p_hard],
        "pool": h._pool.to_list(),
        "folded": [h._folded, h._digest],
        "records": [record.to_list(key) for key, record in h._records.items()],
        "pending": [list(observation) for observation in h._pending.values()],
    }


def _fail(message: str) -> NoReturn:
    msg = f"cannot restore the PromptHistory: {message}"
    raise CheckpointError(msg)


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


def restore_history(data: object) -> dict[str, Any]:
    """
    Check a saved state and return the private fields of the history to build.

    Raises:
        CheckpointError: naming the first problem found.
    """
    data = check_header(
        data,
        keys=_KEYS,
        format_=FORMAT,
        version=VERSION,
        kind="prompt history",
        source="to_dict()",
        fail=_fail,
    )
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
    return {
        "_config": config,
        "_rank": rank,
        "_sequence": sequence,
        "_p_easy": _float(greso[0], "greso[0]"),
        "_p_hard": _float(greso[1], "greso[1]"),
        "_pool": _pool(data["pool"]),
        "_folded": _int(folded[0], "folded[0]"),
        "_digest": folded[1],
        "_records": records,
        "_pending": pending,
    }
