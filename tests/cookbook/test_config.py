"""The training config: defaults, YAML file, flags (flags win), and errors that name the setting."""

from __future__ import annotations

from pathlib import Path

import pytest
from grpo_gsm8k.config import TrainConfig, parse_config

from group_admission import GroupAdmissionConfig, SamplingBudgetConfig

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "cookbook" / "grpo_gsm8k" / "offline" / "config.yaml"


def test_defaults_are_the_real_hub_ids() -> None:
    config = parse_config([])

    assert ("Qwen/Qwen2.5-0.5B-Instruct", "openai/gsm8k", "main") == (
        config.model,
        config.dataset,
        config.subset,
    )
    assert ("accuracy",) == config.admission_config().gate_on


def test_the_embedded_default_file_loads_into_valid_core_configs() -> None:
    config = parse_config(["--config", str(DEMO_CONFIG)])

    assert config.model.endswith("tiny-qwen2")
    assert isinstance(config.admission_config(), GroupAdmissionConfig)
    assert (
        SamplingBudgetConfig(
            max_extra_groups=8,
            max_extra_groups_per_round=8,
            max_resample_rounds=2,
            max_total_samples=128,
            max_total_tokens=2048,
            mode="expected",
        )
        == config.budget_config()
    )


def test_flags_override_the_file_and_sections_merge_key_by_key(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("steps: 5\nlr: 1e-4\nbudget:\n  max_extra_groups: 3\n  max_resample_rounds: 1\n")

    config = parse_config(
        [
            "--config",
            str(path),
            "--steps",
            "7",
            "--budget.max_resample_rounds",
            "4",
            "--admission.min_reward_std",
            "1e-5",
        ]
    )

    assert 7 == config.steps
    assert 1e-4 == config.lr  # PyYAML reads 1e-4 as text; the config reads a number
    assert {"max_extra_groups": 3, "max_extra_groups_per_round": 8, "max_resample_rounds": 4} == config.budget
    assert 1e-5 == config.admission_config().min_reward_std
    assert ("accuracy",) == config.admission_config().gate_on


def test_text_settings_stay_text_and_booleans_take_no_prefix() -> None:
    config = parse_config(
        ["--model", "1e-3", "--no-plot", "--system-prompt", "null", "--prometheus-port", "9100"]
    )

    assert ("1e-3", False, None, 9100) == (
        config.model,
        config.plot,
        config.system_prompt,
        config.prometheus_port,
    )


def test_yaml_lists_parse_from_flags() -> None:
    config = parse_config(["--admission.gate_on", "[accuracy, brevity]"])

    assert ("accuracy", "brevity") == config.admission_config().gate_on


@pytest.mark.parametrize(
    ("argv", "error", "message"),
    [
        (["--steps", "0"], ValueError, r"'steps' must be an integer > 0 \(got 0\)"),
        (["--steps", "two"], ValueError, r"'steps' must be an integer > 0 \(got 'two'\)"),
        (["--lr", "-1"], ValueError, r"'lr' must be a number > 0 \(got -1\)"),
        (
            ["--resample", "again"],
            ValueError,
            r"'resample' must be one of \['fresh', 'retry'\] \(got 'again'\)",
        ),
        (["--advantage-scale", "global"], ValueError, r"'advantage_scale' must be one of"),
        (["--dtype", "int8"], ValueError, r"'dtype' must be one of \['float32', 'bfloat16', 'float16'\]"),
        (["--budget.max_extra_groups", "-1"], ValueError, r"'max_extra_groups' must be >= 0"),
        (["--admission.min_reward_std", "-0.1"], ValueError, r"'min_reward_std' must be >= 0"),
    ],
)
def test_bad_values_name_the_setting(argv: list[str], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        parse_config(argv)


def test_unknown_keys_in_the_file_are_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("stepz: 3\n")

    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['stepz'\] in '.*bad.yaml'"):
        parse_config(["--config", str(path)])


def test_unknown_keys_in_a_section_are_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("budget:\n  max_extra: 3\n")

    with pytest.raises(ValueError, match=r"unknown key\(s\) 'max_extra'"):
        parse_config(["--config", str(path)])


def test_a_section_must_be_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("admission: 3\n")

    with pytest.raises(ValueError, match=r"'admission' in '.*bad.yaml' must be a mapping \(got 3\)"):
        parse_config(["--config", str(path)])


def test_unknown_flag_exits_with_usage() -> None:
    with pytest.raises(SystemExit):
        parse_config(["--no-such-flag", "1"])


def test_config_round_trips_through_its_dict() -> None:
    config = parse_config(["--config", str(DEMO_CONFIG)])

    assert config == TrainConfig(**config.to_dict())
