"""
Prompt ids for a :class:`PromptHistory` inside TRL: which prompt each generated group came from.

The history decides which prompts to skip; this module only names the prompts: by a
dataset column, by a callable on the row, or (the default) by the row's index in the
train dataset, carried in an added column that is removed again before TRL sees the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ... import PromptHistory, PromptHistoryConfig
from .._kit import PromptId, as_history_section, build_history, check_prompt_id, describe

__all__ = ["ID_COLUMN", "PromptIds", "as_prompt_history"]

#: The column added to the train dataset when prompts are named by their row index.
ID_COLUMN = "group_admission_prompt_id"


def as_prompt_history(
    value: PromptHistory | PromptHistoryConfig | Mapping[str, Any] | str, num_generations: int
) -> PromptHistory:
    """
    A history whose group size is TRL's ``num_generations`` (a mapping may leave it out).

    A string names a :class:`SessionConfig` preset whose ``history`` section builds it
    (``"recommended"``), as the ``history`` setting of slime and verl does.

    Raises:
        TypeError: ``value`` is not a history, a config, a mapping or a preset's name.
        ValueError: its ``group_size`` is not ``num_generations``, or the preset is unknown
            or has no history section.
    """
    if isinstance(value, str):
        section = as_history_section(value)
        assert section is not None  # a name gives its preset's section, or raises
        value = build_history(section, num_generations, seed=0)
    if isinstance(value, Mapping):
        value = PromptHistoryConfig.from_mapping({"group_size": num_generations, **value})
    if isinstance(value, PromptHistoryConfig):
        value = PromptHistory(value)
    if not isinstance(value, PromptHistory):
        msg = (
            "'prompt_history' must be a PromptHistory, a PromptHistoryConfig, a mapping or a preset's name "
            f"(got {describe(value)})"
        )
        raise TypeError(msg)
    if value.config.group_size != num_generations:
        msg = (
            f"'prompt_history' must have group_size == num_generations ({num_generations}) "
            f"(got {value.config.group_size})"
        )
        raise ValueError(msg)
    return value


class PromptIds:
    """
    Reads the prompt id of train rows: ``prompt_id`` is a column name, a callable, or ``None`` (row index).

    Args:
        prompt_id: The column that holds each row's id, a callable ``row -> id``, or
            ``None`` for the row's index in the train dataset.
    """

    def __init__(self, prompt_id: str | Callable[[Mapping[str, Any]], PromptId] | None) -> None:
        if prompt_id is not None and not isinstance(prompt_id, str) and not callable(prompt_id):
            msg = f"'prompt_id' must be a column name, a callable or None (got {describe(prompt_id)})"
            raise TypeError(msg)
        self._source = prompt_id
        self._column = ID_COLUMN if prompt_id is None else prompt_id if isinstance(prompt_id, str) else None

    def prepare(self, dataset: Any) -> Any:
        """The train dataset, with the index column added when prompts are named by row index."""
        columns = getattr(dataset, "column_names", None)
        if self._source is None:
            if not hasattr(dataset, "add_column") or not hasattr(dataset, "__len__"):
                msg = (
                    "'prompt_history' names prompts by their row index, which needs a map-style "
                    f"datasets.Dataset (got {type(dataset).__name__}); pass prompt_id= a column "
                    "name or a callable"
                )
                raise TypeError(msg)
            return dataset.add_column(ID_COLUMN, list(range(len(dataset))))
        if isinstance(self._source, str) and columns is not None and self._source not in columns:
            msg = (
                f"'prompt_id' must name a column of the train dataset {list(columns)!r} "
                f"(got {self._source!r})"
            )
            raise ValueError(msg)
        return dataset

    def of_row(self, row: Mapping[str, Any]) -> PromptId:
        """
        The canonical id of one row (what a prompt id may be: see :class:`PromptHistory`).

        Raises:
            TypeError, ValueError: the row's id is no prompt id, naming the column (or
                ``'prompt_id(row)'`` for a callable).
        """
        if self._column is not None:
            return check_prompt_id(row[self._column], self._column)
        assert callable(self._source)  # the constructor checked it: a column, a callable or None
        return check_prompt_id(self._source(row), "prompt_id(row)")

    def of_indices(self, dataset: Any, indices: list[int]) -> list[PromptId]:
        """The ids of the rows at ``indices`` of ``dataset`` (the indices themselves by default)."""
        if self._source is None:
            return list(indices)
        return [self.of_row(dataset[index]) for index in indices]

    def strip(self, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows as TRL should see them: without the added index column."""
        if self._source is not None:
            return list(rows)
        return [{key: value for key, value in row.items() if key != ID_COLUMN} for row in rows]
