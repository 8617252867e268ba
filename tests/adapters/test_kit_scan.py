"""The kit's ``PromptScan``: a host's prompt order through a history, one pass at most a step."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from group_admission import GroupAdmissionPolicy, PromptHistory, PromptHistoryConfig
from group_admission.adapters._kit import PromptScan

PROMPTS = 30


def history(dead: range = range(0, PROMPTS, 2), **config: Any) -> PromptHistory:
    """A history (G = 4) that saw each prompt of ``dead`` all-wrong 20 times at step 0."""
    built = PromptHistory(PromptHistoryConfig(group_size=4, seed=3, **config))
    decision = GroupAdmissionPolicy({"min_reward_std": 1e-6}).evaluate([0.0] * 4)
    for prompt in dead:
        for _ in range(20):
            built.observe(prompt, decision, step=0)
    return built


HISTORY = history()
EVERYTHING_DEAD = history(range(PROMPTS), exploration=0.0, max_wrong_skip_share=None)


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(
        st.tuples(st.integers(1, 4), st.lists(st.integers(0, PROMPTS - 1), max_size=12)), max_size=12
    ),
    pass_length=st.integers(1, 40),
)
def test_within_a_pass_the_history_picks_and_every_candidate_is_counted_once(
    batches: list[tuple[int, list[int]]], pass_length: int
) -> None:
    scan, looked = PromptScan(), dict[int, int]()
    kept_total = skipped_total = forced_total = 0
    for step, candidates in sorted(batches, key=lambda batch: batch[0]):
        before = looked.get(step, 0)
        kept = scan.keep(HISTORY, candidates, step=step, pass_length=pass_length)
        looked[step] = before + len(candidates)

        within = max(0, min(len(candidates), pass_length - before))
        picked = set(HISTORY.pick(candidates[:within], step=step).picked)
        assert kept == [c in picked for c in candidates[:within]] + [True] * (len(candidates) - within)
        assert scan.looked == looked[step]
        kept_total += sum(kept[:within])
        forced_total += len(candidates) - within
        skipped_total += within - sum(kept[:within])

    assert scan.take_counts() == (skipped_total, forced_total)
    assert kept_total + skipped_total + forced_total == sum(looked.values())
    assert scan.take_counts() == (0, 0)


def test_a_history_that_skips_everything_refuses_one_pass_a_step_then_takes_all() -> None:
    scan = PromptScan()
    order = list(range(PROMPTS))

    first = scan.keep(EVERYTHING_DEAD, order + order[:5], step=1, pass_length=PROMPTS)
    more = scan.keep(EVERYTHING_DEAD, order[5:8], step=1, pass_length=PROMPTS)

    assert first == [False] * PROMPTS + [True] * 5
    assert more == [True] * 3
    assert scan.take_counts() == (PROMPTS, 8)
    assert scan.keep(EVERYTHING_DEAD, order, step=2, pass_length=PROMPTS) == [False] * PROMPTS  # a new pass
    assert scan.take_counts() == (PROMPTS, 0)


def test_a_new_step_restarts_the_pass_and_a_restored_position_continues_it() -> None:
    scan = PromptScan()
    scan.keep(EVERYTHING_DEAD, list(range(20)), step=4, pass_length=PROMPTS)
    again = PromptScan()
    again.step, again.looked = scan.step, scan.looked

    rest = again.keep(EVERYTHING_DEAD, list(range(20)), step=4, pass_length=PROMPTS)
    fresh = scan.keep(EVERYTHING_DEAD, list(range(20)), step=5, pass_length=PROMPTS)

    assert rest == [False] * 10 + [True] * 10
    assert fresh == [False] * 20


BAD_PASS_LENGTHS: list[tuple[Any, type[Exception], str]] = [
    (0, ValueError, r"'pass_length' must be >= 1 \(got 0\)"),
    (-3, ValueError, r"'pass_length' must be >= 1 \(got -3\)"),
    (2.0, TypeError, r"'pass_length' must be an integer \(got 2.0\)"),
    (True, TypeError, r"'pass_length' must be an integer \(got True\)"),
    (None, TypeError, r"'pass_length' must be an integer \(got None\)"),
]


@pytest.mark.parametrize(("value", "error", "message"), BAD_PASS_LENGTHS)
def test_a_bad_pass_length_is_refused_before_anything_is_counted(
    value: Any, error: type[Exception], message: str
) -> None:
    scan = PromptScan()

    with pytest.raises(error, match=message):
        scan.keep(HISTORY, [1, 2], step=1, pass_length=value)

    assert (scan.step, scan.looked, scan.take_counts()) == (-1, 0, (0, 0))
