"""
The main batch through a prompt history: TRL's ``RepeatSampler`` order, minus the prompts it skips.

TRL's sampler yields each generation batch as a chunk of ``batch_size`` prompts, the chunk
``repeat_count`` times (``steps_per_generation x num_iterations``), each prompt
``mini_repeat_count`` (``num_generations``) times. :class:`PickingSampler` keeps that layout,
TRL's permutations and TRL's epoch length; it only fills each chunk with the next prompts
of the permutation that the history's pick keeps (through the kit's :class:`PromptScan`: a
chunk looks at one pass at most, then takes TRL's order). A skipped prompt is used up for
its pass; the chunk is filled from the following prompts (from the next pass when one runs out).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ... import PromptHistory
from .._kit import PromptId, PromptScan
from ._trl_imports import Sampler, torch

__all__ = ["Names", "PickingSampler"]

#: ``names(candidate indices)``: the history and the prompt id of each index (read at each call, so
#: that a restored history is the one that picks).
Names = Callable[[list[int]], tuple[PromptHistory, list[PromptId]]]


class PickingSampler(Sampler[int]):
    """
    TRL's ``RepeatSampler`` (``base``), each chunk filled with the prompts ``keep`` picks.

    Chunk ``c`` (counted from the start of training) is generated at admission step ``c``,
    so it is picked with ``step=c``: the same on every rank. ``pending`` holds the chunks
    yielded but not yet generated, with the prompts skipped to fill each and those taken
    in TRL's order once the chunk had looked at a whole pass (so that training cannot
    stall). ``names`` gives the history and the prompt ids of candidate indices; without it
    the sampler yields exactly ``base``'s indices.
    """

    def __init__(self, base: Any, names: Names | None) -> None:
        super().__init__()
        self._base, self._names, self._scan = base, names, PromptScan()
        self._pass_length = len(base.data_source) // base.batch_size * base.batch_size
        self._passes, self._position = 0, 0
        self._order: list[int] = []
        self._fast_forward = 0
        self.chunk = 0
        self.pending: dict[int, tuple[list[int], int, int]] = {}

    def __len__(self) -> int:
        return len(self._base)

    def __iter__(self) -> Iterator[int]:
        base = self._base
        chunks, placeholders = self._pass_length // base.batch_size, self._fast_forward
        self._fast_forward = 0
        for number in range(chunks):
            # After a restore, the trainer skips the epoch's trained batches without reading them.
            prompts = [0] * base.batch_size if number < placeholders else self._next_chunk()
            for _ in range(base.repeat_count):
                for index in prompts:
                    yield from [index] * base.mini_repeat_count

    def _next_chunk(self) -> list[int]:
        number, size = self.chunk, self._base.batch_size
        self.chunk += 1
        if number in self.pending:  # restored: yielded before the checkpoint, not yet generated
            return self.pending[number][0]
        prompts: list[int] = []
        while len(prompts) < size:
            candidates = self._candidates(size - len(prompts))
            if self._names is None:
                prompts += candidates
                continue
            history, ids = self._names(candidates)
            kept = self._scan.keep(history, ids, step=number, pass_length=self._pass_length)
            prompts += [index for index, keep in zip(candidates, kept, strict=True) if keep]
        self.pending[number] = (prompts, *self._scan.take_counts())
        return prompts

    def _candidates(self, count: int) -> list[int]:
        if self._position == len(self._order):
            self._order, self._position = self._permutation(), 0
            self._passes += 1
        end = min(len(self._order), self._position + count)
        candidates = self._order[self._position : end]
        self._position = end
        return candidates

    def _permutation(self) -> list[int]:
        """TRL's next pass: its own generator's permutation, cut to whole chunks."""
        base = self._base
        if base.shuffle:
            order: list[int] = torch.randperm(len(base.data_source), generator=base.generator).tolist()
        else:
            order = list(range(len(base.data_source)))
        return order[: self._pass_length]

    def counts(self, step: int) -> tuple[int, int]:
        """The chunk of ``step``'s prompts skipped and taken unpicked; forget the chunks up to it."""
        entry = self.pending.get(step)
        for number in [number for number in self.pending if number <= step]:
            del self.pending[number]
        return (0, 0) if entry is None else (entry[1], entry[2])

    def state_dict(self) -> dict[str, Any]:
        """The position (JSON-safe): the next chunk to generate, the cursor, the chunks yielded ahead."""
        return {
            "chunk": min(self.pending, default=self.chunk),
            "passes": self._passes,
            "position": self._position,
            "pending": [[number, *entry] for number, entry in sorted(self.pending.items())],
        }

    def load_state_dict(self, state: Mapping[str, Any], *, skip_trained: bool) -> None:
        """
        Continue from :meth:`state_dict`: yield its pending chunks, then go on from its cursor.

        ``skip_trained``: the trainer will skip the batches of its epoch already trained
        (``ignore_data_skip=False``), so the first epoch starts with as many placeholders.
        """
        self.chunk = int(state["chunk"])
        self.pending = {int(e[0]): (list(e[1]), int(e[2]), int(e[3])) for e in state["pending"]}
        self._passes, self._position, self._order = 0, 0, []
        for _ in range(int(state["passes"])):
            self._order = self._permutation()  # replays TRL's generator to the saved pass
            self._passes += 1
        self._position = int(state["position"])
        self._fast_forward = self.chunk % (self._pass_length // self._base.batch_size) if skip_trained else 0
