"""
The ``group-admission`` command: ``simulate``, ``simulate-pool`` and ``explain`` a config.

A mistake in the user's settings (a config file that cannot be read, bad YAML, an unknown
key, a value out of range, an output path that cannot be written) ends the command with
exit status 2 and one line on stderr that names the problem. Anything else is a bug: it
shows its traceback (exit status 1).

The settings flags are generated from the fields of the config classes, so a new field
gets its flag, its type and its help text without touching this module.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from typing import Any

from . import simulation
from ._budget import SamplingBudgetConfig
from ._cli_flags import (
    PROG,
    Parser,
    Section,
    add_settings_command,
    apply_flags,
    cannot_access,
    default_budget_text,
    one_line,
    output_file,
    policy_title,
    read_config,
    run_settings,
    strategy_list,
    user_input,
    write_json,
)
from ._cli_pool import COMMAND as POOL_COMMAND
from ._cli_pool import add_pool_command, run_pool_command
from ._config import GroupAdmissionConfig
from ._exceptions import ConfigurationError
from ._explain import explain_budget, explain_policy
from ._loading import require_extra
from .simulation._models import TASK_MODELS
from .simulation._simulate import PreparedSimulation, prepare_simulation, run_simulation

__all__ = ["main"]

#: What the controller strategies allow without a budget section.
DEFAULT_BUDGET = default_budget_text("a controller", simulation.ControllerResampling().effective_budget)
#: The top-level keys a config file may hold.
SECTIONS = ("policy", "budget", "simulation", "strategies")


_FLAG_SECTIONS = (
    Section(
        ("simulation",),
        (simulation.SimulationConfig,),
        "simulation (the 'simulation' section)",
        skip=("tasks", "lengths", "engine"),
    ),
    Section(
        ("simulation", "tasks"),
        (simulation.BinaryTaskModel, simulation.CompositeTaskModel),
        "tasks ('simulation.tasks')",
        kind_flag="--tasks",
        kinds=tuple(sorted(TASK_MODELS)),
        kind_default="binary",
    ),
    Section(
        ("simulation", "lengths"),
        (simulation.ResponseLengthModel,),
        "response lengths ('simulation.lengths')",
        rename={"cv": "tokens-cv"},
    ),
    Section(("simulation", "engine"), (simulation.EngineModel,), "rollout engine ('simulation.engine')"),
    Section(("policy",), (GroupAdmissionConfig,), policy_title(simulation.DEFAULT_POLICY)),
    Section(
        ("budget",),
        (SamplingBudgetConfig,),
        "budget of the controller strategies (the 'budget' section; without any budget "
        f"setting, {DEFAULT_BUDGET})",
    ),
)


def _build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description=(
            "Decide which GRPO prompt groups carry training signal, and plan bounded resampling. "
            "Use 'simulate' to compare admission strategies before spending GPU hours, and "
            "'explain' to check a policy/budget config and read what it will do."
        ),
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    command = commands.add_parser(
        "simulate",
        help="simulate admission strategies and print their cost and yield",
        description=(
            "Simulate resampling strategies side by side on the same steps and print, per strategy, "
            "the initial and final informative group rate, the recovery rate, the sampling cost "
            "multiplier, the budget exhaustion rate, rounds per step and what was generated. "
            "Settings come from --config (a YAML file with optional 'simulation', 'policy', "
            "'budget' and 'strategies' sections) and flags; flags win."
        ),
    )
    output = add_settings_command(
        command,
        _FLAG_SECTIONS,
        f"comma-separated kinds: {', '.join(simulation.STRATEGY_KINDS)} "
        "(default: the 'strategies' section, else one of each)",
    )
    output.add_argument("--csv", metavar="PATH", help="also write one CSV row per strategy")
    output.add_argument("--plot", metavar="PATH", help="also write a PNG plot (needs matplotlib)")
    add_pool_command(commands)
    explain = commands.add_parser(
        "explain",
        help="validate a policy/budget config and say what each gate and cap will do",
        description=(
            "Validate CONFIG.yaml (a 'policy' and/or 'budget' mapping; 'simulation' and "
            "'strategies' sections are checked too) and print, in plain words, what each "
            "admission gate and each budget cap will do."
        ),
    )
    explain.add_argument("config", metavar="CONFIG.yaml", help="the YAML file to explain")
    return parser


def _prepare(args: argparse.Namespace) -> tuple[PreparedSimulation, SamplingBudgetConfig | None]:
    """Every setting of ``simulate``, checked; a mistake raises ``ConfigurationError``."""
    if args.plot is not None:
        try:  # fail before simulating, not after
            require_extra("matplotlib", "plot", "--plot")
        except ImportError as exc:
            raise ConfigurationError(str(exc)) from exc
    with user_input(f"{PROG} {args.command}"):
        data, _ = read_config(args.config, SECTIONS, args.preset)
        apply_flags(data, args)
        strategies = strategy_list(data.get("strategies") if args.strategies is None else args.strategies)
        policy = GroupAdmissionConfig.from_mapping(data["policy"]) if data["policy"] else None
        budget = SamplingBudgetConfig.from_mapping(data["budget"]) if data["budget"] else None
        prepared = prepare_simulation(
            simulation.SimulationConfig.from_mapping(data["simulation"]),
            policy=policy,
            strategies=strategies,
            budget=budget,
        )
        return prepared, budget


def _simulate(args: argparse.Namespace) -> int:
    prepared, budget = _prepare(args)
    result = run_simulation(prepared)
    print(
        run_settings(
            ("simulation", prepared.config.to_dict()),
            result.policy,
            {"budget": (budget, f"none given; {DEFAULT_BUDGET}")},
        )
    )
    print(result.format_table())
    if args.csv is not None:
        rows = result.rows()
        with output_file(args.csv) as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {args.csv}")
    if args.json is not None:
        write_json(args.json, result.to_dict())
    if args.plot is not None:
        try:
            simulation.plot_result(result, args.plot)
        except OSError as exc:
            raise cannot_access(args.plot, exc) from exc
        print(f"wrote {args.plot}")
    return 0


def _simulation_lines(data: dict[str, Any], present: set[str]) -> list[str]:
    """The one-line summaries of the 'simulation' and 'strategies' sections, checked."""
    config = simulation.SimulationConfig.from_mapping(data["simulation"])
    lines = [
        f"Simulation: {config.steps} step(s) of target {config.target_groups} group(s) of "
        f"{config.group_size}, {config.tasks.kind} tasks (mean pass rate "
        f"{config.tasks.mean_pass_rate:.3f}), seed {config.seed}."
    ]
    strategies = strategy_list(data.get("strategies"))
    if "strategies" in present and strategies is not None:
        budget = SamplingBudgetConfig.from_mapping(data["budget"]) if data["budget"] else None
        built = [simulation.strategy_from_mapping(item, budget=budget) for item in strategies]
        for strategy in built:
            strategy.check(config)
        lines.append(f"Strategies: {', '.join(strategy.name for strategy in built)}.")
    return lines


def _explain(args: argparse.Namespace) -> int:
    with user_input(f"{PROG} {args.command}"):
        data, present = read_config(args.config, SECTIONS)
        if not {"policy", "budget"} & present:
            msg = f"'{args.config}' must hold a 'policy' and/or a 'budget' mapping"
            raise ConfigurationError(msg)
        policy = GroupAdmissionConfig.from_mapping(data["policy"]) if "policy" in present else None
        budget = SamplingBudgetConfig.from_mapping(data["budget"]) if "budget" in present else None
        tail = _simulation_lines(data, present) if {"simulation", "strategies"} & present else []
    lines = [
        *(explain_policy(policy) if policy is not None else []),
        *(explain_budget(budget) if budget is not None else []),
    ]
    print("\n".join([*lines, *tail]))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """
    Run the ``group-admission`` command line; return the exit status.

    Args:
        argv: The arguments (default: ``sys.argv[1:]``).

    Returns:
        0 on success, 2 on a mistake in the arguments or settings (reported on one line
        of stderr). A bug raises its exception, so its traceback shows.

    .. versionadded:: 0.1.0
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or an argparse error already printed
        return exc.code if isinstance(exc.code, int) else 2
    if args.version:
        from importlib.metadata import version  # noqa: PLC0415

        print(f"{PROG} {version('group-admission')}")
        return 0
    if args.command is None:
        parser.print_help()
        return 2
    try:
        commands = {"simulate": _simulate, POOL_COMMAND: run_pool_command, "explain": _explain}
        return commands[args.command](args)
    except ConfigurationError as exc:
        print(f"{PROG} {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
