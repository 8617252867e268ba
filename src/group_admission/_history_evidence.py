"""
The evidence a ``PromptHistory`` keeps, in columns: a row per prompt, and the observations to fold.

A history of a real dataset holds a million prompt ids, so its evidence lives in one
structured numpy array (a row per prompt, its id in a list and a dict) and every step
costs what the step holds, never what the history holds. Every update is the same IEEE
operation, in the same order, that one prompt's scalar update would be (the decay of each
distinct gap computed once by the scalar rule, sums accumulated in sequence), so the
picks are bit for bit those of a prompt-by-prompt history.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ._history_ids import PromptId
from ._validation import check_count, describe, is_finite, is_real

__all__ = [
    "GRESO_BOUNDS",
    "GRESO_FLOOR",
    "GRESO_NUDGE",
    "RECHECK_PRIOR",
    "RECORD",
    "RECORD_FIELDS",
    "Decays",
    "Observation",
    "Pending",
    "PoolStats",
    "Records",
    "greso_flags",
    "informative_chances",
    "informative_probability",
]

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

# GRESO's published constants (Infini-AI-Lab/GRESO, ``presampling_selector.py`` and
# ``ray_trainer.py``): what counts as all-correct and all-wrong, the keep floor, and how
# the keep bases move each step.
GRESO_EASY_MEAN = 0.98
GRESO_HARD_MEAN = 0.11
GRESO_FLOOR = 0.01
GRESO_NUDGE = 0.01
GRESO_BOUNDS = (0.05, 0.95)


def greso_flags(observations: Floats) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Which of the ``(successes, failures, ...)`` rows GRESO counts all-correct, and which all-wrong."""
    rate = observations[:, 0] / (observations[:, 0] + observations[:, 1])
    return rate >= GRESO_EASY_MEAN, rate <= GRESO_HARD_MEAN


#: Observed groups before the pool's prior is fitted, and Jeffreys' prior before that.
_MIN_FIT_WEIGHT = 32.0
_JEFFREYS = (0.5, 0.5)
#: Bounds of a fitted prior's concentration ``alpha + beta``.
_MIN_CONCENTRATION, _MAX_CONCENTRATION = 0.05, 1000.0
#: Pseudo-groups, at the bound, behind the wrong-skip estimate: it moves off the bound only
#: once a few dozen re-checks say so.
RECHECK_PRIOR = 20.0
#: Groups up to this size take the exact product; larger ones its closed form, so that the
#: cost of a pick never grows with an absurd group size.
_PRODUCT_GROUP_SIZE = 256

#: One prompt's evidence: decayed successes, failures and verdicts, the step they are
#: decayed to, its groups, and GRESO's streaks of all-correct and all-wrong groups.
RECORD_FIELDS = ("successes", "failures", "admitted", "rejected", "step", "groups", "easy", "hard")
RECORD = np.dtype([(name, "<f8" if index < 4 else "<i8") for index, name in enumerate(RECORD_FIELDS)])


def informative_chances(alpha: Floats, beta: Floats, group_size: int) -> Floats:
    """:func:`informative_probability` of arrays of arguments already checked (the picks' hot path)."""
    if group_size < 2:
        return np.zeros(len(alpha))  # one completion has nothing to compare with
    if group_size <= _PRODUCT_GROUP_SIZE:
        all_pass, all_fail = np.ones(len(alpha)), np.ones(len(alpha))
        for i in range(group_size):
            total = alpha + beta + i
            all_pass *= (alpha + i) / total
            all_fail *= (beta + i) / total
    else:  # E[p^G] = B(alpha + G, beta) / B(alpha, beta), in log-gamma
        lgamma = math.lgamma
        passes, fails = [], []
        for a, b in zip(alpha.tolist(), beta.tolist(), strict=True):
            base = lgamma(a + b) - lgamma(a + b + group_size)
            passes.append(math.exp(base + lgamma(a + group_size) - lgamma(a)))
            fails.append(math.exp(base + lgamma(b + group_size) - lgamma(b)))
        all_pass, all_fail = np.array(passes), np.array(fails)
    chance = 1.0 - all_pass - all_fail
    return np.where(chance > 0.0, chance, 0.0)


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
    alphas = np.array([_shape(alpha, "alpha")])
    betas = np.array([_shape(beta, "beta")])
    return float(informative_chances(alphas, betas, check_count(group_size, "group_size", 1))[0])


class Decays:
    """Forgetting: ``0.5 ** (elapsed / half_life)``, each distinct gap of an array computed once."""

    __slots__ = ("half_life",)

    def __init__(self, half_life: float | None) -> None:
        self.half_life = half_life

    def scalar(self, elapsed: int) -> float:
        """The weight left after ``elapsed`` steps (1 for none, or with no forgetting)."""
        half_life = self.half_life
        return 1.0 if half_life is None or elapsed <= 0 else 0.5 ** (elapsed / half_life)

    def of(self, elapsed: Ints) -> Floats:
        """:meth:`scalar` of every entry, by the scalar rule itself (so bit for bit the same)."""
        if self.half_life is None or not len(elapsed):
            return np.ones(len(elapsed))
        gaps, where = np.unique(elapsed, return_inverse=True)
        return np.array([self.scalar(gap) for gap in gaps.tolist()])[where.reshape(-1)]


def _accumulate(start: float, terms: Floats) -> float:
    """``start + terms[0] + terms[1] + ...`` added one at a time, as a loop would (not pairwise)."""
    return float(np.cumsum(np.concatenate(([start], terms)))[-1])


class Observation(NamedTuple):
    """One observed group, waiting to be folded (fields in canonical fold order)."""

    step: int
    prompt_id: PromptId
    rank: int
    sequence: int
    successes: float
    failures: float
    admitted: bool


class Pending:
    """
    The observations waiting to fold, in columns, each named by ``(rank, sequence)``.

    Python lists, so that recording a step appends and costs no array copy.
    """

    __slots__ = ("admitted", "failures", "ids", "rank", "sequence", "step", "successes")

    def __init__(self, observations: Sequence[Observation] = ()) -> None:
        self.step: list[int] = []
        self.ids: list[PromptId] = []
        self.rank: list[int] = []
        self.sequence: list[int] = []
        self.successes: list[float] = []
        self.failures: list[float] = []
        self.admitted: list[bool] = []
        self.extend(observations)

    def __len__(self) -> int:
        return len(self.step)

    def __iter__(self) -> Iterator[Observation]:
        columns = (self.step, self.ids, self.rank, self.sequence, self.successes, self.failures)
        for row in zip(*columns, self.admitted, strict=True):
            yield Observation(*row)

    def extend(self, observations: Sequence[Observation]) -> None:
        """Append observations, in order."""
        if observations:
            step, ids, rank, sequence, successes, failures, admitted = zip(*observations, strict=True)
            self.append(list(ids), list(step), list(rank), list(sequence), successes, failures, admitted)

    def append(
        self,
        ids: list[PromptId],
        step: list[int],
        rank: list[int],
        sequence: list[int],
        successes: Sequence[float],
        failures: Sequence[float],
        admitted: Sequence[bool],
    ) -> None:
        """Append observations given as columns of equal length."""
        self.ids.extend(ids)
        self.step.extend(step)
        self.rank.extend(rank)
        self.sequence.extend(sequence)
        self.successes.extend(successes)
        self.failures.extend(failures)
        self.admitted.extend(admitted)

    def split(self, step: int) -> Pending:
        """Remove and return the observations of steps before ``step`` (each part keeps its order)."""
        ready = np.array(self.step, dtype=np.int64) < step
        taken = Pending()
        if not ready.any():
            return taken
        chosen, kept = np.flatnonzero(ready).tolist(), np.flatnonzero(~ready).tolist()
        for name in self.__slots__:
            column = getattr(self, name)
            setattr(taken, name, [column[i] for i in chosen])
            setattr(self, name, [column[i] for i in kept])
        return taken


class Records:
    """
    Every prompt's folded evidence: row ``r`` holds the prompt ``ids[r]``.

    Rows are added in the order prompts are first folded; ``rows`` maps an id to its row.
    """

    __slots__ = ("_data", "ids", "rows")

    def __init__(self, ids: list[PromptId] | None = None, data: np.ndarray | None = None) -> None:
        """An empty table, or ``data`` (a :data:`RECORD` array, taken as it is) for ``ids``, row by row."""
        self.ids: list[PromptId] = [] if ids is None else ids
        self.rows: dict[PromptId, int] = dict(zip(self.ids, range(len(self.ids)), strict=True))
        self._data = np.zeros(1024, dtype=RECORD) if data is None else data

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def data(self) -> np.ndarray:
        """The rows in use (a view: read it, do not write it)."""
        return self._data[: len(self.ids)]

    def lookup(self, ids: Sequence[PromptId]) -> Ints:
        """The row of each id, -1 for an id without folded evidence."""
        get = self.rows.get
        return np.array([get(prompt_id, -1) for prompt_id in ids], dtype=np.int64)

    def ensure(self, ids: Sequence[PromptId]) -> Ints:
        """The row of each id, adding an empty row for each new one, in order."""
        rows = self.lookup(ids)
        new = np.flatnonzero(rows < 0).tolist()
        if not new:
            return rows
        start = len(self.ids)
        for index in new:
            prompt_id = ids[index]
            row = self.rows.get(prompt_id)
            if row is None:
                row = self.rows[prompt_id] = len(self.ids)
                self.ids.append(prompt_id)
            rows[index] = row
        if len(self.ids) > len(self._data):
            grown = np.zeros(max(2 * len(self._data), len(self.ids)), dtype=RECORD)
            grown[:start] = self._data[:start]
            self._data = grown
        return rows

    def add(self, rows: Ints, step: int, observations: Floats, decays: Decays) -> None:
        """
        Fold one observation of ``step`` into each of ``rows`` (distinct), discounting the older side.

        ``observations`` holds ``(successes, failures, admitted)`` per row.
        """
        data = self._data
        successes, failures, admitted = observations.T
        last, groups = data["step"][rows], data["groups"][rows]
        elapsed = step - last
        forward = elapsed >= 0
        old = np.where(forward & (groups > 0), decays.of(elapsed), 1.0)
        new = np.where(forward, 1.0, decays.of(-elapsed))  # a late observation of an earlier step
        data["step"][rows] = np.where(forward, step, last)
        for name, value in (
            ("successes", successes),
            ("failures", failures),
            ("admitted", admitted),
            ("rejected", 1.0 - admitted),
        ):
            column = data[name]
            column[rows] = old * column[rows] + new * value
        data["groups"][rows] = groups + 1
        easy, hard = greso_flags(observations)
        data["easy"][rows] = np.where(easy, data["easy"][rows] + 1, 0)
        data["hard"][rows] = np.where(hard, data["hard"][rows] + 1, 0)


class PoolStats:
    """
    Decayed moments of every observed group, to fit the pool's prior; and the re-checks.

    A re-check is a group of a prompt the history would have skipped at its step and
    generated anyway (the exploration floor): ``rechecks`` weighs them and
    ``rechecks_informative`` the informative ones, so their ratio is an unbiased estimate of
    the share of skipped prompts whose group would have been informative.
    """

    __slots__ = (
        "admitted",
        "inverse_size",
        "rechecks",
        "rechecks_informative",
        "step",
        "sum_rate",
        "sum_square",
        "weight",
    )

    def __init__(self) -> None:
        self.weight = self.sum_rate = self.sum_square = self.inverse_size = self.admitted = 0.0
        self.rechecks = self.rechecks_informative = 0.0
        self.step = 0

    def add_step(self, step: int, observations: Floats, decays: Decays, rechecked: Floats) -> None:
        """
        Fold a step's observations, ``(successes, failures, admitted)`` rows in canonical order.

        ``rechecked`` is 1 for a row the history would have skipped at that step, else 0.
        """
        if step > self.step:
            factor = decays.scalar(step - self.step)
            for name in ("weight", "sum_rate", "sum_square", "inverse_size", "admitted"):
                setattr(self, name, getattr(self, name) * factor)
            self.rechecks *= factor
            self.rechecks_informative *= factor
            self.step = step
        weight = decays.scalar(self.step - step)
        successes, failures, admitted = observations.T
        size = successes + failures
        rate = successes / size
        self.weight = _accumulate(self.weight, np.full(len(size), weight))
        self.sum_rate = _accumulate(self.sum_rate, weight * rate)
        self.sum_square = _accumulate(self.sum_square, weight * rate * rate)
        self.inverse_size = _accumulate(self.inverse_size, weight / size)
        self.admitted = _accumulate(self.admitted, weight * admitted)
        if rechecked.any():
            self.rechecks = _accumulate(self.rechecks, weight * rechecked)
            self.rechecks_informative = _accumulate(self.rechecks_informative, weight * rechecked * admitted)

    def wrong_skip_share(self, bound: float) -> float:
        """
        The estimated share of skipped prompts whose group would have been informative.

        From the re-checks, with :data:`RECHECK_PRIOR` pseudo-groups at ``bound`` (so it starts there).
        """
        return (self.rechecks_informative + RECHECK_PRIOR * bound) / (self.rechecks + RECHECK_PRIOR)

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
        """The moments, the step and the re-checks, in the state's order (:attr:`__slots__` by meaning)."""
        return [
            self.weight,
            self.sum_rate,
            self.sum_square,
            self.inverse_size,
            self.admitted,
            self.step,
            self.rechecks,
            self.rechecks_informative,
        ]
