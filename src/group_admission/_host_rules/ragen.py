"""
RAGEN's group selection (``RolloutFilter._select_top_groups``, mll-lab-nu/RAGEN@20daedc), in numpy.

RAGEN selects on CPU tensors in float32, and its ties are broken by torch's CPU algorithms:
``torch.sort`` is libstdc++'s ``std::sort`` (an insertion sort up to 16 elements, so stable
there, an introsort beyond) and ``torch.topk`` is ``std::nth_element`` then ``std::sort``
(``std::partial_sort`` when ``64 * k <= n``). Rewards of 0/1 give a handful of distinct
stds, so ties are the common case and which tied group is kept changes the batch: the
algorithms are reproduced step for step below. Float32 sums follow numpy's order; torch's
vectorised order can differ in the last bit, which matters only when a running total lands
within one float32 step of the ``top_p`` threshold.

Groups the admission gates rejected leave the candidates the same way RAGEN removes
zero-score groups when ``include_zero`` is false: they are never selected, and ``top_k``
fractions still count every group.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import attrs
import numpy as np
import numpy.typing as npt

from .._validation import as_float, check_bool, check_finite, check_ge, check_one_of, check_real, describe

__all__ = ["ZERO_SCORE", "RagenSelection", "ragen_top_p", "select_top_groups"]

#: RAGEN treats a group score with ``abs(score) <= ZERO_SCORE`` as zero.
ZERO_SCORE = 1e-10

Strategy = Literal["top_p", "top_k", "top_k_abs", "min_p"]
FilterType = Literal["largest", "smallest"]
TopPMode = Literal["linear", "softmax"]
Metric = Literal["reward", "reward_sum", "reward_variance"]
Indices = npt.NDArray[np.int64]
_Item = tuple[float, int]  # (score, group index), as torch sorts values with their indices
_Before = Callable[[_Item, _Item], bool]

_F32 = np.float32
_STRATEGIES = ("top_p", "top_k", "top_k_abs", "min_p")
_FILTER_TYPES = ("largest", "smallest")
_TOP_P_MODES = ("linear", "softmax")
_METRICS = ("reward", "reward_sum", "reward_variance")
# RAGEN's build_rollout_filter lower-cases the metric and accepts this alias.
_METRIC_ALIASES = {"reward_std": "reward_variance"}


def _normalise_metric(value: object) -> object:
    if isinstance(value, str):
        lowered = value.lower()
        return _METRIC_ALIASES.get(lowered, lowered)
    return value


def _as_bool(value: object) -> object:
    # numpy bools arrive from YAML/OmegaConf round trips; anything else is left to the validator.
    return bool(value) if isinstance(value, np.bool_) else value


@attrs.frozen(kw_only=True)
class RagenSelection:
    """
    RAGEN's selection parameters, applied to the groups the admission gates admitted.

    Each field has the meaning of the RAGEN config key ``actor_rollout_ref.rollout.
    rollout_filter_<field>`` (``strategy`` is set through the adapter's own
    ``group_admission.selection`` key, because ``rollout_filter_strategy`` selects the
    adapter itself).

    Args:
        strategy: ``top_p`` (nucleus over scores), ``top_k`` (the best
            ``int(value * num_groups)`` groups), ``top_k_abs`` (the best ``int(value)``
            groups) or ``min_p`` (groups within a factor ``value`` of the best score).
        value: The strategy's parameter. ``top_p`` with ``value >= 1`` keeps every
            candidate.
        filter_type: ``largest`` keeps high scores, ``smallest`` low ones.
        include_zero: When false, groups whose score is within ``1e-10`` of zero are never
            selected.
        top_p_prob_mode: ``linear`` (cumulative score mass) or ``softmax`` (cumulative
            softmax probability) for ``top_p``.
        selection_eps: Slack subtracted from the ``linear`` top-p threshold.
        metric: The group score: ``reward_variance`` (alias ``reward_std``; the sample
            standard deviation, as RAGEN computes it), ``reward`` (mean) or
            ``reward_sum``.

    .. versionadded:: 0.1.0
    """

    strategy: Strategy = attrs.field(default="top_p", validator=check_one_of(_STRATEGIES))
    value: float = attrs.field(
        default=1.0, converter=as_float, validator=(check_real, check_finite, check_ge(0))
    )
    filter_type: FilterType = attrs.field(default="largest", validator=check_one_of(_FILTER_TYPES))
    include_zero: bool = attrs.field(default=True, converter=_as_bool, validator=check_bool)
    top_p_prob_mode: TopPMode = attrs.field(default="linear", validator=check_one_of(_TOP_P_MODES))
    selection_eps: float = attrs.field(
        default=0.01, converter=as_float, validator=(check_real, check_finite, check_ge(0))
    )
    metric: Metric = attrs.field(
        default="reward_variance", converter=_normalise_metric, validator=check_one_of(_METRICS)
    )

    @property
    def keeps_all(self) -> bool:
        """Whether this selection keeps every candidate (RAGEN's "no filter" setting)."""
        return self.strategy == "top_p" and self.value >= 1.0 and self.include_zero

    def to_dict(self) -> dict[str, Any]:
        """Return the parameters as a plain dict."""
        return attrs.asdict(self)


# -- torch's CPU comparators and libstdc++'s algorithms, on (score, index) items ---------
def _greater(x: _Item, y: _Item) -> bool:
    """Descending, as torch orders on CPU: NaN first, then larger scores."""
    return (math.isnan(x[0]) and not math.isnan(y[0])) or x[0] > y[0]


def _less(x: _Item, y: _Item) -> bool:
    """Ascending, as torch orders on CPU: smaller scores first, NaN last."""
    return (not math.isnan(x[0]) and math.isnan(y[0])) or x[0] < y[0]


def _insertion_sort(a: list[_Item], first: int, last: int, before: _Before) -> None:
    for i in range(first + 1, last):
        value, hole = a[i], i
        while hole > first and before(value, a[hole - 1]):
            a[hole] = a[hole - 1]
            hole -= 1
        a[hole] = value


def _partition_pivot(a: list[_Item], first: int, last: int, before: _Before) -> int:
    """``__unguarded_partition_pivot``: median of three moved to ``first``, then Hoare's split."""
    x, y, z = first + 1, first + (last - first) // 2, last - 1
    if before(a[x], a[y]):
        median = y if before(a[y], a[z]) else (z if before(a[x], a[z]) else x)
    else:
        median = x if before(a[x], a[z]) else (z if before(a[y], a[z]) else y)
    a[first], a[median] = a[median], a[first]
    low, high = first + 1, last
    while True:
        while before(a[low], a[first]):
            low += 1
        high -= 1
        while before(a[first], a[high]):
            high -= 1
        if low >= high:
            return low
        a[low], a[high] = a[high], a[low]
        low += 1


def _adjust_heap(a: list[_Item], first: int, hole: int, length: int, value: _Item, before: _Before) -> None:
    top, child = hole, hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if before(a[first + child], a[first + child - 1]):
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and before(a[first + parent], value):
        a[first + hole] = a[first + parent]
        hole, parent = parent, (parent - 1) // 2
    a[first + hole] = value


def _heap_select(a: list[_Item], first: int, middle: int, last: int, before: _Before) -> None:
    length = middle - first
    for parent in range((length - 2) // 2, -1, -1) if length >= 2 else ():
        _adjust_heap(a, first, parent, length, a[first + parent], before)
    for i in range(middle, last):
        if before(a[i], a[first]):
            value, a[i] = a[i], a[first]
            _adjust_heap(a, first, 0, length, value, before)


def _partial_sort(a: list[_Item], first: int, middle: int, last: int, before: _Before) -> None:
    _heap_select(a, first, middle, last, before)
    for end in range(middle - 1, first, -1):
        value, a[end] = a[end], a[first]
        _adjust_heap(a, first, 0, end - first, value, before)


def _sort(a: list[_Item], first: int, last: int, before: _Before) -> None:
    """``std::sort``: introsort down to runs of 16, then one insertion sort over everything."""

    def introsort(first: int, last: int, depth: int) -> None:
        while last - first > 16:
            if depth == 0:
                _partial_sort(a, first, last, last, before)
                return
            depth -= 1
            cut = _partition_pivot(a, first, last, before)
            introsort(cut, last, depth)
            last = cut

    if last - first > 1:
        introsort(first, last, 2 * ((last - first).bit_length() - 1))
        _insertion_sort(a, first, last, before)


def _nth_element(a: list[_Item], nth: int, before: _Before) -> None:
    """``std::nth_element`` (introselect) on the whole list."""
    first, last = 0, len(a)
    depth = 2 * (last.bit_length() - 1)
    while last - first > 3:
        if depth == 0:
            _heap_select(a, first, nth + 1, last, before)
            a[first], a[nth] = a[nth], a[first]
            return
        depth -= 1
        cut = _partition_pivot(a, first, last, before)
        first, last = (cut, last) if cut <= nth else (first, cut)
    _insertion_sort(a, first, last, before)


def _items(scores: npt.NDArray[np.float32]) -> list[_Item]:
    return list(zip(scores.tolist(), range(len(scores)), strict=True))


def _torch_sort(scores: npt.NDArray[np.float32], *, descending: bool) -> Indices:
    """The order ``torch.sort(scores, descending=descending)`` returns on CPU."""
    items = _items(scores)
    _sort(items, 0, len(items), _greater if descending else _less)
    return np.array([index for _, index in items], dtype=np.int64)


def _torch_searchsorted(values: npt.NDArray[np.float32], value: np.float32) -> int:
    """
    ``torch.searchsorted(values, value)`` on CPU: the first position whose entry is ``>= value``.

    torch's bisection moves right past every entry that is not ``>= value``, so a NaN
    counts as smaller than anything (numpy's sorts NaN last): an all-NaN cumulative sum
    gives its length, and softmax top-p then keeps every group, as RAGEN does.
    """
    low, high = 0, len(values)
    while low < high:
        middle = (low + high) // 2
        if values[middle] >= value:
            high = middle
        else:
            low = middle + 1
    return low


def _torch_topk(scores: npt.NDArray[np.float32], k: int) -> Indices:
    """The indices ``torch.topk(scores, k)`` returns on CPU (largest, sorted)."""
    items = _items(scores)
    if 64 * k <= len(items):
        _partial_sort(items, 0, k, len(items), _greater)
    else:
        _nth_element(items, k - 1, _greater)
        _sort(items, 0, k - 1, _greater)
    return np.array([index for _, index in items[:k]], dtype=np.int64)


# -- RAGEN's strategies ---------------------------------------------------------------------
def _top_p(scores: npt.NDArray[np.float32], selection: RagenSelection) -> Indices:
    largest = selection.filter_type == "largest"
    if selection.top_p_prob_mode == "softmax":
        logits = scores if largest else -scores
        exps = np.exp(logits - logits.max())
        probabilities = exps * (_F32(1) / exps.sum(dtype=_F32))  # torch multiplies by 1 / sum
        order = _torch_sort(probabilities, descending=True)
        # torch accumulates a float32 cumsum in double and rounds each entry back.
        cumulative = np.cumsum(probabilities[order], dtype=np.float64).astype(_F32)
        cutoff = _torch_searchsorted(cumulative, _F32(selection.value))
        return order[: min(cutoff + 1, len(scores))]
    order = _torch_sort(scores, descending=largest)
    threshold = _F32(selection.value) * scores.sum(dtype=_F32) - _F32(selection.selection_eps)
    total, taken = 0.0, 0  # a Python float, compared with the float32 threshold as float32
    for score in scores[order].tolist():
        if _F32(total) >= threshold or score <= 0:
            break
        total += score
        taken += 1
    return order[:taken] if _F32(total) >= threshold else order[:0]


def _min_p(scores: npt.NDArray[np.float32], selection: RagenSelection) -> Indices:
    if selection.filter_type == "largest":
        keep = scores >= scores.max() * _F32(selection.value) - _F32(ZERO_SCORE)
    else:
        keep = scores <= scores.min() / _F32(selection.value + ZERO_SCORE) + _F32(ZERO_SCORE)
    return np.flatnonzero(keep).astype(np.int64)


def select_top_groups(
    scores: npt.ArrayLike, selection: RagenSelection, *, candidates: npt.ArrayLike | None = None
) -> Indices:
    """
    Return the indices of the groups RAGEN's selection keeps, in RAGEN's order.

    Args:
        scores: One score per group (read as float32, as RAGEN's ``scores.float()``).
        selection: The selection parameters.
        candidates: A boolean per group: the groups that may be selected (``None``: every
            group, which is RAGEN's ``_select_top_groups`` itself).

    Returns:
        An ``int64`` array of group indices (empty when nothing is selected).

    Raises:
        TypeError: ``selection`` is not a :class:`RagenSelection`.
        ValueError: ``scores`` is not 1-D, or ``candidates`` does not match it.

    .. versionadded:: 0.2.0
    """
    if not isinstance(selection, RagenSelection):
        msg = f"'selection' must be a RagenSelection (got {describe(selection)})"
        raise TypeError(msg)
    # NaN (a one-sample group's std) and infinite scores follow IEEE arithmetic, as in torch.
    with np.errstate(over="ignore", invalid="ignore"):
        values = np.asarray(scores, dtype=_F32)
        if values.ndim != 1:
            msg = f"'scores' must hold one score per group (1-D) (got shape {values.shape})"
            raise ValueError(msg)
        keep = np.ones(len(values), dtype=bool)
        if candidates is not None:
            mask = np.asarray(candidates, dtype=bool)
            if mask.shape != values.shape:
                msg = f"'candidates' must hold one flag per group ({len(values)}) (got shape {mask.shape})"
                raise ValueError(msg)
            keep &= mask
        if not selection.include_zero:
            keep &= np.abs(values) > _F32(ZERO_SCORE)
        return _select(values, np.flatnonzero(keep).astype(np.int64), selection)


def _select(values: npt.NDArray[np.float32], indices: Indices, selection: RagenSelection) -> Indices:
    """The selection among the candidate groups ``indices`` of ``values``."""
    if len(indices) == 0:
        return indices
    kept = values[indices]
    if selection.strategy == "top_p":
        return indices if selection.value >= 1.0 else indices[_top_p(kept, selection)]
    if selection.strategy == "min_p":
        return indices[_min_p(kept, selection)]
    # top_k is a fraction of every group, not of the candidates, exactly as RAGEN counts it.
    k = int(selection.value * len(values)) if selection.strategy == "top_k" else int(selection.value)
    k = max(min(k, len(indices)), 1)
    return indices[_torch_topk(kept if selection.filter_type == "largest" else -kept, k)]


def ragen_top_p(
    scores: npt.ArrayLike, *, top_p: float, include_zero: bool = True, selection_eps: float = 0.01
) -> Indices:
    """
    RAGEN's linear top-p selection (``strategy="top_p"``, ``top_p_prob_mode="linear"``).

    Candidates are sorted by score, largest first (zero scores dropped unless
    ``include_zero``); the walk takes groups until their cumulative score reaches
    ``top_p * sum(scores) - selection_eps`` or the next score is not positive. When the
    walk ends below the threshold nothing is selected. ``top_p >= 1`` keeps every
    candidate. This is :func:`select_top_groups` with those settings.

    Returns:
        The selected group indices, in descending score order.

    .. versionadded:: 0.1.0
    """
    selection = RagenSelection(value=top_p, include_zero=include_zero, selection_eps=selection_eps)
    return select_top_groups(scores, selection)
