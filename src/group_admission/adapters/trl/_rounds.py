"""
Resampling inside TRL: fresh prompts for extra rounds, and one batch made of several rounds.

TRL generates one batch per ``_generate_and_score_completions`` call. An extra round is
another call on fresh prompts with the same weights (no optimizer step runs in between);
its admitted groups take the rejected slots of the first batch, so the buffer keeps the
shape TRL expects. Rounds are padded to one width before rows are picked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._trl_imports import torch

__all__ = ["PromptStream", "merge_rounds"]

# Per-row fields of TRL's text batch: (padding side, pad value; None = the tokenizer's pad id).
_PADDING: dict[str, tuple[str, float | None]] = {
    "prompt_ids": ("left", None),
    "prompt_mask": ("left", 0),
    "completion_ids": ("right", None),
    "completion_mask": ("right", 0),
    "tool_mask": ("right", 1),
    "old_per_token_logps": ("right", 0.0),
    "ref_per_token_logps": ("right", 0.0),
    "sampling_per_token_logps": ("right", 0.0),
}
_SCALARS = frozenset({"num_items_in_batch"})


class PromptStream:
    """
    Fresh prompts for extra rounds: a seeded permutation of the train dataset.

    Built from the trainer's seed, it yields the same rows on every rank and its position
    is checkpointed, so a resumed run draws the prompts the original would have.
    """

    def __init__(self, dataset: Any, seed: int) -> None:
        if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
            msg = (
                "'budget' (resampling) needs a map-style train_dataset with __len__ and "
                f"__getitem__ (got {type(dataset).__name__})"
            )
            raise TypeError(msg)
        self._dataset = dataset
        self._seed = seed
        self.epoch = 0
        self.position = 0
        self._deferred: list[int] = []
        self._order = self._permutation()

    def _permutation(self) -> list[int]:
        generator = torch.Generator().manual_seed(self._seed + self.epoch)
        order: list[int] = torch.randperm(len(self._dataset), generator=generator).tolist()
        return order

    def draw(self, groups: int, num_generations: int) -> list[dict[str, Any]]:
        """``groups`` prompt rows, each repeated ``num_generations`` times (TRL's layout)."""
        return self.rows(self.take(groups), num_generations)

    def take(self, count: int) -> list[int]:
        """The next ``count`` indices: the deferred ones first, then the permutation's."""
        indices, self._deferred = self._deferred[:count], self._deferred[count:]
        while len(indices) < count:
            if self.position == len(self._order):
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._permutation()
            end = min(len(self._order), self.position + count - len(indices))
            indices += self._order[self.position : end]
            self.position = end
        return indices

    def defer(self, indices: list[int]) -> None:
        """Put ``indices`` back at the front of the stream, in order (picked, not needed yet)."""
        self._deferred = indices + self._deferred

    def rows(self, indices: list[int], num_generations: int) -> list[dict[str, Any]]:
        """The rows of ``indices``, each repeated ``num_generations`` times (TRL's layout)."""
        return [dict(self._dataset[index]) for index in indices for _ in range(num_generations)]

    def state_dict(self) -> dict[str, Any]:
        """The stream's position and deferred indices (JSON-safe)."""
        return {"epoch": self.epoch, "position": self.position, "deferred": list(self._deferred)}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        """Continue from a :meth:`state_dict` snapshot."""
        self.epoch, self.position = int(data["epoch"]), int(data["position"])
        self._deferred = [int(index) for index in data.get("deferred", [])]
        self._order = self._permutation()


def _pad(tensor: torch.Tensor, width: int, side: str, value: float) -> torch.Tensor:
    missing = width - tensor.size(1)
    if missing == 0:
        return tensor
    filler = torch.full(
        (tensor.size(0), missing, *tensor.shape[2:]), value, dtype=tensor.dtype, device=tensor.device
    )
    return torch.cat([filler, tensor] if side == "left" else [tensor, filler], dim=1)


def merge_rounds(
    rounds: Sequence[dict[str, Any]], rows: Sequence[tuple[int, int]], pad_token_id: int
) -> dict[str, Any]:
    """
    One batch whose row ``i`` is row ``rows[i][1]`` of round ``rows[i][0]``.

    Raises:
        ValueError: a round holds a per-row field resampling cannot merge (images, vLLM
            importance ratios).
    """
    merged: dict[str, Any] = {}
    for key, first in rounds[0].items():
        if key in _SCALARS or first is None:
            merged[key] = first
            continue
        if key != "advantages" and key not in _PADDING:
            msg = (
                f"resampling merges text-only batches: the field {key!r} is not supported "
                "(turn resampling off with budget=None, or drop that feature)"
            )
            raise ValueError(msg)
        parts = [batch[key] for batch in rounds]
        if key in _PADDING:
            side, value = _PADDING[key]
            width = max(part.size(1) for part in parts)
            fill = float(pad_token_id) if value is None else value
            parts = [_pad(part, width, side, fill) for part in parts]
        offsets = [0]
        for part in parts[:-1]:
            offsets.append(offsets[-1] + part.size(0))
        index = torch.tensor([offsets[r] + i for r, i in rows], device=parts[0].device)
        merged[key] = torch.cat(parts)[index]
    return merged
