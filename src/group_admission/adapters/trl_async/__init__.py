"""
TRL asynchronous adapter: group admission in ``trl.experimental.async_grpo.AsyncGRPOTrainer`` (TRL 1.16).

Replace ``AsyncGRPOTrainer(...)`` with ``AdmissionAsyncGRPOTrainer(..., admission={...})``: the
rollout worker then runs :class:`AdmissionRolloutLoop`, which judges each group as it is
scored (a rejected group never reaches the queue, and TRL's stream refills), skips prompts
the prompt history predicts dead, and reports through TRL's metrics. Importing this
package imports TRL; see docs/adapters/trl_async.md.
"""

from __future__ import annotations

from .._kit import publish as _publish
from ._loop import HOST, METRIC_PREFIX, NO_TRAINABLE_TOKENS, AdmissionRolloutLoop, AdmissionRolloutWorker
from ._trainer import STATE_FILE, AdmissionAsyncGRPOTrainer, StaleDrops
from ._versions import INSTALL_HINT, SUPPORTED_VERSIONS

__all__ = [
    "HOST",
    "INSTALL_HINT",
    "METRIC_PREFIX",
    "NO_TRAINABLE_TOKENS",
    "STATE_FILE",
    "SUPPORTED_VERSIONS",
    "AdmissionAsyncGRPOTrainer",
    "AdmissionRolloutLoop",
    "AdmissionRolloutWorker",
    "StaleDrops",
]

_publish(__name__)
