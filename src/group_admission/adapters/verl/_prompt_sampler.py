"""
``AdmissionPromptSampler``: verl's train order, minus the prompts a :class:`PromptHistory` skips.

verl 0.9.1 draws every prompt (each step's batch and every refill) from one
``StatefulDataLoader`` over its train dataset, ordered by ``create_rl_sampler``: a
``RandomSampler`` on a generator seeded with ``data.seed`` (``data.shuffle``), else the
dataset's order. This sampler keeps that order and that epoch length; it only yields the
next index of the order that the history picks at the current step (verl's global step,
set by :class:`AdmissionReplayBuffer`). A skipped prompt is used up for its pass; once a step
has looked at a whole pass, the sampler takes prompts as they come until the next step (the
kit's :class:`PromptScan`), so training cannot stall. Its state (the position, the step and the
history) is the dataloader's sampler state, which verl saves in each checkpoint's
``data.pt``. Imports torch (verl's), not verl.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sized
from typing import Any

from ... import CheckpointError, PromptHistory
from .._kit import PromptScan, describe, restored_history
from ._verl_imports import Sampler, torch

__all__ = ["PROMPT_ID_FIELD", "STATE_FORMAT", "AdmissionPromptSampler", "PromptIdDataset"]

#: The row field that names each prompt (its index in the train dataset), carried into every
#: trajectory verl's agent loop writes to the TransferQueue.
PROMPT_ID_FIELD = "group_admission_prompt_id"
#: The ``format`` of :meth:`AdmissionPromptSampler.state_dict`.
STATE_FORMAT = "group-admission/verl-prompt-sampler"
_VERSION = 2
_COUNTS = ("length", "passes", "position", "yielded", "looked", "step", "skipped", "forced")


class PromptIdDataset:
    """verl's train dataset whose rows also carry their index, as :data:`PROMPT_ID_FIELD`."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        row = self.dataset[index]
        return {**row, PROMPT_ID_FIELD: int(index)}


class AdmissionPromptSampler(Sampler[int]):
    """
    verl's train sampler through a prompt history: its order and epoch, without the prompts it skips.

    Args:
        data_source: verl's train dataset (its length is the epoch).
        data_config: verl's ``data`` config (``shuffle``, ``seed``), as ``create_rl_sampler`` reads it.
        history: The history that picks (and that the replay buffer feeds).

    Attributes:
        history: The :class:`PromptHistory`; a restored state replaces it.
        step: The global step whose picks the sampler makes now (verl's first is 1).

    .. versionadded:: 0.2.0
    """

    def __init__(self, data_source: Sized, data_config: Any, history: PromptHistory) -> None:
        super().__init__()
        self.history = history
        self._length = len(data_source)
        self._shuffle = bool(data_config.get("shuffle", True))
        seed = data_config.get("seed")
        self._seed = None if seed is None else int(seed)
        self._generator = self._new_generator()
        self._order: list[int] = []
        self._passes = self._position = self._yielded = 0
        self.step = 1
        self._scan = PromptScan()

    def __len__(self) -> int:
        return self._length

    def take_counts(self) -> tuple[int, int]:
        """The prompts skipped and taken unpicked since the last call."""
        return self._scan.take_counts()

    def __iter__(self) -> Iterator[int]:
        return _Epoch(self)

    def _next_in_epoch(self) -> int:
        """The epoch's next index; ``StopIteration`` once it yielded its length."""
        if self._yielded >= self._length:
            self._yielded = 0  # the epoch is over: the next iterator starts the next one
            raise StopIteration
        index = self._next_index()
        self._yielded += 1
        return index

    def _next_index(self) -> int:
        while True:
            if self._position == len(self._order):
                self._order, self._position = self._permutation(), 0
                self._passes += 1
            index = self._order[self._position]
            self._position += 1
            if self._scan.keep(self.history, [index], step=self.step, pass_length=self._length)[0]:
                return index

    def _new_generator(self) -> Any:
        generator = torch.Generator()
        if self._seed is not None:
            generator.manual_seed(self._seed)
        return generator

    def _permutation(self, generator: Any = None) -> list[int]:
        """Verl's next pass: its RandomSampler's permutation of the dataset, or the dataset's order."""
        if not self._shuffle:
            return list(range(self._length))
        order: list[int] = torch.randperm(self._length, generator=generator or self._generator).tolist()
        return order

    def state_dict(self) -> dict[str, Any]:
        """The position, the step and the history (plain types: verl ``torch.save``s it in ``data.pt``)."""
        scan = self._scan
        looked = scan.looked if scan.step == self.step else 0  # a new step starts a new pass
        counts = (
            self._length,
            self._passes,
            self._position,
            self._yielded,
            looked,
            self.step,
            scan.skipped,
            scan.forced,
        )
        return {
            "format": STATE_FORMAT,
            "version": _VERSION,
            **dict(zip(_COUNTS, counts, strict=True)),
            "history": self.history.to_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """
        Continue from :meth:`state_dict`, exactly (verl's order replayed to the saved pass).

        Raises:
            CheckpointError: the state is malformed, was saved for a dataset of another
                length, or holds a history saved under another config. Nothing changes then.
        """
        counts = _checked(state, self._length)
        history = restored_history(state["history"], self.history.config, settings="the sampler's")
        generator, order = self._new_generator(), []
        for _ in range(counts["passes"]):
            order = self._permutation(generator)  # replays verl's generator to the saved pass
        if counts["position"] > len(order):
            msg = f"the sampler state's 'position' must be <= {len(order)} (got {counts['position']})"
            raise CheckpointError(msg)
        self.history, self._generator, self._order = history, generator, order
        self._passes, self._position, self._yielded = counts["passes"], counts["position"], counts["yielded"]
        self.step, self._scan = counts["step"], PromptScan()
        self._scan.step, self._scan.looked = counts["step"], counts["looked"]
        self._scan.skipped, self._scan.forced = counts["skipped"], counts["forced"]


class _Epoch:
    """
    The sampler's iterator: its state is the sampler's, so it saves none of its own.

    It is stateful only to refuse what torchdata would otherwise hand it: verl's own
    ``RandomSampler`` keeps its state in its iterator, so a checkpoint saved without a
    prompt history holds an iterator state and no sampler state.
    """

    def __init__(self, sampler: AdmissionPromptSampler) -> None:
        self._sampler = sampler

    def __iter__(self) -> _Epoch:
        return self

    def __next__(self) -> int:
        return self._sampler._next_in_epoch()

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state:
            msg = (
                "the train dataloader's state was saved by verl's own sampler (a run without "
                f"'history'), not by a prompt sampler (got an iterator state with {sorted(state)})"
            )
            raise CheckpointError(msg)


def _checked(state: object, length: int) -> dict[str, int]:
    """The counts of a sampler state, checked before anything is restored."""
    if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
        msg = (
            f"a verl prompt sampler state must be a mapping of format {STATE_FORMAT!r} "
            f"(got {describe(state)})"
        )
        raise CheckpointError(msg)
    version = state.get("version")
    if type(version) is not int or version != _VERSION:
        msg = f"the sampler state's 'version' must be {_VERSION} (got {describe(version)})"
        raise CheckpointError(msg)
    missing = sorted({*_COUNTS, "history"} - set(state))
    if missing:
        msg = f"the sampler state misses {missing}"
        raise CheckpointError(msg)
    counts = {name: state[name] for name in _COUNTS}
    for name, value in counts.items():
        if type(value) is not int or value < 0:
            msg = f"the sampler state's {name!r} must be an integer >= 0 (got {describe(value)})"
            raise CheckpointError(msg)
    if counts["length"] != length:
        msg = (
            f"the sampler state was saved for a train dataset of {counts['length']} prompts; "
            f"this one holds {length}"
        )
        raise CheckpointError(msg)
    if counts["yielded"] > length:
        msg = f"the sampler state's 'yielded' must be <= {length} (got {counts['yielded']})"
        raise CheckpointError(msg)
    return counts
