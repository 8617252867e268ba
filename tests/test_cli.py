"""The ``group-admission`` command line, called in-process through ``main`` (and once as a script)."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest

import group_admission
from group_admission import ConfigurationError, GroupAdmissionConfig, SamplingBudgetConfig, SessionConfig
from group_admission._cli import _build_parser, main
from group_admission._loading import load_yaml_mapping
from group_admission.simulation import (
    BinaryTaskModel,
    CompositeTaskModel,
    ControllerResampling,
    EngineModel,
    HistorySkipping,
    PoolController,
    ResponseLengthModel,
    SimulationConfig,
)

SMALL = ["--steps", "3", "--target-groups", "6", "--group-size", "4"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


class TestHelp:
    @pytest.mark.parametrize(
        ("argv", "expected"),
        [
            (["--help"], ["simulate", "simulate-pool", "explain"]),
            (
                ["simulate", "--help"],
                ["--config", "--strategies", "--csv", "--json", "--plot", "--max-extra-groups"],
            ),
            (["explain", "--help"], ["CONFIG.yaml", "policy", "budget"]),
        ],
    )
    def test_every_command_has_help(
        self, capsys: pytest.CaptureFixture[str], argv: list[str], expected: list[str]
    ) -> None:
        code, out, _ = run(capsys, *argv)
        assert 0 == code
        for word in expected:
            assert word in out

    def test_no_command_prints_help_and_fails(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, _ = run(capsys)
        assert 2 == code
        assert "simulate" in out

    def test_version(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The installed version (pyproject's, tests/test_versions.py: 0.2.0.dev0 until 0.2.0 is released)."""
        code, out, _ = run(capsys, "--version")
        assert (0, f"group-admission {group_admission.__version__}") == (code, out.strip())


class TestSimulate:
    def test_prints_a_table_of_the_chosen_strategies(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, err = run(capsys, "simulate", *SMALL, "--strategies", "no_filtering, oracle,controller")
        assert (0, "") == (code, err)
        lines = out.split("\n\n", 1)[1].splitlines()
        assert lines[0].split()[:2] == ["strategy", "initial"]
        assert ["no_filtering", "oracle", "controller(expected)"] == [line.split()[0] for line in lines[2:]]

    def test_the_table_says_the_settings_it_ran_with_and_its_time_unit(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Issue 23: the default table printed neither its settings nor the unit of its time."""
        code, out, _ = run(capsys, "simulate", "--steps", "2", "--alpha", "0.5", "--strategies", "oracle")
        settings, table = out.split("\n\n", 1)

        assert 0 == code
        assert settings.splitlines() == [
            "simulation: group_size=8 target_groups=16 steps=2 seed=0 failure_rate=0 safety_max_rounds=100",
            "  tasks: kind=binary alpha=0.5 beta=1",
            "  lengths: mean_tokens=512 cv=0.5 max_tokens=none",
            "  engine: half_speed_sequences=none",
            "  policy: min_reward_std=1e-06",
            "  budget: none given; a controller allows 2 x target extra groups in 3 resample rounds",
        ]
        assert "time (decoding steps)" in table.splitlines()[0]

    def test_a_preset_lies_beneath_the_flags(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        preset = GroupAdmissionConfig.from_mapping(SessionConfig.PRESETS["recommended"]["policy"])
        path = tmp_path / "run.json"
        argv = ["--strategies", "oracle", "--min-reward-range", "0.02", "--json", str(path)]

        assert 0 == run(capsys, "simulate", *SMALL, "--preset", "recommended", *argv)[0]
        with_preset = json.loads(path.read_text())["policy"]
        assert 0 == run(capsys, "simulate", *SMALL, *argv)[0]
        without = json.loads(path.read_text())["policy"]

        assert with_preset == attrs.evolve(preset, min_reward_range=0.02).to_dict()
        assert without == GroupAdmissionConfig(min_reward_range=0.02).to_dict() != with_preset

    def test_the_settings_lines_name_what_was_set(self, capsys: pytest.CaptureFixture[str]) -> None:
        argv = ["--min-reward-range", "0.02", "--max-extra-groups", "8", "--max-resample-rounds", "2"]
        code, out, _ = run(capsys, "simulate", *SMALL, "--strategies", "oracle", *argv)

        assert 0 == code
        assert "  policy: min_reward_range=0.02" in out.splitlines()
        assert "  budget: max_extra_groups=8 max_resample_rounds=2" in out.splitlines()

    def test_help_shows_every_default(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Issue 23: --help showed no defaults."""
        code, out, _ = run(capsys, "simulate", "--help")
        text = " ".join(out.split())

        assert 0 == code
        for shown in (
            "--steps N Training steps to simulate, at most 100,000 (default: 100)",
            "--tasks {binary,composite} the kind (default: binary)",
            "(default: 512)",  # --mean-tokens
            "--max-tokens N Truncation length",
            "'none' unsets it (default: none)",
            (
                "without any policy setting, the 'zero_std' preset's policy, "
                "the zero-std filter min_reward_std=1e-06"
            ),
            "without any budget setting, a controller allows 2 x target extra groups",
        ):
            assert shown in text, shown

    def test_writes_csv_and_json(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        table, report = tmp_path / "out.csv", tmp_path / "out.json"
        code, out, _ = run(
            capsys,
            "simulate",
            *SMALL,
            "--strategies",
            "roll,oracle",
            "--csv",
            str(table),
            "--json",
            str(report),
        )
        assert 0 == code
        assert f"wrote {table}" in out
        with table.open() as handle:
            rows = list(csv.DictReader(handle))
        assert ["roll", "oracle"] == [row["name"] for row in rows]
        assert rows[0]["generated_groups"] == rows[1]["generated_groups"]
        data = json.loads(report.read_text())
        assert 3 == data["config"]["steps"]
        assert ["roll", "oracle"] == [r["name"] for r in data["results"]]

    def test_writes_a_plot(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        path = tmp_path / "out.png"
        code, _, _ = run(capsys, "simulate", *SMALL, "--strategies", "oracle", "--plot", str(path))
        assert 0 == code
        assert path.read_bytes().startswith(b"\x89PNG")

    def test_reads_a_config_file_and_flags_win(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        config = write(
            tmp_path,
            "simulation:\n"
            "  steps: 2\n  target_groups: 5\n  group_size: 3\n"
            "  tasks: {kind: composite, shaping_spread: 0.02}\n"
            "policy: {min_reward_std: 1.0e-6, min_reward_range: 0.02}\n"
            "budget: {max_extra_groups: 4, max_resample_rounds: 1}\n"
            "strategies:\n  - {kind: controller, mode: confidence}\n  - per_task_retry\n",
        )
        report = tmp_path / "out.json"
        code, _, _ = run(capsys, "simulate", "--config", config, "--steps", "4", "--json", str(report))
        assert 0 == code
        data = json.loads(report.read_text())
        assert (4, 5, "composite") == (
            data["config"]["steps"],
            data["config"]["target_groups"],
            data["config"]["tasks"]["kind"],
        )
        assert 0.02 == data["policy"]["min_reward_range"]
        assert 4 == data["strategies"][0]["budget"]["max_extra_groups"]
        assert ["controller(confidence)", "per_task_retry"] == [r["name"] for r in data["results"]]

    def test_new_fields_get_flags_and_none_unsets_an_optional_field(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        config = write(
            tmp_path, "simulation:\n  lengths: {max_tokens: 64}\nbudget: {max_total_samples: 90}\n"
        )
        report = tmp_path / "out.json"
        argv = ["--config", config, *SMALL, "--strategies", "controller", "--json", str(report)]
        argv += ["--mode", "confidence", "--max-tokens", "none", "--max-total-samples", "None"]
        argv += ["--tasks", "composite", "--shaping-task-share", "0.25", "--tokens-cv", "0"]
        code, _, err = run(capsys, "simulate", *argv)
        assert (0, "") == (code, err)
        data = json.loads(report.read_text())
        assert ("confidence", None) == (
            data["strategies"][0]["budget"]["mode"],
            data["strategies"][0]["budget"]["max_total_samples"],
        )
        assert {"mean_tokens": 512.0, "cv": 0.0, "max_tokens": None} == data["config"]["lengths"]
        assert 0.25 == data["config"]["tasks"]["shaping_task_share"]

    def test_policy_and_budget_flags(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        report = tmp_path / "out.json"
        argv = [*SMALL, "--tasks", "composite", "--gate-on", "outcome", "--min-reward-range", "0.5"]
        argv += ["--max-extra-groups", "3", "--max-resample-rounds", "1", "--strategies", "controller"]
        code, _, _ = run(capsys, "simulate", *argv, "--json", str(report))
        assert 0 == code
        data = json.loads(report.read_text())
        assert (["outcome"], 0.5) == (data["policy"]["gate_on"], data["policy"]["min_reward_range"])
        assert 3 == data["strategies"][0]["budget"]["max_extra_groups"]
        assert data["results"][0]["generated_groups"] <= 3 * (6 + 3)


class TestFlags:
    SECTIONS: ClassVar[list[tuple[type, tuple[str, ...]]]] = [
        (SimulationConfig, ("tasks", "lengths", "engine")),
        (EngineModel, ()),
        (BinaryTaskModel, ()),
        (CompositeTaskModel, ()),
        (ResponseLengthModel, ("cv",)),
        (GroupAdmissionConfig, ()),
        (SamplingBudgetConfig, ()),
    ]

    @staticmethod
    def simulate_flags(command: str = "simulate") -> set[str]:
        commands = next(a for a in _build_parser()._actions if a.dest == "command")
        parser = commands.choices[command]  # type: ignore[index]
        return {flag for action in parser._actions for flag in action.option_strings}

    @pytest.mark.parametrize(("cls", "renamed"), SECTIONS, ids=[c.__name__ for c, _ in SECTIONS])
    def test_every_config_field_has_a_flag(self, cls: type, renamed: tuple[str, ...]) -> None:
        wanted = {"--" + f.name.replace("_", "-") for f in attrs.fields(cls) if f.name not in renamed}
        assert wanted <= self.simulate_flags()

    def test_every_documented_flag_still_parses(self) -> None:
        text = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
        documented = set(re.findall(r"(--[a-z][a-z-]+)", text)) - {"--help", "--version"}
        assert {"--tokens-cv", "--gate-on", "--tasks", "--strategies", "--plot"} <= documented
        assert documented <= self.simulate_flags() | self.simulate_flags("simulate-pool")


class TestExplain:
    def test_explains_every_gate_and_cap(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        config = write(
            tmp_path,
            "policy:\n  min_reward_std: 1.0e-6\n  min_reward_range: 0.02\n  min_nontrivial_advantages: 2\n"
            "  gate_on: [accuracy]\n"
            "budget:\n  max_extra_groups: 8\n  max_resample_rounds: 2\n  max_total_tokens: 90000\n"
            "  mode: confidence\n",
        )
        code, out, err = run(capsys, "explain", config)
        assert (0, "") == (code, err)
        for phrase in (
            "reward component(s) accuracy",
            "population std is below 1e-06",
            "max - min is below 0.02",
            "fewer than 2 member(s)",
            "redundancy gate: off",
            "exact_dead",
            "at most 8 group(s) beyond the target",
            "at most 2 resample round(s)",
            "no per-round group cap",
            "at most 90000 tokens per step",
            "confidence mode",
            "exhausted",
        ):
            assert phrase in out

    def test_default_policy_and_disabled_budget(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        code, out, _ = run(capsys, "explain", write(tmp_path, "policy:\nbudget: {}\n"))
        assert 0 == code
        assert "No reward gate is on" in out
        assert "resampling is disabled" in out
        assert "expected mode" in out

    def test_checks_simulation_and_strategies_sections(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        config = write(
            tmp_path,
            "budget: {max_extra_groups: 2}\nsimulation: {steps: 5}\nstrategies: [roll, {kind: ragen}]\n",
        )
        code, out, _ = run(capsys, "explain", config)
        assert 0 == code
        assert "Simulation: 5 step(s)" in out
        assert "Strategies: roll, ragen(top_p=0.9)." in out


BAD_RUNS = [
    (["simulate", "--steps", "0"], "'steps' must be >= 1 (got 0)"),
    (["simulate", "--steps", "many"], "argument --steps: invalid int value: 'many'"),
    (["simulate", "--min-reward-std", "-1"], "'min_reward_std' must be >= 0 (got -1.0)"),
    (["simulate", "--strategies", "slim"], "strategy 'kind' must be one of"),
    (["simulate", "--tasks", "gauss"], "argument --tasks: invalid choice: 'gauss'"),
    (["simulate", "--tasks", "binary", "--shaping-spread", "0.1"], "unknown key(s) 'shaping_spread'"),
    (["simulate", "--gate-on", "accuracy"], "'gate_on' names reward component(s) ['accuracy']"),
    (["simulate", "--config", "missing.yaml"], "cannot access 'missing.yaml': No such file or directory"),
    (["explain", "missing.yaml"], "cannot access 'missing.yaml'"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_RUNS)
def test_bad_arguments_fail_with_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *argv)
    assert 2 == code
    assert message in err
    assert 1 == len(err.strip().splitlines())
    assert "Traceback" not in err


BAD_FILES = [
    ("policy: [1, 2\n", "is not valid YAML"),
    ("- policy\n", "must hold a YAML mapping"),
    ("polcy: {}\n", "unknown section(s) ['polcy']"),
    ("policy: 3\n", "'policy' in"),
    ("policy: {min_reward_range: -0.5}\n", "'min_reward_range' must be >= 0 (got -0.5)"),
    ("policy: {min_reward_rang: 0.5}\n", "unknown key(s) 'min_reward_rang'"),
    ("budget: {mode: greedy}\n", "'mode' must be one of 'expected', 'confidence' (got 'greedy')"),
    ("budget: {max_extra_groups: 1.5}\n", "'max_extra_groups' must be an integer (got 1.5)"),
    ("simulation: {steps: 1}\n", "must hold a 'policy' and/or a 'budget' mapping"),
    ("policy: {}\nstrategies: roll\n", "'strategies' must be a list"),
    ("policy: {}\nsimulation: {tasks: 3}\n", "'tasks' must be a task model or a mapping (got 3)"),
]


@pytest.mark.parametrize(("text", "message"), BAD_FILES)
def test_bad_config_files_fail_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    code, _, err = run(capsys, "explain", write(tmp_path, text))
    assert 2 == code
    assert message in err
    assert err.startswith("group-admission explain: error: ")
    assert 1 == len(err.strip().splitlines())


@pytest.mark.parametrize("value", ["3", "false", "[]", "''"])
def test_a_section_is_read_by_the_librarys_rule(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, value: str
) -> None:
    """The CLI refuses a section that is no mapping as ``load_yaml_mapping(key=...)`` does, word for word."""
    path = write(tmp_path, f"policy: {value}\n")
    with pytest.raises(ConfigurationError) as refused:
        load_yaml_mapping(path, key="policy")

    code, _, err = run(capsys, "explain", path)

    assert (2, f"group-admission explain: error: {refused.value}") == (code, err.strip())


def test_simulate_reports_bad_config_files_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = write(
        tmp_path, "simulation: {steps: 1}\nstrategies: [{kind: slime, over_sampling_batch_size: 2}]\n"
    )
    code, _, err = run(capsys, "simulate", "--config", config, "--target-groups", "4")
    assert 2 == code
    assert "'over_sampling_batch_size' must be >= target_groups (4), as slime asserts (got 2)" in err


def test_plot_without_matplotlib_fails_before_simulating(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, out, err = run(capsys, "simulate", *SMALL, "--plot", str(tmp_path / "x.png"))
    assert (2, "") == (code, out)
    assert (
        "--plot requires the 'matplotlib' package; install it with: pip install 'group-admission[plot]'"
        in err
    )


def test_unwritable_output_fails_with_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "out.csv"
    code, _, err = run(capsys, "simulate", *SMALL, "--strategies", "oracle", "--csv", str(target))
    assert 2 == code
    assert f"cannot access '{target}': No such file or directory" in err


def test_console_script_runs(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("group-admission")
    config = write(tmp_path, "policy: {min_reward_std: 1.0e-6}\n")
    done = subprocess.run([str(script), "explain", config], capture_output=True, text=True, check=False)
    assert 0 == done.returncode, done.stderr
    assert "std gate: rejects a group" in done.stdout
    bad = subprocess.run(
        [str(script), "explain", str(tmp_path / "nope.yaml")], capture_output=True, text=True, check=False
    )
    assert 2 == bad.returncode
    assert bad.stderr.startswith("group-admission explain: error: cannot access")


def command(*argv: str, setup: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command line as a process, as the console script runs it (after ``setup``)."""
    code = f"import sys\nimport group_admission._cli as cli\n{setup}\nsys.exit(cli.main(sys.argv[1:]))"
    argv_ = [sys.executable, "-c", code, *argv]
    return subprocess.run(argv_, capture_output=True, text=True, check=False, timeout=120, cwd=cwd)


SIM = [
    "simulate",
    "--steps",
    "2",
    "--target-groups",
    "4",
    "--group-size",
    "4",
    "--strategies",
    "controller,slime",
]
#: (argv, config file text or None, the message); every row exits 2 with one line, no traceback.
BAD_COMMANDS = [
    # A response longer than any model writes overflowed numpy's int64 (a traceback, exit 1).
    ([*SIM, "--max-tokens", str(10**400)], None, "'max_tokens' must be <= 10000000 tokens"),
    # Tiny spreads divided by zero (1 / cv^2); absurd means overflowed or ran with 1-token responses.
    ([*SIM, "--tokens-cv", "1e-300"], None, "'cv' must be 0 or in [1e-06, 10] (got 1e-300)"),
    ([*SIM, "--tokens-cv", "1e-160"], None, "'cv' must be 0 or in [1e-06, 10] (got 1e-160)"),
    ([*SIM, "--mean-tokens", "1e300"], None, "'mean_tokens' must be <= 10000000 tokens"),
    ([*SIM, "--mean-tokens", "1e30"], None, "'mean_tokens' must be <= 10000000 tokens"),
    ([*SIM, "--mean-tokens", "1e-30"], None, "'mean_tokens' must be >= 1 (got 1e-30)"),
    ([*SIM, "--mean-tokens", "nan"], None, "'mean_tokens' must be finite (got nan)"),
    # No upper bounds: a huge group printed a traceback, a huge target or run hung.
    ([*SIM, "--group-size", str(10**30)], None, "'target_groups' x 'group_size' must be <= 1000000 samples"),
    ([*SIM, "--target-groups", str(10**30)], None, "'target_groups' x 'group_size' must be <= 1000000"),
    ([*SIM, "--steps", str(10**30)], None, "'steps' must be <= 100000 steps, the most a simulation runs"),
    ([*SIM, "--safety-max-rounds", str(10**30)], None, "'safety_max_rounds' must be <= 10000 rounds"),
    ([*SIM, "--max-extra-groups", str(10**30)], None, "lower 'max_extra_groups' or set 'max_total_samples'"),
    # Exit 0 with nonsense figures: dividing by the grid step overflowed every shaping term.
    (
        [*SIM, "--tasks", "composite", "--shaping-resolution", "1e-320"],
        None,
        "'shaping_resolution' must be in",
    ),
    # A strategy's budget that is not a mapping crashed while naming the strategy.
    (["simulate", "--steps", "1"], "strategies: [{kind: controller, budget: 3}]\n", "'budget' must be a"),
    (["simulate", "--steps", "1"], "strategies: [{kind: controller, budget: [1]}]\n", "'budget' must be a"),
    (["simulate", "--steps", "1"], "strategies: [{kind: per_task_retry, budget: x}]\n", "'budget' must be a"),
    (["simulate", "--steps", "1"], "strategies: [{kind: per_task_retry, budget: null}]\n", "(got None)"),
    (
        ["simulate", "--alpha", "2"],
        "simulation: {tasks: 3}\n",
        "'simulation.tasks' must be a mapping (got 3)",
    ),
    (["simulate", "--steps", "0"], None, "'steps' must be >= 1 (got 0)"),
    # The default name formatted the value first: the message was about a format code.
    (
        ["simulate", "--steps", "1"],
        "strategies: [{kind: streaming, confidence: '0.9'}]\n",
        "'confidence' must be a real number (got '0.9')",
    ),
    (["simulate", "--mode", "greedy"], None, "argument --mode: invalid choice: 'greedy'"),
    (["simulate", "--max-tokens", "1.5"], None, "argument --max-tokens: invalid int value: '1.5'"),
    (["simulate", "--config", "."], None, "cannot access '.': Is a directory"),
    (["explain", "missing.yaml"], None, "cannot access 'missing.yaml': No such file or directory"),
    (["explain"], "policy: {min_reward_std: -1}\n", "'min_reward_std' must be >= 0 (got -1.0)"),
]


@pytest.mark.parametrize(("argv", "config", "message"), BAD_COMMANDS)
def test_bad_commands_exit_2_with_one_line(
    tmp_path: Path, argv: list[str], config: str | None, message: str
) -> None:
    if config is not None:
        argv = [*argv, "--config" if argv[0] == "simulate" else "", write(tmp_path, config)]
        argv = [arg for arg in argv if arg]
    done = command(*argv, cwd=tmp_path)
    assert (2, "") == (done.returncode, done.stdout)
    assert message in done.stderr
    assert 1 == len(done.stderr.strip().splitlines())
    assert done.stderr.startswith(f"group-admission {argv[0]}: error: ")


def test_a_bug_shows_its_traceback_and_exits_1() -> None:
    # A ValueError raised while simulating is a bug, not a mistake in the settings.
    done = command(*SIM, setup="def bug(prepared):\n    raise ValueError('a bug')\ncli.run_simulation = bug")
    assert 1 == done.returncode
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.strip().endswith("ValueError: a bug")


def test_a_bug_is_not_reported_as_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import group_admission._cli as cli

    def bug(prepared: object) -> None:
        raise TypeError("a bug")

    monkeypatch.setattr(cli, "run_simulation", bug)
    with pytest.raises(TypeError, match="a bug"):
        main(SIM)


@pytest.mark.parametrize(
    "strategy",
    [ControllerResampling(), PoolController(), HistorySkipping()],
    ids=["controller", "pool controller", "history"],
)
def test_the_default_budgets_scale_with_the_target(strategy: Any) -> None:
    """The help and settings lines read the caps off a target of one group as 'N x target'."""
    one = strategy.effective_budget(1)
    for target in (2, 7, 64):
        budget = strategy.effective_budget(target)
        assert attrs.evolve(one, max_extra_groups=target * one.max_extra_groups) == budget, target


def test_the_default_texts_are_read_off_the_code() -> None:
    """The help texts said what the code did in words of their own, free to drift from it."""
    from group_admission._cli import DEFAULT_BUDGET
    from group_admission._cli_flags import policy_title
    from group_admission._cli_pool import DEFAULT_BUDGET as POOL_BUDGET
    from group_admission.simulation._simulate import DEFAULT_POLICY

    controller = ControllerResampling().effective_budget(1)
    pool = PoolController().effective_budget(1)
    assert DEFAULT_BUDGET.startswith(
        f"a controller allows {controller.max_extra_groups} x target extra groups in "
        f"{controller.max_resample_rounds} resample rounds"
    )
    assert POOL_BUDGET.endswith(f"confidence mode at {pool.confidence:g}")
    assert f"min_reward_std={DEFAULT_POLICY.min_reward_std:g}" in policy_title(DEFAULT_POLICY)
