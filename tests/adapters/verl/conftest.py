"""
The verl adapter's fixtures: the real verl 0.9.1 and a real TransferQueue on a local Ray.

These tests run in ``.venv-verl`` (``.ci/verl``). Elsewhere verl is not importable and
every test here skips with that reason, except the one that checks the install hint.

TransferQueue's ``SimpleStorage`` backend on a local Ray instance is verl's own local
mode, so nothing here is a stand-in for verl's storage; the rollout that fills it is
``doubles.verl_rollout.FakeRollout``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

with warnings.catch_warnings():
    # verl warns at import about optional engines (megatron, mindspeed) a CPU host lacks.
    warnings.simplefilter("ignore")
    try:
        import verl.trainer.ppo.v1.replay_buffer
        import verl.trainer.ppo.v1.utils  # noqa: F401

        VERL_IMPORT_ERROR: ImportError | None = None
    except ImportError as exc:
        VERL_IMPORT_ERROR = exc

SKIP_REASON = "needs verl==0.9.1 and TransferQueue (run .ci/verl)"


@pytest.fixture(scope="session")
def transfer_queue() -> Iterator[Any]:
    """A real TransferQueue (SimpleStorage) on a local, two-CPU Ray instance."""
    if VERL_IMPORT_ERROR is not None:
        pytest.skip(SKIP_REASON)
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    yield tq
    tq.close()
    ray.shutdown()


@pytest.fixture
def tq(transfer_queue: Any) -> Iterator[Any]:
    """The queue, emptied before and after each test."""

    def clear() -> None:
        for partition_id, items in (transfer_queue.kv_list() or {}).items():
            if items:
                transfer_queue.kv_clear(keys=list(items), partition_id=partition_id)

    clear()
    yield transfer_queue
    clear()
