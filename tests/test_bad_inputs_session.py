"""
Bad inputs to ``AdmissionSession`` and ``DropLimits``.

Each raises one type, with a message naming the field, the requirement and the value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from bad_inputs_common import (
    HUGE,
    REJECTED,
    SEVERAL,
    Case,
    check_case,
    restore_session_edited,
    stepping,
)
from group_admission import (
    AdmissionSession,
    CheckpointError,
    DropLimits,
    PromptHistory,
    StepLifecycleError,
)

CASES: list[Case] = [
    # restoring a state no session writes
    (
        "session state whose drop window judged more than the session",
        lambda: restore_session_edited(lambda s: s["windows"][0].__setitem__(1, 6), max_rejection_ratio=0.5),
        CheckpointError,
        "the drop windows judged 6 group(s) and the session 1",
    ),
    (
        "session state evicting with room in its windows",
        lambda: restore_session_edited(
            lambda s: s.update(evicted={"through": 3, "labels": []}), max_rejected_groups=1
        ),
        CheckpointError,
        "'evicted' names evicted steps, but windows are evicted only by step-scoped limits holding 16",
    ),
    (
        "session state whose streak names a reason never counted",
        lambda: restore_session_edited(lambda s: s["streak"].update(rollout_failed=1)),
        CheckpointError,
        "'streak' counts 1 external rejections in a row, of 0 in all",
    ),
    # AdmissionSession
    (
        "session policy junk",
        lambda: AdmissionSession(3),  # type: ignore[arg-type]
        TypeError,
        "'policy' must be a GroupAdmissionPolicy, a GroupAdmissionConfig, a mapping or None (got 3)",
    ),
    (
        "session budget junk",
        lambda: AdmissionSession(budget=3),  # type: ignore[arg-type]
        TypeError,
        "'budget' must be a SamplingBudgetController, a SamplingBudgetConfig, a mapping or None (got 3)",
    ),
    (
        "session limits junk",
        lambda: AdmissionSession(limits=3),  # type: ignore[arg-type]
        TypeError,
        "'limits' must be a DropLimits, a mapping or None (got 3)",
    ),
    (
        "session host junk",
        lambda: AdmissionSession(host=3),  # type: ignore[arg-type]
        TypeError,
        "'host' must be a string (got 3)",
    ),
    (
        "session judge no rewards",
        lambda: AdmissionSession().judge([]),
        ValueError,
        "'rewards' must hold at least one member (got 0)",
    ),
    (
        "session judge negative tokens",
        lambda: AdmissionSession().judge([0, 1], generated_tokens=-1),
        ValueError,
        "'generated_tokens' must be >= 0 (got -1)",
    ),
    (
        "session judge float step",
        lambda: AdmissionSession().judge([0, 1], step=1.5),  # type: ignore[arg-type]
        TypeError,
        "'step' must be an int, a str or None (got 1.5)",
    ),
    (
        "session judge_batch 1-D",
        lambda: AdmissionSession().judge_batch(np.zeros(3)),
        ValueError,
        "'rewards' must be 2-D (got an array of shape (3,))",
    ),
    (
        "session judge_batch float tokens",
        lambda: AdmissionSession().judge_batch(np.zeros((1, 2)), generated_tokens=1.5),  # type: ignore[arg-type]
        TypeError,
        "'generated_tokens' must be an integer (got 1.5)",
    ),
    (
        "session record junk",
        lambda: AdmissionSession().record(3),  # type: ignore[arg-type]
        TypeError,
        "'decision' must be a GroupAdmissionDecision (got 3)",
    ),
    (
        "session record zero samples",
        lambda: AdmissionSession().record(REJECTED, samples=0),
        ValueError,
        "'samples' must be >= 1 (got 0)",
    ),
    (
        "session fallback without rejections",
        lambda: AdmissionSession().record_fallback(1),
        ValueError,
        "'count' would make fallback_admitted exceed the rejected groups (0 + 1 > 0)",
    ),
    (
        "session fallback a float",
        lambda: AdmissionSession().record_fallback(1.5),  # type: ignore[arg-type]
        TypeError,
        "'count' must be an integer (got 1.5)",
    ),
    (
        "session negative target",
        lambda: AdmissionSession().begin_step(-1),
        ValueError,
        "'target_groups' must be >= 0 (got -1)",
    ),
    (
        "session string target",
        lambda: AdmissionSession().begin_step("4"),  # type: ignore[arg-type]
        TypeError,
        "'target_groups' must be an integer (got '4')",
    ),
    (
        "session plan before a step",
        lambda: AdmissionSession().plan(),
        StepLifecycleError,
        "call begin_step(target_groups) before plan()",
    ),
    (
        "session plan zero generations",
        lambda: stepping().plan(num_generations=0),
        ValueError,
        "'num_generations' must be >= 1 (got 0)",
    ),
    (
        "session can_launch before a step",
        lambda: AdmissionSession().can_launch(),
        StepLifecycleError,
        "call begin_step(target_groups) before can_launch()",
    ),
    (
        "session can_launch zero groups",
        lambda: stepping().can_launch(0),
        ValueError,
        "'groups' must be >= 1 (got 0)",
    ),
    (
        "session can_launch negative in flight",
        lambda: stepping().can_launch(in_flight=-1),
        ValueError,
        "'in_flight' must be >= 0 (got -1)",
    ),
    (
        "session end_step before a step",
        lambda: AdmissionSession().end_step(),
        StepLifecycleError,
        "call begin_step(target_groups) before end_step()",
    ),
    (
        "session begin_step on an open step",
        lambda: stepping().begin_step(4),
        StepLifecycleError,
        "begin_step() while step 0 is open: call end_step() first",
    ),
    # prompt ids: one check at every door (str of valid Unicode, or an int in the int64 range)
    (
        "session pick_prompts a float id",
        lambda: stepping().pick_prompts(PromptHistory({"group_size": 2}), [0.5]),
        TypeError,
        "'prompt_ids[0]' must be a str or an int (got 0.5)",
    ),
    (
        "session state empty",
        lambda: AdmissionSession().load_state_dict({}),
        CheckpointError,
        "cannot restore the session: missing key(s) ['format'",
    ),
    (
        "session state not a mapping",
        lambda: AdmissionSession().load_state_dict(3),  # type: ignore[arg-type]
        CheckpointError,
        "cannot restore the session: the state must be a mapping from state_dict() (got 3)",
    ),
    (
        "session state of another config",
        lambda: AdmissionSession().load_state_dict(stepping().state_dict()),
        CheckpointError,
        "it was saved under a different policy configuration",
    ),
    # DropLimits
    (
        "limits ratio above one",
        lambda: DropLimits(max_rejection_ratio=1.5),
        ValueError,
        "'max_rejection_ratio' must be in [0, 1] (got 1.5)",
    ),
    (
        "limits huge int ratio",
        lambda: DropLimits(max_rejection_ratio=HUGE),
        ValueError,
        f"'max_rejection_ratio' must be finite (got 1{SEVERAL}",
    ),
    (
        "limits ratio a string",
        lambda: DropLimits(max_rejection_ratio="0.5"),  # type: ignore[arg-type]
        TypeError,
        "'max_rejection_ratio' must be a real number (got '0.5')",
    ),
    (
        "limits negative count",
        lambda: DropLimits(max_rejected_groups=-1),
        ValueError,
        "'max_rejected_groups' must be >= 0 (got -1)",
    ),
    (
        "limits unknown scope",
        lambda: DropLimits(scope="epoch"),  # type: ignore[arg-type]
        ValueError,
        "'scope' must be one of 'step', 'run' (got 'epoch')",
    ),
    (
        "limits forceable not names",
        lambda: DropLimits(forceable_external=[1]),  # type: ignore[list-item]
        TypeError,
        "'forceable_external' entries must be non-empty strings (got 1)",
    ),
    (
        "limits zero streak",
        lambda: DropLimits(max_consecutive_failed_groups=0),
        ValueError,
        "'max_consecutive_failed_groups' must be >= 1 (got 0)",
    ),
    (
        "limits unknown mapping key",
        lambda: DropLimits.from_mapping({"ratio": 0.5}),
        ValueError,
        "unknown key(s) 'ratio' in DropLimits mapping",
    ),
]


@pytest.mark.parametrize(("name", "call", "error", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(
    name: str, call: Callable[[], Any], error: type[Exception], message: str
) -> None:
    check_case(call, error, message)
