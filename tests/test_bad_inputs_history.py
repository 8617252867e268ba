"""
Bad inputs to prompt ids, ``PromptHistory``, ``PromptHistoryConfig`` and ``informative_probability``.

Each raises one type, with a message naming the field, the requirement and the value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from bad_inputs_common import (
    ADMITTED,
    Case,
    check_case,
    history_state_with_id,
    restore_history_edited,
)
from group_admission import (
    CheckpointError,
    PromptHistory,
    PromptHistoryConfig,
    informative_probability,
)

CASES: list[Case] = [
    # restoring a state no history writes
    (
        "history state claiming 2**63 prompts",
        lambda: restore_history_edited(lambda s: s["prompts"].update(count=2**63 - 8)),
        CheckpointError,
        "'prompts.int_ids' must be 9223372036854775800 values of <u8",
    ),
    (
        "history state numbering beyond its observations",
        lambda: restore_history_edited(lambda s: s.update(sequence=2**63 - 1)),
        CheckpointError,
        "'sequence' (9223372036854775807) counts more observations of rank 0 than are pending (1)",
    ),
    # AdmissionSession
    (
        "informative probability negative alpha",
        lambda: informative_probability(-1, 0.5, 8),
        ValueError,
        "'alpha' must be a finite number > 0 (got -1)",
    ),
    (
        "informative probability nan beta",
        lambda: informative_probability(0.5, math.nan, 8),
        ValueError,
        "'beta' must be a finite number > 0 (got nan)",
    ),
    (
        "history reward range too wide",
        lambda: PromptHistoryConfig(group_size=8, reward_range=(-1e308, 1e308)),
        ValueError,
        "'reward_range' must have a finite width high - low (got (-1e+308, 1e+308))",
    ),
    # prompt ids: one check at every door (str of valid Unicode, or an int in the int64 range)
    (
        "history observe a lone surrogate",
        lambda: PromptHistory({"group_size": 2}).observe("a\ud800", ADMITTED, step=0),
        ValueError,
        "'prompt_id' must be a str of valid Unicode, encodable as UTF-8 "
        "(no lone surrogates) (got 'a\\ud800')",
    ),
    (
        "history pick a lone surrogate",
        lambda: PromptHistory({"group_size": 2}).pick(["a", "\udfff"], step=0),
        ValueError,
        "'prompt_ids[1]' must be a str of valid Unicode",
    ),
    (
        "history pick a float id",
        lambda: PromptHistory({"group_size": 2}).pick(iter([1, 2.0]), step=0),
        TypeError,
        "'prompt_ids[1]' must be a str or an int (got 2.0)",
    ),
    (
        "history pick an id beyond int64",
        lambda: PromptHistory({"group_size": 2}).pick([2**63], step=0),
        ValueError,
        "'prompt_ids[0]' must be an int in [-2**63, 2**63 - 1] (got 9223372036854775808)",
    ),
    (
        "history pick a numpy uint64 beyond int64",
        lambda: PromptHistory({"group_size": 2}).pick(np.array([2**64 - 1], dtype=np.uint64), step=0),
        ValueError,
        "'prompt_ids[0]' must be an int in [-2**63, 2**63 - 1]",
    ),
    (
        "history pick a set",
        lambda: PromptHistory({"group_size": 2}).pick({1, 2}, step=0),
        TypeError,
        "'prompt_ids' must be a sequence of prompt ids (got {1, 2} of type set)",
    ),
    (
        "history estimate a bool",
        lambda: PromptHistory({"group_size": 2}).estimate(True, step=0),
        TypeError,
        "'prompt_id' must be a str or an int (got True)",
    ),
    (
        "history observe_batch a numpy bool id",
        lambda: PromptHistory({"group_size": 2}).observe_batch([np.bool_(True)], [ADMITTED], step=0),
        TypeError,
        "'prompt_ids[0]' must be a str or an int (got np.True_ of type bool)",
    ),
    (
        "history step beyond int64",
        lambda: PromptHistory({"group_size": 2}).pick([1], step=2**63),
        ValueError,
        "'step' must be <= 2**63 - 1 (got 9223372036854775808)",
    ),
    (
        "history merge a state with a lone surrogate",
        lambda: PromptHistory({"group_size": 2}).merge(history_state_with_id("\ud800")),
        CheckpointError,
        "cannot restore the PromptHistory: 'pending.ids[]' must be a str of valid Unicode",
    ),
]


@pytest.mark.parametrize(("name", "call", "error", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(
    name: str, call: Callable[[], Any], error: type[Exception], message: str
) -> None:
    check_case(call, error, message)
