"""
``AdmissionAsyncGRPOTrainer``: TRL's ``AsyncGRPOTrainer`` whose rollout worker runs the admission loop.

The trainer is TRL's; the subclass only wires admission in, on the process that holds the
rollout worker (rank 0):

- the worker TRL builds runs :class:`AdmissionRolloutLoop` (its ``_loop_cls``), with the
  admission block and the stream's state file among the loop's kwargs;
- TRL's ``RolloutQueueDataset`` drops samples older than ``max_staleness``: the queue it
  reads from is observed, so that each drop TRL makes is counted, per sample and per group,
  as stale (``group_admission/stale_samples_total``, ``group_admission/stale_groups_total``);
- a checkpoint holds the stream's last written state (``group_admission_stream.json``), and
  a resume from it hands that state to the new worker, which restores it exactly or refuses it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import Any

from ... import AdmissionStream, parse_state
from ._loop import HOST, METRIC_PREFIX, AdmissionRolloutLoop
from ._versions import import_async_grpo

import_async_grpo()

from trl.experimental.async_grpo.async_grpo_trainer import AsyncGRPOTrainer  # noqa: E402
from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker  # noqa: E402

__all__ = ["STATE_FILE", "AdmissionAsyncGRPOTrainer", "StaleDrops"]

#: The stream's state file, in the output directory (written by the worker) and in each checkpoint.
STATE_FILE = "group_admission_stream.json"
#: The metric TRL's ``RolloutQueueDataset`` appends 1.0 to for each stale sample it drops.
_TRL_STALE_METRIC = "sample/dropped_stale_total"


class StaleDrops:
    """
    TRL's queue, observed: which samples TRL's ``RolloutQueueDataset`` dropped as stale.

    TRL reads a sample, then either yields it or, when it is older than ``max_staleness``,
    appends to ``sample/dropped_stale_total`` and reads the next one at once. So a sample
    was dropped exactly when that metric grew between its read and the next read; the rule
    stays TRL's. Counts: ``samples`` dropped and ``groups`` with at least one sample dropped.
    """

    def __init__(self, rollout_queue: Any, metrics: Mapping[str, list[float]]) -> None:
        self._queue = rollout_queue
        self._metrics = metrics
        self._last: Any = None
        self._mark = 0
        self._stale_groups: set[int] = set()
        self.samples = 0

    @property
    def groups(self) -> int:
        """Groups with at least one sample TRL dropped as stale."""
        return len(self._stale_groups)

    def _drops(self) -> int:
        return len(self._metrics.get(_TRL_STALE_METRIC, ()))

    def get(self, *args: Any, **kwargs: Any) -> Any:
        """``queue.get``, settling whether the previous sample was dropped."""
        if self._last is not None and self._drops() > self._mark:
            self.samples += 1
            self._stale_groups.add(self._last.group_id)
        self._last = None
        sample = self._queue.get(*args, **kwargs)
        self._last, self._mark = sample, self._drops()
        return sample

    def __getattr__(self, name: str) -> Any:
        # qsize, put, close, ...: the queue's own.
        return getattr(self._queue, name)


class AdmissionAsyncGRPOTrainer(AsyncGRPOTrainer):  # type: ignore[misc]  # TRL is untyped
    """
    TRL's ``AsyncGRPOTrainer`` with group admission in its rollout worker.

    Args:
        admission: The admission block: a ``SessionConfig`` mapping (``preset:
            recommended`` included) plus a ``stream`` section (:class:`StreamSettings`).
            Set ``stream.window_groups`` to the groups one optimizer step consumes.
        args, kwargs: ``AsyncGRPOTrainer``'s own. An injected ``rollout_worker`` must be an
            ``AsyncRolloutWorker``, which is then made to run the admission loop.

    .. versionadded:: 0.2.0
    """

    def __init__(self, *args: Any, admission: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        # Checked here, where the error reaches the user; the worker's child builds its own stream.
        AdmissionStream.from_mapping(admission or {}, host=HOST)
        super().__init__(*args, **kwargs)
        self.stale_drops: StaleDrops | None = None
        self._stale_logged = (0, 0)
        worker = self.rollout_worker
        if worker is None:
            return  # not the main process: no worker, no queue
        if not isinstance(worker, AsyncRolloutWorker):
            msg = (
                "'rollout_worker' must be an AsyncRolloutWorker for group admission to run in it "
                f"(got {type(worker).__name__})"
            )
            raise TypeError(msg)
        if not issubclass(worker._loop_cls, AdmissionRolloutLoop):
            worker._loop_cls = AdmissionRolloutLoop
        worker._loop_kwargs["admission"] = dict(admission or {})
        worker._loop_kwargs["admission_state_path"] = os.path.abspath(
            os.path.join(self.args.output_dir, STATE_FILE)
        )

    def get_train_dataloader(self) -> Any:
        loader = super().get_train_dataloader()
        dataset = self._rollout_dataset
        if dataset is not None:
            self.stale_drops = StaleDrops(dataset.queue, dataset.metrics)
            dataset.queue = self.stale_drops
        return loader

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        drops = self.stale_drops
        if drops is not None and self.model.training:
            samples, groups = self._stale_logged
            metrics = self._metrics["train"]
            metrics[f"{METRIC_PREFIX}stale_samples_total"].append(float(drops.samples - samples))
            metrics[f"{METRIC_PREFIX}stale_groups_total"].append(float(drops.groups - groups))
            self._stale_logged = (drops.samples, drops.groups)
        super().log(logs, start_time)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        written = self.rollout_worker and self.rollout_worker._loop_kwargs.get("admission_state_path")
        if written and os.path.isfile(written):
            folder = os.path.join(self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}")
            shutil.copyfile(written, os.path.join(folder, STATE_FILE))

    def _inner_training_loop(self, *args: Any, **kwargs: Any) -> Any:
        worker = self.rollout_worker
        if isinstance(worker, AsyncRolloutWorker):
            worker._loop_kwargs.pop("admission_state", None)
            resume = kwargs.get("resume_from_checkpoint")
            saved = None if resume is None else os.path.join(resume, STATE_FILE)
            if saved is not None and os.path.isfile(saved):
                with open(saved, encoding="utf-8") as handle:
                    worker._loop_kwargs["admission_state"] = parse_state(handle.read())
        return super()._inner_training_loop(*args, **kwargs)
