"""
twinkle's flat rows (G consecutive completions per prompt) read as groups, and back.

A twinkle 0.5.1 loop holds one reward list per reward function, one entry per completion,
in the sampler's order; ``GRPOAdvantage`` views them as ``(-1, G)``. These helpers cut the
same rows into groups for the session, and build the reward tensor ``GRPOAdvantage``
receives for the rows that are kept.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from .._kit import UNSUMMABLE_REWARD, WRONG_GROUP_SIZE, chunk, describe, scalar_reward

if TYPE_CHECKING:
    import torch

__all__ = ["UNSUMMABLE_REWARD", "WRONG_GROUP_SIZE", "RowRewards", "chunk"]

_FLAT = "reward"  # the component name of a plain list of rewards


def _as_list(values: Any, name: str) -> list[Any]:
    if hasattr(values, "tolist") and callable(values.tolist):
        values = values.tolist()  # a tensor or an array of per-row rewards
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
        msg = f"'{name}' must be a list of per-completion rewards (got {describe(values)})"
        raise TypeError(msg)
    return list(values)


def _summable(value: Any) -> bool:
    """A finite number as the adapters read one (a bool, a 0-d tensor); an int beyond the float range not."""
    number, _ = scalar_reward(value)
    return number is not None and math.isfinite(number)


def _float32_totals(rows: list[list[Any]]) -> npt.NDArray[np.bool_]:
    """Whether each row of finite values sums, component by component, to a finite float32."""
    values = np.array(rows, dtype=np.float64)
    with np.errstate(over="ignore"):  # an overflow is what this looks for
        totals = np.cumsum(values.astype(np.float32), axis=1, dtype=np.float32)[:, -1]
    return np.isfinite(totals)


@attrs.frozen
class RowRewards:
    """
    Per-completion rewards by component, as twinkle's reward functions return them.

    ``named`` is false for a plain list of rewards (one component, given no name).
    """

    columns: dict[str, list[Any]]
    named: bool

    @classmethod
    def read(cls, rewards: Any, num_generations: int) -> RowRewards:
        """
        Read a mapping ``{component: per-row rewards}`` or one list of per-row rewards.

        Raises:
            TypeError: ``rewards`` (or a component) is not a list, tensor or array.
            ValueError: no rows, components of different lengths, or a length that is not
                a multiple of ``num_generations``.
        """
        if isinstance(rewards, Mapping):
            if not rewards:
                msg = "'rewards' must hold at least one reward component (got an empty mapping)"
                raise ValueError(msg)
            columns = {str(key): _as_list(value, f"rewards[{key!r}]") for key, value in rewards.items()}
            named = True
        else:
            columns, named = {_FLAT: _as_list(rewards, "rewards")}, False
        lengths = {name: len(column) for name, column in columns.items()}
        if len(set(lengths.values())) > 1:
            msg = f"'rewards' components must all have one entry per completion (got lengths {lengths})"
            raise ValueError(msg)
        rows = next(iter(lengths.values()))
        if rows == 0 or rows % num_generations:
            msg = (
                f"'rewards' must hold a whole number of groups of num_generations={num_generations} "
                f"consecutive completions (got {rows} rows)"
            )
            raise ValueError(msg)
        return cls(columns, named)

    @property
    def rows(self) -> int:
        """The number of completions."""
        return len(next(iter(self.columns.values())))

    def grouped(
        self, num_generations: int
    ) -> tuple[dict[str, list[list[Any]]] | list[list[Any]], dict[int, list[str]]]:
        """
        The rewards as ``(groups, G)`` lists of numbers, in the form the session takes, and problems.

        A value that is no number (text, a list, a mapping) is a missing member for the
        session, and its group is named with the problem (``non_numeric_reward``...), as the
        other adapters read their hosts' rewards.
        """
        problems: dict[int, list[str]] = {}
        columns: dict[str, list[Any]] = {}
        for name, column in self.columns.items():
            values: list[Any] = []
            for row, value in enumerate(column):
                number, problem = scalar_reward(value)
                values.append(value if isinstance(value, numbers.Real) else number)  # a number as given
                found = problems.setdefault(row // num_generations, [])
                if problem is not None and problem not in found:
                    found.append(problem)
            columns[name] = values
        groups = {name: chunk(column, num_generations) for name, column in columns.items()}
        return (groups if self.named else groups[_FLAT]), problems

    def unsummable_groups(self, gated: Sequence[str] | None, num_generations: int) -> set[int]:
        """
        Groups with a row that twinkle cannot sum to a finite float32 total.

        A value outside ``gated`` that is missing, not a number or not finite; or a row of
        finite numbers whose float32 sum is not finite (``1e39`` in any component). A
        gated component's own problems are the session's to report.
        """
        columns = list(self.columns.values())
        ungated = set() if gated is None or not self.named else set(self.columns) - set(gated)
        found = {
            row for name in ungated for row, value in enumerate(self.columns[name]) if not _summable(value)
        }
        numbers_only = [row for row in range(self.rows) if all(_summable(column[row]) for column in columns)]
        if numbers_only:
            totals = _float32_totals([[float(column[row]) for column in columns] for row in numbers_only])
            found.update(row for row, finite in zip(numbers_only, totals.tolist(), strict=True) if not finite)
        return {row // num_generations for row in found}

    def take(self, rows: Sequence[int]) -> RowRewards:
        """The rewards of ``rows``, in that order."""
        columns = {name: [column[row] for row in rows] for name, column in self.columns.items()}
        return RowRewards(columns, self.named)

    def extend(self, other: RowRewards) -> RowRewards:
        """These rows followed by ``other``'s (the same components)."""
        return RowRewards(
            {name: column + other.columns[name] for name, column in self.columns.items()}, self.named
        )

    def as_dict(self) -> dict[str, list[Any]]:
        """``{component: per-row rewards}`` (a plain list reads as component ``reward``)."""
        return {name: list(column) for name, column in self.columns.items()}

    def tensor(self) -> torch.Tensor:
        """
        The float32 reward tensor ``GRPOAdvantage`` takes.

        ``(rows, components)``, or ``(rows,)`` for one component: twinkle sums a 2-D tensor
        over its last dimension itself.
        """
        import torch  # noqa: PLC0415  (twinkle depends on torch; the package does not)

        columns = list(self.columns.values())
        if len(columns) == 1:
            return torch.tensor([float(value) for value in columns[0]], dtype=torch.float32)
        rows = [[float(column[row]) for column in columns] for row in range(self.rows)]
        return torch.tensor(rows, dtype=torch.float32).reshape(self.rows, len(columns))
