"""The adapter kit: one way to hold a session, one env reader, one install-on-import, presets in settings."""

from __future__ import annotations

import importlib
import json
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

import group_admission
from group_admission import ConfigurationError, DropLimits, GroupAdmissionConfig, SessionConfig
from group_admission._host_rules import slime as slime_rule
from group_admission.adapters import _kit
from group_admission.adapters._kit import (
    AdapterSession,
    GroupInput,
    HoldsAdmission,
    InstallOnImport,
    as_limits,
    as_policy_config,
    history_field,
    install_on_import,
    loss_scale_field,
    read_settings_env,
    settings_from,
)


@attrs.frozen(kw_only=True)
class Plain:
    policy: GroupAdmissionConfig = attrs.field(factory=GroupAdmissionConfig, converter=as_policy_config)
    limits: DropLimits = attrs.field(factory=DropLimits, converter=as_limits)
    loss_scale: str = loss_scale_field()
    window: int = 1


@attrs.frozen(kw_only=True)
class Choosing(Plain):
    history: Mapping[str, Any] | None = history_field()


def test_the_kit_exports_exactly_its_all_and_nothing_the_root_exports() -> None:
    public = {name for name in vars(_kit) if not name.startswith("_") and name != "annotations"}

    assert set(_kit.__all__) == public
    assert set(_kit.__all__) & set(group_admission.__all__) == set()


# -- settings: a SessionConfig block in an adapter's settings ----------------------------
def test_a_preset_fills_the_session_sections_and_keeps_the_adapters_own_keys() -> None:
    settings = settings_from(Plain, {"preset": "recommended", "window": 3}, "'x'")
    recommended = SessionConfig.preset("recommended")

    assert settings.policy == recommended.policy
    assert settings.loss_scale == recommended.loss_scale
    assert settings.window == 3


def test_the_blocks_overrides_apply_over_the_preset() -> None:
    block = {"preset": "recommended", "policy": {"gate_on": ["accuracy"]}, "loss_scale": "kept"}

    settings = settings_from(Plain, block, "'x'")

    assert settings.policy == SessionConfig.from_mapping(block).policy
    assert settings.policy.gate_on == ("accuracy",)
    assert settings.loss_scale == "kept"


def test_a_host_that_chooses_prompts_gets_the_presets_history() -> None:
    settings = settings_from(Choosing, {"preset": "recommended"}, "'x'")

    assert settings.history == SessionConfig.preset("recommended").history
    assert settings.history is not None


def test_a_section_the_host_cannot_use_is_refused_when_given_and_skipped_when_preset() -> None:
    assert not hasattr(settings_from(Plain, {"preset": "recommended"}, "'x'"), "history")
    with pytest.raises(ValueError, match="history"):
        settings_from(Plain, {"preset": "recommended", "history": {"half_life": 5}}, "'x'")


@pytest.mark.parametrize(
    ("block", "error", "message"),
    [
        ({"preset": "best"}, ValueError, "'preset' must be one of"),
        ({"preset": "recommended", "policy": 3}, TypeError, "'policy'"),
        ({"preset": "recommended", "history": {"group_size": 4}}, ValueError, "'history.group_size'"),
        ({"preset": "recommended", "speed": 1}, ValueError, "speed"),
    ],
)
def test_bad_blocks_name_the_field(block: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        settings_from(Choosing, block, "'x'")


def test_a_session_config_builds_the_adapter_session_itself() -> None:
    config = SessionConfig.preset("recommended", limits={"max_consecutive_failed_groups": 2})

    held = AdapterSession(config, host="toy")

    assert held.session.policy.config == config.policy
    assert held.session.limits == config.limits
    assert held.session.loss_scale == config.loss_scale


# -- holding: AdapterSession, HoldsAdmission, last_report --------------------------------
class Hook(HoldsAdmission):
    def __init__(self) -> None:
        self.admission = AdapterSession(Plain(policy={"min_reward_std": 1e-6}), host="toy")


def test_a_step_keeps_its_report_as_last_report() -> None:
    hook = Hook()
    assert hook.last_report is None

    with hook.admission.step(2):
        GroupInput(rewards=[1.0, 0.0], completions=[None, None], rollout_ids=[0, 1]).judge(hook.session)
        GroupInput(rewards=[1.0, 1.0], completions=[None, None], rollout_ids=[0, 1]).judge(hook.session)

    assert hook.last_report is not None
    assert (hook.last_report.kept_groups, hook.last_report.target_groups) == (1, 2)
    assert hook.stats.admitted == 1
    assert hook.policy is hook.session.policy


def test_a_step_that_raised_still_ends_and_keeps_its_report() -> None:
    hook = Hook()

    def failing_step() -> None:
        with hook.admission.step(3):
            GroupInput(rewards=[1.0, 0.0], completions=[None, None], rollout_ids=[0, 1]).judge(hook.session)
            raise RuntimeError("host failed")

    with pytest.raises(RuntimeError, match="host failed"):
        failing_step()

    assert not hook.session.step_open
    assert hook.last_report is not None
    assert hook.last_report.kept_groups == 1


def test_group_input_judges_through_the_session_with_its_tokens_and_problems() -> None:
    session = AdapterSession(Plain(), host="toy").session
    group = GroupInput(group_key="g", tokens=7)
    group.add(1.0, None, 0)
    group.reject("non_numeric_reward", 1)

    verdict = group.judge(session)

    assert not verdict.keep
    assert verdict.decision.primary_rejection_reason == "external"
    assert session.tokens.decoded == 7


# -- one env reader, one exception type ---------------------------------------------------
def test_the_env_reader_reads_inline_json_inline_yaml_and_files(tmp_path: Path) -> None:
    block = {"preset": "recommended", "policy": {"min_reward_std": 1e-6}}
    json_file, yaml_file = tmp_path / "a.json", tmp_path / "a.yaml"
    json_file.write_text(json.dumps(block))
    yaml_file.write_text("preset: recommended\npolicy: {min_reward_std: 1e-6}\n")

    for value in (
        json.dumps(block),
        "preset: recommended\npolicy: {min_reward_std: 1e-6}",
        str(json_file),
        str(yaml_file),
    ):
        assert read_settings_env("V", value) == block, value
    assert read_settings_env("V", None) is None
    assert read_settings_env("V", "  ") is None


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (
            "[1, 2]",
            ConfigurationError,
            "'V' must hold a mapping of settings, inline or in a file (got [1, 2]",
        ),
        ("3", ConfigurationError, "'V' must hold a mapping of settings, inline or in a file (got 3"),
        (
            "{a: [1",
            ConfigurationError,
            "'V' must hold valid inline JSON or YAML, or a file path (got neither",
        ),
        ("/no/such/file.json", FileNotFoundError, "/no/such/file.json"),
        ("/no/such/file.yaml", FileNotFoundError, "/no/such/file.yaml"),
    ],
)
def test_the_env_reader_refuses_with_one_exception_type(
    value: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as raised:
        read_settings_env("V", value)

    assert message in str(raised.value)


def test_an_invalid_json_file_is_a_configuration_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("{nope")

    with pytest.raises(
        ConfigurationError, match=f"'V' must name a file of valid JSON \\(got invalid '{path}'"
    ):
        read_settings_env("V", str(path))


# -- one install-on-import helper ---------------------------------------------------------
def test_install_on_import_runs_now_or_when_the_module_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "toy_host_mod.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.delitem(sys.modules, "toy_host_mod", raising=False)
    installed: list[types.ModuleType] = []

    assert not install_on_import("toy_host_mod", installed.append)
    assert not install_on_import("toy_host_mod", installed.append)  # one finder, however often
    assert sum(isinstance(f, InstallOnImport) and f.module == "toy_host_mod" for f in sys.meta_path) == 1
    assert installed == []

    import toy_host_mod  # type: ignore[import-not-found]

    assert installed == [toy_host_mod]
    assert toy_host_mod.VALUE == 1
    assert install_on_import("toy_host_mod", installed.append)  # imported: installs at once
    assert installed == [toy_host_mod, toy_host_mod]


# -- names 0.1.0 exported that live elsewhere now -----------------------------------------
@pytest.mark.parametrize(
    ("package", "name", "home"),
    [
        ("slime", "ConsecutiveFailedGroupsError", group_admission),
        ("roll", "ConsecutiveFailedGroupsError", group_admission),
        ("slime", "should_drop", slime_rule),
    ],
)
def test_a_moved_name_warns_and_is_the_same_object(package: str, name: str, home: types.ModuleType) -> None:
    module = importlib.import_module(f"group_admission.adapters.{package}")

    with pytest.warns(
        DeprecationWarning, match=f"adapters.{package}.{name} is deprecated and will be removed in"
    ):
        value = getattr(module, name)

    assert value is getattr(home, name)
    assert name not in module.__all__
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        module.nothing
