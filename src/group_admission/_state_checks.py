"""Checks shared by the JSON states that restore exactly or raise ``CheckpointError``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from ._exceptions import CheckpointError
from ._validation import describe

__all__ = ["Fail", "check_header", "failing", "state_int"]

#: Raises ``CheckpointError`` with the message, prefixed by what could not be restored.
Fail = Callable[[str], NoReturn]


def failing(what: str) -> Fail:
    """The ``Fail`` of one format: ``CheckpointError("cannot restore <what>: <message>")``."""

    def fail(message: str) -> NoReturn:
        msg = f"cannot restore {what}: {message}"
        raise CheckpointError(msg)

    return fail


def check_header(
    data: object,
    *,
    keys: tuple[str, ...],
    source: str,
    fail: Fail,
    format_: str | None = None,
    version: int | None = None,
    kind: str = "",
) -> Mapping[str, Any]:
    """
    ``data`` as a mapping with exactly ``keys`` (and a tagged ``format_`` at ``version``); else ``fail``.

    The one reader of the headers of the three checkpoint formats: the session's and the
    prompt history's (tagged with ``format`` and ``version``) and the budget state's
    (untagged). ``source`` is the method that writes the state (``"state_dict()"``);
    ``kind`` names a tagged state in messages (``"session state"``).
    """
    if not isinstance(data, Mapping):
        fail(f"the state must be a mapping from {source} (got {describe(data)})")
    missing = [key for key in keys if key not in data]
    unknown = sorted(str(key) for key in data if key not in keys)
    if missing or unknown:
        fail(f"missing key(s) {missing!r}, unknown key(s) {unknown!r}")
    if format_ is not None and (data["format"] != format_ or data["version"] != version):
        fail(f"not a version-{version} {kind} (got {data['format']!r} version {data['version']!r})")
    return data


def state_int(value: object, name: str, fail: Fail, minimum: int = 0) -> int:
    """``value`` if it is an int (not a bool) >= ``minimum``; else ``fail`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        fail(f"'{name}' must be an integer >= {minimum} (got {describe(value)})")
    return value
