"""
Step-scoped drop limits hold for every step, also for a step whose window was evicted.

A session keeps the counts of the 16 most recent step labels (``WINDOWS``). A group that
arrives for an older step cannot show that its drop fits the limit, so no rejection of it
is honoured: a gate rejection is kept as a fallback, unusable data is still dropped. The
property test checks every drop a session honours against the true per-step counts of an
independent reference, on random label streams long enough to evict.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from group_admission import AdmissionSession, CheckpointError, DropLimits
from group_admission._drop_tracker import WINDOWS

GATE = {"min_reward_std": 1e-6}
DEAD, LIVE, FAILED = [0.0] * 4, [1.0, 0.0, 1.0, 0.0], [None] * 4


def _session(**limits: Any) -> AdmissionSession:
    return AdmissionSession(GATE, limits={"scope": "step", **limits})


def test_a_late_group_of_an_evicted_step_cannot_drop_a_second_group() -> None:
    session = _session(max_rejected_groups=1)
    assert not session.judge(DEAD, step=0).keep  # step 0's one drop
    for step in range(1, WINDOWS + 1):  # 16 newer steps evict step 0's window
        session.judge(LIVE, step=step)
    late = session.judge(DEAD, step=0)
    unusable = session.judge(FAILED, step=0)

    assert (True, True) == (late.keep, late.fallback_admitted)  # it was dropped: a second drop of step 0
    assert (False, False) == (unusable.keep, unusable.fallback_admitted)  # unusable data is never kept
    assert not session.judge(DEAD, step=WINDOWS + 1).keep  # a new step has its own window


def test_text_labels_are_remembered_once_evicted() -> None:
    session = _session(max_rejected_groups=1)
    session.judge(DEAD, step="warmup")
    for step in range(WINDOWS):
        session.judge(LIVE, step=f"s{step}")

    assert session.judge(DEAD, step="warmup").fallback_admitted
    assert not session.judge(DEAD, step="never seen").fallback_admitted


#: One group of an asynchronous host: how many steps late it is, whether the host labels steps
#: with text, and what it holds.
GROUP = st.tuples(st.integers(0, 24), st.booleans(), st.sampled_from(["dead", "live", "failed"]))
LIMITS = [{"max_rejected_groups": 1}, {"max_rejection_ratio": 0.5}, {"max_rejected_groups": 0}]


@settings(max_examples=200, deadline=None)
@given(
    groups=st.lists(GROUP, min_size=20, max_size=120),
    limits=st.sampled_from(LIMITS),
    checkpoint_at=st.integers(0, 120),
)
def test_every_honoured_drop_fits_the_limit_on_the_steps_true_counts(
    groups: list[tuple[int, bool, str]], limits: dict[str, Any], checkpoint_at: int
) -> None:
    session, rule = _session(**limits), DropLimits(scope="step", **limits)
    judged: Counter[int | str] = Counter()
    dropped: Counter[int | str] = Counter()
    for index, (late, text, kind) in enumerate(groups):
        step = max(0, index // 2 - late)  # the host's step advances every two groups
        label: int | str = f"s{step}" if text else step
        if index == checkpoint_at:  # a restored session goes on exactly as the original
            state = json.loads(json.dumps(session.state_dict()))
            session = _session(**limits)
            session.load_state_dict(state)
        verdict = session.judge({"dead": DEAD, "live": LIVE, "failed": FAILED}[kind], step=label)
        if not verdict.keep and kind == "dead":  # a gate rejection honoured: it must fit
            assert rule.drop_allowed(judged[label], dropped[label])
        judged[label] += 1
        dropped[label] += not verdict.keep
    assert len(session.state_dict()["windows"]) <= WINDOWS


def test_a_state_with_evicted_steps_restores_exactly() -> None:
    session = _session(max_rejection_ratio=0.5)
    for step in [*range(WINDOWS + 3), "x", *(f"t{n}" for n in range(WINDOWS))]:
        session.judge(DEAD, step=step)
    state = json.loads(json.dumps(session.state_dict()))
    restored = _session(max_rejection_ratio=0.5)
    restored.load_state_dict(state)

    assert {"through": WINDOWS + 2, "labels": ["x"]} == state["evicted"]
    assert state == restored.state_dict()
    assert restored.judge(DEAD, step="x").fallback_admitted


@pytest.mark.parametrize(
    ("limits", "evicted", "message"),
    [
        ({"scope": "run"}, {"through": 3, "labels": []}, "windows are evicted only by step-scoped limits"),
        ({}, {"through": None, "labels": ["a"]}, "windows are evicted only by step-scoped limits"),
        (
            {},
            {"through": True, "labels": []},
            "'evicted.through' must be an int step label or null (got True)",
        ),
        ({}, {"through": None, "labels": [3]}, "'evicted.labels' must be a list of text step labels"),
        ({}, {"through": None, "labels": ["b", "a"]}, "'evicted.labels' must be sorted, each label once"),
        ({}, {"through": None}, "'evicted' must be a mapping of exactly ['through', 'labels']"),
    ],
)
def test_evicted_steps_that_no_session_writes_are_refused(
    limits: dict[str, Any], evicted: dict[str, Any], message: str
) -> None:
    session = _session(max_rejected_groups=2, **limits)
    session.judge(DEAD, step=0)
    state = json.loads(json.dumps(session.state_dict()))
    state["evicted"] = evicted

    with pytest.raises(CheckpointError, match=re.escape(message)):
        _session(max_rejected_groups=2, **limits).load_state_dict(state)
