"""``group-admission simulate-pool``: prompt-pool strategies from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from group_admission import GroupAdmissionConfig, PromptHistoryConfig, SessionConfig
from group_admission._cli import _build_parser, main
from group_admission.simulation import PromptPoolConfig, simulate_pool

TINY = ["simulate-pool", "--size", "48", "--target-groups", "4", "--group-size", "4", "--steps", "6"]


def command(*argv: str, setup: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command line as a process, as the console script runs it (after ``setup``)."""
    code = f"import sys\nimport group_admission._cli as cli\n{setup}\nsys.exit(cli.main(sys.argv[1:]))"
    argv_ = [sys.executable, "-c", code, *argv]
    return subprocess.run(argv_, capture_output=True, text=True, check=False, timeout=120, cwd=cwd)


def pool_flags() -> set[str]:
    commands = next(a for a in _build_parser()._actions if a.dest == "command")
    parser = commands.choices["simulate-pool"]  # type: ignore[index]
    return {flag for action in parser._actions for flag in action.option_strings}


def run_json(capsys: pytest.CaptureFixture[str], tmp_path: Path, *argv: str) -> Any:
    path = tmp_path / "pool.json"
    code = main([*TINY, *argv, "--json", str(path)])
    out = capsys.readouterr().out
    assert 0 == code
    assert f"wrote {path}" in out
    return json.loads(path.read_text())


def test_a_tiny_run_prints_its_settings_and_the_table_of_every_default_strategy() -> None:
    done = command(*TINY, "--half-life", "50")

    assert (0, "") == (done.returncode, done.stderr)
    settings, table = done.stdout.split("\n\n", 1)
    assert settings.splitlines() == [
        "pool: size=48 group_size=4 target_groups=4 steps=6 seed=0 logit_mean=-1 logit_std=4 "
        "learnable_share=0.5 learning_rate=2 safety_max_rounds=100",
        "  lengths: mean_tokens=512 cv=0.5 max_tokens=none",
        "  policy: min_reward_std=1e-06",
        "  budget: none given; a strategy allows 6 x target extra groups in 8 resample rounds, "
        "confidence mode at 0.9",
        "  history: half_life=50",
    ]
    lines = table.splitlines()
    assert lines[0].split() == [
        "strategy", "final", "groups/inf", "groups", "tokens", "skipped", "wrong", "skip", "re-checks",
        "informative", "est.", "wrong", "safety", "hits", "epochs",
    ]  # fmt: skip
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert list(rows) == ["controller", "greso", "history", "oracle_skip"]
    assert ["-", "-", "-"] == rows["controller"][7:10] == rows["oracle_skip"][7:10]  # no history
    assert "-" not in rows["history"][7:10]


def test_help_shows_every_default() -> None:
    done = command("simulate-pool", "--help")
    text = " ".join(done.stdout.split())

    assert 0 == done.returncode
    for shown in (
        "(default: 512)",
        "(default: 300)",
        "(default: 0,1)",
        "'none' unsets it (default: none)",
    ):
        assert shown in text, shown
    assert (
        "without any policy setting, the 'zero_std' preset's policy, the zero-std filter min_reward_std=1e-06"
    ) in text


def test_the_table_and_json_are_simulate_pools_own(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = run_json(capsys, tmp_path, "--strategies", "controller,greso")
    expected = simulate_pool(
        PromptPoolConfig(size=48, target_groups=4, group_size=4, steps=6),
        strategies=["controller", {"kind": "history", "history": {"mode": "greso"}}],
    )
    assert expected.to_dict() == data


def test_the_history_section_reaches_the_history_strategies_only(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = run_json(capsys, tmp_path, "--skip-below", "0.3", "--prior", "1,3", "--history-seed", "5")
    specs = {spec["name"]: spec for spec in data["strategies"]}

    assert specs["history"]["history"] == {"skip_below": 0.3, "prior": [1.0, 3.0], "seed": 5}
    assert specs["greso"]["history"] == {"skip_below": 0.3, "prior": [1.0, 3.0], "seed": 5, "mode": "greso"}
    assert specs["oracle_skip"]["skip_below"] == 0.1
    assert "history" not in specs["controller"]


def test_a_preset_gives_the_sections_it_sets_and_the_file_and_flags_win(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    preset = SessionConfig.PRESETS["recommended"]
    data = run_json(capsys, tmp_path, "--preset", "recommended")
    specs = {spec["name"]: spec for spec in data["strategies"]}

    assert specs["history"]["history"] == preset["history"]
    assert specs["greso"]["history"] == {**preset["history"], "mode": "greso"}
    assert data["policy"] == GroupAdmissionConfig.from_mapping(preset["policy"]).to_dict()
    assert "budget" not in preset
    assert specs["controller"]["budget"] is None  # the preset sets none: the strategy's own default

    config = tmp_path / "pool.yaml"
    config.write_text("history: {skip_below: 0.3}\npolicy: {min_reward_range: 0.5}\n")
    data = run_json(
        capsys, tmp_path, "--preset", "recommended", "--config", str(config), "--exploration", "0.2"
    )
    mine = {spec["name"]: spec for spec in data["strategies"]}["history"]["history"]

    assert mine == {**preset["history"], "skip_below": 0.3, "exploration": 0.2}
    assert data["policy"]["min_reward_range"] == 0.5
    assert (
        data["policy"]["min_reward_std"] == GroupAdmissionConfig.from_mapping(preset["policy"]).min_reward_std
    )


def test_the_preset_help_is_read_off_the_presets() -> None:
    done = command("simulate-pool", "--help")
    text = " ".join(done.stdout.split())

    for name, preset in SessionConfig.PRESETS.items():
        sections = ", ".join(key for key in ("pool", "policy", "budget", "history") if key in preset)
        assert f"{name} ({sections})" in text


def test_a_config_file_and_flags_win(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "pool.yaml"
    config.write_text(
        "pool: {steps: 99, logit_std: 2.0}\n"
        "budget: {max_extra_groups: 12, max_resample_rounds: 3}\n"
        "history: {half_life: 50}\n"
        "strategies:\n"
        "  - controller\n"
        "  - {kind: history, name: mine, history: {skip_below: 0.5}, budget: {max_extra_groups: 4}}\n"
    )
    data = run_json(capsys, tmp_path, "--config", str(config))

    assert data["config"]["steps"] == 6
    assert data["config"]["logit_std"] == 2.0
    controller, mine = data["strategies"]
    assert controller["budget"]["max_extra_groups"] == 12
    assert mine["budget"]["max_extra_groups"] == 4  # its own budget wins over the section
    assert mine["history"] == {"half_life": 50, "skip_below": 0.5}
    assert [r["name"] for r in data["results"]] == ["controller", "mine"]


@pytest.mark.parametrize(
    ("cls", "skip", "renamed"),
    [
        (PromptPoolConfig, ("lengths",), {}),
        (PromptHistoryConfig, ("group_size",), {"mode": "--history-mode", "seed": "--history-seed"}),
    ],
    ids=["pool", "history"],
)
def test_every_field_has_a_flag(cls: type, skip: tuple[str, ...], renamed: dict[str, str]) -> None:
    wanted = {
        renamed.get(f.name, "--" + f.name.replace("_", "-")) for f in attrs.fields(cls) if f.name not in skip
    }
    assert wanted <= pool_flags()
    shared = {"--mean-tokens", "--tokens-cv", "--min-reward-std", "--max-extra-groups", "--json"}
    assert shared <= pool_flags()


#: (argv after TINY, config file text or None, the message); every row exits 2 with one line.
BAD_POOL_RUNS = [
    (["--skip-below", "2"], None, "'skip_below' must be in [0, 1] (got 2.0)"),
    (["--prior", "1,x"], None, "argument --prior: invalid numbers value: '1,x'"),
    (["--prior", "1,2,3"], None, "'prior' must be a pair of numbers"),
    (["--strategies", "history,frob"], None, "a pool strategy's kind must be one of"),
    (["--strategies", "history,history"], None, "each with a unique name"),
    (["--history-mode", "greedy"], None, "argument --history-mode: invalid choice: 'greedy'"),
    (["--size", "0"], None, "'size' must be >= 1 (got 0)"),
    (["--mean-tokens", "1e30"], None, "'mean_tokens' must be <= 10000000 tokens"),
    # No upper bounds: a huge target hung, a huge pool or group printed a traceback.
    (["--target-groups", str(10**30)], None, "'target_groups' x 'group_size' must be <= 1000000 samples"),
    (["--size", str(10**30)], None, "'size' x 'group_size' must be <= 10000000 samples"),
    (["--group-size", str(10**30)], None, "'target_groups' x 'group_size' must be <= 1000000 samples"),
    (["--steps", str(10**30)], None, "'steps' must be <= 100000 steps"),
    (["--safety-max-rounds", str(10**30)], None, "'safety_max_rounds' must be <= 10000 rounds"),
    (["--max-extra-groups", str(10**30)], None, "the budget of strategy 'controller' lets a simulated step"),
    ([], "strategies: [{kind: oracle_skip, skip_below: 2}]\n", "'skip_below' must be in [0, 1] (got 2.0)"),
    # Tracebacks (exit 1) from the first step: the pool has neither texts nor components.
    (["--max-mean-pairwise-similarity", "0.5"], None, "'max_mean_pairwise_similarity' must be None"),
    (["--gate-on", "outcome"], None, "'gate_on' must be None for simulate_pool"),
    ([], "simulation: {steps: 1}\n", "unknown section(s) ['simulation']"),
    ([], "history: {group_size: 8}\n", "must not set 'group_size'"),
    # Without a history strategy the section was built as it was: attrs' own TypeErrors.
    (["--strategies", "controller"], "history: {group_size: 4}\n", "'history' must not set 'group_size'"),
    (["--strategies", "controller"], "history: {bogus: 1}\n", "unknown key(s) 'bogus' in 'history'"),
    (
        [],
        "strategies: [{kind: controller, bogus: 1}]\n",
        "unknown key(s) 'bogus' in pool strategy 'controller'",
    ),
    ([], "strategies: history\n", "'strategies' must be a list"),
    ([], "strategies: [{kind: controller, budget: 3}]\n", "'budget' must be a"),
    # A traceback: the strategy's name was built from the history before it was checked.
    ([], "strategies: [{kind: history, history: 5}]\n", "'history' must be a mapping of PromptHistoryConfig"),
    ([], "strategies: [{kind: greso, history: [1]}]\n", "'history' must be a mapping of PromptHistoryConfig"),
]


@pytest.mark.parametrize(("argv", "config", "message"), BAD_POOL_RUNS)
def test_bad_settings_exit_2_with_one_line(
    tmp_path: Path, argv: list[str], config: str | None, message: str
) -> None:
    if config is not None:
        (tmp_path / "bad.yaml").write_text(config)
        argv = [*argv, "--config", str(tmp_path / "bad.yaml")]
    done = command(*TINY, *argv, cwd=tmp_path)

    assert (2, "") == (done.returncode, done.stdout)
    assert message in done.stderr
    assert 1 == len(done.stderr.strip().splitlines())
    assert done.stderr.startswith("group-admission simulate-pool: error: ")


def test_an_all_dead_pool_runs_to_the_end() -> None:
    """Plain simulate-pool on a pool no prompt of which is informative hung in oracle_skip."""
    done = command(*TINY, "--logit-mean", "-30", "--logit-std", "0")

    assert (0, "") == (done.returncode, done.stderr)
    oracle = next(line.split() for line in done.stdout.splitlines() if line.startswith("oracle_skip"))
    assert ["oracle_skip", "0.000", "-", "0", "0"] == oracle[:5]


def test_a_bug_while_simulating_shows_its_traceback() -> None:
    setup = "import group_admission._cli_pool as pool\ndef bug(*a, **k):\n    raise ValueError('a bug')\n"
    done = command(*TINY, setup=setup + "pool.run_pool = bug")

    assert 1 == done.returncode
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.strip().endswith("ValueError: a bug")
