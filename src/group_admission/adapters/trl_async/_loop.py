"""
The rollout loop with admission: TRL's own ``_AsyncRolloutLoop``, through the seams TRL itself uses.

TRL's ``AsyncRolloutWorker`` runs ``_loop_cls`` in a spawned child (its own
``openenv_harness.py`` swaps it the same way). This loop changes two methods and nothing else:

- ``_repeat_iterator``, the prompt iterator: a prompt the prompt history predicts dead is
  skipped before any of its members is generated (its group id is left unused);
- ``_score_group``: TRL scores the group (rewards, advantages, rows) as it always does, then
  the :class:`AdmissionStream` judges it. A rejected group returns ``[]``, which TRL's score
  loop drops, and its generate loop keeps the stream full; a kept group's rows go to the
  queue with TRL's advantages times the stream's loss scale.

The stream's counts reach the trainer through TRL's own metrics queue, as counters TRL's
``_reduce_metric`` sums (``..._total``) and gauges it averages.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from typing import Any

from ... import AdmissionStream, StreamVerdict
from .._kit import ReportWindow
from ._versions import import_async_grpo

import_async_grpo()

from trl.experimental.async_grpo.async_rollout_worker import (  # noqa: E402  (after the check, which names the pip line)
    AsyncRolloutWorker,
    RolloutGroup,
    RolloutSample,
    _AsyncRolloutLoop,
)

__all__ = ["HOST", "METRIC_PREFIX", "NO_TRAINABLE_TOKENS", "AdmissionRolloutLoop", "AdmissionRolloutWorker"]

#: The host's name in messages.
HOST = "trl-async"
#: Where the admission metrics appear in TRL's logs.
METRIC_PREFIX = "group_admission/"
#: The external reason of a group with a conversation that produced no trainable token.
NO_TRAINABLE_TOKENS = "no_trainable_tokens"


class AdmissionRolloutLoop(_AsyncRolloutLoop):  # type: ignore[misc]  # TRL is untyped
    """
    TRL's asynchronous rollout loop, judging each scored group with an :class:`AdmissionStream`.

    Args:
        admission: The admission block (:meth:`AdmissionStream.from_mapping`: a
            ``SessionConfig`` mapping, ``preset`` included, plus a ``stream`` section).
        admission_state_path: Where the stream writes its state each time a window closes
            (``None``: nowhere), so that the trainer can put it in its checkpoints.
        admission_state: A stream state to resume from (:meth:`AdmissionStream.state_dict`
            output); it restores exactly or raises ``CheckpointError``.
        loop_kwargs: TRL's own loop arguments, passed on unchanged.
    """

    def __init__(
        self,
        *,
        admission: Mapping[str, Any] | None = None,
        admission_state_path: str | None = None,
        admission_state: Mapping[str, Any] | None = None,
        **loop_kwargs: Any,
    ) -> None:
        self._dataset_start = int(loop_kwargs.get("dataset_start_index", 0))
        # Before TRL's loop builds its event loop and thread pool: a bad setting leaks neither.
        size = loop_kwargs.get("num_generations", 8)
        self.admission = AdmissionStream.from_mapping(admission or {}, host=HOST, group_size=size)
        if admission_state is not None:
            self.admission.load_state_dict(admission_state)
        super().__init__(**loop_kwargs)
        self._state_path = admission_state_path
        self._reported = ReportWindow(self.admission.session)
        self._reported.close()  # a resumed stream's earlier counts were logged by the earlier run
        self._pushed: dict[str, int] = self._counters_now()
        self._last_pushed = self.admission.last_report
        self._prompts: dict[int, int] = {}

    # -- before generation: the prompt iterator ---------------------------------------
    def _prompt_id(self, group_id: int) -> int:
        """The dataset row of a group: TRL numbers groups from the row it started at."""
        size = len(self.dataset) if hasattr(self.dataset, "__len__") else 0
        return (self._dataset_start + group_id) % size if size else group_id

    def _repeat_iterator(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """TRL's iterator, less the prompts the history skips (their members are never yielded)."""
        skipping: int | None = None
        for group_id, row in super()._repeat_iterator():
            if group_id == skipping:
                continue
            if group_id not in self._prompts:
                prompt = self._prompt_id(group_id)
                # The stream bounds the skips in a row (max_skips_in_a_row): the iterator always yields.
                if not self.admission.pick([prompt]).picked:
                    skipping = group_id
                    continue
                self._prompts[group_id] = prompt
            yield group_id, row

    # -- after generation: judging ----------------------------------------------------
    async def _score_group(self, group: RolloutGroup) -> list[RolloutSample]:
        samples: list[RolloutSample] = await super()._score_group(group)
        scale = self.admission.loss_scale  # the last closed window's, for the open window's groups
        verdict = self._judge(group, samples)
        if not verdict.keep:
            return []
        if scale != 1.0:
            for sample in samples:
                sample.advantage *= scale
        return samples

    def _judge(self, group: RolloutGroup, samples: list[RolloutSample]) -> StreamVerdict:
        """The stream's verdict on a scored group; its metrics go to the trainer either way."""
        rewards, external = self._rewards(group, samples)
        gate_on = self.admission.session.policy.config.gate_on
        try:
            return self.admission.judge(
                self._components(group, samples) if gate_on else rewards,
                [_text(c) for c in group.completions] if self._texts else None,
                external_reasons=external,
                prompt_id=self._prompts.pop(group.group_id, self._prompt_id(group.group_id)),
                generated_tokens=sum(len(ids) for ids in group.completions_ids),
                versions=[group.model_version, self.model_version],
                current_version=self.model_version,
            )
        finally:
            self._push_admission_metrics()

    @property
    def _texts(self) -> bool:
        return self.admission.session.policy.config.similarity_gate_enabled

    @staticmethod
    def _first_rows(group: RolloutGroup) -> list[int | None]:
        """Each conversation's first row in TRL's samples (``None``: it produced no row)."""
        rows: list[int | None] = []
        at = 0
        for sequences in group.completions_sequences:
            rows.append(at if sequences else None)
            at += len(sequences)
        return rows

    def _rewards(
        self, group: RolloutGroup, samples: list[RolloutSample]
    ) -> tuple[list[float | None], list[str]]:
        """Each conversation's total reward as TRL computed it; unscorable (NaN) ones read as missing."""
        rewards: list[float | None] = []
        external: list[str] = []
        for row in self._first_rows(group):
            value = None if row is None else samples[row].metrics["reward"]
            rewards.append(None if value is None or math.isnan(value) else value)
            if row is None and NO_TRAINABLE_TOKENS not in external:
                external.append(NO_TRAINABLE_TOKENS)
        return rewards, external

    def _components(self, group: RolloutGroup, samples: list[RolloutSample]) -> dict[str, list[float | None]]:
        """Each reward function's reward per conversation (``rewards/<name>``), for ``gate_on``."""
        rows = self._first_rows(group)
        components: dict[str, list[float | None]] = {}
        for name in self.reward_func_names:
            values = [None if row is None else samples[row].metrics[f"rewards/{name}"] for row in rows]
            components[name] = [None if v is None or math.isnan(v) else v for v in values]
        return components

    # -- reporting --------------------------------------------------------------------
    def _counters_now(self) -> dict[str, int]:
        """The stream's counters beside the session's counts, as TRL sums them (``..._total``)."""
        ledger = self.admission.ledger
        counters = {
            "skipped_prompts": ledger.skipped_prompts,
            "arrived_stale": ledger.arrived_stale,
            "exhausted_windows": ledger.exhausted_windows,
            "trained_groups": self.admission.trained_groups(),
        }
        return {**counters, **self.admission.tokens.metrics()}

    def _push_admission_metrics(self) -> None:
        """Counts since the last push as TRL counters (``_total``), gauges as they are now."""
        counts = self._reported.close(METRIC_PREFIX, count_suffix="_total", rates=False)
        values: dict[str, float] = dict(counts)
        now = self._counters_now()
        values.update({f"{METRIC_PREFIX}{k}_total": float(v - self._pushed[k]) for k, v in now.items()})
        self._pushed = now
        ledger = self.admission.ledger
        values[f"{METRIC_PREFIX}version_span_max"] = float(ledger.version_span_max)
        values[f"{METRIC_PREFIX}loss_scale"] = self.admission.loss_scale
        report = self.admission.last_report
        if report is not None and report is not self._last_pushed:
            values.update(report.metrics(prefix=f"{METRIC_PREFIX}window/"))
            self._last_pushed = report
            self._write_state()
        self._push_metrics(values)

    def _write_state(self) -> None:
        """Write the stream's state where the trainer copies it into checkpoints (atomically)."""
        if self._state_path is None:
            return
        partial = f"{self._state_path}.partial"
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump(self.admission.state_dict(), handle)
        os.replace(partial, self._state_path)


def _text(messages: Any) -> str | None:
    """A conversation's completion as text (its messages' contents joined), for the redundancy gate."""
    if isinstance(messages, str):
        return messages
    if isinstance(messages, list):
        return "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    return None


class AdmissionRolloutWorker(AsyncRolloutWorker):  # type: ignore[misc]  # TRL is untyped
    """TRL's ``AsyncRolloutWorker`` running :class:`AdmissionRolloutLoop` (pass it ``admission=``)."""

    _loop_cls = AdmissionRolloutLoop
