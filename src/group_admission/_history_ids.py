"""
What a prompt id may be, and the one check every entry point that takes prompt ids runs.

A prompt id is a ``str`` of valid Unicode or an ``int`` in the signed 64-bit range (a
numpy integer counts as the ``int`` of its value; ``True``/``False`` are no prompt ids).
``7`` and ``"7"`` are two prompts. The check returns the canonical id (a plain ``str`` or
``int``), so that what a history stores, returns and writes to JSON never holds a numpy
scalar, and it reads an iterable of ids exactly once, so that a generator works.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from typing import NoReturn

import numpy as np

from ._validation import describe

__all__ = ["INT_ID_RANGE", "PromptId", "check_prompt_id", "check_prompt_ids", "key_id", "prompt_key"]

#: A prompt's identity: a string or an integer (``True``/``False`` are not prompt ids).
PromptId = str | int
#: The integers a prompt id may be: those of a signed 64-bit integer, as datasets index rows.
INT_ID_RANGE = (-(2**63), 2**63 - 1)
_LOW, _HIGH = INT_ID_RANGE


def _refuse_text(value: str, name: str) -> NoReturn:
    msg = (
        f"'{name}' must be a str of valid Unicode, encodable as UTF-8 "
        f"(no lone surrogates) (got {describe(value)})"
    )
    raise ValueError(msg)


def check_prompt_id(value: object, name: str = "prompt_id") -> PromptId:
    """
    The canonical form of one prompt id: a plain ``str`` or ``int``.

    Raises:
        TypeError: ``value`` is neither a str nor an int (a bool or a float included).
        ValueError: a str that is not valid Unicode (a lone surrogate), or an int outside
            the signed 64-bit range.
    """
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                _refuse_text(value, name)
        return value if type(value) is str else "".join((value,))  # a str subclass becomes a str
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        number = int(value)
        if not _LOW <= number <= _HIGH:
            msg = f"'{name}' must be an int in [-2**63, 2**63 - 1] (got {describe(number)})"
            raise ValueError(msg)
        return number
    msg = f"'{name}' must be a str or an int (got {describe(value)})"
    raise TypeError(msg)


def check_prompt_ids(values: object, name: str = "prompt_ids") -> list[PromptId]:
    """
    The canonical ids of an ordered collection of prompt ids, read exactly once.

    A list, a tuple, a 1-D array or any other iterable (a generator too) is accepted;
    a string, a mapping or a set is not (a set has no order, and picks keep the order
    given).

    Raises:
        TypeError: ``values`` is not an ordered collection, or an entry is neither a str
            nor an int (named by its position, ``'prompt_ids[3]'``).
        ValueError: an entry is a str that is not valid Unicode or an int outside the
            signed 64-bit range.
    """
    if isinstance(values, (str, bytes, bytearray, Mapping, Set)) or not isinstance(values, Iterable):
        msg = f"'{name}' must be a sequence of prompt ids (got {describe(values)})"
        raise TypeError(msg)
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind == "i":
        return values.tolist()  # type: ignore[no-any-return]  # int64 or narrower: in range
    return [check_prompt_id(value, f"{name}[{index}]") for index, value in enumerate(values)]


def prompt_key(prompt_id: PromptId) -> str:
    """The canonical text of a checked prompt id, as the picks hash it (``"i7"``, ``"sgsm8k/12"``)."""
    return f"s{prompt_id}" if isinstance(prompt_id, str) else f"i{prompt_id}"


def key_id(key: str) -> PromptId | None:
    """The prompt id whose :func:`prompt_key` is ``key``; ``None`` when no id has that key."""
    if key.startswith("s"):
        try:
            return check_prompt_id(key[1:])
        except ValueError:
            return None
    if key.startswith("i"):
        try:
            number = int(key[1:])
        except ValueError:
            return None
        if prompt_key(number) == key and _LOW <= number <= _HIGH:  # not "i07", "i-0", "i+7", "i 7"
            return number
    return None
