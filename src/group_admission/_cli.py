"""
The ``group-admission`` command: ``simulate`` strategies and ``explain`` a config.

A mistake in the user's settings (a config file that cannot be read, bad YAML, an unknown
key, a value out of range, an output path that cannot be written) ends the command with
exit status 2 and one line on stderr that names the problem. Anything else is a bug: it
shows its traceback (exit status 1).

The settings flags are generated from the fields of the config classes, so a new field
gets its flag, its type and its help text without touching this module.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import inspect
import json
import os
import re
import sys
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import NoneType, UnionType
from typing import Any, NoReturn, TextIO

import attrs

from . import simulation
from ._budget import SamplingBudgetConfig
from ._config import GroupAdmissionConfig
from ._exceptions import ConfigurationError
from ._explain import explain_budget, explain_policy
from ._loading import load_yaml_mapping, require_extra
from ._validation import describe
from .simulation._models import TASK_MODELS
from .simulation._simulate import PreparedSimulation, prepare_simulation, run_simulation

__all__ = ["main"]

PROG = "group-admission"
#: The top-level keys a config file may hold.
SECTIONS = ("policy", "budget", "simulation", "strategies")


@attrs.frozen
class _Section:
    """One section of the settings, and the config classes whose fields are its flags."""

    path: tuple[str, ...]
    classes: tuple[type, ...]
    title: str
    skip: tuple[str, ...] = ()
    #: Flag names for fields whose name alone would be ambiguous on the command line.
    rename: Mapping[str, str] = attrs.field(factory=dict)


_FLAG_SECTIONS = (
    _Section(
        ("simulation",),
        (simulation.SimulationConfig,),
        "simulation (the 'simulation' section)",
        skip=("tasks", "lengths"),
    ),
    _Section(
        ("simulation", "tasks"),
        (simulation.BinaryTaskModel, simulation.CompositeTaskModel),
        "tasks ('simulation.tasks')",
    ),
    _Section(
        ("simulation", "lengths"),
        (simulation.ResponseLengthModel,),
        "response lengths ('simulation.lengths')",
        rename={"cv": "tokens-cv"},
    ),
    _Section(("policy",), (GroupAdmissionConfig,), "policy (the 'policy' section)"),
    _Section(
        ("budget",), (SamplingBudgetConfig,), "budget of the controller strategies (the 'budget' section)"
    ),
)


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _field_help(cls: type) -> dict[str, str]:
    """The first sentence of each field's entry under ``Args:`` in the class docstring."""
    helps: dict[str, str] = {}
    name, in_args = "", False
    for line in (inspect.getdoc(cls) or "").splitlines():
        if line.strip() == "Args:":
            in_args = True
        elif in_args and line and not line.startswith(" "):
            break
        elif in_args and (entry := re.match(r"^    (\w+): (.*)$", line)):
            name, helps[entry[1]] = entry[1], entry[2]
        elif in_args and name and line.startswith("        "):
            helps[name] += " " + line.strip()
    plain = {key: re.sub(r":\w+:`~?([^`]*)`|``|\*\*", r"\1", text) for key, text in helps.items()}
    return {key: re.split(r"(?<=\.)\s", text, maxsplit=1)[0] for key, text in plain.items()}


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


@attrs.frozen
class _FlagKind:
    """How a flag reads a field: its parser, choices, metavar and a note for the help."""

    parse: Callable[[str], Any]
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    note: str = ""


def _optional(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse_optional(text: str) -> Any:
        return None if text.strip().lower() in ("none", "null") else parse(text)

    parse_optional.__name__ = getattr(parse, "__name__", "value")  # argparse names it in errors
    return parse_optional


def _flag_kind(hint: Any) -> _FlagKind:
    """How a flag reads a field of type ``hint``."""
    # Only the field types the config classes use; a new kind of field fails loudly here.
    arguments = typing.get_args(hint)
    union = typing.get_origin(hint) is typing.Union or isinstance(hint, UnionType)
    optional = union and NoneType in arguments
    base = next(arg for arg in arguments if arg is not NoneType) if optional else hint
    if typing.get_origin(base) is typing.Literal:
        kind = _FlagKind(str, choices=tuple(typing.get_args(base)))
    elif typing.get_origin(base) is tuple:
        kind = _FlagKind(_names, metavar="NAMES", note="; comma-separated")
    elif base in (int, float, str):
        # 10**400 parses; the config's own validator refuses what is out of range.
        kind = _FlagKind(base, metavar={int: "N", float: "X", str: "TEXT"}[base])
    else:
        msg = f"no command-line flag for a field of type {hint!r}"
        raise TypeError(msg)
    if optional:
        return attrs.evolve(kind, parse=_optional(kind.parse), note=kind.note + "; 'none' unsets it")
    return kind


def _add_section_flags(parser: argparse.ArgumentParser, section: _Section, seen: set[str]) -> None:
    group = parser.add_argument_group(section.title)
    if section.path == ("simulation", "tasks"):
        kinds = tuple(sorted(TASK_MODELS))
        group.add_argument(
            "--tasks",
            dest="simulation.tasks.kind",
            choices=kinds,
            default=argparse.SUPPRESS,
            help="task model",
        )
    for cls in section.classes:
        hints = typing.get_type_hints(cls, globalns=cls.to_dict.__globals__)  # type: ignore[attr-defined]
        helps = _field_help(cls)
        for field in attrs.fields(cls):
            flag = "--" + section.rename.get(field.name, field.name.replace("_", "-"))
            if field.name in section.skip or flag in seen:
                continue
            seen.add(flag)
            kind = _flag_kind(hints[field.name])
            group.add_argument(
                flag,
                dest=".".join((*section.path, field.name)),
                type=kind.parse,
                choices=kind.choices,
                default=argparse.SUPPRESS,
                metavar=kind.metavar,
                help=helps.get(field.name, field.name).rstrip(".") + kind.note,
            )


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description=(
            "Decide which GRPO prompt groups carry training signal, and plan bounded resampling. "
            "Use 'simulate' to compare admission strategies before spending GPU hours, and "
            "'explain' to check a policy/budget config and read what it will do."
        ),
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
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
    command.add_argument("--config", metavar="PATH", help="YAML file with the settings")
    seen: set[str] = set()
    for section in _FLAG_SECTIONS:
        _add_section_flags(command, section, seen)
    output = command.add_argument_group("strategies and output")
    output.add_argument(
        "--strategies",
        type=_names,
        default=None,
        metavar="KINDS",
        help=f"comma-separated kinds: {', '.join(simulation.STRATEGY_KINDS)} "
        "(default: the 'strategies' section, else one of each)",
    )
    output.add_argument("--csv", metavar="PATH", help="also write one CSV row per strategy")
    output.add_argument("--json", metavar="PATH", help="also write the full result as JSON")
    output.add_argument("--plot", metavar="PATH", help="also write a PNG plot (needs matplotlib)")
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


def _one_line(text: str) -> str:
    return " ".join(text.split())


@contextlib.contextmanager
def _user_input() -> Iterator[None]:
    """Report an argument error raised while the settings are built as the user's mistake."""
    try:
        yield
    except ConfigurationError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(str(exc)) from exc


def _cannot_access(path: str, exc: OSError) -> ConfigurationError:
    return ConfigurationError(f"cannot access '{os.fspath(path)}': {exc.strerror or exc}")


def _read_config(path: str | None) -> tuple[dict[str, Any], set[str]]:
    """The file's sections (absent or empty ones as empty mappings) and the keys present."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = dict(load_yaml_mapping(path))
        except OSError as exc:
            raise _cannot_access(path, exc) from exc
        except ImportError as exc:  # PyYAML missing: the message names the pip line
            raise ConfigurationError(str(exc)) from exc
    present = {str(key) for key in data}
    unknown = sorted(str(key) for key in data if key not in SECTIONS)
    if unknown:
        msg = f"unknown section(s) {unknown} in '{path}' (known: {', '.join(SECTIONS)})"
        raise ConfigurationError(msg)
    for key in ("policy", "budget", "simulation"):
        if data.get(key) is None:
            data[key] = {}
        elif not isinstance(data[key], Mapping):
            msg = f"'{key}' in '{path}' must be a mapping (got {describe(data[key])})"
            raise ConfigurationError(msg)
        else:
            data[key] = dict(data[key])
    return data, present


def _apply_flags(data: dict[str, Any], args: argparse.Namespace) -> None:
    """Write every settings flag given into its section of ``data`` (flags win over the file)."""
    for dest, value in sorted(vars(args).items()):
        if "." not in dest:
            continue
        *path, name = dest.split(".")
        node = data
        for depth, key in enumerate(path):
            child = node.get(key)
            if child is None:
                child = {}
            elif not isinstance(child, Mapping):
                where = ".".join(path[: depth + 1])
                msg = f"'{where}' must be a mapping (got {describe(child)})"
                raise ConfigurationError(msg)
            node[key] = node = dict(child)
        node[name] = value


def _strategies(value: object) -> list[Any] | None:
    if value is not None and not isinstance(value, list):
        msg = f"'strategies' must be a list of kinds or mappings (got {describe(value)})"
        raise ConfigurationError(msg)
    return value


def _prepare(args: argparse.Namespace) -> PreparedSimulation:
    """Every setting of ``simulate``, checked; a mistake raises ``ConfigurationError``."""
    if args.plot is not None:
        try:  # fail before simulating, not after
            require_extra("matplotlib", "plot", "--plot")
        except ImportError as exc:
            raise ConfigurationError(str(exc)) from exc
    with _user_input():
        data, _ = _read_config(args.config)
        _apply_flags(data, args)
        strategies = _strategies(data.get("strategies") if args.strategies is None else args.strategies)
        policy, budget = data["policy"], data["budget"]
        return prepare_simulation(
            simulation.SimulationConfig.from_mapping(data["simulation"]),
            policy=GroupAdmissionConfig.from_mapping(policy) if policy else None,
            strategies=strategies,
            budget=SamplingBudgetConfig.from_mapping(budget) if budget else None,
        )


@contextlib.contextmanager
def _output(path: str) -> Iterator[TextIO]:
    try:
        with open(path, "w", newline="", encoding="utf-8") as handle:
            yield handle
    except OSError as exc:
        raise _cannot_access(path, exc) from exc


def _simulate(args: argparse.Namespace) -> int:
    result = run_simulation(_prepare(args))
    print(result.format_table())
    if args.csv is not None:
        rows = result.rows()
        with _output(args.csv) as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {args.csv}")
    if args.json is not None:
        with _output(args.json) as handle:
            json.dump(result.to_dict(), handle, indent=2)
            handle.write("\n")
        print(f"wrote {args.json}")
    if args.plot is not None:
        try:
            simulation.plot_result(result, args.plot)
        except OSError as exc:
            raise _cannot_access(args.plot, exc) from exc
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
    strategies = _strategies(data.get("strategies"))
    if "strategies" in present and strategies is not None:
        budget = SamplingBudgetConfig.from_mapping(data["budget"]) if data["budget"] else None
        built = [simulation.strategy_from_mapping(item, budget=budget) for item in strategies]
        for strategy in built:
            strategy.check(config)
        lines.append(f"Strategies: {', '.join(strategy.name for strategy in built)}.")
    return lines


def _explain(args: argparse.Namespace) -> int:
    with _user_input():
        data, present = _read_config(args.config)
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
        return _simulate(args) if args.command == "simulate" else _explain(args)
    except ConfigurationError as exc:
        print(f"{PROG} {args.command}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
