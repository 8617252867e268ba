"""
States whose fields contradict each other are refused: the session's, the history's (v1, v2), the budget's.

``test_checkpoints.py`` changes one field at a time. Here each value stays valid on its own
and two fields are made to disagree: a relation every state a session, a history or a
budget writes keeps (counts that add up, parts within their whole, one verdict per group,
numbers within what was observed). Each test builds a real state from random operations,
applies a random relational corruption that applies to it, and requires ``CheckpointError``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from group_admission import (
    AdmissionSession,
    CheckpointError,
    GroupAdmissionError,
    GroupAdmissionPolicy,
    PromptHistory,
    SamplingBudgetController,
    SamplingBudgetState,
)
from group_admission._drop_tracker import WINDOWS
from history_forms import older, read, write_v1, write_v2, write_v3

GATE = {"min_reward_std": 1e-6}
GROUPS = {
    "live": [1.0, 0.0, 1.0, 0.0],
    "dead": [0.0] * 4,
    "failed": [None, 1.0, 1.0, 1.0],
    "lost": [None] * 4,
}
POLICY = GroupAdmissionPolicy(GATE)
Corruption = tuple[str, Callable[[dict[str, Any]], bool], Callable[[dict[str, Any]], None]]


def _refused(restore: Callable[[Any], Any], state: dict[str, Any], name: str) -> None:
    try:
        restore(state)
    except CheckpointError:
        return
    raise AssertionError(f"a state with {name} was restored")


def _applicable(corruptions: list[Corruption], state: dict[str, Any]) -> list[Corruption]:
    return [corruption for corruption in corruptions if corruption[1](state)]


# -- the session -------------------------------------------------------------------------------------
LIMITS = [
    {},
    {"max_rejection_ratio": 0.5},
    {"max_rejected_groups": 1, "scope": "run", "max_consecutive_failed_groups": 1000},
    {"max_rejected_groups": 1, "forceable_external": ["missing_reward"]},
]
BUDGET = {"max_extra_groups": 8, "max_total_tokens": 400, "max_resample_rounds": 2}
OPERATION = st.one_of(
    st.tuples(st.just("begin"), st.integers(0, 4)),
    st.tuples(
        st.just("judge"), st.sampled_from(sorted(GROUPS)), st.none() | st.integers(0, 30) | st.just("warmup")
    ),
    st.tuples(st.just("batch"), st.lists(st.sampled_from(sorted(GROUPS)), min_size=1, max_size=3)),
    st.tuples(st.just("plan"), st.integers(0, 3)),
    st.tuples(st.just("charge"), st.sampled_from(["aborted", "carried", "pilot"])),
    st.tuples(st.just("fallback"), st.integers(1, 2)),
    st.tuples(st.just("end"), st.just(0)),
)


def _run(session: AdmissionSession, operations: list[tuple[Any, ...]]) -> None:
    """Apply the operations a host could make; those the session refuses in that order are skipped."""
    for name, *arguments in operations:
        with suppress(GroupAdmissionError, ValueError):
            if name == "begin":
                session.begin_step(arguments[0])
            elif name == "judge":
                session.judge(GROUPS[arguments[0]], generated_tokens=10, step=arguments[1])
            elif name == "batch":
                session.judge_batch([GROUPS[kind] for kind in arguments[0]], generated_tokens=7)
            elif name == "plan" and arguments[0]:
                session.stream_plan(arguments[0], num_generations=4)
            elif name == "plan":
                session.plan(num_generations=4)
            elif name == "charge":
                session.charge(5, kind=arguments[0])
            elif name == "fallback":
                session.record_fallback(arguments[0])
            else:
                session.end_step()


def _counts(state: dict[str, Any], part: str) -> dict[str, int]:
    counts: dict[str, int] = state[part]["counts"] if part != "round" else state["round"]["stats"]["counts"]
    return counts


def _one_more_admitted(counts: dict[str, int]) -> None:
    counts["candidates"] += 1
    counts["admitted"] += 1


def _windows_judge_more(state: dict[str, Any]) -> None:
    judged = sum(window[1] for window in state["windows"])
    state["windows"][0][1] += _counts(state, "stats")["candidates"] - judged + 1


def _windows_drop_more(state: dict[str, Any]) -> None:
    window, counts = state["windows"][0], _counts(state, "stats")
    extra = counts["candidates"] - counts["admitted"] - sum(w[2] for w in state["windows"]) + 1
    window[1], window[2] = window[1] + extra, window[2] + extra


def _budget_gains_a_round(state: dict[str, Any]) -> None:
    budget = state["budget"]
    budget.update(
        sampling_rounds=budget["sampling_rounds"] + 1,
        generated_groups=budget["generated_groups"] + 1,
        rejected_groups=budget["rejected_groups"] + 1,
        generated_samples=budget["generated_samples"] + 4,
        effective_rate_ema=budget["effective_rate_ema"] if budget["effective_rate_ema"] is not None else 0.0,
    )


def _step_tokens(state: dict[str, Any]) -> int:
    return int(state["round"]["tokens"] + (state["budget"] or {"generated_tokens": 0})["generated_tokens"])


SESSION_CORRUPTIONS: list[Corruption] = [
    (
        "a step group the lifetime lacks",
        lambda s: True,
        lambda s: _one_more_admitted(_counts(s, "step_stats")),
    ),
    (
        "a round group its step lacks",
        lambda s: True,
        lambda s: (
            _one_more_admitted(_counts(s, "round")),
            s["round"].update(samples=s["round"]["samples"] + 4),
        ),
    ),
    ("budget groups the step lacks", lambda s: s["budget"] is not None, _budget_gains_a_round),
    ("no budget in a started session", lambda s: s["step"]["index"] >= 0, lambda s: s.update(budget=None)),
    ("windows judging more than the session", lambda s: bool(s["windows"]), _windows_judge_more),
    ("windows dropping more than the session rejected", lambda s: bool(s["windows"]), _windows_drop_more),
    (
        "evicted steps with room left in the windows",
        lambda s: len(s["windows"]) < WINDOWS,
        lambda s: s.update(evicted={"through": 0, "labels": []}),
    ),
    ("a streak of a reason never counted", lambda s: True, lambda s: s["streak"].update(never_counted=1)),
    (
        "a streak longer than its reason's count",
        lambda s: bool(s["stats"]["external_details"]),
        lambda s: s["streak"].update(
            {reason: count + 1 for reason, count in list(s["stats"]["external_details"].items())[:1]}
        ),
    ),
    (
        "step tokens above the lifetime's",
        lambda s: True,
        lambda s: s["step"]["charged"].update(aborted=s["tokens"]["aborted"] + 1),
    ),
    (
        "lifetime generated tokens below the step's",
        lambda s: _step_tokens(s) > 0,
        lambda s: s["tokens"].update(generated=_step_tokens(s) - 1),
    ),
    (
        "a step charged with judged groups' tokens",
        lambda s: True,
        lambda s: (
            s["step"]["charged"].update(generated=1),
            s["tokens"].update(generated=s["tokens"]["generated"] + 1),
        ),
    ),
    (
        "a last call after more groups than the step judged",
        lambda s: s["step"]["last_call"] is not None,
        lambda s: s["step"]["last_call"].update(judged=_counts(s, "step_stats")["candidates"] + 1),
    ),
    (
        "a closed step with a round in progress",
        lambda s: _counts(s, "round")["candidates"] > 0,
        lambda s: s["step"].update(open=False, last_call=None),
    ),
]


@settings(max_examples=300, deadline=None)
@given(
    limits=st.sampled_from(range(len(LIMITS))),
    operations=st.lists(OPERATION, max_size=40),
    data=st.data(),
)
def test_a_session_state_whose_fields_contradict_is_refused(
    limits: int, operations: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    session = AdmissionSession(GATE, budget=BUDGET, limits=LIMITS[limits])
    _run(session, operations)
    state = json.loads(json.dumps(session.state_dict()))
    restored = AdmissionSession(GATE, budget=BUDGET, limits=LIMITS[limits])
    restored.load_state_dict(state)  # the real state restores
    name, _, corrupt = data.draw(st.sampled_from(_applicable(SESSION_CORRUPTIONS, state)), label="corruption")
    corrupt(state)

    _refused(restored.load_state_dict, state, name)


# -- the prompt history, in both versions ----------------------------------------------------------------
CONFIGS = [
    {"group_size": 4},
    {"group_size": 4, "half_life": 3.0, "mode": "greso"},
    {"group_size": 4, "evidence": "admissions", "half_life": 1.5},
]
HISTORY_OPERATION = st.tuples(
    st.sampled_from(["observe", "pick", "merge"]),
    st.sampled_from([0, 1, 2, "a", "b"]),
    st.sampled_from(sorted(GROUPS)),
    st.integers(-1, 1),  # the step moves on, stays, or a late observation comes in
)


def _history(config: dict[str, Any], operations: list[tuple[Any, ...]]) -> PromptHistory:
    history, other = PromptHistory(config, rank=1), PromptHistory(config, rank=2)
    step = 0
    for name, prompt, kind, move in operations:
        step = max(0, step + move)
        if name == "observe":
            history.observe(prompt, POLICY.evaluate(GROUPS[kind]), step=step)
        elif name == "merge":  # another rank observed too
            other.observe(prompt, POLICY.evaluate(GROUPS[kind]), step=step)
        else:  # the ranks merge each other's states before every pick, as the docs say
            other.merge(history.to_dict())
            history.merge(other.to_dict())
            history.pick([prompt], step=step)
            other.pick([prompt], step=step)
    return history


def _own(data: dict[str, Any]) -> list[list[Any]]:
    return [row for row in data["pending"] if row[2] == data["rank"]]


def _forgets(data: dict[str, Any]) -> bool:
    return data["config"]["half_life"] is not None


def _record(data: dict[str, Any]) -> list[Any]:
    row: list[Any] = data["records"][0]
    return row


def _as_int_bits(value: float) -> float:
    """A count written with the wrong dtype: the int64 bits of ``value`` read as a float64."""
    bits: float = struct.unpack("<d", struct.pack("<q", round(value)))[0]
    return bits


HISTORY_CORRUPTIONS: list[Corruption] = [
    (
        "a sequence beyond the observations",
        lambda d: True,
        lambda d: d.update(sequence=d["folded"][0] + len(_own(d)) + 1),
    ),
    (
        "an own pending observation numbered at the sequence",
        lambda d: bool(_own(d)),
        lambda d: d.update(sequence=max(row[3] for row in _own(d))),
    ),
    (
        "a fold count off the records",
        lambda d: True,
        lambda d: d["folded"].__setitem__(0, d["folded"][0] + 1),
    ),
    (
        "a record with a group more, folded to match",
        lambda d: bool(d["records"]) and not _forgets(d),
        lambda d: (
            _record(d).__setitem__(6, _record(d)[6] + 1),
            d["folded"].__setitem__(0, d["folded"][0] + 1),
        ),
    ),
    (
        "a record with fewer samples than verdicts",
        lambda d: bool(d["records"]),
        lambda d: _record(d).__setitem__(slice(1, 3), [(_record(d)[3] + _record(d)[4]) / 4] * 2),
    ),
    (
        "the successes column in the wrong dtype",
        lambda d: any(row[1] >= 1 for row in d["records"]),
        lambda d: [row.__setitem__(1, _as_int_bits(row[1])) for row in d["records"]],
    ),
    (
        "a record on both streaks",
        lambda d: bool(d["records"]),
        lambda d: _record(d).__setitem__(slice(7, 9), [1, 1]),
    ),
    (
        "a streak longer than the record's groups",
        lambda d: bool(d["records"]),
        lambda d: _record(d).__setitem__(slice(7, 9), [_record(d)[6] + 1, 0]),
    ),
    (
        "a pool moment above its weight",
        lambda d: d["folded"][0] > 0,
        lambda d: d["pool"].__setitem__(4, d["pool"][0] * 2 + 1.0),
    ),
    (
        "a pool weight off the groups folded",
        lambda d: d["folded"][0] > 0,
        lambda d: d["pool"].__setitem__(0, float(d["folded"][0]) * 2 + 1.0),
    ),
    (
        "a pool step off the records'",
        lambda d: bool(d["records"]),
        lambda d: d["pool"].__setitem__(5, d["pool"][5] + 1),
    ),
    (
        "an observation listed twice",
        lambda d: bool(d["pending"]),
        lambda d: d["pending"].append(list(d["pending"][0])),
    ),
    (
        "a digest with nothing folded",
        lambda d: d["folded"][0] == 0,
        lambda d: d["folded"].__setitem__(1, "0" * 32),
    ),
]


@settings(max_examples=300, deadline=None)
@given(
    config=st.sampled_from(range(len(CONFIGS))),
    operations=st.lists(HISTORY_OPERATION, max_size=30),
    version=st.sampled_from([1, 2, 3]),
    data=st.data(),
)
def test_a_history_state_whose_fields_contradict_is_refused_in_either_version(
    config: int, operations: list[tuple[Any, ...]], version: int, data: st.DataObject
) -> None:
    history = _history(CONFIGS[config], operations)
    state = json.loads(json.dumps(history.to_dict()))
    parsed = read(state)
    write = {1: write_v1, 2: write_v2, 3: write_v3}[version]
    # The real state, rewritten, restores (an older version without its re-checks and bound).
    assert (state if version == 3 else older(state)) == PromptHistory.from_dict(write(parsed)).to_dict()
    name, _, corrupt = data.draw(
        st.sampled_from(_applicable(HISTORY_CORRUPTIONS, parsed)), label="corruption"
    )
    corrupt(parsed)

    _refused(PromptHistory.from_dict, json.loads(json.dumps(write(parsed))), name)


RECHECK_CORRUPTIONS: list[Corruption] = [
    (
        "re-checks above the pool's weight",
        lambda d: d["folded"][0] > 0,
        lambda d: d["pool"].__setitem__(6, d["pool"][0] + 1.0),
    ),
    (
        "informative re-checks above the re-checks",
        lambda d: d["folded"][0] > 0,
        lambda d: d["pool"].__setitem__(7, d["pool"][6] + 1.0),
    ),
    (
        "re-checks in a history that folded nothing",
        lambda d: d["folded"][0] == 0,
        lambda d: d["pool"].__setitem__(6, 1.0),
    ),
]


@settings(max_examples=100, deadline=None)
@given(
    config=st.sampled_from(range(len(CONFIGS))),
    operations=st.lists(HISTORY_OPERATION, max_size=30),
    data=st.data(),
)
def test_contradictory_rechecks_are_refused(
    config: int, operations: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    parsed = read(json.loads(json.dumps(_history(CONFIGS[config], operations).to_dict())))
    name, _, corrupt = data.draw(
        st.sampled_from(_applicable(RECHECK_CORRUPTIONS, parsed)), label="corruption"
    )
    corrupt(parsed)
    _refused(PromptHistory.from_dict, json.loads(json.dumps(write_v3(parsed))), name)


# -- the budget state ------------------------------------------------------------------------------------
BUDGET_CORRUPTIONS: list[Corruption] = [
    (
        "admitted beyond the groups",
        lambda b: True,
        lambda b: b.update(admitted_groups=b["admitted_groups"] + 1),
    ),
    (
        "groups without their verdicts",
        lambda b: True,
        lambda b: b.update(
            generated_groups=b["generated_groups"] + 1, generated_samples=b["generated_samples"] + 1
        ),
    ),
    (
        "fewer samples than groups",
        lambda b: b["generated_groups"] > 0,
        lambda b: b.update(generated_samples=b["generated_groups"] - 1),
    ),
    (
        "samples without a round",
        lambda b: b["generated_samples"] > 0 or b["generated_tokens"] > 0,
        lambda b: b.update(sampling_rounds=0),
    ),
    (
        "groups without a rate",
        lambda b: b["generated_groups"] > 0,
        lambda b: b.update(effective_rate_ema=None),
    ),
]
ROUND = st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 3), st.integers(0, 50))


@settings(max_examples=200, deadline=None)
@given(rounds=st.lists(ROUND, max_size=5), carried=st.none() | st.floats(0, 1), data=st.data())
def test_a_budget_state_whose_fields_contradict_is_refused(
    rounds: list[tuple[int, int, int, int]], carried: float | None, data: st.DataObject
) -> None:
    controller = SamplingBudgetController()
    state = SamplingBudgetState(effective_rate_ema=carried)
    for admitted, rejected, extra, tokens in rounds:
        groups = admitted + rejected
        controller.observe_round(
            state,
            groups=groups,
            admitted=admitted,
            generated_samples=2 * groups + extra,
            generated_tokens=tokens,
        )
    written = state.to_dict()
    assert written == SamplingBudgetState.from_dict(written).to_dict()
    name, _, corrupt = data.draw(
        st.sampled_from(_applicable(BUDGET_CORRUPTIONS, written)), label="corruption"
    )
    corrupt(written)

    _refused(SamplingBudgetState.from_dict, written, name)
