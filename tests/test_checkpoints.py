"""
Checkpoints restore exactly or are refused: the session's, the prompt history's, the budget state's.

Every single-field corruption of a state (a value replaced, a key deleted or added, a list
entry deleted or written twice, a text edited) either restores to a state that writes back
exactly what was given, or raises ``CheckpointError``: never another exception, never a
silently different state. "Exactly" compares JSON text, so ``1.0`` for ``1`` and ``True``
for ``1`` count as different.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from group_admission import (
    AdmissionSession,
    CheckpointError,
    GroupAdmissionPolicy,
    PromptHistory,
    SamplingBudgetController,
    SamplingBudgetState,
    parse_state,
)
from history_forms import read, write_v1, write_v2

GATE = {"min_reward_std": 1e-6}
LIVE, DEAD, FAILED = [1.0, 0.0, 1.0, 0.0], [0.0] * 4, [None, 1.0, 1.0, 1.0]
BUDGET = {"max_extra_groups": 8, "max_total_tokens": 200, "mode": "confidence"}
POLICY = GroupAdmissionPolicy(GATE)
V1_STATES = Path(__file__).parent / "data" / "history_v1" / "states.json"


def _text(state: Any) -> str:
    return json.dumps(state, sort_keys=True)


# -- states to corrupt ------------------------------------------------------------------------
SESSIONS: list[tuple[dict[str, Any], Callable[[AdmissionSession], None]]] = [
    ({}, lambda s: None),  # before the first step
    ({"limits": {"max_rejection_ratio": 0.5}}, lambda s: (s.begin_step(3), s.judge(LIVE), s.judge(DEAD))),
    (
        {"limits": {"max_rejected_groups": 2, "scope": "run", "max_consecutive_failed_groups": 9}},
        lambda s: (s.begin_step(2), s.judge_batch([LIVE, DEAD]), s.plan(4), s.judge(FAILED), s.judge(FAILED)),
    ),
    ({}, lambda s: (s.begin_step(3), s.judge(LIVE), s.stream_plan(2, num_generations=4, race=1.5))),
    (
        {},
        lambda s: (s.begin_step(1), s.judge(DEAD), s.record_fallback(1), s.end_step(), s.judge(LIVE, step=7)),
    ),
]


def _session(index: int) -> AdmissionSession:
    fields, _ = SESSIONS[index]
    return AdmissionSession(GATE, budget=BUDGET, **fields)


def _session_state(index: int) -> dict[str, Any]:
    session = _session(index)
    SESSIONS[index][1](session)
    return json.loads(json.dumps(session.state_dict()))


def _history_state(kind: str) -> dict[str, Any]:
    fields = {
        "posterior": {"group_size": 4, "half_life": 5.0, "prior": (0.5, 0.5), "exploration": 0.3},
        "greso": {"group_size": 4, "mode": "greso"},
        "admissions": {"group_size": 4, "evidence": "admissions", "half_life": 2.0},
        "empty": {"group_size": 4},
    }[kind]
    history = PromptHistory(fields, rank=1)
    ids: list[Any] = [0, 5, -3, "a", "b/2", ""]
    if kind != "empty":
        for step in range(3):
            history.pick(ids, step=step)
            history.observe_batch(
                ids, POLICY.evaluate_batch([LIVE, DEAD, DEAD, LIVE, [1.0] * 4, DEAD]), step=step
            )
        history.observe("a", POLICY.evaluate(LIVE), step=0)  # a late one, still pending
    return json.loads(json.dumps(history.to_dict()))


def _budget_state(rounds: int) -> dict[str, Any]:
    controller, state = SamplingBudgetController(BUDGET), SamplingBudgetState()
    for _ in range(rounds):
        controller.observe_round(state, groups=3, admitted=1, num_generations=4, generated_tokens=30)
    return state.to_dict()


# -- single-field corruptions -------------------------------------------------------------------
def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield from _paths(value, (*path, key))


def _leaves(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [leaf for value in node.values() for leaf in _leaves(value)]
    if isinstance(node, list):
        return [leaf for value in node for leaf in _leaves(value)]
    return [node]


_VALUES = [
    None,
    True,
    False,
    0,
    1,
    -1,
    2,
    1.0,
    0.5,
    -0.5,
    0.0,
    -0.0,
    math.nan,
    math.inf,
    2**63,
    2**70,
    "",
    "x",
    [],
    {},
]


@st.composite
def _corrupted(draw: st.DrawFn, state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with one field changed (a deep copy)."""
    state = copy.deepcopy(state)
    path = draw(st.sampled_from(list(_paths(state))[1:]), label="path")
    parent = state
    for key in path[:-1]:
        parent = parent[key]
    key, old = path[-1], parent[path[-1]]
    operation = draw(
        st.sampled_from(["replace", "neighbour", "other leaf", "delete", "twice", "add key", "edit text"])
    )
    if operation == "delete":
        del parent[key]
    elif operation == "twice" and isinstance(parent, list):
        parent.insert(key + 1, copy.deepcopy(old))
    elif operation == "add key" and isinstance(old, dict):
        old[draw(st.sampled_from(["extra", "counts", "0"]))] = draw(st.sampled_from(_VALUES))
    elif operation == "edit text" and isinstance(old, str):
        position = draw(st.integers(0, len(old)))
        if draw(st.booleans()) and old:
            parent[key] = old[: max(0, position - 1)] + old[position:]
        else:
            parent[key] = old[:position] + draw(st.sampled_from(list("0-+ aA=/\ud800"))) + old[position:]
    elif operation == "neighbour" and type(old) in (int, float):
        parent[key] = draw(
            st.sampled_from([old - 1, old + 1, float(old), int(old) if math.isfinite(old) else 0, old * 2])
        )
    elif operation == "other leaf":
        parent[key] = copy.deepcopy(draw(st.sampled_from(_leaves(state))))
    else:
        parent[key] = draw(st.sampled_from(_VALUES))
    return state


def _exactly_or_refused(restore: Callable[[Any], Any], corrupted: dict[str, Any]) -> bool:
    """Whether ``restore`` refused; when it did not, it must write back exactly ``corrupted``."""
    try:
        written = restore(corrupted)
    except CheckpointError:
        return True
    assert _text(corrupted) == _text(written)
    return False


@settings(max_examples=400, deadline=None)
@given(data=st.data(), index=st.integers(0, len(SESSIONS) - 1))
def test_every_single_field_corruption_of_a_session_state_restores_exactly_or_is_refused(
    data: st.DataObject, index: int
) -> None:
    corrupted = data.draw(_corrupted(_session_state(index)))
    target = _session(index)
    before = target.state_dict()

    def restore(state: Any) -> Any:
        target.load_state_dict(state)
        return target.state_dict()

    if _exactly_or_refused(restore, corrupted):
        assert before == target.state_dict()  # a refused state leaves the session as it was


@settings(max_examples=400, deadline=None)
@given(data=st.data(), kind=st.sampled_from(["posterior", "greso", "admissions", "empty"]))
def test_every_single_field_corruption_of_a_history_state_restores_exactly_or_is_refused(
    data: st.DataObject, kind: str
) -> None:
    corrupted = data.draw(_corrupted(_history_state(kind)))

    _exactly_or_refused(lambda state: PromptHistory.from_dict(state).to_dict(), corrupted)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), rounds=st.integers(0, 2))
def test_every_single_field_corruption_of_a_budget_state_restores_exactly_or_is_refused(
    data: st.DataObject, rounds: int
) -> None:
    corrupted = data.draw(_corrupted(_budget_state(rounds)))

    _exactly_or_refused(lambda state: SamplingBudgetState.from_dict(state).to_dict(), corrupted)


# -- version 1 of the history state: restored into version 2, exactly ------------------------------
def _as_version_1(state: dict[str, Any]) -> dict[str, Any]:
    """
    A version-3 state written as version 1 (records by key, pending by number), independently.

    Version 1 has no re-checks: a history restored from it has none and no wrong-skip bound.
    """
    assert state["pool"][6:] == [0.0, 0.0]  # nothing re-checked since the version-1 state
    assert state["config"]["max_wrong_skip_share"] is None
    return write_v1(read(state))


def _v1(name: str) -> dict[str, Any]:
    state: dict[str, Any] = json.loads(V1_STATES.read_text())[name]["state"]
    return state


@settings(max_examples=300, deadline=None)
@given(data=st.data(), name=st.sampled_from(["posterior", "greso", "admissions"]))
def test_every_single_field_corruption_of_a_version_1_history_state_restores_exactly_or_is_refused(
    data: st.DataObject, name: str
) -> None:
    corrupted = data.draw(_corrupted(_v1(name)))
    try:
        restored = PromptHistory.from_dict(corrupted).to_dict()
    except CheckpointError:
        return
    expected = {**corrupted, "records": sorted(corrupted["records"])}
    expected["pending"] = sorted(corrupted["pending"], key=lambda e: e[2:4])
    assert _text(expected) == _text(_as_version_1(restored))


def test_a_version_1_state_is_what_the_independent_writer_writes() -> None:
    for name in ("posterior", "greso", "admissions"):
        state = _v1(name)
        expected = {
            **state,
            "records": sorted(state["records"]),
            "pending": sorted(state["pending"], key=lambda e: e[2:4]),
        }
        assert _text(expected) == _text(_as_version_1(PromptHistory.from_dict(state).to_dict()))


# -- the contradictions and duplicates that used to restore silently ------------------------------
def _open_session_state() -> dict[str, Any]:
    return _session_state(1)  # step 0 open, two groups judged, drop windows


SESSION_ROWS: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    ("version True", lambda s: s.update(version=True), "not a version-2 session state (got"),
    ("version 1.0", lambda s: s.update(version=1.0), "(got 'group-admission/session' version 1.0)"),
    ("a window twice", lambda s: s["windows"].append(list(s["windows"][0])), "each step once (got 0 twice)"),
    ("a window of step True", lambda s: s["windows"][0].__setitem__(0, True), "'windows' entries must be"),
    (
        "step counts above the lifetime's",
        lambda s: s["step_stats"]["counts"].update(candidates=3, admitted=2),
        "the step counts more than the session's lifetime: 'candidates' is 3 in it, 2 in the whole",
    ),
    (
        "round counts above the step's",
        lambda s: s["round"]["stats"]["counts"].update(candidates=3, admitted=2),
        "the round in progress counts more than its step",
    ),
    (
        "step index -1 with an open step",
        lambda s: s["step"].update(index=-1),
        "a budget state belongs to a step: 'budget' is null exactly before the first",
    ),
    (
        "step index -1 with an open step and no budget",
        lambda s: (s["step"].update(index=-1), s.update(budget=None)),
        "before the first step (step.index -1) no step is open, targeted or counted",
    ),
    ("an unknown key in step", lambda s: s["step"].update(extra=1), "'step' must have exactly the keys"),
    (
        "a budget state that disagrees with the step's counts",
        lambda s: s["budget"].update(
            generated_groups=1,
            rejected_groups=1,
            generated_samples=4,
            sampling_rounds=1,
            effective_rate_ema=0.5,
        ),
        "do not add up to the step's",
    ),
    (
        "a last call with race null",
        lambda s: s["step"].update(last_call={**_session_state(3)["step"]["last_call"], "race": None}),
        "'step.last_call': 'race' must be a number >= 1",
    ),
    (
        "a last call with a field missing",
        lambda s: s["step"].update(
            last_call={k: v for k, v in _session_state(3)["step"]["last_call"].items() if k != "race"}
        ),
        "'step.last_call' must have exactly the keys",
    ),
    (
        "a config value of another type",
        lambda s: s["config"]["policy"].update(min_reward_range=False),
        "policy",
    ),
    (
        "a drop window that judged more groups than the session",  # it would let 6 of 6 dead groups drop
        lambda s: s["windows"][0].__setitem__(1, 12),
        "the drop windows judged 12 group(s) and the session 2",
    ),
    (
        "a streak naming a reason never counted",
        lambda s: (
            s["stats"]["counts"].update(candidates=3, external=1),
            s["stats"]["external_details"].update(missing_reward=1),
            s["streak"].update(rollout_failed=1),
        ),
        "'streak.rollout_failed' counts 1 rejection(s) the session counted 0 time(s)",
    ),
]


@pytest.mark.parametrize(("name", "edit", "message"), SESSION_ROWS, ids=[row[0] for row in SESSION_ROWS])
def test_a_contradictory_session_state_is_refused(name: str, edit: Any, message: str) -> None:
    state = _open_session_state()
    edit(state)
    target = _session(1)

    with pytest.raises(CheckpointError, match=re.escape(message)):
        target.load_state_dict(state)


HISTORY_ROWS: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    (
        "version True",
        lambda s: s.update(version=True),
        "not a version-3 (or version-1, version-2) prompt history",
    ),
    ("version 1.0", lambda s: s.update(version=1.0), "(got 'group-admission/prompt-history' version 1.0)"),
    ("a record twice", lambda s: s["records"].append(list(s["records"][0])), "each prompt once"),
    (
        "a pending observation twice",
        lambda s: s["pending"].append(list(s["pending"][0])),
        "each (rank, sequence) once",
    ),
    ("a non-canonical key i07", lambda s: s["records"][0].__setitem__(0, "i07"), "must be a prompt key"),
    ("a key beyond int64", lambda s: s["records"][0].__setitem__(0, f"i{2**63}"), "must be a prompt key"),
    ("a lone surrogate", lambda s: s["records"][0].__setitem__(0, "s\ud800"), "must be a prompt key"),
    ("a fold count off the records", lambda s: s["folded"].__setitem__(0, s["folded"][0] + 1), "'folded' ("),
    ("a config default left out", lambda s: s["config"].pop("seed"), "'config' must be a whole"),
    ("keep bases out of GRESO's bounds", lambda s: s.update(greso=[0.99, 0.5]), "'greso' must lie within"),
]


@pytest.mark.parametrize(("name", "edit", "message"), HISTORY_ROWS, ids=[row[0] for row in HISTORY_ROWS])
def test_a_contradictory_history_state_is_refused(name: str, edit: Any, message: str) -> None:
    state = _v1("posterior")
    edit(state)

    with pytest.raises(CheckpointError, match=re.escape(message)):
        PromptHistory.from_dict(state)


def _v2(edit: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    state = _history_state("posterior")
    edit(state)
    return state


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (lambda: _v2(lambda s: s["prompts"].update(count=2**63 - 8)), "(it claims"),
        (lambda: _v2(lambda s: s["prompts"].update(count=2**62)), "'prompts.int_ids' must be"),
        (lambda: _v2(lambda s: s.update(sequence=2**63 - 1)), "'sequence' (9223372036854775807) counts more"),
        (lambda: _v2(lambda s: s.update(sequence=2**63)), "'sequence' must be an integer <= 2**63 - 1"),
    ],
    ids=["count near 2**63", "count 2**62", "sequence 2**63 - 1", "sequence 2**63"],
)
def test_counts_no_history_reaches_are_refused_not_overflowed(state: Callable[[], Any], message: str) -> None:
    with pytest.raises(CheckpointError, match=re.escape(message)):
        PromptHistory.from_dict(state())


def test_a_history_at_its_last_countable_group_refuses_more_and_still_restores() -> None:
    full = {
        **read(_history_state("posterior")),
        "sequence": 0,
        "pool": [1.0, 0.5, 0.25, 0.25, 0.5, 2],
        "folded": [2**63 - 1, "0" * 32],
        "records": [["p", 2.0, 2.0, 0.5, 0.5, 2, 2**63 - 1, 0, 0]],
        "pending": [],
    }
    history = PromptHistory.from_dict(write_v2(full))

    with pytest.raises(ValueError, match=re.escape("a PromptHistory holds at most 2**63 - 1 observations")):
        history.observe("q", POLICY.evaluate(LIVE), step=3)
    assert history.to_dict() == PromptHistory.from_dict(history.to_dict()).to_dict()


def test_every_reachable_session_state_restores_exactly() -> None:
    for index in range(len(SESSIONS)):
        state = _session_state(index)
        target = _session(index)
        target.load_state_dict(state)
        assert _text(state) == _text(target.state_dict())


def test_json_with_a_key_written_twice_is_refused() -> None:
    text = json.dumps(_session_state(2))
    assert _session_state(2) == parse_state(text)
    twice = text.replace('"streak": {', '"streak": {"rollout_failed": 1, "rollout_failed": 2, ', 1)

    with pytest.raises(CheckpointError, match="the key 'rollout_failed' appears twice in one JSON object"):
        parse_state(twice)
    with pytest.raises(CheckpointError, match="not valid JSON"):
        parse_state(text[:-1])


# -- merges are atomic ------------------------------------------------------------------------
def test_a_merged_copy_of_the_same_rank_that_observed_more_gives_a_history_that_restores() -> None:
    config = {"group_size": 4}
    mine = PromptHistory(config, rank=0)
    mine.observe("p", POLICY.evaluate(LIVE), step=0)
    copy_ = PromptHistory.from_dict(mine.to_dict())  # a restored copy of rank 0 that goes on
    copy_.observe("q", POLICY.evaluate(DEAD), step=0)
    mine.merge(copy_)
    mine.observe("r", POLICY.evaluate(LIVE), step=0)  # numbered after the copy's
    restored = PromptHistory.from_dict(json.loads(json.dumps(mine.to_dict())))

    assert mine.to_dict() == restored.to_dict()
    assert [0, 1, 2] == sorted(o.sequence for o in restored._merge_view()[3])
    assert restored.pick(["p", "q", "r"], step=1) == mine.pick(["p", "q", "r"], step=1)


@pytest.mark.parametrize("bad", ["another config", "a conflicting observation", "a damaged state"])
def test_a_refused_merge_leaves_the_history_as_it_was(bad: str) -> None:
    config = {"group_size": 4}
    mine, good = PromptHistory(config, rank=0), PromptHistory(config, rank=1)
    mine.observe("p", POLICY.evaluate(LIVE), step=0)
    good.observe("q", POLICY.evaluate(DEAD), step=0)
    if bad == "another config":
        other: Any = PromptHistory({"group_size": 4, "seed": 1}, rank=2)
    elif bad == "a conflicting observation":
        other = PromptHistory(config, rank=0)
        other.observe("p", POLICY.evaluate(DEAD), step=0)  # rank 0's number 0, with other contents
    else:
        other = {**good.to_dict(), "rank": "two"}
    before = mine.to_dict()

    with pytest.raises(ValueError, match=r"cannot|different observations"):
        mine.merge(good, other)
    assert before == mine.to_dict()
    mine.merge(good)
    assert before != mine.to_dict()
