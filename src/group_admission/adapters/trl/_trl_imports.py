"""
The host names the TRL adapter builds on, imported once, through the adapters' one idiom.

Every module of the adapter takes torch, accelerate and TRL from here: without them the
import fails here, with the pip line that installs them, and a TRL outside
``SUPPORTED_VERSIONS`` gets one warning.
"""

from __future__ import annotations

from .._kit import import_host, install_line
from ._versions import SUPPORTED_VERSIONS

for _module, _needs in (
    ("torch", "torch"),
    ("trl.trainer.grpo_trainer", "TRL"),
    ("accelerate.utils", "accelerate"),
):
    import_host(
        _module,
        adapter="group_admission.adapters.trl",
        needs=_needs,
        install=install_line("trl"),
        versions=SUPPORTED_VERSIONS,
    )

import torch  # noqa: E402  (after the check, which names the install line)
from accelerate.utils import gather, gather_object  # noqa: E402
from torch.utils.data import Sampler  # noqa: E402
from trl.trainer.grpo_trainer import GRPOTrainer  # noqa: E402

__all__ = ["GRPOTrainer", "Sampler", "gather", "gather_object", "torch"]
