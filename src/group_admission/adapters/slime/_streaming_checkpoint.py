"""
The streaming rollout in slime's own rollout checkpoint: the session's state and the prompt history's.

slime's ``RolloutManager`` saves its data source after a rollout is trained
(``RolloutDataSource.save`` writes the source's ``metadata`` dict with ``torch.save``) and
loads it when a run resumes (``load(start_rollout_id - 1)``). At the end of each rollout
the streaming rollout puts the session's state (rate estimate, counts) and the prompt
history's, both JSON-safe, into that dict under :data:`STATE_KEY`, by rollout: the states
after this rollout and after the one before, since slime's ``train_async`` saves a
rollout's data source once the next rollout has run. Before the first rollout of a
configuration in a process, the state after the previous rollout is restored exactly, or
refused. No slime import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ... import AdmissionSession, CheckpointError, PromptHistory
from .._kit import describe, restored_history
from ._streaming_prompts import StreamPrompts

__all__ = ["STATE_KEY", "load_stream_state", "restore_stream_state", "save_stream_state"]

#: The key of the data source's ``metadata`` that holds the streaming rollout's states.
STATE_KEY = "group_admission_streaming"
_PARTS = ("history", "session")


def _states(data_source: Any) -> dict[str, Any]:
    """The states the data source's ``metadata`` holds, by rollout (none without a ``metadata`` dict)."""
    metadata = getattr(data_source, "metadata", None)
    states = metadata.get(STATE_KEY) if isinstance(metadata, dict) else None
    if states is None:
        return {}
    if not isinstance(states, dict) or not all(isinstance(key, str) and key.isdigit() for key in states):
        msg = (
            f"slime's rollout checkpoint must hold the streaming rollout's states by rollout under "
            f"metadata[{STATE_KEY!r}] (got {describe(states)})"
        )
        raise CheckpointError(msg)
    return states


def save_stream_state(
    data_source: Any, rollout_id: int, session: AdmissionSession, history: PromptHistory | None
) -> None:
    """
    Put the states after ``rollout_id`` into the data source's ``metadata``, beside the previous rollout's.

    A data source without a ``metadata`` dict keeps nothing (a custom ``--data-source-path``):
    after a restart the session and the history then start afresh.
    """
    metadata = getattr(data_source, "metadata", None)
    if not isinstance(metadata, dict):
        return
    earlier = [key for key in _states(data_source) if int(key) < rollout_id]
    kept = {key: metadata[STATE_KEY][key] for key in sorted(earlier, key=int)[-1:]}
    state = {"session": session.state_dict(), "history": None if history is None else history.to_dict()}
    metadata[STATE_KEY] = {**kept, str(rollout_id): state}


def load_stream_state(data_source: Any, rollout_id: int) -> Mapping[str, Any] | None:
    """
    The states after rollout ``rollout_id - 1`` in the data source's ``metadata`` (``None``: it holds none).

    Raises:
        CheckpointError: it holds states, but none after ``rollout_id - 1``, or a malformed one.
    """
    states = _states(data_source)
    if not states:
        return None
    state = states.get(str(rollout_id - 1))
    if state is None:
        msg = (
            f"slime's rollout checkpoint holds the streaming rollout's states after rollout(s) "
            f"{sorted(states, key=int)}, not after rollout {rollout_id - 1}, the one before rollout "
            f"{rollout_id}: they cannot be restored exactly (remove metadata[{STATE_KEY!r}] from the "
            "data source's checkpoint to start afresh)"
        )
        raise CheckpointError(msg)
    if not isinstance(state, Mapping) or sorted(state) != sorted(_PARTS):
        msg = f"a streaming rollout's state must hold {list(_PARTS)} (got {describe(state)})"
        raise CheckpointError(msg)
    return state


def restore_stream_state(
    data_source: Any, rollout_id: int, session: AdmissionSession, prompts: StreamPrompts | None
) -> None:
    """
    Restore the session and the prompt history after rollout ``rollout_id - 1``, if the checkpoint holds them.

    A history saved without one (or one the settings no longer ask for) is not restored:
    the history starts afresh (or stays off).

    Raises:
        CheckpointError: the checkpoint holds states but not that one, a malformed one, or
            one saved under other settings; then nothing is restored.
    """
    state = load_stream_state(data_source, rollout_id)
    if state is None:
        return
    history = None
    if prompts is not None and state["history"] is not None:
        config = prompts.history.config
        history = restored_history(state["history"], config, settings="the streaming settings'")
    session.load_state_dict(state["session"])
    if prompts is not None and history is not None:
        prompts.history = history
