"""
The settings flags of the ``group-admission`` subcommands, generated from config classes' fields.

A subcommand lists its sections (a path in the settings mapping and the config classes
whose fields are its flags); every field gets a flag with its type, choices and the first
sentence of its documentation, so a new field needs no change here. A config file and
the flags build one settings mapping; flags win.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import re
import sys
import typing
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import NoneType, UnionType
from typing import Any, NoReturn, TextIO

import attrs

from ._budget import SamplingBudgetConfig
from ._config import GroupAdmissionConfig
from ._exceptions import ConfigurationError, HalfConfiguredWarning
from ._loading import load_yaml_mapping, yaml_section
from ._session import SessionConfig
from ._validation import describe

__all__ = [
    "PROG",
    "Parser",
    "Section",
    "add_section_flags",
    "add_settings_command",
    "apply_flags",
    "cannot_access",
    "default_budget_text",
    "names",
    "one_line",
    "output_file",
    "policy_title",
    "read_config",
    "run_settings",
    "strategy_list",
    "user_input",
    "write_json",
]


#: The command's name, the first word of every line it prints on stderr.
PROG = "group-admission"


@attrs.frozen
class Section:
    """One section of the settings, and the config classes whose fields are its flags."""

    path: tuple[str, ...]
    classes: tuple[type, ...]
    title: str
    skip: tuple[str, ...] = ()
    #: Flag names for fields whose name alone would be ambiguous on the command line.
    rename: Mapping[str, str] = attrs.field(factory=dict)
    #: A flag that chooses the section's ``kind`` among ``kinds`` (e.g. ``--tasks``).
    kind_flag: str = ""
    kinds: tuple[str, ...] = ()
    kind_default: str = ""


class Parser(argparse.ArgumentParser):
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


def names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def numbers(text: str) -> list[float]:
    """Comma-separated numbers (a pair such as ``prior``); argparse reports what does not parse."""
    return [float(item) for item in names(text)]


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
    elif typing.get_origin(base) is tuple and float in typing.get_args(base):
        kind = _FlagKind(numbers, metavar="X,Y", note="; comma-separated")
    elif typing.get_origin(base) is tuple:
        kind = _FlagKind(names, metavar="NAMES", note="; comma-separated")
    elif base in (int, float, str):
        # 10**400 parses; the config's own validator refuses what is out of range.
        kind = _FlagKind(base, metavar={int: "N", float: "X", str: "TEXT"}[base])
    else:
        msg = f"no command-line flag for a field of type {hint!r}"
        raise TypeError(msg)
    if optional:
        return attrs.evolve(kind, parse=_optional(kind.parse), note=kind.note + "; 'none' unsets it")
    return kind


def _flag_text(value: object) -> str:
    """A setting's value as a flag takes it: ``none``, ``0.5,0.5``, ``1e-06``."""
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ",".join(_flag_text(item) for item in value)
    return str(value)


def _default_note(field: attrs.Attribute[Any]) -> str:
    default: Any = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        default = attrs.NOTHING if default.takes_self else default.factory()
    if default is attrs.NOTHING:
        return ""
    return f" (default: {_flag_text(default)})".replace("%", "%%")  # argparse formats help with %


def add_section_flags(parser: argparse.ArgumentParser, section: Section, seen: set[str]) -> None:
    group = parser.add_argument_group(section.title)
    if section.kind_flag:
        group.add_argument(
            section.kind_flag,
            dest=".".join((*section.path, "kind")),
            choices=section.kinds,
            default=argparse.SUPPRESS,
            help=f"the kind (default: {section.kind_default})" if section.kind_default else "the kind",
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
                help=helps.get(field.name, field.name).rstrip(".") + kind.note + _default_note(field),
            )


def _pairs(values: Mapping[str, Any]) -> str:
    return " ".join(f"{key}={_flag_text(value)}" for key, value in values.items())


#: Fields a settings line shows even at their default: the ones whose 0 turns a feature off.
_ALWAYS_SHOWN = {SamplingBudgetConfig: ("max_extra_groups", "max_resample_rounds")}


def _changed(config: Any) -> dict[str, Any]:
    """The fields of a config object whose value is not its class's default (and any always shown)."""
    required = {
        f.name: getattr(config, f.name) for f in attrs.fields(type(config)) if f.default is attrs.NOTHING
    }
    default = type(config)(**required).to_dict()
    shown = _ALWAYS_SHOWN.get(type(config), ())
    return {
        key: value for key, value in config.to_dict().items() if key in shown or value != default.get(key)
    }


def policy_title(default: GroupAdmissionConfig) -> str:
    """
    The policy section's title, naming the simulators' ``default`` policy.

    Its flags' defaults are the class's: a policy setting is built as the library builds
    it. With no policy setting at all the simulators judge with ``default``, the
    ``zero_std`` preset's policy.
    """
    settings = _pairs(_changed(default))
    return (
        "policy (the 'policy' section, built as GroupAdmissionConfig builds it; without any "
        f"policy setting, the 'zero_std' preset's policy, the zero-std filter {settings})"
    )


def default_budget_text(who: str, effective_budget: Callable[[int], SamplingBudgetConfig]) -> str:
    """
    What ``who`` allows without a budget, read off its ``effective_budget`` at a target of one group.

    The defaults scale with the target (tests/test_cli.py checks it), so the caps at one
    group are the multipliers.
    """
    budget = effective_budget(1)
    rest = _changed(budget)  # the fields said below, then any other it sets
    for key in ("max_extra_groups", "max_resample_rounds", "mode", "confidence"):
        rest.pop(key, None)
    text = (
        f"{who} allows {budget.max_extra_groups} x target extra groups "
        f"in {budget.max_resample_rounds} resample rounds"
    )
    if budget.mode == "confidence":
        text += f", confidence mode at {_flag_text(budget.confidence)}"
    return text + (f" ({_pairs(rest)})" if rest else "")


def run_settings(
    run: tuple[str, Mapping[str, Any]],
    policy: GroupAdmissionConfig,
    sections: Mapping[str, tuple[Any, str]],
) -> str:
    """
    The settings a simulation ran with, spelled as a config file spells them, to print above its table.

    ``run`` is the run's section label and its config's ``to_dict`` (a nested mapping gets
    a line of its own); the policy shows the fields it sets. ``sections`` maps a label to
    (a config object or ``None``, what applies without one); a config shows the fields
    it sets.
    """
    label, values = run
    lines = [f"{label}: {_pairs({k: v for k, v in values.items() if not isinstance(v, Mapping)})}"]
    lines += [f"  {key}: {_pairs(value)}" for key, value in values.items() if isinstance(value, Mapping)]
    lines.append(f"  policy: {_pairs(_changed(policy)) or 'every field at its default'}")
    for name, (config, fallback) in sections.items():
        text = fallback if config is None else _pairs(_changed(config)) or "every field at its default"
        lines.append(f"  {name}: {text}")
    return "\n".join(lines) + "\n"


def one_line(text: str) -> str:
    return " ".join(text.split())


@contextlib.contextmanager
def user_input(command: str) -> Iterator[None]:
    """
    Report an argument error raised while the settings are built as the user's mistake.

    A half-configured section (:class:`HalfConfiguredWarning`) is printed as one line on
    stderr, ``{command}: warning: ...``, and the command goes on.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", HalfConfiguredWarning)
        try:
            yield
        except ConfigurationError:
            raise
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(str(exc)) from exc
    for warning in caught:
        if issubclass(warning.category, HalfConfiguredWarning):
            print(f"{command}: warning: {one_line(str(warning.message))}", file=sys.stderr)
        else:  # not ours to reword: passed on as it came
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


def cannot_access(path: str, exc: OSError) -> ConfigurationError:
    return ConfigurationError(f"cannot access '{os.fspath(path)}': {exc.strerror or exc}")


def read_config(
    path: str | None, sections: Sequence[str], preset: str | None = None
) -> tuple[dict[str, Any], set[str]]:
    """
    The file's sections (absent or empty ones as empty mappings) and the keys present.

    Every section but ``strategies`` (a list) must be a mapping, by ``load_yaml_mapping``'s
    rule for a section (``yaml_section``). ``preset`` names a :class:`SessionConfig` preset
    whose sections the command has lie beneath the file's: a field the file sets wins.
    """
    mappings = [section for section in sections if section != "strategies"]
    base = _preset_sections(preset, mappings)
    if path is None:
        return {key: dict(base.get(key, {})) for key in mappings}, set()
    try:
        data = dict(load_yaml_mapping(path))
    except OSError as exc:
        raise cannot_access(path, exc) from exc
    except ImportError as exc:  # PyYAML missing: the message names the pip line
        raise ConfigurationError(str(exc)) from exc
    present = {str(key) for key in data}
    unknown = sorted(str(key) for key in data if key not in sections)
    if unknown:
        msg = f"unknown section(s) {unknown} in '{path}' (known: {', '.join(sections)})"
        raise ConfigurationError(msg)
    data.update({key: {**base.get(key, {}), **yaml_section(data, key, path)} for key in mappings})
    return data, present


def _preset_sections(preset: str | None, mappings: Sequence[str]) -> dict[str, Mapping[str, Any]]:
    """The sections ``preset`` sets that are among ``mappings`` (``{}`` without a preset)."""
    if preset is None:
        return {}
    if preset not in SessionConfig.PRESETS:
        msg = f"'--preset' must be one of {sorted(SessionConfig.PRESETS)} (got {preset!r})"
        raise ConfigurationError(msg)
    sections = SessionConfig.PRESETS[preset]
    return {key: sections[key] for key in mappings if isinstance(sections.get(key), Mapping)}


def preset_help(sections: Sequence[str]) -> str:
    """The ``--preset`` help: each preset and the sections of this command it sets."""
    known = [
        f"{name} ({', '.join(key for key in sections if key in preset) or 'no section here'})"
        for name, preset in SessionConfig.PRESETS.items()
    ]
    return (
        "start from a SessionConfig preset: its sections this command has lie beneath the "
        f"file's and the flags' ({'; '.join(known)})"
    )


def apply_flags(data: dict[str, Any], args: argparse.Namespace) -> None:
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


@contextlib.contextmanager
def output_file(path: str) -> Iterator[TextIO]:
    try:
        with open(path, "w", newline="", encoding="utf-8") as handle:
            yield handle
    except OSError as exc:
        raise cannot_access(path, exc) from exc


def write_json(path: str, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path`` and say so."""
    with output_file(path) as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
    print(f"wrote {path}")


def strategy_list(value: object) -> list[Any] | None:
    """The 'strategies' setting: ``None`` or a list of kinds or mappings."""
    if value is not None and not isinstance(value, list):
        msg = f"'strategies' must be a list of kinds or mappings (got {describe(value)})"
        raise ConfigurationError(msg)
    return value


def add_settings_command(
    parser: argparse.ArgumentParser, sections: Sequence[Section], strategies_help: str
) -> argparse._ArgumentGroup:
    """
    Give a subcommand ``--config``, a flag for every field of ``sections`` and ``--strategies``.

    Returns the "strategies and output" group, for the command's own output flags; every
    command that has one writes ``--json``.
    """
    parser.add_argument("--config", metavar="PATH", help="YAML file with the settings")
    top = [section.path[0] for section in sections if len(section.path) == 1]
    parser.add_argument("--preset", choices=sorted(SessionConfig.PRESETS), help=preset_help(top))
    seen: set[str] = set()
    for section in sections:
        add_section_flags(parser, section, seen)
    output = parser.add_argument_group("strategies and output")
    output.add_argument("--strategies", type=names, default=None, metavar="KINDS", help=strategies_help)
    output.add_argument("--json", metavar="PATH", help="also write the full result as JSON")
    return output
