"""
verl adapter: group admission and a capped refill for verl's v1 (default) PPO trainer.

Turn it on with verl's own class-path config, no change to verl::

    trainer.v1.sampler.custom_sampler.path=pkg://group_admission.adapters.verl
    trainer.v1.sampler.custom_sampler.name=AdmissionReplayBuffer
    +trainer.v1.sampler.sampler_kwargs.policy.gate_on=[acc]
    trainer.checkpoint_callback_class=group_admission.adapters.verl.AdmissionCheckpointCallback

With ``+trainer.v1.sampler.sampler_kwargs.history=recommended`` (and
``data.dataloader_num_workers=0``) a prompt history picks the prompts verl's train
dataloader yields (:class:`AdmissionPromptSampler`).

Importing this module imports verl 0.9 and TransferQueue; without them it raises
``ImportError`` with the pip line that installs them. See ``docs/adapters/verl.md``.
"""

from __future__ import annotations

from .._kit import publish as _publish
from ._checkpoint import AdmissionCheckpointCallback
from ._checkpoint_state import STATE_FILE
from ._metrics import METRIC_PREFIX
from ._prompt_sampler import PROMPT_ID_FIELD, AdmissionPromptSampler
from ._replay_buffer import AdmissionReplayBuffer
from ._settings import VerlAdmissionSettings
from ._versions import SUPPORTED_VERSIONS

__all__ = [
    "METRIC_PREFIX",
    "PROMPT_ID_FIELD",
    "STATE_FILE",
    "SUPPORTED_VERSIONS",
    "AdmissionCheckpointCallback",
    "AdmissionPromptSampler",
    "AdmissionReplayBuffer",
    "VerlAdmissionSettings",
]

_publish(__name__)
