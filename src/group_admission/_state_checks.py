"""Checks shared by the JSON states that restore exactly or raise ``CheckpointError``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import attrs

from ._exceptions import CheckpointError
from ._validation import describe

__all__ = ["Fail", "StateFormat", "state_int"]

#: Raises ``CheckpointError`` with the message, prefixed by what could not be restored.
Fail = Callable[[str], NoReturn]


@attrs.frozen
class StateFormat:
    """
    One checkpoint format, and the one reader of the headers of all three.

    The session's and the prompt history's states are tagged with ``format`` and
    ``version``; the budget state's is not (``tag`` is ``None``). Every message reads
    ``cannot restore <what>: ...``.

    Attributes:
        what: What the state restores (``"the session"``).
        source: The method that writes it (``"state_dict()"``).
        keys: Its keys, every one required and no other allowed.
        tag: The ``format`` value of a tagged state.
        version: The ``version`` value of a tagged state.
        kind: A tagged state's name in messages (``"session state"``).
    """

    what: str
    source: str
    keys: tuple[str, ...]
    tag: str | None = None
    version: int | None = None
    kind: str = ""

    def fail(self, message: str) -> NoReturn:
        """Raise ``CheckpointError`` naming what cannot be restored, and why."""
        msg = f"cannot restore {self.what}: {message}"
        raise CheckpointError(msg)

    def read(self, data: object) -> Mapping[str, Any]:
        """``data`` as a mapping with exactly :attr:`keys` (and the tag and version); else :meth:`fail`."""
        if not isinstance(data, Mapping):
            self.fail(f"the state must be a mapping from {self.source} (got {describe(data)})")
        missing = [key for key in self.keys if key not in data]
        unknown = sorted(str(key) for key in data if key not in self.keys)
        if missing or unknown:
            self.fail(f"missing key(s) {missing!r}, unknown key(s) {unknown!r}")
        if self.tag is not None and (data["format"] != self.tag or data["version"] != self.version):
            found = f"{data['format']!r} version {data['version']!r}"
            self.fail(f"not a version-{self.version} {self.kind} (got {found})")
        return data


def state_int(value: object, name: str, fail: Fail, minimum: int = 0) -> int:
    """``value`` if it is an int (not a bool) >= ``minimum``; else ``fail`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        fail(f"'{name}' must be an integer >= {minimum} (got {describe(value)})")
    return value
