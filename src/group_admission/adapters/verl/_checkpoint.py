"""``AdmissionCheckpointCallback``: saves the admission session with verl's checkpoint."""

from __future__ import annotations

from typing import Any

from ._checkpoint_state import save_session_state
from ._replay_buffer import AdmissionReplayBuffer
from ._verl_imports import CheckpointCallback

__all__ = ["AdmissionCheckpointCallback"]


class AdmissionCheckpointCallback(CheckpointCallback):  # type: ignore[misc]
    """
    verl's ``trainer.checkpoint_callback_class``: writes the session state into each checkpoint.

    After verl saves ``global_step_<N>``, the admission statistics and budget state are
    written to ``global_step_<N>/group_admission_state.json``. On resume,
    :class:`AdmissionReplayBuffer` reads it back from ``sampler_kwargs.checkpoint_dir``.
    A trainer whose replay buffer is not an :class:`AdmissionReplayBuffer` is left alone.

    .. versionadded:: 0.2.0
    """

    def on_save(
        self, trainer: Any, global_step: int, checkpoint_dir: str, async_save: bool = False, **kwargs: Any
    ) -> None:
        """Write the session state into ``checkpoint_dir`` (verl's ``global_step_<N>`` folder)."""
        buffer = getattr(trainer, "replay_buffer", None)
        if isinstance(buffer, AdmissionReplayBuffer):
            save_session_state(checkpoint_dir, buffer.session.state_dict())
