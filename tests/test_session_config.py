"""``SessionConfig``: one block for the whole setup, and its named presets."""

from __future__ import annotations

from pathlib import Path

import pytest

from group_admission import (
    AdmissionSession,
    DropLimits,
    GroupAdmissionConfig,
    PromptHistory,
    SamplingBudgetConfig,
    SessionConfig,
)


def test_the_recommended_preset_builds_a_session_and_a_history() -> None:
    config = SessionConfig.preset("recommended", policy={"gate_on": ["accuracy"]})
    assert config.policy.gate_on == ("accuracy",)
    assert config.policy.min_reward_std > 0  # the preset's gate survives the override of another field
    session = config.session(host="mine")
    assert isinstance(session, AdmissionSession)
    assert session.host == "mine"
    assert session.loss_scale == config.loss_scale
    assert session.controller.config == config.budget
    history = config.prompt_history(8, seed=3)
    assert isinstance(history, PromptHistory)
    assert history.config.group_size == 8
    assert history.config.seed == 3


def test_overrides_update_the_presets_sections_field_by_field() -> None:
    base = SessionConfig.preset("recommended")
    changed = SessionConfig.preset("recommended", budget={"max_extra_groups": 3}, loss_scale="kept")
    assert changed.budget.max_extra_groups == 3
    assert changed.budget.max_resample_rounds == base.budget.max_resample_rounds
    assert changed.loss_scale == "kept"
    assert changed.policy == base.policy


def test_without_a_preset_every_section_is_its_default() -> None:
    config = SessionConfig()
    assert config.policy == GroupAdmissionConfig()
    assert config.budget == SamplingBudgetConfig()
    assert config.limits == DropLimits()
    assert config.history is None
    assert config.prompt_history(8) is None


def test_the_yaml_block_and_the_mapping_agree(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "host.yaml"
    path.write_text(
        "trainer: {lr: 1.0e-6}\n"
        "group_admission:\n"
        "  preset: recommended\n"
        "  policy: {gate_on: [accuracy]}\n"
        "  history: {exploration: 0.1}\n"
    )
    from_yaml = SessionConfig.from_yaml(path, key="group_admission")
    assert from_yaml == SessionConfig.preset(
        "recommended", policy={"gate_on": ["accuracy"]}, history={"exploration": 0.1}
    )
    assert SessionConfig.from_mapping(from_yaml.to_dict()) == from_yaml


@pytest.mark.parametrize("name", sorted(SessionConfig.PRESETS))
def test_every_preset_round_trips(name: str) -> None:
    config = SessionConfig.preset(name)
    assert SessionConfig.from_mapping(config.to_dict()) == config


@pytest.mark.parametrize(
    ("mapping", "error", "message"),
    [
        ({"preset": "fast"}, ValueError, "'preset' must be one of 'recommended', 'zero_std' (got 'fast')"),
        (
            {"preset": "recommended", "polcy": {}},
            ValueError,
            "unknown key(s) 'polcy' in SessionConfig mapping",
        ),
        ({"policy": {"min_reward_std": -0.1}}, ValueError, "'min_reward_std' must be >= 0 (got -0.1)"),
        ({"policy": 3}, TypeError, "'policy' must be a GroupAdmissionConfig, a mapping or None (got 3)"),
        (
            {"loss_scale": "mean"},
            ValueError,
            "'loss_scale' must be one of 'kept', 'target', 'linear', 'sqrt'",
        ),
        ({"history": {"group_size": 8}}, ValueError, "'history.group_size' is the host's group size"),
        ({"history": {"skip_below": 2}}, ValueError, "'skip_below' must be"),
        ({"history": [1]}, TypeError, "'history' must be a mapping of PromptHistoryConfig fields or None"),
        ("recommended", TypeError, "'SessionConfig mapping' must be a mapping of fields (got 'recommended')"),
    ],
)
def test_bad_blocks_name_the_field(mapping: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        SessionConfig.from_mapping(mapping)  # type: ignore[arg-type]


def test_a_bad_group_size_is_refused_when_the_history_is_built() -> None:
    with pytest.raises(ValueError, match=r"'group_size' must be >= 1 \(got 0\)"):
        SessionConfig.preset("recommended").prompt_history(0)
