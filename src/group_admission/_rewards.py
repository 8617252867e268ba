"""
Turning the many shapes of reward input into float64 values.

Structural mistakes (no members, 2-D input, strings, ragged components, unknown
``gate_on`` names) raise. Data problems that arrive during training (``None`` or a
non-finite value) are reported back so the policy can reject the group as ``external``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import attrs
import numpy as np
import numpy.typing as npt

from ._reasons import CHECK_MISSING_REWARD, CHECK_NON_FINITE_REWARD
from ._validation import describe

__all__ = ["BatchRewards", "coerce_batch", "coerce_group", "is_torch_tensor", "to_numpy"]

_FLOAT = {float}
_NUMBER = {float, int}
# The data problems of a reward, in the order a decision lists them.
_PROBLEM_ORDER = (CHECK_MISSING_REWARD, CHECK_NON_FINITE_REWARD)


def is_torch_tensor(value: object) -> bool:
    """Tell whether ``value`` is a torch tensor, without importing torch."""
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def to_numpy(value: Any, name: str) -> npt.NDArray[Any]:
    """
    Convert a torch tensor (any device, any real dtype) to a float64 numpy array.

    Raises:
        TypeError: the tensor is complex (casting would silently drop the imaginary part).
    """
    if value.is_complex():
        msg = f"'{name}' must hold numbers (got a tensor of dtype {value.dtype})"
        raise TypeError(msg)
    return np.asarray(value.detach().cpu().double().numpy())


def _from_array(
    array: npt.NDArray[Any], name: str, ndim: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_] | None]:
    """
    Return float64 values and the mask of missing members (``None`` when none can be missing).

    ``None`` members (object arrays) and masked members (numpy masked arrays) are missing;
    their values are NaN.
    """
    if array.ndim != ndim:
        msg = f"'{name}' must be {ndim}-D (got an array of shape {array.shape})"
        raise ValueError(msg)
    masked = None
    if isinstance(array, np.ma.MaskedArray):
        # The mask marks members without a reward; reading ``.data`` alone would train on fillers.
        masked = np.ma.getmaskarray(array)
        array = np.asarray(array.data)
    kind = array.dtype.kind
    if kind in "biuf":
        # No copy when the input already is float64 and nothing is masked: nothing
        # downstream writes to it.
        values = array.astype(np.float64, copy=masked is not None)
        missing = None
    elif kind == "O":
        items = array.reshape(-1).tolist()
        width = array.shape[-1] if array.ndim > 1 else 0
        missing = np.array([item is None for item in items], dtype=bool).reshape(array.shape)
        values = np.array(
            [
                math.nan if item is None else _scalar(item, name, divmod(i, width) if width else i, ndim)
                for i, item in enumerate(items)
            ],
            dtype=np.float64,
        ).reshape(array.shape)
    else:
        msg = f"'{name}' must hold numbers (got an array of dtype {array.dtype})"
        raise TypeError(msg)
    if masked is not None and masked.any():
        values[masked] = math.nan
        missing = masked if missing is None else missing | masked
    return values, missing


def _scalar(item: object, name: str, index: int | tuple[int, ...], ndim: int = 1) -> float:
    if isinstance(item, (float, np.floating, np.integer, np.bool_)):
        return float(item)
    if isinstance(item, numbers.Real):  # int, Fraction and other registered reals
        try:
            return float(item)
        except OverflowError:  # beyond the float range: an infinity of its sign, a non-finite reward
            return math.inf if cast("float", item) > 0 else -math.inf
    if is_torch_tensor(item) and getattr(item, "ndim", 1) == 0:
        return _scalar(item.item(), name, index, ndim)  # type: ignore[attr-defined]
    if isinstance(item, (Sequence, np.ndarray)) and not isinstance(item, (str, bytes)):
        msg = f"'{name}' must be {ndim}-D: member {index} is itself a sequence ({describe(item)})"
        raise ValueError(msg)
    msg = f"'{name}' must hold numbers: member {index} is {describe(item)}"
    raise TypeError(msg)


def _one_dim(values: Any, name: str) -> tuple[list[float], int]:
    """Convert one 1-D reward vector to floats (``None`` becomes NaN) and count the missing members."""
    kinds = set(map(type, values)) if type(values) in (list, tuple) else None
    if kinds is not None and kinds <= _NUMBER:
        # The common case (a list of Python numbers) stays in pure Python: for small
        # groups that is several times faster than a round trip through numpy. The
        # values are only read, never mutated, so a list of floats is used as is.
        try:
            converted: list[float] = (
                values if kinds <= _FLOAT and type(values) is list else [float(v) for v in values]
            )
        except OverflowError:  # an int beyond the float range
            converted = [_scalar(v, name, index) for index, v in enumerate(values)]
        missing = 0
    elif isinstance(values, np.ndarray) or is_torch_tensor(values):
        array = values if isinstance(values, np.ndarray) else to_numpy(values, name)
        floats, mask = _from_array(array, name, 1)
        converted, missing = floats.tolist(), 0 if mask is None else int(mask.sum())
    elif isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        msg = f"'{name}' must be a 1-D sequence of numbers (got {describe(values)})"
        raise TypeError(msg)
    else:
        items = list(values)
        missing = sum(item is None for item in items)
        converted = [
            math.nan if item is None else _scalar(item, name, index) for index, item in enumerate(items)
        ]
    if not converted:
        msg = f"'{name}' must hold at least one member (got 0)"
        raise ValueError(msg)
    return converted, missing


def _problems(values: list[float], missing: int) -> list[str]:
    """Name the data problems: ``None`` members, and non-finite values that are not ``None``."""
    if not missing and math.isfinite(sum(values)):
        # Fast path: a finite sum means every value is finite (an overflowing sum of finite
        # values merely takes the slow path below).
        return []
    problems = [CHECK_MISSING_REWARD] if missing else []
    if sum(not math.isfinite(v) for v in values) > missing:
        problems.append(CHECK_NON_FINITE_REWARD)
    return problems


def _components(rewards: Any, gate_on: Sequence[str] | None) -> tuple[dict[str, Any], list[str]]:
    """
    Return ``{label: component}`` and the labels of the gated components.

    A plain sequence is one component labelled ``rewards``; a mapping's components are
    labelled ``rewards['name']`` so that errors point at the culprit.
    """
    if not (type(rewards) is dict or isinstance(rewards, Mapping)):
        if gate_on is not None:
            msg = (
                "'rewards' must be a mapping of reward component names to values when "
                f"'gate_on' is set (got {describe(rewards)})"
            )
            raise TypeError(msg)
        return {"rewards": rewards}, ["rewards"]
    if not rewards:
        msg = "'rewards' must hold at least one reward component (got an empty mapping)"
        raise ValueError(msg)
    for key in rewards:
        if not isinstance(key, str):
            msg = f"'rewards' component names must be strings (got {describe(key)})"
            raise TypeError(msg)
    if gate_on is not None:
        unknown = [name for name in gate_on if name not in rewards]
        if unknown:
            msg = (
                f"'gate_on' names unknown reward component(s) {unknown!r} "
                f"(the rewards have {sorted(rewards)!r})"
            )
            raise ValueError(msg)
    labelled = {f"rewards[{key!r}]": value for key, value in rewards.items()}
    return labelled, [f"rewards[{name!r}]" for name in (rewards if gate_on is None else gate_on)]


def coerce_group(rewards: Any, gate_on: Sequence[str] | None) -> tuple[list[float], list[str]]:
    """
    Return the gated reward of each member and the data problems found.

    A mapping is a composite reward: every component must have the same length, and the
    gated value is the sum of the ``gate_on`` components (all components when ``None``).
    Only the gated components' data problems are reported: a component outside
    ``gate_on`` may legitimately be ``None`` for members it does not apply to.
    """
    if gate_on is None and type(rewards) is list:
        values, missing = _one_dim(rewards, "rewards")  # the hot path: skip the mapping checks
        return values, _problems(values, missing)
    components, gated_labels = _components(rewards, gate_on)
    columns: dict[str, list[float]] = {}
    found: set[str] = set()
    for label, component in components.items():
        columns[label], missing = _one_dim(component, label)
        if label in gated_labels:
            found.update(_problems(columns[label], missing))
    problems = [problem for problem in _PROBLEM_ORDER if problem in found]
    if len(columns) == 1:
        return columns[gated_labels[0]], problems
    lengths = {label: len(column) for label, column in columns.items()}
    if len(set(lengths.values())) > 1:
        msg = f"'rewards' components must all have the same length (got {lengths})"
        raise ValueError(msg)
    # Summed left to right from 0.0, exactly as ``coerce_batch`` does, so the two agree
    # bitwise. A sum of finite values may overflow; the gate reports that itself.
    gated = [0.0] * len(columns[gated_labels[0]])
    for label in gated_labels:
        for index, value in enumerate(columns[label]):
            gated[index] += value
    return gated, problems


@attrs.frozen(kw_only=True, eq=False)
class BatchRewards:
    """
    A batch's gated rewards as a ``(groups, members)`` float64 array, and what is missing.

    ``missing`` marks groups with a missing member in a gated component. Which groups hold
    a non-finite gated value that is not missing, :meth:`non_finite` tells for the rows
    asked about: every such row has a non-finite gated value, hence non-finite reward
    statistics, so a caller asks only about the rows whose statistics are not finite
    instead of reading the whole batch once more.
    """

    gated: npt.NDArray[np.float64]
    missing: npt.NDArray[np.bool_]
    gated_components: tuple[tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_] | None], ...]

    def non_finite(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
        """Of ``rows``, those with a non-finite gated value that is not missing (see :func:`coerce_group`)."""
        found = np.zeros(len(rows), dtype=bool)
        for array, mask in self.gated_components:
            bad = (~np.isfinite(array[rows])).sum(axis=1)
            found |= bad > (0 if mask is None else mask[rows].sum(axis=1))
        return found


def coerce_batch(rewards: Any, gate_on: Sequence[str] | None) -> BatchRewards:
    """Read a batch of rewards: every component as float64, the gated sum, the missing members."""
    components, gated_labels = _components(rewards, gate_on)
    arrays = {label: _two_dim(component, label) for label, component in components.items()}
    shapes = {label: array.shape for label, (array, _) in arrays.items()}
    if len(set(shapes.values())) > 1:
        msg = f"'rewards' components must all have the same shape (got {shapes})"
        raise ValueError(msg)
    # Sums of finite values may overflow: the gate reports overflowing groups itself.
    with np.errstate(over="ignore", invalid="ignore"):
        if len(arrays) == 1:
            gated = arrays[gated_labels[0]][0]
        else:
            gated = np.zeros(next(iter(shapes.values())), dtype=np.float64)
            for label in gated_labels:
                gated += arrays[label][0]
    missing = np.zeros(gated.shape[0], dtype=bool)
    for label in gated_labels:
        mask = arrays[label][1]
        if mask is not None:
            missing |= mask.any(axis=1)
    return BatchRewards(
        gated=gated, missing=missing, gated_components=tuple(arrays[label] for label in gated_labels)
    )


def _two_dim(values: Any, name: str) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_] | None]:
    """Return the values as float64 and the mask of missing members (``None`` when none can be)."""
    if is_torch_tensor(values):
        values = to_numpy(values, name)
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        msg = f"'{name}' must be a 2-D array of shape (groups, members) (got {describe(values)})"
        raise TypeError(msg)
    array = values if isinstance(values, np.ndarray) else _rows_to_array(values, name)
    converted, mask = _from_array(array, name, 2)
    if converted.shape[0] == 0 or converted.shape[1] == 0:
        msg = f"'{name}' must hold at least one group of at least one member (got shape {converted.shape})"
        raise ValueError(msg)
    return converted, mask


def _rows_to_array(rows: Sequence[Any], name: str) -> npt.NDArray[Any]:
    if not rows:
        return np.zeros((0, 0))
    # A list of 1-D tensors is a batch too: each row is what ``evaluate`` takes for a group.
    rows = [to_numpy(row, name) if is_torch_tensor(row) else row for row in rows]
    lengths = set()
    for row in rows:
        if isinstance(row, (str, bytes)) or not isinstance(row, (Sequence, np.ndarray)):
            msg = f"'{name}' must be 2-D: every group must be a sequence (got {describe(row)})"
            raise TypeError(msg)
        lengths.add(len(row))
    if len(lengths) > 1:
        msg = f"'{name}' groups must all have the same number of members (got lengths {sorted(lengths)})"
        raise ValueError(msg)
    flat = [item for row in rows for item in row]
    if all(isinstance(item, (float, int, np.floating, np.integer)) for item in flat):
        try:
            return np.array(flat, dtype=np.float64).reshape(len(rows), -1)
        except OverflowError:  # an int beyond the float range: convert it member by member
            pass
    # Built item by item so that numpy never reads a nested member as another dimension:
    # a third level is refused member by member instead of widening the groups.
    return np.fromiter(flat, dtype=object, count=len(flat)).reshape(len(rows), -1)
