"""
The prompt history's JSON state read into plain lists and written back, in version 3, 2 or 1.

Written independently of the package's reader and writer, from the format the docs
describe, so that a test can change a state's values (two at once, to make them contradict)
and write the result in either version.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any

import numpy as np

RECORD_FIELDS = ("successes", "failures", "admitted", "rejected", "step", "groups", "easy", "hard")
RECORD_TYPES = {name: "<f8" if index < 4 else "<i8" for index, name in enumerate(RECORD_FIELDS)}
PENDING_TYPES = {
    "step": "<i8",
    "rank": "<i8",
    "sequence": "<i8",
    "successes": "<f8",
    "failures": "<f8",
    "admitted": "u1",
}
HEADER = ("format", "config", "rank", "sequence", "greso", "pool", "folded")


def _column(text: str, dtype: str, count: int) -> list[Any]:
    values: list[Any] = np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=dtype)[:count].tolist()
    return values


def _text(values: list[Any], dtype: str) -> str:
    return base64.b64encode(zlib.compress(np.array(values, dtype=dtype).tobytes())).decode("ascii")


def key(prompt_id: int | str) -> str:
    """A prompt id's version-1 key: ``"i7"``, ``"sname"``."""
    return f"s{prompt_id}" if isinstance(prompt_id, str) else f"i{prompt_id}"


def read(state: dict[str, Any]) -> dict[str, Any]:
    """
    A version-3 (or 2) state as plain data: the header, then ``records`` and ``pending`` as lists of rows.

    A record row is ``[prompt id, *RECORD_FIELDS]``; a pending row ``[prompt id, *PENDING_TYPES]``
    (``admitted`` a bool), rows in the order the state holds them.
    """
    prompts, pending = state["prompts"], state["pending"]
    gaps = np.frombuffer(zlib.decompress(base64.b64decode(prompts["int_ids"])), dtype="<u8")
    ids = [*np.cumsum(gaps, dtype=np.uint64).view(np.int64).tolist(), *prompts["str_ids"]]
    columns = {name: _column(prompts[name], dtype, len(ids)) for name, dtype in RECORD_TYPES.items()}
    waiting = {
        name: _column(pending[name], dtype, len(pending["ids"])) for name, dtype in PENDING_TYPES.items()
    }
    waiting["admitted"] = [bool(flag) for flag in waiting["admitted"]]
    return {
        **{name: state[name] for name in HEADER},
        "records": [[p, *(columns[name][row] for name in RECORD_FIELDS)] for row, p in enumerate(ids)],
        "pending": [[p, *(waiting[name][i] for name in PENDING_TYPES)] for i, p in enumerate(pending["ids"])],
    }


def older(state: dict[str, Any]) -> dict[str, Any]:
    """
    A version-3 state as a version-2 or 1 state holds it: no re-checks, no wrong-skip bound
    (what a history restored from one has: ``pool[6:]`` zeros, ``max_wrong_skip_share`` None).
    """
    config = {**state["config"], "max_wrong_skip_share": None}
    return {**state, "config": config, "pool": [*state["pool"][:6], 0.0, 0.0]}


def _old_header(data: dict[str, Any]) -> dict[str, Any]:
    header = {name: data[name] for name in HEADER}
    header["pool"] = data["pool"][:6]
    header["config"] = {k: v for k, v in data["config"].items() if k != "max_wrong_skip_share"}
    return header


def write_v3(data: dict[str, Any]) -> dict[str, Any]:
    """:func:`read`'s data as a version-3 state: version 2's layout with the re-checks and the bound."""
    return {**write_v2(data), **{name: data[name] for name in HEADER}, "version": 3}


def write_v2(data: dict[str, Any]) -> dict[str, Any]:
    """:func:`read`'s data as a version-2 state (records sorted: int ids, then text ids)."""
    records = sorted(data["records"], key=lambda row: (isinstance(row[0], str), row[0]))
    numbers = [row[0] for row in records if isinstance(row[0], int)]
    gaps = np.diff(np.array(numbers, dtype=np.int64).view(np.uint64), prepend=np.uint64(0))
    prompts: dict[str, Any] = {
        "count": len(records),
        "int_ids": _text(gaps.tolist(), "<u8"),
        "str_ids": [row[0] for row in records if isinstance(row[0], str)],
    }
    for index, (name, dtype) in enumerate(RECORD_TYPES.items(), start=1):
        prompts[name] = _text([row[index] for row in records], dtype)
    waiting = sorted(data["pending"], key=lambda row: (row[2], row[3]))
    pending: dict[str, Any] = {"ids": [row[0] for row in waiting]}
    for index, (name, dtype) in enumerate(PENDING_TYPES.items(), start=1):
        pending[name] = _text([row[index] for row in waiting], dtype)
    return {**_old_header(data), "version": 2, "prompts": prompts, "pending": pending}


def write_v1(data: dict[str, Any]) -> dict[str, Any]:
    """:func:`read`'s data as a version-1 state (records by key, pending by number)."""
    records = sorted([key(row[0]), *row[1:]] for row in data["records"])
    pending = [
        [row[1], key(row[0]), row[2], row[3], row[4], row[5], row[6]]
        for row in sorted(data["pending"], key=lambda row: (row[2], row[3]))
    ]
    return {**_old_header(data), "version": 1, "records": records, "pending": pending}
