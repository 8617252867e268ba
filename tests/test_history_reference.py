"""The columnar history picks bit for bit what the prompt-by-prompt one did; version-1 states replay."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from group_admission import GroupAdmissionPolicy, PromptHistory, PromptHistoryConfig, parse_state
from group_admission._history_ids import key_ranks, prompt_key
from reference_history import Obs, Record, ReferenceHistory

POLICY = GroupAdmissionPolicy({"min_reward_std": 1e-6})
V1_STATES = Path(__file__).parent / "data" / "history_v1" / "states.json"

_ids = st.sampled_from([0, 1, 2, 3, 17, -5, 2**40, "a", "b", "7", "", "task/3", "é"])
_configs = st.fixed_dictionaries(
    {
        "group_size": st.sampled_from([1, 2, 4, 8, 300]),
        "mode": st.sampled_from(["posterior", "greso"]),
        "evidence": st.sampled_from(["rewards", "admissions"]),
        "half_life": st.sampled_from([None, 0.7, 3.0, 50.0]),
        "prior": st.sampled_from([None, (1.0, 1.0), (0.3, 2.0)]),
        "skip_below": st.sampled_from([0.1, 0.5, 0.9]),
        "exploration": st.sampled_from([0.0, 0.3]),
        "reward_range": st.sampled_from([(0.0, 1.0), (-1.0, 2.0)]),
        "seed": st.integers(0, 3),
    }
)
# One step: groups of (prompt, successes of the group, rejected as external), repeated (so
# that the pool's fitted prior and long sums come into play), and an optional late group of
# an earlier step.
_steps = st.lists(
    st.tuples(
        st.lists(st.tuples(_ids, st.integers(0, 300), st.booleans()), max_size=12),
        st.sampled_from([1, 1, 2, 40]),
        st.one_of(st.none(), st.tuples(_ids, st.integers(0, 300), st.integers(0, 5))),
    ),
    min_size=1,
    max_size=8,
)


def _decision(successes: int, size: int, external: bool = False) -> Any:
    k = min(successes, size)
    rewards = [1.0] * k + [0.0] * (size - k)
    return POLICY.evaluate(rewards, external_reasons=["rollout_failed"] if external else ())


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@settings(max_examples=150, deadline=None)
@given(fields=_configs, steps=_steps, extra=st.integers(0, 40))
def test_picks_and_estimates_are_bit_for_bit_the_prompt_by_prompt_ones(
    fields: dict[str, Any], steps: list[Any], extra: int
) -> None:
    config = PromptHistoryConfig(**fields)
    history, reference = PromptHistory(config), ReferenceHistory(config)
    candidates = [0, 1, 2, 3, 17, -5, 2**40, "a", "b", "7", "", "task/3", "é", 99]
    size = config.group_size
    for step, (groups, repeat, late) in enumerate(steps):
        picks = history.pick(candidates, step=step)
        assert (list(picks.picked), list(picks.skipped), list(picks.informative_probabilities)) == (
            reference.pick(candidates, step)
        )
        for prompt, successes, external in groups * repeat:
            decision = _decision(successes, size, external)
            history.observe(prompt, decision, step=step)
            reference.observe(prompt, decision, step)
        if late is not None and late[2] <= step:
            decision = _decision(late[1], size)
            history.observe(late[0], decision, step=step - late[2])
            reference.observe(late[0], decision, step - late[2])
    last = len(steps) + extra
    for prompt in candidates:
        estimate = history.estimate(prompt, step=last)
        groups, mean, informative, keep = reference.estimate(prompt, last)
        assert groups == estimate.groups
        assert _same(mean, estimate.pass_rate)
        assert (informative, keep) == (estimate.informative_probability, estimate.keep_probability)
    assert history.greso_keep_bases == (reference.p_easy, reference.p_hard)
    restored = PromptHistory.from_dict(parse_state(json.dumps(history.to_dict())))
    assert restored.pick(candidates, step=last + 1) == history.pick(candidates, step=last + 1)


def _v1_cases() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(V1_STATES.read_text())
    return data


@pytest.mark.parametrize("name", ["posterior", "greso", "admissions"])
def test_a_version_1_state_restores_exactly_and_replays_its_picks(name: str) -> None:
    """States written by the version-1 history (commit c9b72d0), with what it picked afterwards."""
    case = _v1_cases()[name]
    history = PromptHistory.from_dict(case["state"])
    ids = case["ids"]
    assert 63 == len(history)
    for step in (10, 11, 40):
        assert case["later"][str(step)] == history.pick(ids, step=step).to_dict()
        expected = case["later"][f"estimate-{step}"]
        for prompt, (groups, mean, informative, keep) in zip(ids, expected, strict=True):
            estimate = history.estimate(prompt, step=step)
            assert groups == estimate.groups
            assert _same(mean, estimate.pass_rate)
            assert (informative, keep) == (estimate.informative_probability, estimate.keep_probability)
    # Written again as version 3, it restores to the same history.
    again = PromptHistory.from_dict(json.loads(json.dumps(history.to_dict())))
    assert again.to_dict() == history.to_dict()
    assert 3 == again.to_dict()["version"]


@pytest.mark.parametrize("name", ["posterior", "greso", "admissions"])
def test_the_reference_reproduces_the_version_1_picks(name: str) -> None:
    """The reference above is the version-1 algorithm: it replays what that history picked."""
    case = _v1_cases()[name]
    state = case["state"]
    config = PromptHistoryConfig.from_mapping(state["config"])
    reference = ReferenceHistory(config, rank=state["rank"])
    # Rebuild the reference from the version-1 state's fields.
    for key, *values in state["records"]:
        record = reference.records[key] = Record()
        (record.successes, record.failures, record.admitted, record.rejected) = values[:4]
        (record.step, record.groups, record.easy, record.hard) = values[4:]
    for entry in state["pending"]:
        reference.pending[(entry[2], entry[3])] = Obs(*entry)
    pool = reference.pool
    pool.weight, pool.sum_rate, pool.sum_square, pool.inverse_size, pool.admitted, pool.step = state["pool"]
    reference.p_easy, reference.p_hard = state["greso"]
    for step in (10, 11, 40):
        picked, skipped, chances = reference.pick(case["ids"], step)
        assert case["later"][str(step)] == {
            "picked": picked,
            "skipped": skipped,
            "informative_probabilities": chances,
        }


@given(
    st.lists(
        st.one_of(
            st.integers(-(2**63), 2**63 - 1),
            st.integers(-1000, 1000),
            st.sampled_from([0, -1, 1, 10, 9, 2**63 - 1, -(2**63), 10**18, 10**18 - 1]),
            st.text(max_size=4),
        ),
        max_size=40,
    )
)
def test_key_ranks_are_the_order_of_the_prompt_keys(ids: list[Any]) -> None:
    """The fold orders observations by key without writing the keys; it must be the keys' order."""
    keys = sorted({prompt_key(prompt_id) for prompt_id in ids})
    expected = [keys.index(prompt_key(prompt_id)) for prompt_id in ids]

    assert expected == key_ranks(ids).tolist()
