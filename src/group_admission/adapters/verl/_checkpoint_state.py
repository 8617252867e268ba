"""Where the session state lives in a verl checkpoint, and reading and writing it (no verl import)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ... import parse_state

__all__ = ["STATE_FILE", "load_session_state", "save_session_state"]

#: The file written into verl's ``global_step_<N>`` folder, beside ``data.pt``.
STATE_FILE = "group_admission_state.json"


def save_session_state(checkpoint_dir: str, state: Mapping[str, Any]) -> str:
    """Write ``state`` into ``checkpoint_dir`` atomically; return the file's path."""
    os.makedirs(checkpoint_dir, exist_ok=True)
    path = os.path.join(checkpoint_dir, STATE_FILE)
    partial = f"{path}.partial"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(state, handle, sort_keys=True)
    # A crash mid-write must never leave a truncated state for the resume to read.
    os.replace(partial, path)
    return path


def load_session_state(root: str | None, global_step: int) -> dict[str, Any] | None:
    """The state saved at ``root/global_step_<global_step>``, or ``None`` when there is none."""
    if root is None or global_step < 1:
        return None
    path = os.path.join(root, f"global_step_{global_step}", STATE_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        data: dict[str, Any] = parse_state(handle.read())  # a key written twice is refused, not dropped
    return data
