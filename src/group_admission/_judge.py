"""
The one judge of a group, and its reward gate: once for a group (Python), once for a batch (numpy).

``evaluate`` runs :func:`judge_group` on every group. ``evaluate_batch`` runs the gate's
batch twin (the one deliberate twin) and this judge itself on the few groups whose rollout
ids repeat or whose statistics overflow; it takes its precedence from :func:`primary_reason`
and its similarity gate from :func:`measure_similarity`, so the two paths cannot drift apart.
Both reward paths compute the same IEEE operations in the same order (left-to-right sums
from 0.0, then ``sqrt``), so ``evaluate_batch`` agrees with ``evaluate`` bit for bit. Which
checks run on the statistics, against which thresholds, is the table of ``_checks``: both
paths loop over its reward rows.

Finite rewards can still overflow float64 on the way: a range beyond the largest float
(``[1e308, -1e308]``), squares above about ``1e154``, or a composite whose summed
components overflow. Both paths then report the group as overflowing instead of returning
infinite or NaN statistics, and the policy rejects it as ``external`` (``reward_overflow``):
a trainer normalising such rewards would overflow in the same way.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from . import _checks
from ._checks import REL_TOL, primary_reason
from ._config import GroupAdmissionConfig
from ._decision import GroupAdmissionDecision
from ._reasons import CHECK_MISSING_COMPLETION, CHECK_REWARD_OVERFLOW
from ._similarity import pairwise_similarities

__all__ = [
    "STATISTICS",
    "BatchStatistics",
    "Scorer",
    "add_problem",
    "batch_reward_failures",
    "batch_reward_statistics",
    "judge_group",
    "log_rejection",
    "measure_similarity",
    "reward_failures",
    "reward_statistics",
]

#: The names of :func:`reward_statistics`' values, in order, as a check's ``statistic``
#: names them: the mean, the population std, the range, the count of members whose
#: deviation from the mean exceeds the tolerance, and the largest magnitude (the scale a
#: threshold's tolerance grows with). A plain tuple: one is built per group judged.
STATISTICS = ("mean", "std", "range", "nontrivial", "scale")
_POSITION = {name: position for position, name in enumerate(STATISTICS)}
Stats = tuple[float, float, float, int, float]


def reward_statistics(values: Sequence[float], tolerance: float) -> Stats | None:
    """
    Return the :data:`STATISTICS` of finite values.

    ``None`` when a statistic overflows float64.
    """
    lo, hi = min(values), max(values)
    scale = max(abs(lo), abs(hi))
    if lo == hi:
        # Identical rewards: report exact zeros, never the rounding residue of a mean.
        return (lo, 0.0, 0.0, 0, scale) if math.isfinite(lo) else None
    # Measured from the lowest reward: for rewards on a grid (0/1 outcomes, rubric steps)
    # ``value - lo`` is exact, so shifting every reward changes no deviation, no count at
    # the tolerance's edge and no std (a mean of raw values rounds with their magnitude).
    total = 0.0
    for value in values:
        total += value - lo
    offset = total / len(values)
    squares = 0.0
    nontrivial = 0
    for value in values:
        deviation = (value - lo) - offset
        squares += deviation * deviation
        if abs(deviation) > tolerance:
            nontrivial += 1
    std, spread = math.sqrt(squares / len(values)), hi - lo
    # An overflowing sum makes the mean infinite and the squares infinite or NaN.
    if not (math.isfinite(std) and math.isfinite(spread)):
        return None
    return lo + offset, std, spread, nontrivial, scale


def reward_failures(config: GroupAdmissionConfig, stats: Stats) -> list[str]:
    """
    Name the reward checks of ``config`` that fail, in the table's order.

    Identical rewards fail every enabled check of the shipped table, which is the one
    rule for a group of one rollout (its rewards are identical by definition): it passes
    when no reward gate is on and is ``exact_dead`` otherwise.
    """
    dead, scale = stats[2] == 0.0, stats[4]
    return [
        check.name
        for check in _checks.TABLE.reward
        if check.bound.fails(stats[_POSITION[check.statistic]], getattr(config, check.field), scale, dead)
    ]


Scorer = Callable[[str, str], float]


def log_rejection(logger: Any, decision: GroupAdmissionDecision) -> None:
    """Report one rejection as a ``group_rejected`` event (structlog fields, or stdlib ``extra``)."""
    fields = decision.to_dict()
    if isinstance(logger, (logging.Logger, logging.LoggerAdapter)):
        # The stdlib takes no keyword fields: the message carries them, and so does ``extra``.
        logger.info("group_rejected %s", fields, extra={"group_admission": fields})
    else:
        logger.info("group_rejected", **fields)


def add_problem(problems: list[str], check: str) -> None:
    """Note a data problem once, in the order problems are found."""
    if check not in problems:
        problems.append(check)


def measure_similarity(
    config: GroupAdmissionConfig, scorer: Scorer | None, texts: list[str | None]
) -> tuple[float | None, float | None, str | None]:
    """
    The similarity gate on one group: mean and max pairwise similarity, and what fails.

    The statistics are ``None`` when not measured. What fails is ``missing_completion``
    (a data problem, even in a one-member group), the similarity check, or ``None``.
    """
    if any(text is None for text in texts):
        return None, None, CHECK_MISSING_COMPLETION
    if len(texts) < 2:
        return None, None, None
    scores = pairwise_similarities(texts, config.similarity_ngram_size, scorer)  # type: ignore[arg-type]
    mean, high = float(scores.mean()), float(scores.max())
    check = _checks.TABLE.similarity
    fails = check.bound.fails(mean, getattr(config, check.field), 0.0, dead=False)
    return mean, high, check.name if fails else None


def judge_group(
    config: GroupAdmissionConfig,
    scorer: Scorer | None,
    values: list[float],
    texts: list[str | None] | None,
    external: list[str],
    problems: list[str],
    size: int,
    group_key: Hashable | None,
) -> GroupAdmissionDecision:
    """
    Judge one group whose input is validated and merged by rollout.

    ``external`` holds the caller's reasons and ``problems`` the data problems found so
    far; both lists may be extended in place.
    """
    failed: list[str] = []
    # Without a data problem every value is finite (a composite's sum may still overflow).
    measurable = not problems or all(math.isfinite(v) for v in values)
    stats = reward_statistics(values, config.advantage_tolerance) if measurable else None
    if stats is None:
        mean = std = spread = math.nan
        nontrivial = 0
        if measurable:
            problems.append(CHECK_REWARD_OVERFLOW)
    else:
        mean, std, spread, nontrivial, _ = stats
        failed = reward_failures(config, stats)
    mean_similarity = max_similarity = None
    if texts is not None and config.similarity_gate_enabled:
        mean_similarity, max_similarity, check = measure_similarity(config, scorer, texts)
        if check == CHECK_MISSING_COMPLETION:
            add_problem(problems, check)
        elif check is not None:
            failed.append(check)
    if problems:
        external.extend(p for p in problems if p not in external)
    # The common admitted case builds no tuples (this is the hot path).
    return GroupAdmissionDecision(
        reason=primary_reason(external, failed, dead=spread == 0.0),
        failed_checks=(*external, *failed) if external or failed else (),
        external_reasons=tuple(external) if external else (),
        group_size=size,
        unique_rollouts=len(values),
        reward_mean=mean,
        reward_std=std,
        reward_range=spread,
        nontrivial_advantage_count=nontrivial,
        mean_pairwise_similarity=mean_similarity,
        max_pairwise_similarity=max_similarity,
        group_key=group_key,
    )


FloatArray = npt.NDArray[np.float64]


# Groups per block in the batch gate: a block's members-major copy stays in cache, which
# makes the transposition and every reduction several times cheaper than on the whole array.
_BLOCK = 2048


class BatchStatistics(NamedTuple):
    """The :data:`STATISTICS` of every row of a batch, and the mask of rows whose statistics overflow."""

    mean: FloatArray
    std: FloatArray
    range: FloatArray
    nontrivial: npt.NDArray[np.int64]
    scale: FloatArray
    overflow: npt.NDArray[np.bool_]


def batch_reward_statistics(rewards: FloatArray, tolerance: float) -> BatchStatistics:
    """
    Row-wise :func:`reward_statistics` of a ``(groups, members)`` array of finite groups.

    Returns the five statistics and the mask of groups whose statistics overflow (where
    :func:`reward_statistics` returns ``None``). Rows holding non-finite values get
    meaningless statistics and are flagged as overflowing; the caller sets them aside.
    Sums run over a members-major copy of a block of groups, reduced along its slow axis:
    numpy adds such rows one after another (pairwise summation is only for the fast
    axis), which is the scalar loop's left-to-right order for every group at once. A sum
    along the groups' own contiguous axis would be pairwise and differ in the last bits.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected below
        mean, std, spread, nontrivial, scale = _blocked_statistics(rewards, tolerance)
    # Identical infinite sums leave a NaN range; any other overflow an infinite or NaN std.
    overflow: npt.NDArray[np.bool_] = ~(np.isfinite(std) & np.isfinite(spread))
    return BatchStatistics(mean, std, spread, nontrivial, scale, overflow)


def _blocked_statistics(
    rewards: FloatArray, tolerance: float
) -> tuple[FloatArray, FloatArray, FloatArray, npt.NDArray[np.int64], FloatArray]:
    groups, members = rewards.shape
    if groups % _BLOCK == 1:
        # A block of one group is one contiguous column, which numpy sums pairwise, not in
        # the scalar loop's order: give it a twin row and drop the twin's statistics.
        mean, std, spread, nontrivial, scale = _blocked_statistics(
            np.concatenate([rewards, rewards[-1:]]), tolerance
        )
        return mean[:groups], std[:groups], spread[:groups], nontrivial[:groups], scale[:groups]
    lo, hi, mean, squares = (np.empty(groups) for _ in range(4))
    small = members < 256  # a member count fits a byte: count in bytes, no cast per element
    count = np.empty(groups, dtype=np.uint8 if small else np.int64)
    width = min(_BLOCK, groups)
    # One pair of buffers for every block: each operation writes in place, in cache.
    buffer, far = np.empty((members, width)), np.empty((members, width), dtype=bool)
    for start in range(0, groups, _BLOCK):
        rows, size = slice(start, start + _BLOCK), min(_BLOCK, groups - start)
        columns, beyond = buffer[:, :size], far[:, :size]
        np.copyto(columns, rewards[rows].T)
        np.minimum.reduce(columns, axis=0, out=lo[rows])
        np.maximum.reduce(columns, axis=0, out=hi[rows])
        np.subtract(columns, lo[rows], out=columns)  # from the lowest reward, as the scalar path
        block_mean = mean[rows]
        np.add.reduce(columns, axis=0, out=block_mean)
        np.divide(block_mean, members, out=block_mean)
        np.subtract(columns, block_mean, out=columns)
        np.abs(columns, out=columns)  # |d| * |d| is d * d, bit for bit
        np.greater(columns, tolerance, out=beyond)
        np.add.reduce(beyond.view(np.uint8) if small else beyond, axis=0, out=count[rows])
        np.multiply(columns, columns, out=columns)
        np.add.reduce(columns, axis=0, out=squares[rows])
    np.add(mean, lo, out=mean)
    std = np.sqrt(np.divide(squares, members, out=squares), out=squares)
    nontrivial = count.astype(np.int64)
    # Identical rewards: report exact zeros, never the rounding residue of a mean.
    dead = np.flatnonzero(lo == hi)
    mean[dead], std[dead], nontrivial[dead] = lo[dead], 0.0, 0
    return mean, std, hi - lo, nontrivial, np.maximum(np.abs(lo), np.abs(hi))


def batch_reward_failures(
    config: GroupAdmissionConfig, stats: BatchStatistics
) -> dict[str, npt.NDArray[np.bool_]]:
    """Row-wise :func:`reward_failures`: a mask of failing rows per enabled check."""
    dead = stats.range == 0.0
    slack = REL_TOL * stats.scale  # one product for every tolerant check (see Bound.fails_batch)
    failed: dict[str, npt.NDArray[np.bool_]] = {}
    for check in _checks.TABLE.reward:
        threshold = getattr(config, check.field)
        if check.bound.enabled(threshold):
            failed[check.name] = check.bound.fails_batch(
                getattr(stats, check.statistic), threshold, slack, dead
            )
    return failed
