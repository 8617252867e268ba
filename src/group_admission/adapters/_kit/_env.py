"""
Settings an adapter reads from an environment variable: one reader, one exception type.

Hosts whose parser takes no extra flags (OpenRLHF, AReaL) or that pass settings through
their workers' environment (ROLL's agentic pipeline) name one variable; its value is
inline JSON, inline YAML, or the path of a ``.json`` or YAML file.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Mapping
from typing import Any

from ..._exceptions import ConfigurationError
from ..._loading import load_yaml_mapping, parse_yaml
from ..._validation import describe

__all__ = ["is_inline", "read_settings_env"]

_FILE_SUFFIXES = (".json", ".yaml", ".yml")


def is_inline(value: str) -> bool:
    """Whether a settings value is inline text: not one line that names a file or ends like one."""
    text = value.strip()
    return "\n" in text or not (text.endswith(_FILE_SUFFIXES) or os.path.isfile(text))


def read_settings_env(name: str, value: str | None) -> Mapping[str, Any] | None:
    """
    The settings mapping held by environment variable ``name`` (``value``: its value).

    ``None`` or blank: ``None`` (the defaults). A path (one line that ends in ``.json``,
    ``.yaml`` or ``.yml``, or names an existing file): that file, JSON if it ends in
    ``.json``, else YAML. Anything else is inline: JSON when it parses as JSON (no PyYAML
    needed), else YAML (1.2 numbers: ``1e-6`` is a float).

    Raises:
        ConfigurationError: the text is neither valid JSON nor valid YAML, or it does not
            hold a mapping; the message names ``name``. One type for every such mistake,
            whichever host reads the variable.
        FileNotFoundError: the file does not exist.
        ImportError: YAML is needed and PyYAML is not installed (with the pip line).
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    if not is_inline(text):
        data: Any = _read_json_file(name, text) if text.endswith(".json") else load_yaml_mapping(text)
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            data = _inline_yaml(name, text, exc)
    if data is None:
        return None
    if not isinstance(data, Mapping):
        msg = f"'{name}' must hold a mapping of settings, inline or in a file (got {describe(data)})"
        raise ConfigurationError(msg)
    return data


def _inline_yaml(name: str, text: str, json_error: json.JSONDecodeError) -> Any:
    """``text`` read as YAML, once it is not JSON; JSON's error alone where PyYAML is missing."""
    if importlib.util.find_spec("yaml") is None:
        msg = f"'{name}' must hold valid JSON, or YAML with PyYAML installed (got invalid JSON: {json_error})"
        raise ConfigurationError(msg)
    try:
        return parse_yaml(text, source=name)
    except ConfigurationError as exc:
        msg = f"'{name}' must hold valid inline JSON or YAML, or a file path (got neither: {exc})"
        raise ConfigurationError(msg) from None


def _read_json_file(name: str, path: str) -> Any:
    with open(path, encoding="utf-8") as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as exc:
            msg = f"'{name}' must name a file of valid JSON (got invalid '{path}': {exc})"
            raise ConfigurationError(msg) from None
