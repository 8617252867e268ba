"""Building frozen config objects from mappings and YAML files."""

from __future__ import annotations

import os
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
    "require_extra",
    "yaml_section",
]

T = TypeVar("T")
C = TypeVar("C", bound="MappingConfig")


#: The extras that install torch: their install line carries the advice to pin it.
_TORCH_EXTRAS = frozenset({"torch", "trl", "verl", "cookbook"})


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


def coerce_config(cls: type[T], value: object, *, name: str = "config", optional: bool = True) -> T:
    """
    Accept a config instance, a mapping of its fields, or (when ``optional``) ``None``: the defaults.

    Raises:
        TypeError: ``value`` is none of these; the message offers ``None`` only when it is accepted.
    """
    if value is None and optional:
        return cls()
    if isinstance(value, Mapping):
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


def load_yaml_mapping(path: str | os.PathLike[str], *, key: str | None = None) -> Mapping[str, Any]:
    """
    Read a YAML file holding a mapping, optionally the sub-mapping under ``key``.

    An empty file, an absent ``key`` section and a ``key`` set to null read as an empty
    mapping, so every default applies. Any other value under ``key`` must be a mapping: a
    section set to ``0``, ``false`` or ``[]`` is a mistake, not a request for the defaults.

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
    yaml = require_extra("yaml", "yaml", "Loading a config from YAML")
    with open(path, encoding="utf-8") as handle:
        try:
            data = yaml.safe_load(handle)
        except yaml.YAMLError as exc:
            msg = f"'{os.fspath(path)}' is not valid YAML: {exc}"
            raise ConfigurationError(msg) from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        msg = f"'{os.fspath(path)}' must hold a YAML mapping (got {describe(data)})"
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
        msg = f"'{key}' in '{os.fspath(path)}' must be a mapping (got {describe(section)})"
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
