"""Building frozen config objects from mappings and YAML files."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from types import EllipsisType
from typing import Any, TypeVar

import attrs

from ._exceptions import ConfigurationError
from ._validation import describe

__all__ = [
    "MappingConfig",
    "coerce_config",
    "coerce_instance",
    "from_mapping",
    "install_line",
    "load_yaml_mapping",
    "parse_yaml",
    "require_extra",
    "yaml_section",
]

T = TypeVar("T")
C = TypeVar("C", bound="MappingConfig")


#: The extras that install torch: their install line carries the advice to pin it.
_TORCH_EXTRAS = frozenset({"torch", "trl", "trl-async", "verl", "cookbook"})


def install_line(extra: str) -> str:
    """
    The pip command that installs ``extra``, for error messages.

    For an extra that pulls torch, it says to pin torch in the same command: without a pin,
    pip may resolve a multi-GB CUDA build.
    """
    line = f"pip install 'group-admission[{extra}]'"
    if extra in _TORCH_EXTRAS:
        line += " (in the same pip command as your torch pin, e.g. torch==2.13.0)"
    return line


def require_extra(module: str, extra: str, feature: str) -> Any:
    """
    Import an optional dependency, or fail with the exact install command.

    Raises:
        ImportError: naming the feature and the ``pip install`` line that fixes it.
    """
    import importlib  # noqa: PLC0415  (imported only when an optional feature is used)

    try:
        return importlib.import_module(module)
    except ImportError:
        msg = f"{feature} requires the '{module}' package; install it with: {install_line(extra)}"
        raise ImportError(msg) from None


def from_mapping(cls: type[T], mapping: Mapping[str, Any], *, source: str = "mapping") -> T:
    """
    Build the attrs class ``cls`` from a mapping, rejecting unknown keys by name.

    Raises:
        TypeError: ``mapping`` is not a mapping or a key is not a string.
        ValueError: a key is not a field of ``cls``.
    """
    if not isinstance(mapping, Mapping):
        msg = f"'{source}' must be a mapping of field names to values (got {describe(mapping)})"
        raise TypeError(msg)
    known = {field.name for field in attrs.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(str(key) for key in mapping if key not in known)
    if unknown:
        target = "" if source.startswith(cls.__name__) else f" for {cls.__name__}"
        msg = (
            f"unknown key(s) {', '.join(repr(k) for k in unknown)} in {source}{target} "
            f"(known: {', '.join(sorted(known))})"
        )
        raise ValueError(msg)
    return cls(**dict(mapping))


def coerce_config(
    cls: type[T],
    value: object,
    *,
    name: str = "config",
    optional: bool = True,
    build: Callable[[Mapping[str, Any]], T] | None = None,
) -> T:
    """
    Accept a config instance, a mapping of its fields, or (when ``optional``) ``None``: the defaults.

    ``build`` reads a mapping where the class has its own reader (``SessionConfig``'s
    ``preset``); by default the mapping must hold ``cls``'s fields.

    Raises:
        TypeError: ``value`` is none of these; the message offers ``None`` only when it is accepted.
    """
    if value is None and optional:
        return cls()
    if isinstance(value, Mapping):
        if build is not None:
            return build(value)
        return from_mapping(cls, value, source=f"{cls.__name__} mapping")
    if not isinstance(value, cls):
        accepted = ", a mapping or None" if optional else " or a mapping of its fields"
        msg = f"'{name}' must be a {cls.__name__}{accepted} (got {describe(value)})"
        raise TypeError(msg)
    return value


def coerce_instance(value: object, cls: type[T], config: type, *, name: str) -> T:
    """
    Accept a ready ``cls`` as it is, or build one from a ``config``, a mapping of its fields or ``None``.

    The one coercer of the objects a caller may hand over ready or describe
    (``AdmissionSession(policy=..., budget=...)``).

    Raises:
        TypeError: ``value`` is none of these, naming ``name``.
    """
    if isinstance(value, cls):
        return value
    if value is None or isinstance(value, (config, Mapping)):
        build: Callable[[object], T] = cls
        return build(value)
    msg = f"'{name}' must be a {cls.__name__}, a {config.__name__}, a mapping or None (got {describe(value)})"
    raise TypeError(msg)


#: The floats of YAML 1.2 that PyYAML, a YAML 1.1 reader, takes for text: an exponent with
#: no dot (``1e-6``) or no sign (``1.0e6``). A config that says ``1e-6`` means the number.
_YAML12_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$")


@functools.cache
def _yaml_loader(yaml: Any) -> Any:
    """PyYAML's safe loader, also reading YAML 1.2's exponent forms as floats (one class per module)."""

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        """``yaml.SafeLoader`` with YAML 1.2's floats."""

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+.0123456789"))
    return Loader


def parse_yaml(text: str, *, source: str = "YAML text") -> Any:
    """
    Read YAML text as every config of this library is read: safe types, YAML 1.2's numbers.

    PyYAML follows YAML 1.1, which reads ``1e-6`` (no dot) as the string ``'1e-6'``; here it
    is the float ``1e-06``, as YAML 1.2 reads it. Everything else is what
    ``yaml.safe_load`` gives. Needs PyYAML (``pip install 'group-admission[yaml]'``).

    Args:
        text: The YAML document.
        source: What the text is, for the error message (a file name, a setting).

    Raises:
        TypeError: ``text`` is not a string.
        ConfigurationError: the text is not valid YAML, naming ``source``.
        ImportError: PyYAML is not installed, with the pip line.

    .. versionadded:: 0.2.0
    """
    if not isinstance(text, str):
        msg = f"'text' must be a string of YAML (got {describe(text)})"
        raise TypeError(msg)
    yaml = require_extra("yaml", "yaml", "Loading a config from YAML")
    try:
        return yaml.load(text, Loader=_yaml_loader(yaml))  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        msg = f"'{source}' is not valid YAML: {exc}"
        raise ConfigurationError(msg) from None


def load_yaml_mapping(path: str | os.PathLike[str], *, key: str | None = None) -> Mapping[str, Any]:
    """
    Read a YAML file holding a mapping, optionally the sub-mapping under ``key``.

    The file is read by :func:`parse_yaml` (``1e-6`` is a number). An empty file, an absent
    ``key`` section and a ``key`` set to null read as an empty mapping, so every default
    applies. Any other value under ``key`` must be a mapping: a section set to ``0``,
    ``false`` or ``[]`` is a mistake, not a request for the defaults.

    Raises:
        FileNotFoundError: the file does not exist.
        TypeError: ``path`` is not a path, or ``key`` not a string.
        ConfigurationError: the file is not valid YAML, or does not hold a mapping where
            one is required.
    """
    if not isinstance(path, (str, bytes, os.PathLike)):
        # An int would open (and then close) that file descriptor.
        msg = f"'path' must be a file path (got {describe(path)})"
        raise TypeError(msg)
    if key is not None and not isinstance(key, str):
        msg = f"'key' must be a string or None (got {describe(key)})"
        raise TypeError(msg)
    require_extra("yaml", "yaml", "Loading a config from YAML")  # before the file: the pip line first
    with open(path, encoding="utf-8") as handle:
        data = parse_yaml(handle.read(), source=os.fsdecode(path))
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        msg = f"'{os.fsdecode(path)}' must hold a YAML mapping (got {describe(data)})"
        raise ConfigurationError(msg)
    return data if key is None else yaml_section(data, key, path)


def yaml_section(data: Mapping[str, Any], key: str, path: str | os.PathLike[str]) -> Mapping[str, Any]:
    """
    The mapping under ``key`` of a YAML file's ``data``: absent or null reads as empty.

    Raises:
        ConfigurationError: the section holds anything else (``0``, ``false`` and ``[]``
            are mistakes, not requests for the defaults).
    """
    section = data.get(key)
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        msg = f"'{key}' in '{os.fsdecode(path)}' must be a mapping (got {describe(section)})"
        raise ConfigurationError(msg)
    return section


class MappingConfig:
    """
    How every config class is built from a mapping of its fields or from a YAML file.

    For frozen attrs config classes (``GroupAdmissionConfig``, ``SamplingBudgetConfig``, the
    simulator's); each writes its own ``to_dict``. ``YAML_KEY`` names the section
    :meth:`from_yaml` reads by default (``None``: the whole file).
    """

    __slots__ = ()
    #: The section of a YAML file :meth:`from_yaml` reads when no ``key`` is given. Not a
    #: ``ClassVar`` on purpose: the CLI resolves a config's annotations in its own module.
    YAML_KEY: str | None = None

    @classmethod
    def from_mapping(cls: type[C], mapping: Mapping[str, Any]) -> C:
        """
        Build a config from a mapping of field names (nested configs as mappings), rejecting unknown keys.

        Raises:
            ValueError: a key is unknown or a value is out of range.
            TypeError: a value has the wrong type.
        """
        return from_mapping(cls, mapping, source=f"{cls.__name__} mapping")

    @classmethod
    def from_yaml(cls: type[C], path: str | os.PathLike[str], *, key: str | EllipsisType | None = ...) -> C:
        """
        Build a config from a YAML file: the mapping under ``key`` (``None``: the whole file).

        Without ``key``, the class's section (``YAML_KEY``): ``"simulation"`` for
        ``SimulationConfig``, ``"pool"`` for ``PromptPoolConfig``, the whole file for the
        others. An empty file, a missing ``key`` and a ``key`` set to null give the
        defaults. Needs PyYAML: ``pip install 'group-admission[yaml]'``.

        Raises:
            ConfigurationError: the file is not valid YAML, or what should be a mapping
                (the file, the section under ``key``) is not one.
            TypeError, ValueError: a field is invalid, as in :meth:`from_mapping`.
        """
        section = cls.YAML_KEY if isinstance(key, EllipsisType) else key
        return cls.from_mapping(load_yaml_mapping(path, key=section))
