"""
What the tables of bad inputs share: the shorthands, states to damage, and the one check.

Each ``test_bad_inputs_<area>.py`` holds the table of the entry points whose module raises
(``policy``: configs, the policy, rewards and similarity; ``planning``: the budget and the
planners; ``session``: the session and its drop limits; ``history``: prompt histories and
ids; ``metrics``: the counts). A row is ``(name, call, exception type, message start)``: the
call must raise exactly that type, with a message naming the field, the requirement and the
value.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from group_admission import (
    AdmissionSession,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    PromptHistory,
    SamplingBudgetController,
    SamplingBudgetState,
)

__all__ = [
    "ADMITTED",
    "HUGE",
    "REJECTED",
    "SEVERAL",
    "C",
    "Case",
    "P",
    "check_case",
    "history_state_with_id",
    "restore_history_edited",
    "restore_session_edited",
    "similar",
    "state_with_round",
    "stats_dict",
    "stepping",
    "torch_or_skip",
    "yaml_file",
]

#: One row of a table: its name, the call, the exception type and the start of the message.
Case = tuple[str, Callable[[], Any], type[Exception], str]

P = GroupAdmissionPolicy
C = GroupAdmissionConfig
similar = C(max_mean_pairwise_similarity=0.5)


def state_with_round() -> SamplingBudgetState:
    state = SamplingBudgetState()
    SamplingBudgetController().observe_round(state, groups=1, admitted=1, num_generations=2)
    return state


def yaml_file(text: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="ga-bad-")) / "config.yaml"
    path.write_text(text)
    return path


def stepping() -> AdmissionSession:
    session = AdmissionSession(C(min_reward_std=1e-6))
    session.begin_step(4)
    return session


def history_state_with_id(prompt_id: object) -> dict[str, Any]:
    """A history state whose one pending observation names ``prompt_id`` (written as JSON would)."""
    history = PromptHistory({"group_size": 2})
    history.observe("p", ADMITTED, step=0)
    state = json.loads(json.dumps(history.to_dict()))
    state["pending"]["ids"] = [prompt_id]
    return state


def torch_or_skip() -> Any:
    return pytest.importorskip("torch")


REJECTED = P(C(min_reward_std=1e-6)).evaluate([1, 1])
ADMITTED = P().evaluate([0, 1])
_COUNT_KEYS = (
    "candidates",
    "admitted",
    "external",
    "exact_dead",
    "near_tie",
    "redundant",
    "reward_rejected",
    "near_duplicate_rejected",
    "fallback_admitted",
)


def stats_dict(**counts: int) -> dict[str, Any]:
    return {"counts": {**dict.fromkeys(_COUNT_KEYS, 0), **counts}, "external_details": {}}


HUGE = 10**400  # a Python int beyond the float range
SEVERAL = "0" * 70  # the digits of HUGE that an error message shows


def restore_history_edited(edit: Callable[[dict[str, Any]], Any]) -> Any:
    """``PromptHistory.from_dict`` of a real state (one observation pending) after ``edit``."""
    history = PromptHistory({"group_size": 2})
    history.observe("p", ADMITTED, step=0)
    state = json.loads(json.dumps(history.to_dict()))
    edit(state)
    return PromptHistory.from_dict(state)


def restore_session_edited(edit: Callable[[dict[str, Any]], Any], **limits: Any) -> None:
    """``load_state_dict`` of a real state (one dead group judged under ``limits``) after ``edit``."""
    state = json.loads(json.dumps(_limited(limits).state_dict()))
    edit(state)
    AdmissionSession(C(min_reward_std=1e-6), limits=limits).load_state_dict(state)


def _limited(limits: dict[str, Any]) -> AdmissionSession:
    session = AdmissionSession(C(min_reward_std=1e-6), limits=limits)
    session.judge([1.0, 1.0])
    return session


def check_case(call: Callable[[], Any], error: type[Exception], message: str) -> None:
    """``call`` raises ``error`` with a message holding ``message`` (the field, requirement and value)."""
    with pytest.raises(error, match=re.escape(message)):
        call()
