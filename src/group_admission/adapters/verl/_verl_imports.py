"""
The verl names the adapter builds on, imported once, with an install hint when verl is missing.

Importing ``group_admission.adapters.verl`` imports verl (its v1 replay buffer needs the
TransferQueue package); without them the import fails here with the pip line that fixes it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from .._kit import import_host, install_line
from ._versions import SUPPORTED_VERSIONS

__all__ = [
    "CheckpointCallback",
    "KVBatchMeta",
    "PPOTrainer",
    "ReplayBuffer",
    "Sampler",
    "SkipManager",
    "StatefulDataLoader",
    "plain_container",
    "torch",
    "tq",
]

with warnings.catch_warnings():
    # verl warns at import about optional engines (megatron, mindspeed) a CPU host lacks.
    warnings.simplefilter("ignore", UserWarning)
    for _module in ("transfer_queue", "omegaconf", "verl.trainer.ppo.v1.replay_buffer"):
        import_host(
            _module,
            adapter="group_admission.adapters.verl",
            needs="verl with its v1 replay buffer",
            install=install_line("verl"),
            versions=SUPPORTED_VERSIONS,
        )
    import torch
    import transfer_queue as tq
    from omegaconf import DictConfig, ListConfig, OmegaConf
    from torch.utils.data import Sampler
    from torchdata.stateful_dataloader import StatefulDataLoader
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.checkpoint_callback import CheckpointCallback
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer
    from verl.utils.skip import SkipManager


def plain_container(value: Any) -> Any:
    """An OmegaConf ``DictConfig``/``ListConfig`` as plain, resolved dicts and lists."""
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    if isinstance(value, Mapping):
        return {key: plain_container(item) for key, item in value.items()}
    return value
