"""``PickingSampler``: TRL's ``RepeatSampler`` layout, with the main batch's prompts picked by the history."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from trl.trainer.utils import RepeatSampler

from group_admission import GroupAdmissionPolicy, PromptHistory, PromptHistoryConfig
from group_admission.adapters.trl._sampler import Names, PickingSampler

#: The prompts the seeded history saw all-wrong many times (dead): it should skip them.
DEAD = frozenset(range(0, 40, 2))


def dead_history(seed: int = 0, prompts: frozenset[int] = DEAD, **config: Any) -> PromptHistory:
    """A history (G = 4) that saw every one of ``prompts`` all-wrong 20 times at step 0."""
    history = PromptHistory(PromptHistoryConfig(group_size=4, seed=seed, **config))
    dead = GroupAdmissionPolicy({"min_reward_std": 1e-6}).evaluate([0.0] * 4)
    for prompt in sorted(prompts):
        for _ in range(20):
            history.observe(prompt, dead, step=0)
    return history


def keep_of(history: PromptHistory) -> Names:
    """The history, over indices that are their own prompt ids."""
    return lambda indices: (history, list(indices))


def base(size: int = 40, **kwargs: Any) -> RepeatSampler:
    settings: dict[str, Any] = {"mini_repeat_count": 4, "batch_size": 3, "repeat_count": 2, "seed": 7}
    settings.update(kwargs)
    return RepeatSampler(list(range(size)), **settings)


def epochs(sampler: Any, count: int) -> list[list[int]]:
    return [list(sampler) for _ in range(count)]


def blocks(indices: list[int], sampler: RepeatSampler) -> Iterator[list[int]]:
    """Each chunk's prompts, checking that its block is TRL's layout (repeats, then per-prompt copies)."""
    size = sampler.batch_size * sampler.mini_repeat_count
    block = size * sampler.repeat_count
    for start in range(0, len(indices), block):
        rows = indices[start : start + block]
        prompts = rows[: size : sampler.mini_repeat_count]
        assert rows == [
            i for _ in range(sampler.repeat_count) for i in prompts for _ in range(sampler.mini_repeat_count)
        ]
        yield prompts


class TestWithoutHistory:
    @pytest.mark.parametrize(
        "settings",
        [
            {},
            {"size": 41, "batch_size": 4, "repeat_count": 1},
            {"mini_repeat_count": 2, "batch_size": 5, "repeat_count": 3, "seed": 0},
            {"shuffle": False},
        ],
    )
    def test_the_indices_are_trls_epoch_after_epoch(self, settings: dict[str, Any]) -> None:
        sampler = PickingSampler(base(**settings), None)

        assert epochs(sampler, 3) == epochs(base(**settings), 3)
        assert len(sampler) == len(base(**settings))


class TestWithHistory:
    def test_dead_prompts_are_skipped_but_at_the_exploration_floor_and_batches_stay_whole(self) -> None:
        history = dead_history()
        sampler = PickingSampler(base(), keep_of(history))
        sampler.chunk = 1  # the chunk of step 1: the evidence of step 0 counts

        indices = epochs(sampler, 2)

        generator = torch.Generator().manual_seed(7)
        stream = [i for _ in range(6) for i in torch.randperm(40, generator=generator).tolist()[:39]]
        chunks, skipped = [], 0
        for step in range(1, 1 + 2 * 13):
            chunk = []
            while len(chunk) < 3:
                prompt = stream.pop(0)
                if prompt in history.pick([prompt], step=step).picked:
                    chunk.append(prompt)
                else:
                    skipped += 1
            chunks.append(chunk)
        assert [chunk for epoch in indices for chunk in blocks(epoch, sampler._base)] == chunks
        assert [len(epoch) for epoch in indices] == [len(sampler)] * 2
        floor = [p for chunk in chunks for p in chunk if p in DEAD]
        assert 0 < len(floor) < skipped / 4  # ~5% of the dead prompts offered are explored
        assert sum(entry[1] for entry in sampler.pending.values()) == skipped

    def test_two_ranks_with_the_same_history_yield_the_same_indices(self) -> None:
        rank0, rank1 = dead_history(), PromptHistory.from_dict(dead_history().to_dict())
        first, second = PickingSampler(base(), keep_of(rank0)), PickingSampler(base(), keep_of(rank1))
        first.chunk = second.chunk = 3

        assert epochs(first, 2) == epochs(second, 2)
        assert first.pending == second.pending

    def test_a_history_that_skips_everything_cannot_stall_a_batch_and_that_is_counted(self) -> None:
        everything = dead_history(prompts=frozenset(range(40)), exploration=0.0, max_wrong_skip_share=None)
        sampler = PickingSampler(base(), keep_of(everything))
        sampler.chunk = 1  # the chunk of step 1: the evidence of step 0 counts

        indices = list(sampler)

        assert len(indices) == len(sampler)
        assert sampler.counts(1) == (39, 3)  # a whole pass (39 of 40, whole chunks) refused, then TRL's order
        assert sampler.counts(2) == (39, 3)  # and again at the next step: the pass is a step's

    def test_counts_read_a_step_and_forget_the_chunks_up_to_it(self) -> None:
        sampler = PickingSampler(base(), keep_of(dead_history()))
        sampler.chunk = 1
        iterator = iter(sampler)
        for _ in range(3 * 4 * 2 * 2 + 1):  # two chunks, and the first index of a third
            next(iterator)
        counts = {number: entry[1] for number, entry in sampler.pending.items()}

        assert sampler.counts(2) == (counts[2], 0)
        assert list(sampler.pending) == [3]
        assert sampler.counts(9) == (0, 0)


class TestRestore:
    @pytest.mark.parametrize("trained", [1, 13, 15])
    def test_a_restored_sampler_continues_as_the_original_would(self, trained: int) -> None:
        """``trained`` chunks generated; the original had already yielded the next one (prefetch)."""
        history = dead_history()
        original = PickingSampler(base(), keep_of(history))
        stream = (index for _ in range(3) for index in original)
        block = 3 * 4 * 2
        rows = [next(stream) for _ in range(block * (trained + 1) + 1)]
        original.counts(trained - 1)
        state = original.state_dict()
        rows += [next(stream) for _ in range(block * 10)]

        restored = PickingSampler(base(), keep_of(PromptHistory.from_dict(history.to_dict())))
        restored.load_state_dict(state, skip_trained=True)
        again = [index for _ in range(2) for index in restored]

        epoch = 13 * block
        skip = trained % 13 * block  # what the trainer skips of the resumed epoch
        start = trained // 13 * epoch + skip
        assert again[skip : skip + block * 10] == rows[start : start + block * 10]
        assert state["chunk"] == trained

    def test_with_ignore_data_skip_the_epoch_starts_at_the_next_chunk(self) -> None:
        original = PickingSampler(base(), keep_of(dead_history()))
        block, first = 3 * 4 * 2, list(original)
        original.counts(4)  # chunks 0-4 generated; 5-12 yielded ahead
        state = original.state_dict()
        second = list(original)
        restored = PickingSampler(base(), keep_of(dead_history()))
        restored.load_state_dict(state, skip_trained=False)

        again = list(restored)

        assert again == first[5 * block :] + second[: 5 * block]
        assert restored.chunk == 18
