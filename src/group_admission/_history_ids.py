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
from typing import Any, NoReturn

import numpy as np

from ._validation import describe

__all__ = [
    "INT64_MAX",
    "INT_ID_RANGE",
    "PromptId",
    "check_prompt_id",
    "check_prompt_ids",
    "key_id",
    "key_ranks",
    "prompt_key",
]

#: A prompt's identity: a string or an integer (``True``/``False`` are not prompt ids).
PromptId = str | int
#: The largest signed 64-bit integer: of prompt ids, and of the steps, ranks and counts a history stores.
INT64_MAX = 2**63 - 1
#: The integers a prompt id may be: those of a signed 64-bit integer, as datasets index rows.
INT_ID_RANGE = (-INT64_MAX - 1, INT64_MAX)
_LOW, _HIGH = INT_ID_RANGE
_POWERS = np.array([10**k for k in range(20)], dtype=np.uint64)


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
    items: list[Any] = list(values)
    # The common cases at a glance (a step's ids checked in microseconds); the rest one by one.
    kinds = set(map(type, items))
    if kinds <= {int} and (not items or (min(items) >= _LOW and max(items) <= _HIGH)):
        return items
    if kinds <= {str} and all(text.isascii() for text in items):
        return items
    return [check_prompt_id(value, f"{name}[{index}]") for index, value in enumerate(items)]


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


def key_ranks(ids: list[PromptId]) -> np.ndarray:
    """
    Each checked id's place in the order of their :func:`prompt_key` texts (equal ids, equal places).

    The order the picks fold observations in, computed without writing a million keys: an
    int's key ``"i<decimal>"`` sorts before every str's ``"s<text>"``; negative decimals
    (``'-'`` sorts before the digits) before the others; and two digit strings compare as
    their numbers left-aligned to 19 digits, the shorter first on a tie ("1" < "10" < "2").
    """
    is_int = np.fromiter((type(prompt_id) is int for prompt_id in ids), dtype=bool, count=len(ids))
    at_int, at_str = np.flatnonzero(is_int), np.flatnonzero(~is_int)
    numbers = np.array([ids[i] for i in at_int.tolist()], dtype=np.int64)
    negative = numbers < 0
    magnitude = numbers.view(np.uint64).copy()
    magnitude[negative] = ~magnitude[negative] + np.uint64(1)  # |n|, -2**63 included, in uint64
    digits = np.maximum(1, np.searchsorted(_POWERS, magnitude, side="right"))
    aligned = magnitude * _POWERS[19 - digits]
    order = np.lexsort((digits, aligned, ~negative))
    fields = np.stack((negative[order], aligned[order], digits[order].astype(np.uint64)))
    new = np.ones(len(order), dtype=bool)
    new[1:] = np.any(fields[:, 1:] != fields[:, :-1], axis=0)
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[at_int[order]] = np.cumsum(new) - 1
    texts = [ids[i] for i in at_str.tolist()]
    place = {text: index for index, text in enumerate(sorted(set(texts)), start=int(new.sum()))}
    ranks[at_str] = [place[text] for text in texts]
    return ranks
