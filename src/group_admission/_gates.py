"""
The reward gate, written once for a single group (pure Python) and once for a batch (numpy).

Both compute the same IEEE operations in the same order (left-to-right sums from 0.0,
then ``sqrt``), so ``evaluate_batch`` agrees with ``evaluate`` bit for bit.

Finite rewards can still overflow float64 on the way: a range beyond the largest float
(``[1e308, -1e308]``), squares above about ``1e154``, or a composite whose summed
components overflow. Both paths then report the group as overflowing instead of returning
infinite or NaN statistics, and the policy rejects it as ``external`` (``reward_overflow``):
a trainer normalising such rewards would overflow in the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ._config import GroupAdmissionConfig
from ._reasons import CHECK_NONTRIVIAL, CHECK_RANGE, CHECK_STD

__all__ = [
    "REL_TOL",
    "batch_reward_failures",
    "batch_reward_statistics",
    "reward_failures",
    "reward_statistics",
]

#: A statistic this close to its threshold, relative to the reward scale, meets it: decimal
#: rewards such as 0.12 - 0.1 land a few ulps below 0.02.
REL_TOL = 1e-12

Stats = tuple[float, float, float, int, float]


def reward_statistics(values: Sequence[float], tolerance: float) -> Stats | None:
    """
    Return ``(mean, population std, range, non-trivial count, scale)`` of finite values.

    ``None`` when a statistic overflows float64.
    """
    lo, hi = min(values), max(values)
    scale = max(abs(lo), abs(hi))
    if lo == hi:
        # Identical rewards: report exact zeros, never the rounding residue of a mean.
        return (lo, 0.0, 0.0, 0, scale) if math.isfinite(lo) else None
    total = 0.0
    for value in values:
        total += value
    mean = total / len(values)
    squares = 0.0
    nontrivial = 0
    for value in values:
        deviation = value - mean
        squares += deviation * deviation
        if abs(deviation) > tolerance:
            nontrivial += 1
    std, spread = math.sqrt(squares / len(values)), hi - lo
    # An overflowing sum makes the mean infinite and the squares infinite or NaN.
    if not (math.isfinite(std) and math.isfinite(spread)):
        return None
    return mean, std, spread, nontrivial, scale


def reward_failures(
    config: GroupAdmissionConfig, std: float, spread: float, nontrivial: int, scale: float
) -> list[str]:
    """
    Name the reward checks that fail. Identical rewards fail every enabled check.

    This is the one rule for a group of one rollout, whose rewards are identical by
    definition: it passes when no reward gate is on and is ``exact_dead`` otherwise.
    """
    failed = []
    dead = spread == 0.0
    threshold = config.min_reward_std
    if threshold > 0 and (dead or std < threshold - REL_TOL * max(threshold, scale)):
        failed.append(CHECK_STD)
    threshold = config.min_reward_range
    if threshold > 0 and (dead or spread < threshold - REL_TOL * max(threshold, scale)):
        failed.append(CHECK_RANGE)
    if nontrivial < config.min_nontrivial_advantages:
        failed.append(CHECK_NONTRIVIAL)
    return failed


FloatArray = npt.NDArray[np.float64]


def _sequential_sum(columns: FloatArray) -> FloatArray:
    """Sum the rows of ``columns`` one after another, starting from 0.0 like the scalar loop."""
    total = np.zeros(columns.shape[1])
    for row in columns:
        np.add(total, row, out=total)
    return total


# Groups per block in the batch gate: a block's members-major copy stays in cache, which
# makes the transposition and every reduction several times cheaper than on the whole array.
_BLOCK = 2048


def batch_reward_statistics(
    rewards: FloatArray, tolerance: float
) -> tuple[FloatArray, FloatArray, FloatArray, npt.NDArray[np.int64], FloatArray, npt.NDArray[np.bool_]]:
    """
    Row-wise :func:`reward_statistics` of a ``(groups, members)`` array of finite groups.

    Returns the five statistics and the mask of groups whose statistics overflow (where
    :func:`reward_statistics` returns ``None``). Sums run member by member over whole
    columns of a block of groups (a members-major copy), which is the scalar loop's
    left-to-right order for every group at once. numpy's own ``sum`` would reduce a
    contiguous axis pairwise and differ in the last bits.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected below
        mean, std, spread, nontrivial, scale = _blocked_statistics(rewards, tolerance)
    # Identical infinite sums leave a NaN range; any other overflow an infinite or NaN std.
    overflow: npt.NDArray[np.bool_] = ~(np.isfinite(std) & np.isfinite(spread))
    return mean, std, spread, nontrivial, scale, overflow


def _blocked_statistics(
    rewards: FloatArray, tolerance: float
) -> tuple[FloatArray, FloatArray, FloatArray, npt.NDArray[np.int64], FloatArray]:
    groups, members = rewards.shape
    mean, std, spread, scale = (np.empty(groups) for _ in range(4))
    nontrivial = np.empty(groups, dtype=np.int64)
    for start in range(0, groups, _BLOCK):
        block = slice(start, start + _BLOCK)
        columns = np.ascontiguousarray(rewards[block].T)
        lo, hi = columns.min(axis=0), columns.max(axis=0)
        scale[block] = np.maximum(np.abs(lo), np.abs(hi))
        spread[block] = hi - lo
        mean[block] = _sequential_sum(columns) / members
        deviation = columns - mean[block]
        nontrivial[block] = (np.abs(deviation) > tolerance).sum(axis=0, dtype=np.int64)
        np.multiply(deviation, deviation, out=deviation)
        std[block] = np.sqrt(_sequential_sum(deviation) / members)
        # Identical rewards: report exact zeros, never the rounding residue of a mean.
        dead = np.flatnonzero(lo == hi) + start
        mean[dead], std[dead], nontrivial[dead] = lo[dead - start], 0.0, 0
    return mean, std, spread, nontrivial, scale


def batch_reward_failures(
    config: GroupAdmissionConfig,
    std: FloatArray,
    spread: FloatArray,
    nontrivial: npt.NDArray[np.int64],
    scale: FloatArray,
) -> dict[str, npt.NDArray[np.bool_]]:
    """Row-wise :func:`reward_failures`: a mask of failing rows per enabled check."""
    dead = spread == 0.0
    failed: dict[str, npt.NDArray[np.bool_]] = {}
    for check, threshold, statistic in (
        (CHECK_STD, config.min_reward_std, std),
        (CHECK_RANGE, config.min_reward_range, spread),
    ):
        if threshold > 0:
            failed[check] = dead | (statistic < threshold - REL_TOL * np.maximum(threshold, scale))
    if config.min_nontrivial_advantages > 0:
        failed[CHECK_NONTRIVIAL] = nontrivial < config.min_nontrivial_advantages
    return failed
