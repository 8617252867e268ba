"""The training config: defaults, YAML file, flags (flags win), and errors that name the setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cookbook.grpo_gsm8k.config import PLAIN_GRPO, ConfigError, TrainConfig, parse_config, session_config
from group_admission import GroupAdmissionPolicy, SessionConfig

ROOT = Path(__file__).resolve().parents[2]
DEMO_CONFIG = ROOT / "cookbook" / "grpo_gsm8k" / "offline" / "config.yaml"
#: The training script, run by name from the repository root as the docs run it.
TRAIN = ["-m", "cookbook.grpo_gsm8k.train"]
PHANTOM = {"accuracy": [0.0, 0.0, 0.0, 0.0], "brevity": [0.1, 0.0, 0.1, 0.05]}


def test_defaults_are_the_real_hub_ids_and_the_recommended_preset_gated_on_accuracy() -> None:
    config = parse_config([])

    assert ("Qwen/Qwen2.5-0.5B-Instruct", "openai/gsm8k", "main") == (
        config.model,
        config.dataset,
        config.subset,
    )
    assert SessionConfig.preset("recommended", policy={"gate_on": ["accuracy"]}) == config.session_config()


def test_the_embedded_default_builds_its_session_from_the_recommended_preset() -> None:
    config = parse_config(["--config", str(DEMO_CONFIG)])
    built = config.session_config()
    preset = SessionConfig.preset("recommended")

    assert config.model.endswith("tiny-qwen2")
    assert "plain" == config.baseline
    assert ("accuracy",) == built.policy.gate_on
    # The preset's values, by name: only gate_on is the demo's own.
    assert (preset.budget, preset.loss_scale, preset.history) == (
        built.budget,
        built.loss_scale,
        built.history,
    )
    assert not GroupAdmissionPolicy(built.policy).evaluate(PHANTOM).admitted


def test_plain_grpo_trains_on_every_group_in_one_round() -> None:
    plain = session_config(PLAIN_GRPO)

    assert GroupAdmissionPolicy(plain.policy).evaluate(PHANTOM).admitted
    assert 0 == plain.budget.max_resample_rounds
    assert plain.history is None
    assert "kept" == plain.loss_scale


def test_flags_override_the_file_and_the_admission_block_merges_section_by_section(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(
        "steps: 5\nlr: 1e-4\nadmission:\n  budget:\n    max_extra_groups: 3\n    max_resample_rounds: 1\n"
    )

    config = parse_config(
        [
            *("--config", str(path), "--steps", "7"),
            *("--admission.budget.max_resample_rounds", "4", "--admission.policy.min_reward_std", "1e-5"),
        ]
    )
    built = config.session_config()

    assert 7 == config.steps
    assert 1e-4 == config.lr  # PyYAML reads 1e-4 as text; the config reads it as YAML 1.2 does
    assert (3, 4) == (built.budget.max_extra_groups, built.budget.max_resample_rounds)
    assert 1e-5 == built.policy.min_reward_std
    assert ("accuracy",) == built.policy.gate_on  # the default block's, kept by the merge


def test_null_turns_off_the_preset_and_the_history() -> None:
    config = parse_config(["--admission.preset", "null", "--admission.history", "null"])
    built = config.session_config()

    assert built.history is None
    assert 0 == built.budget.max_extra_groups  # the blank budget: no preset under it
    assert ("accuracy",) == built.policy.gate_on


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
    config = parse_config(["--admission.policy.gate_on", "[accuracy, brevity]"])

    assert ("accuracy", "brevity") == config.session_config().policy.gate_on


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--steps", "0"], r"'steps' must be an integer > 0 \(got 0\)"),
        (["--steps", "two"], r"'steps' must be an integer > 0 \(got 'two'\)"),
        (["--steps", "1e3"], r"'steps' must be an integer > 0 \(got 1000.0\)"),
        (["--lr", "-1"], r"'lr' must be a number > 0 \(got -1\)"),
        (["--lr", "1e-4x"], r"'lr' must be a number > 0 \(got '1e-4x'\)"),
        (["--resample", "again"], r"'resample' must be one of \['fresh', 'retry'\] \(got 'again'\)"),
        (["--advantage-scale", "global"], r"'advantage_scale' must be one of"),
        (["--dtype", "int8"], r"'dtype' must be one of \['float32', 'bfloat16', 'float16'\]"),
        (["--baseline", "dapo"], r"'baseline' must be one of \[None, 'plain'\] \(got 'dapo'\)"),
        (["--admission.budget.max_extra_groups", "-1"], r"'max_extra_groups' must be >= 0"),
        (["--admission.policy.min_reward_std=-1e-6"], r"'min_reward_std' must be >= 0 \(got -1e-06\)"),
        (["--admission.preset", "best"], r"'preset' must be one of"),
        (["--admission.history.skip_below", "2"], r"'skip_below' must be in \[0, 1\] \(got 2"),
        (["--admission.policy.gate_on", "[a"], r"'--admission.policy.gate_on' is not valid YAML"),
    ],
)
def test_bad_values_name_the_setting(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(argv)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stepz: 3\n", r"unknown setting\(s\) \['stepz'\] in '.*bad.yaml'"),
        ("budget:\n  max_extra_groups: 3\n", r"unknown setting\(s\) \['budget'\]"),
        ("admission:\n  budget:\n    max_extra: 3\n", r"unknown key\(s\) 'max_extra'"),
        ("admission: 3\n", r"'admission' in '.*bad.yaml' must be a mapping \(got 3\)"),
        ("- 1\n", r"'.*bad.yaml' must hold a YAML mapping of settings \(got \[1\]\)"),
        ("steps: [\n", r"'.*bad.yaml' is not valid YAML"),
    ],
)
def test_a_bad_file_is_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)

    with pytest.raises(ConfigError, match=message):
        parse_config(["--config", str(path)])


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read '.*missing.yaml': No such file or directory"):
        parse_config(["--config", str(tmp_path / "missing.yaml")])


def test_unknown_flag_exits_with_status_2() -> None:
    with pytest.raises(SystemExit) as exited:
        parse_config(["--no-such-flag", "1"])

    assert 2 == exited.value.code


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--steps", "0"], "grpo_gsm8k: error: 'steps' must be an integer > 0 (got 0)"),
        (["--admission.budget.max_extra_groups", "-1"], "grpo_gsm8k: error: 'max_extra_groups' must be >= 0"),
        (["--no-such-flag", "1"], "grpo_gsm8k: error: unrecognized arguments: --no-such-flag 1 (see --help)"),
    ],
)
def test_the_script_reports_a_config_mistake_in_one_line_with_status_2(argv: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, *TRAIN, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )

    assert 2 == done.returncode
    assert done.stderr.startswith(message), done.stderr
    assert 1 == len(done.stderr.strip().splitlines()), done.stderr
    assert "" == done.stdout


def test_help_describes_every_flag_with_its_default() -> None:
    done = subprocess.run(
        [sys.executable, *TRAIN, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    text = " ".join(done.stdout.split())

    assert 0 == done.returncode
    for shown in (
        "--batch-size VALUE groups trained on per step: the admission target (default: 8)",
        "--lr VALUE AdamW learning rate (default: 1e-06)",
        "--baseline VALUE also train plain GRPO",
        "--plot, --no-plot write curves.png (default: True)",
        "--admission.preset NAME the named configuration to start from: recommended, zero_std or null",
        "--admission.budget.max_resample_rounds VALUE SamplingBudgetConfig.max_resample_rounds",
    ):
        assert shown in text, shown
    assert "--admission.history.group_size" not in text  # the history's group size is num_generations


def test_config_round_trips_through_its_dict() -> None:
    config = parse_config(["--config", str(DEMO_CONFIG)])

    assert config == TrainConfig(**config.to_dict())


def test_the_gpu_recipe_s_flags_are_settings_of_this_script() -> None:
    """cookbook/grpo_gsm8k/run.sh: the recommended preset, gated on accuracy, with resampling on top."""
    import shlex

    text = (ROOT / "cookbook" / "grpo_gsm8k" / "run.sh").read_text()
    command = text[text.index("python -m cookbook.grpo_gsm8k.train") :].replace("\\\n", " ")
    argv = [arg for arg in shlex.split(command, comments=True)[3:] if arg != "$@"]
    built = parse_config(argv).session_config()

    assert SessionConfig.preset("recommended").history == built.history
    assert ("accuracy",) == built.policy.gate_on
    assert (16, 2, "confidence") == (
        built.budget.max_extra_groups,
        built.budget.max_resample_rounds,
        built.budget.mode,
    )
