"""Checks shared by the JSON states that restore exactly or raise ``CheckpointError``."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import attrs

from ._exceptions import CheckpointError
from ._validation import describe

__all__ = [
    "Fail",
    "StateFormat",
    "check_written_back",
    "exactly_equal",
    "parse_state",
    "state_int",
    "unique_keys",
]

#: Raises ``CheckpointError`` with the message, prefixed by what could not be restored.
Fail = Callable[[str], NoReturn]


@attrs.frozen
class StateFormat:
    """
    One checkpoint format, and the one reader of the headers of all three.

    The session's and the prompt history's states are tagged with ``format`` and
    ``version`` (an ``int``: ``1.0`` and ``True`` are no version); the budget state's is
    not (``tag`` is ``None``). Every message reads ``cannot restore <what>: ...``.

    Attributes:
        what: What the state restores (``"the session"``).
        source: The method that writes it (``"state_dict()"``).
        keys: Its keys, every one required and no other allowed.
        tag: The ``format`` value of a tagged state.
        version: The ``version`` value of a tagged state (the one written).
        kind: A tagged state's name in messages (``"session state"``).
        older: Earlier versions still read, each with its keys: ``((1, keys),)``.
    """

    what: str
    source: str
    keys: tuple[str, ...]
    tag: str | None = None
    version: int | None = None
    kind: str = ""
    older: tuple[tuple[int, tuple[str, ...]], ...] = ()

    def fail(self, message: str) -> NoReturn:
        """Raise ``CheckpointError`` naming what cannot be restored, and why."""
        msg = f"cannot restore {self.what}: {message}"
        raise CheckpointError(msg)

    def read(self, data: object) -> Mapping[str, Any]:
        """``data`` as a mapping with exactly the keys of its version; else :meth:`fail`."""
        if not isinstance(data, Mapping):
            self.fail(f"the state must be a mapping from {self.source} (got {describe(data)})")
        keys = self.keys if self.tag is None else self._version_keys(data)
        missing = [key for key in keys if key not in data]
        unknown = sorted(str(key) for key in data if key not in keys)
        if missing or unknown:
            self.fail(f"missing key(s) {missing!r}, unknown key(s) {unknown!r}")
        return data

    def _version_keys(self, data: Mapping[Any, Any]) -> tuple[str, ...]:
        versions: dict[int | None, tuple[str, ...]] = {self.version: self.keys, **dict(self.older)}
        if "format" not in data or "version" not in data:
            return self.keys  # the key check names what is missing
        tag, version = data["format"], data["version"]
        # type() rather than ==: True == 1 and 1.0 == 1, and neither is a version.
        if tag != self.tag or type(tag) is not str or type(version) is not int or version not in versions:
            older = ", ".join(f"version-{v}" for v, _ in self.older)
            readable = f"version-{self.version}" + (f" (or {older})" if older else "")
            found = f"{describe(tag)} version {describe(version)}"
            self.fail(f"not a {readable} {self.kind} (got {found})")
        return versions[version]


def state_int(value: object, name: str, fail: Fail, minimum: int = 0) -> int:
    """``value`` if it is an int (not a bool) >= ``minimum``; else ``fail`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        fail(f"'{name}' must be an integer >= {minimum} (got {describe(value)})")
    return value


def exactly_equal(a: object, b: object) -> bool:
    """``a == b`` with the types of every value equal too: ``False`` is not ``0.0``, ``1`` not ``1.0``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Mapping):
        assert isinstance(b, Mapping)
        return a.keys() == b.keys() and all(exactly_equal(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple))
        return len(a) == len(b) and all(exactly_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)  # -0.0 is not 0.0, and a nan is a nan
    return a == b


def check_written_back(saved: Mapping[str, Any], written: Mapping[str, Any], name: str, fail: Fail) -> None:
    """
    Refuse ``saved`` unless what was built from it writes back exactly ``written``.

    A converter that makes ``1`` the float ``1.0`` would otherwise restore a state that
    writes back another; ``name`` prefixes the field named (``"step.last_call."``).
    """
    for key, value in written.items():
        if not exactly_equal(saved.get(key), value):
            fail(f"'{name}{key}' must be a {type(value).__name__} (got {describe(saved.get(key))})")


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An ``object_pairs_hook`` for :func:`json.loads` that refuses a key written twice."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            msg = f"cannot restore a state: the key {key!r} appears twice in one JSON object"
            raise CheckpointError(msg)
        seen[key] = value
    return seen


def parse_state(text: str | bytes) -> Any:
    """
    A checkpoint state from its JSON text, refusing what :func:`json.loads` would hide.

    ``json.loads`` keeps the last of two equal keys in an object, so a state edited by
    hand or joined from two files could silently lose a value; this raises instead.

    Raises:
        CheckpointError: the text is not JSON, or an object holds a key twice.
    """
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except (ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        msg = f"cannot restore a state: it is not valid JSON ({exc})"
        raise CheckpointError(msg) from exc
