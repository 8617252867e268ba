"""GroupAdmissionConfig and SamplingBudgetConfig: defaults, converters, mapping and YAML constructors."""

from __future__ import annotations

from pathlib import Path

import attrs
import numpy as np
import pytest

from group_admission import GroupAdmissionConfig, SamplingBudgetConfig


def test_every_gate_is_off_by_default() -> None:
    config = GroupAdmissionConfig()

    assert not config.reward_gate_enabled
    assert not config.similarity_gate_enabled


def test_numpy_scalars_and_ints_are_converted() -> None:
    config = GroupAdmissionConfig(
        min_reward_std=np.float32(0.5), min_nontrivial_advantages=np.int64(2), min_reward_range=1
    )

    assert isinstance(config.min_reward_std, float)
    assert isinstance(config.min_reward_range, float)
    assert 2 == config.min_nontrivial_advantages
    assert type(config.min_nontrivial_advantages) is int


def test_gate_on_accepts_a_single_name() -> None:
    assert ("accuracy",) == GroupAdmissionConfig(gate_on="accuracy").gate_on


def test_configs_are_frozen() -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        GroupAdmissionConfig().min_reward_std = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("cls", [GroupAdmissionConfig, SamplingBudgetConfig])
def test_to_dict_round_trips_through_from_mapping(cls: type) -> None:
    config = (
        GroupAdmissionConfig(min_reward_std=1e-6, gate_on=["accuracy"], max_mean_pairwise_similarity=0.9)
        if cls is GroupAdmissionConfig
        else SamplingBudgetConfig(max_extra_groups=4, max_total_tokens=1000, mode="confidence")
    )

    assert config == cls.from_mapping(config.to_dict())


def test_from_yaml_reads_a_section(tmp_path: Path) -> None:
    path = tmp_path / "admission.yaml"
    path.write_text(
        "policy:\n  min_reward_std: 1.0e-6\n  min_reward_range: 0.02\n  gate_on: [accuracy]\n"
        "budget:\n  max_extra_groups: 8\n  max_resample_rounds: 2\n  mode: confidence\n"
    )

    policy = GroupAdmissionConfig.from_yaml(path, key="policy")
    budget = SamplingBudgetConfig.from_yaml(path, key="budget")

    assert GroupAdmissionConfig(min_reward_std=1e-6, min_reward_range=0.02, gate_on=["accuracy"]) == policy
    assert SamplingBudgetConfig(max_extra_groups=8, max_resample_rounds=2, mode="confidence") == budget


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e-6", 1e-6),  # no dot: YAML 1.1 (PyYAML) reads text, YAML 1.2 a float
        ("1E-6", 1e-6),
        ("+1e-6", 1e-6),
        ("1.0e6", 1e6),  # no sign in the exponent: text in YAML 1.1 too
        (".5e1", 5.0),
        ("3e+2", 300.0),
        ("1.0e-6", 1e-6),  # what PyYAML already read
        ("0.02", 0.02),
        ("2", 2),
    ],
)
def test_yaml_reads_every_yaml_12_float_as_a_number(text: str, value: float) -> None:
    pytest.importorskip("yaml")
    from group_admission import parse_yaml

    parsed = parse_yaml(f"x: {text}\n")["x"]

    assert value == parsed
    assert type(value) is type(parsed)


@pytest.mark.parametrize("text", ["'1e-6'", "1e-6x", "e6", "1e", "1_000e3", "0x1p3", "1e-6 apples"])
def test_yaml_keeps_quoted_and_not_number_text_as_text(text: str) -> None:
    pytest.importorskip("yaml")
    from group_admission import parse_yaml

    assert isinstance(parse_yaml(f"x: {text}\n")["x"], str)


def test_the_configs_the_docs_quote_with_1e_6_load_everywhere(tmp_path: Path) -> None:
    """``min_reward_std: 1e-6`` through from_yaml, SessionConfig and the command line alike."""
    pytest.importorskip("yaml")
    from group_admission import SessionConfig
    from group_admission._cli import main

    path = tmp_path / "admission.yaml"
    path.write_text("policy:\n  min_reward_std: 1e-6\n  gate_on: [accuracy]\nbudget:\n  confidence: 9e-1\n")

    assert 1e-6 == GroupAdmissionConfig.from_yaml(path, key="policy").min_reward_std
    assert 0.9 == SamplingBudgetConfig.from_yaml(path, key="budget").confidence
    assert 1e-6 == SessionConfig.from_yaml(path).policy.min_reward_std
    assert 0 == main(["explain", str(path)])


def test_an_empty_yaml_file_gives_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")

    assert GroupAdmissionConfig() == GroupAdmissionConfig.from_yaml(path)
    assert SamplingBudgetConfig() == SamplingBudgetConfig.from_yaml(path, key="budget")


def test_from_yaml_without_pyyaml_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "yaml", None)  # makes "import yaml" raise ImportError

    with pytest.raises(ImportError, match=r"pip install 'group-admission\[yaml\]'"):
        GroupAdmissionConfig.from_yaml(tmp_path / "x.yaml")


@pytest.mark.parametrize(
    ("extra", "pinned"), [("torch", True), ("trl", True), ("verl", True), ("plot", False)]
)
def test_the_install_line_of_an_extra_that_pulls_torch_says_to_pin_it(extra: str, pinned: bool) -> None:
    from group_admission._loading import install_line

    line = install_line(extra)
    assert line.startswith(f"pip install 'group-admission[{extra}]'")
    assert ("torch==2.13.0" in line) is pinned
