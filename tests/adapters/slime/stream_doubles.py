"""
Test doubles of the slime rollout machinery the streaming rollout function runs on.

Mirrors THUDM/slime at 624b824a898ab0ec1fcb4d373004c7f3852bf515, for the fast lane (the
real tree runs the same tests when ``SLIME_SRC`` is set):

- ``GenerateState`` (``slime/rollout/sglang_rollout.py`` L83-149): ``pendings`` (one
  asyncio task per group), ``aborted``, ``reset``, ``submit_generate_tasks``;
- ``generate_and_rm`` / ``generate_and_rm_group`` (L224-336): the off-policy mask of a
  resumed sample, finished samples passing through, ``aborted`` turning new requests into
  ABORTED samples, the custom generate and reward functions;
- ``abort`` (L339-371): abort every request, await every pending task, and with
  ``--partial-rollout`` return the groups, stamping ``metadata["start_rollout_id"]``;
- ``RolloutDataSourceWithBuffer`` (``slime/rollout/data_source.py`` L168-229): blank
  ``Sample()`` groups (or a JSONL file's prompts) numbered per group and sample, the buffer
  taken first (``pop_first``), ``metadata`` saved and loaded with the position;
- ``Sample.append_response_tokens`` (``slime/utils/types.py`` L253-313): tokens, loss mask,
  log probabilities, weight version and the status from ``finish_reason``;
- ``RolloutFnTrainOutput`` / ``RolloutFnEvalOutput`` (``slime/rollout/base_types.py``).

The code is written for these tests; only the interfaces and semantics follow slime.
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.slime import scripted_engine, slime_types
from adapters.slime.virtual_clock import VirtualLoopRunner


class Sample(slime_types.Sample):
    """slime's ``Sample`` with ``append_response_tokens``."""

    def append_response_tokens(
        self,
        args: Any = None,
        *,
        tokens: list[int] | None = None,
        log_probs: list[float] | None = None,
        meta_info: dict[str, Any] | None = None,
        text: str | None = None,
        **kwargs: Any,
    ) -> None:
        tokens, log_probs, meta_info = list(tokens or []), list(log_probs or []), meta_info or {}
        if text is not None:
            self.response += text
        previous = self.response_length
        if tokens:
            self.tokens += tokens
            self.response_length += len(tokens)
            if self.loss_mask is None:
                self.loss_mask = [1] * previous
            self.loss_mask += [1] * len(tokens)
        self.rollout_log_probs = (self.rollout_log_probs or [0.0] * previous) + log_probs
        if "weight_version" in meta_info:
            self.weight_versions.append(meta_info["weight_version"])
        finish = meta_info.get("finish_reason", {}).get("type")
        statuses = {"length": "TRUNCATED", "abort": "ABORTED", "stop": "COMPLETED"}
        if finish in statuses:
            self.status = Sample.Status[statuses[finish]]


@dataclass
class RolloutFnTrainOutput:
    samples: list[list[Any]]
    metrics: dict[str, Any] | None = None


@dataclass
class RolloutFnEvalOutput:
    data: dict[str, dict[str, Any]]
    metrics: dict[str, Any] | None = None


class GenerateState(metaclass=slime_types.SingletonMeta):
    def __init__(self, args: Any) -> None:
        self.args = args
        self.reset()

    def reset(self) -> None:
        self.remaining_batch_size = 0
        self.pendings: set[asyncio.Task[Any]] = set()
        self.aborted = False

    def submit_generate_tasks(self, samples: list[list[Any]]) -> None:
        for group in samples:
            self.pendings.add(
                asyncio.create_task(generate_and_rm_group(self.args, group, {}, evaluation=False))
            )
        self.remaining_batch_size += len(samples)


_DONE = (Sample.Status.COMPLETED, Sample.Status.TRUNCATED)


async def generate_and_rm(
    args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False
) -> Any:
    if args.partial_rollout and args.mask_offpolicy_in_partial_rollout and sample.response_length > 0:
        sample.loss_mask = [0] * sample.response_length
    if sample.status in _DONE:
        return sample
    if GenerateState(args).aborted:
        sample.status = Sample.Status.ABORTED
        return sample
    sample = await slime_types.load_function(args.custom_generate_function_path)(
        args, sample, sampling_params
    )
    if sample.status is Sample.Status.ABORTED:
        return sample
    if sample.reward is None:
        sample.reward = await slime_types.load_function(args.custom_rm_path)(args, sample)
    return sample


async def generate_and_rm_group(
    args: Any, group: list[Any], sampling_params: dict[str, Any], evaluation: bool = False
) -> list[Any]:
    if GenerateState(args).aborted:
        return group
    tasks = [asyncio.create_task(generate_and_rm(args, s, dict(sampling_params), evaluation)) for s in group]
    return list(await asyncio.gather(*tasks))


async def abort(args: Any, rollout_id: int) -> list[list[Any]]:
    state = GenerateState(args)
    assert not state.aborted
    state.aborted = True
    await scripted_engine.abort_servers_until_idle(["http://scripted-engine"])
    aborted: list[list[Any]] = []
    while state.pendings:
        done, state.pendings = await asyncio.wait(state.pendings, return_when=asyncio.FIRST_COMPLETED)
        if not args.partial_rollout:
            continue
        for task in done:
            group = task.result()
            for sample in group:
                if sample.response and "start_rollout_id" not in sample.metadata:
                    sample.metadata["start_rollout_id"] = rollout_id
            aborted.append(group)
    return aborted


def generate_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> Any:
    """Only the evaluation path is doubled: it reports that slime's own function ran."""
    assert evaluation
    sample = Sample(index=0, reward=1.0, response="r", status=Sample.Status.COMPLETED)
    return RolloutFnEvalOutput(
        data={"slime_default_eval": {"rewards": [1.0], "truncated": [False], "samples": [sample]}}
    )


class RolloutDataSourceWithBuffer:
    """
    slime's buffered data source: blank groups, or with ``args.prompt_data`` a JSONL file's rows.

    As slime's (``slime/rollout/data_source.py``, ``slime/utils/data.py``): a row's
    ``args.input_key`` is the prompt, ``args.label_key`` the label and ``args.metadata_key``
    the metadata; passes wrap around (no shuffle); ``save``/``load`` write and read the
    offset, the counters and ``metadata`` with ``torch.save``/``torch.load`` under
    ``args.save``/``args.load``.
    """

    def __init__(self, args: Any) -> None:
        self.args = args
        self.buffer: list[list[Any]] = []
        self.sample_group_index = 0
        self.sample_index = 0
        self.sample_offset = 0
        self.epoch_id = 0
        self.metadata: dict[str, Any] = {}
        self.rows: list[Any] = []
        if getattr(args, "prompt_data", None) is not None:
            with open(args.prompt_data, encoding="utf-8") as handle:
                rows = [json.loads(line) for line in handle if line.strip()]
            self.rows = [
                Sample(
                    prompt=row[args.input_key],
                    label=row[args.label_key] if args.label_key is not None else None,
                    metadata=row.get(args.metadata_key) or {},
                )
                for row in rows
            ]

    def __len__(self) -> int:
        return len(self.rows)

    def _prompts(self, count: int) -> list[Any]:
        if not self.rows:
            return [Sample() for _ in range(count)]
        prompts = []
        for _ in range(count):
            if self.sample_offset == len(self.rows):
                self.sample_offset, self.epoch_id = 0, self.epoch_id + 1
            prompts.append(self.rows[self.sample_offset])
            self.sample_offset += 1
        return prompts

    def get_samples(self, num_samples: int) -> list[list[Any]]:
        taken = min(len(self.buffer), num_samples)
        samples, self.buffer = self.buffer[:taken], self.buffer[taken:]
        for prompt in self._prompts(num_samples - taken):
            group = []
            for _ in range(self.args.n_samples_per_prompt):
                sample = copy.deepcopy(prompt)
                sample.group_index, sample.index = self.sample_group_index, self.sample_index
                self.sample_index += 1
                group.append(sample)
            self.sample_group_index += 1
            samples.append(group)
        return samples

    def add_samples(self, samples: list[list[Any]]) -> None:
        for group in samples:
            assert len(group) == self.args.n_samples_per_prompt
            self.buffer.append(group)

    def get_buffer_length(self) -> int:
        return len(self.buffer)

    _STATE = ("sample_offset", "epoch_id", "sample_group_index", "sample_index", "metadata")

    def save(self, rollout_id: int) -> None:
        import torch

        path = Path(self.args.save) / f"rollout/global_dataset_state_dict_{rollout_id}.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({name: getattr(self, name) for name in self._STATE}, path)

    def load(self, rollout_id: int | None = None) -> None:
        import torch

        path = Path(self.args.load) / f"rollout/global_dataset_state_dict_{rollout_id}.pt"
        state = torch.load(path)  # weights_only, as slime's: plain containers only
        for name in self._STATE:
            setattr(self, name, state[name])


def install(monkeypatch: pytest.MonkeyPatch, runner: VirtualLoopRunner) -> None:
    """Make ``import slime...`` find these doubles, with ``runner`` as slime's background loop."""
    modules: dict[str, dict[str, Any]] = {
        "slime": {},
        "slime.rollout": {},
        "slime.rollout.sglang_rollout": {
            "GenerateState": GenerateState,
            "abort": abort,
            "generate_and_rm_group": generate_and_rm_group,
            "generate_rollout": generate_rollout,
        },
        "slime.rollout.base_types": {
            "RolloutFnTrainOutput": RolloutFnTrainOutput,
            "RolloutFnEvalOutput": RolloutFnEvalOutput,
        },
        "slime.rollout.filter_hub": {},
        "slime.rollout.filter_hub.base_types": {"MetricGatherer": slime_types.MetricGatherer},
        "slime.utils": {},
        "slime.utils.misc": {
            "SingletonMeta": slime_types.SingletonMeta,
            "load_function": slime_types.load_function,
        },
        "slime.utils.async_utils": {"run": runner.run},
        "slime.utils.types": {"Sample": Sample},
    }
    for name, attributes in modules.items():
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        monkeypatch.setitem(sys.modules, name, module)
