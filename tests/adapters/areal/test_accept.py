"""``AReaLAdmission`` on trajectories shaped as AReaL's workflow executor hands them over (no AReaL)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from group_admission import ConfigurationError, SessionConfig
from group_admission.adapters import areal
from group_admission.adapters.areal import PARTIAL_GROUP, SETTINGS_ENV, AReaLAdmission

BLOCK = {
    "policy": {"min_reward_std": 1e-6},
    "budget": {"max_extra_groups": 2},
    "stream": {"window_groups": 2},
    "group_size": 4,
}


def trajectory(
    rewards: list[float], versions: tuple[int, int] = (0, 0), completion: int = 3
) -> dict[str, Any]:
    """A GroupedRolloutWorkflow result: members concatenated, prompt tokens at version -1 and mask 0."""
    members = len(rewards)
    prompt = 2
    mask = np.array([[0] * prompt + [1] * completion] * members)
    first, last = versions
    tokens = [first] * (completion - 1) + [last]
    return {
        "input_ids": np.ones((members, prompt + completion), dtype=np.int64),
        "loss_mask": mask,
        "attention_mask": np.ones_like(mask, dtype=bool),
        "versions": np.array([[-1] * prompt + tokens] * members),
        "rewards": np.array(rewards, dtype=np.float32),
    }


def test_a_group_is_judged_off_the_trajectory() -> None:
    admission = AReaLAdmission(BLOCK)

    assert admission(trajectory([1.0, 0.0, 1.0, 0.0], versions=(3, 5)))
    assert not admission(trajectory([0.0] * 4))
    stream = admission.stream
    assert stream.stats.candidates == 2
    assert stream.stats.exact_dead == 1
    assert stream.tokens.generated == 2 * 4 * 3  # the loss mask's ones: completion tokens only
    assert stream.ledger.version_span_max == 2


@pytest.mark.parametrize(
    ("traj", "detail"),
    [
        (trajectory([1.0, 0.0, 1.0]), PARTIAL_GROUP),  # AReaL dropped a failed member
        ({"input_ids": np.ones((4, 3))}, "trajectory_without_rewards"),
        (trajectory([1.0, math.nan, 1.0, 0.0]), "non_finite_reward"),
    ],
)
def test_a_data_problem_is_external_and_counted_never_a_crash(traj: dict[str, Any], detail: str) -> None:
    admission = AReaLAdmission(BLOCK)

    assert not admission(traj)
    assert admission.stream.stats.external == 1
    assert detail in admission.stream.stats.external_details


def test_agent_interactions_are_read_by_their_reward() -> None:
    class Interaction:
        def __init__(self, reward: float) -> None:
            self.reward = reward

    admission = AReaLAdmission(BLOCK)
    assert admission({str(i): Interaction(r) for i, r in enumerate([1.0, 0.0, 0.0, 1.0])})


@given(st.lists(st.booleans(), max_size=40), st.integers(1, 3), st.integers(0, 3))
def test_a_stream_of_dead_groups_cannot_refill_forever(live: list[bool], window: int, extra: int) -> None:
    """Every window keeps its target, having generated at most target + extra groups."""
    block = {**BLOCK, "budget": {"max_extra_groups": extra}, "stream": {"window_groups": window}}
    admission = AReaLAdmission(block)
    reports = []
    for is_live in live:
        admission(trajectory([1.0, 0.0, 0.0, 1.0] if is_live else [0.0] * 4))
        report = admission.stream.last_report
        if report is not None and report not in reports:
            reports.append(report)

    assert len(reports) == admission.stream.window
    cap = window + admission.stream.config.budget.max_extra_groups
    assert all(r.kept_groups == window and r.generated_groups <= cap for r in reports)


def test_raise_on_exhaustion_is_refused_where_the_host_would_refill() -> None:
    with pytest.raises(ValueError, match=r"'stream\.on_exhausted' must be 'train' for AReaL"):
        AReaLAdmission({"stream": {"on_exhausted": "raise"}})


BAD = [
    ([1], TypeError, "settings must be a mapping"),
    ({"group_size": 0}, ValueError, "'group_size' must be >= 1"),
    ({"group_size": "4"}, TypeError, "'group_size' must be an integer"),
    ({"polcy": {}}, ValueError, "unknown key"),
    ({"stream": {"window_groups": 0}}, ValueError, "'window_groups' must be >= 1"),
]


@pytest.mark.parametrize(("block", "error", "message"), BAD)
def test_bad_settings_name_the_field(block: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        AReaLAdmission(block)


def test_the_import_path_reads_its_settings_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(SETTINGS_ENV, json.dumps(BLOCK))
    assert areal.should_accept(trajectory([1.0, 0.0, 0.0, 0.0]))
    assert areal.current_admission().stream.stats.candidates == 1  # one stream per process and settings

    path = tmp_path / "admission.json"
    path.write_text(json.dumps({**BLOCK, "stream": {"window_groups": 5}}))
    monkeypatch.setenv(SETTINGS_ENV, str(path))
    assert areal.current_admission().stream.settings.window_groups == 5

    monkeypatch.setenv(SETTINGS_ENV, "{not json")
    with pytest.raises(ConfigurationError, match=f"'{SETTINGS_ENV}' must hold valid inline JSON or YAML"):
        areal.should_accept(trajectory([1.0, 0.0]))


def test_the_recommended_block_builds_the_stream() -> None:
    block = {"preset": "recommended", "group_size": 4}

    admission = areal.AReaLAdmission(block)

    assert admission.stream.session.policy.config == SessionConfig.preset("recommended").policy
    assert admission(trajectory([1.0, 0.0, 0.0, 0.0]))
    assert not admission(trajectory([1.0, 1.0, 1.0, 1.0]))
