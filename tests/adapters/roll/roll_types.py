"""
Test doubles of ROLL's types, rollout loop and group queue.

Mirrors alibaba/ROLL at commit 8eb27cc2dc34c4d1310b169d9b86d339004d811a (2026-08-18, after
tag v0.3.0), field for field where a field is mirrored:

- ``DataProto`` (``batch`` a TensorDict behind a ``BatchProxy`` whose ``len()`` raises,
  ``non_tensor_batch`` of object arrays, ``meta_info``; ``__len__``, ``__getitem__`` with
  int/slice/list/str, ``from_dict``, ``select_idxs``, ``slice`` that *share* ``meta_info``,
  ``concat`` that merges ``meta_info["metrics"]``): ``roll/distributed/scheduler/protocol.py``
  and ``remote_protocol.py`` (no remote batches);
- ``RewardFilterConfig``, ``RewardConfig`` (the filter fields), ``RLVRConfig`` (the fields the
  rollout loop reads): ``roll/pipeline/rlvr/rlvr_config.py``, ``roll/configs/base_config.py``;
- ``query_filter``, ``response_filter``, ``UserDefinedRolloutLoop``:
  ``roll/distributed/scheduler/user_defined_rollout_loop.py`` (generation and reward are one
  call to the test's responder);
- ``RolloutContext`` (attributes), ``expand_responses``, ``run_prompt`` (the commit/abort of
  ``RolloutContext.process_new_prompt``), ``collect_metrics`` (the metric part of
  ``collect_items_as_batch``): ``roll/distributed/scheduler/generate_scheduler.py``;
- ``EnvManagerConfig``, ``AgenticConfig`` (the fields a group filter reads):
  ``roll/pipeline/agentic/agentic_config.py``; ``GroupFilter``:
  ``roll/pipeline/agentic/agentic_pipeline.py``; ``DropFlagGroupFilter``: the ``GroupFilter`` of
  ``roll/pipeline/agentic/env_manager/agent_native_env_manager.py``;
- ``GroupQueue`` (``put``/``advance_group``/``group_filter_count``):
  ``roll/distributed/scheduler/rollout_scheduler.py``;
- ``traj_rollout``, ``step_rollout``, ``placeholder_rollout``: the DataProtos of
  ``TrajEnvManager.formulate_rollouts``, ``StepEnvManager.formulate_rollouts`` and
  ``AgentNativeStepEnvManager.create_placeholder_rollout``;
- ``safe_import_class``: ``roll/utils/import_utils.py``.

The code is written for these tests; only the interfaces and semantics follow ROLL.
"""

from __future__ import annotations

import asyncio
import importlib
import math
import sys
import types
from collections import deque
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pytest
import torch
from tensordict import TensorDict

UPSTREAM_COMMIT = "8eb27cc2dc34c4d1310b169d9b86d339004d811a"


class BatchProxy:
    """``remote_protocol.BatchProxy`` without a remote batch: dict-like, and ``len()`` raises."""

    def __init__(self, batch: TensorDict | dict[str, Any] | None) -> None:
        self._batch = batch

    def __getitem__(self, key: str) -> Any:
        if self._batch is not None and key in self._batch.keys():
            return self._batch[key]
        msg = f"Key '{key}' not found in batch or remote_batch"
        raise KeyError(msg)

    def __setitem__(self, key: str, value: Any) -> None:
        assert self._batch is not None
        self._batch[key] = value

    def __contains__(self, key: str) -> bool:
        return self._batch is not None and key in self._batch.keys()

    def __len__(self) -> int:
        msg = "BatchProxy does not support len(); use len(DataProto)"
        raise TypeError(msg)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def keys(self) -> set[str]:
        return set() if self._batch is None else set(self._batch.keys())

    def update(self, other: dict[str, Any]) -> None:
        for key, value in other.items():
            self[key] = value

    @property
    def batch_size(self) -> Any:
        return self._batch.batch_size  # type: ignore[union-attr]


class DataProto:
    def __init__(
        self,
        batch: TensorDict | None = None,
        non_tensor_batch: dict[str, np.ndarray] | None = None,
        meta_info: dict[str, Any] | None = None,
    ) -> None:
        self._batch = batch
        self._non_tensor_batch = non_tensor_batch if non_tensor_batch is not None else {}
        self.meta_info = meta_info if meta_info is not None else {}

    @property
    def batch(self) -> BatchProxy:
        return BatchProxy(self._batch)

    @property
    def non_tensor_batch(self) -> BatchProxy:
        return BatchProxy(self._non_tensor_batch)

    def __len__(self) -> int:
        if self._batch is not None:
            return len(self._batch)
        if self._non_tensor_batch:
            return len(next(iter(self._non_tensor_batch.values())))
        return 0

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, slice):
            return self.slice(item.start, item.stop, item.step)
        if isinstance(item, (list, np.ndarray, torch.Tensor)):
            return self.select_idxs(item)
        if isinstance(item, (int, np.integer)):
            return self.slice(item, item + 1, 1)
        if isinstance(item, str):
            if self._batch is not None and item in self._batch.keys():
                return self._batch[item]
            if item in self._non_tensor_batch:
                return self._non_tensor_batch[item]
            msg = f"Key '{item}' not found in batch or remote_batch"
            raise KeyError(msg)
        msg = f"Indexing with {type(item)} is not supported"
        raise TypeError(msg)

    @classmethod
    def from_dict(
        cls,
        tensors: dict[str, torch.Tensor],
        non_tensors: dict[str, Any] | None = None,
        meta_info: Any = None,
    ) -> DataProto:
        batch_size = next(iter(tensors.values())).shape[:1]
        objects = {}
        for key, value in (non_tensors or {}).items():
            objects[key] = np.empty(len(value), dtype=object)
            objects[key][:] = value
        return cls(TensorDict(source=tensors, batch_size=batch_size), objects, meta_info or {})

    def select_idxs(self, idxs: Any) -> DataProto:
        index = torch.tensor(idxs) if isinstance(idxs, list) else torch.as_tensor(idxs)
        batch = None
        if self._batch is not None:
            batch = TensorDict({k: v[index] for k, v in self._batch.items()}, batch_size=(len(index),))
        objects = {k: v[index.numpy()] for k, v in self._non_tensor_batch.items()}
        return type(self)(batch, objects, self.meta_info)  # meta_info is shared, as upstream does

    def slice(self, start: Any = None, end: Any = None, step: Any = None) -> DataProto:
        window = slice(start, end, step)
        batch = None if self._batch is None else self._batch[window]
        objects = {k: v[window] for k, v in self._non_tensor_batch.items()}
        return type(self)(batch, objects, self.meta_info)

    @staticmethod
    def concat(data: list[DataProto]) -> DataProto:
        if len(data) == 1:
            return data[0]
        batch = torch.cat([d._batch for d in data if d._batch is not None], dim=0)
        keys = {k for d in data for k in d._non_tensor_batch}
        objects = {
            k: np.concatenate([d._non_tensor_batch[k] for d in data if k in d._non_tensor_batch])
            for k in keys
        }
        meta = dict(data[0].meta_info)
        if any(d.meta_info.get("metrics") is not None for d in data):
            merged: dict[str, list[Any]] = {}
            for d in data:
                for key, value in (d.meta_info.get("metrics") or {}).items():
                    merged.setdefault(key, []).append(value)
            meta["metrics"] = merged
        return DataProto(batch, objects, meta)


# -- RLVR --------------------------------------------------------------------------------
@dataclass
class RewardFilterConfig:
    type: Literal["no_filter", "mean_filter", "std_filter"] = "no_filter"
    filter_args: dict[str, Any] = field(default_factory=dict)


@dataclass
class RewardConfig:
    query_filter_config: RewardFilterConfig = field(default_factory=RewardFilterConfig)
    response_filter_config: RewardFilterConfig = field(default_factory=RewardFilterConfig)
    tag_included: list[str] = field(default_factory=list)


@dataclass
class RLVRConfig:
    rewards: dict[str, RewardConfig] = field(default_factory=dict)
    rollout_batch_size: int = 128
    num_return_sequences_in_group: int = 1
    is_num_return_sequences_expand: bool = False
    prompt_length: int = 8
    user_defined_rollout_loop_cls: str = (
        "roll.distributed.scheduler.user_defined_rollout_loop.UserDefinedRolloutLoop"
    )
    system_envs: dict[str, str] = field(default_factory=dict)


def query_filter(data_list: list[DataProto], config: RLVRConfig) -> bool:
    response_level_rewards = [data.batch["response_level_rewards"] for data in data_list]
    if len(response_level_rewards) == 1:
        return True
    rewards = torch.cat(response_level_rewards, dim=0)
    domain = data_list[0].non_tensor_batch["domain"][0]
    query_filter_config = config.rewards[domain].query_filter_config
    if query_filter_config.type == "no_filter":
        return True
    if query_filter_config.type == "mean_filter":
        threshold_up = query_filter_config.filter_args.get("threshold_up", math.inf)
        threshold_down = query_filter_config.filter_args.get("threshold_down", -1)
        if torch.mean(rewards) <= threshold_down or torch.mean(rewards) >= threshold_up:
            return False
    elif query_filter_config.type == "std_filter":
        std_threshold = query_filter_config.filter_args.get("std_threshold", -1)
        if torch.std(rewards) <= std_threshold:
            return False
    return True


def response_filter(data_item: DataProto, config: RLVRConfig) -> bool:
    return True


Responder = Callable[[int], DataProto]


class RolloutContext:
    """The attributes ``RolloutContext`` exposes; generation and reward come from ``responder``."""

    def __init__(
        self,
        prompt_id: int,
        pipeline_config: RLVRConfig,
        responder: Responder,
        *,
        is_val: bool = False,
        global_step: int = 0,
        domain: str = "math_rule",
        num_return_sequences: int | None = None,
    ) -> None:
        n = num_return_sequences or pipeline_config.num_return_sequences_in_group
        self.prompt_id = prompt_id
        self.meta_info = {"global_step": global_step, "generation_config": {"num_return_sequences": n}}
        self.pipeline_config = pipeline_config
        self.is_val = is_val
        self.sequence_length = 16
        self.prompt_length = pipeline_config.prompt_length
        self.is_num_return_sequences_expand = pipeline_config.is_num_return_sequences_expand
        self.domain: str | None = None
        self.sampling_start_step: int | None = None
        self._dataset_domain = domain
        self._responder = responder

    def get_request_data(self, meta_info: dict[str, Any]) -> tuple[dict[str, Any], str]:
        self.domain = self._dataset_domain
        return {"prompt_id": self.prompt_id, "meta_info": meta_info}, self._dataset_domain

    @asynccontextmanager
    async def do_generate_and_reward(self, max_concurrency: int) -> Any:
        self.sampling_start_step = self.meta_info["global_step"]
        yield

    async def generate(self, req: dict[str, Any], domain: str) -> DataProto:
        data = self._responder(self.prompt_id)
        data.meta_info = {**req["meta_info"], **data.meta_info}
        return data


class UserDefinedRolloutLoop:
    """ROLL's default rollout loop: generate and reward, split rows, response filter, query filter."""

    def __init__(self) -> None:
        pass

    async def process_new_prompt(self, context: RolloutContext) -> DataProto | list[DataProto] | None:
        request_data, domain = context.get_request_data(meta_info=context.meta_info)
        async with context.do_generate_and_reward(max_concurrency=1):
            req = await context.generate(req=request_data, domain=domain)
            responses = [req[[idx]] for idx in range(req.batch.batch_size[0])]
            responses = [
                r for r in responses if context.is_val or response_filter(r, context.pipeline_config)
            ]
        if not context.is_val and not query_filter(responses, context.pipeline_config):
            return None
        return responses


def expand_responses(response: DataProto | list[Any] | None) -> list[DataProto]:
    ret: list[DataProto] = []
    if response is None:
        return ret
    stack: deque[Any] = deque([response])
    while stack:
        current = stack.pop()
        if isinstance(current, list):
            stack.extend(reversed(current))
        else:
            assert isinstance(current, DataProto)
            batch_size = current.batch.batch_size[0]
            if batch_size > 1:
                stack.extend(reversed([current[i] for i in range(batch_size)]))
            else:
                ret.append(current)
    return ret


def run_prompt(loop: Any, context: RolloutContext) -> list[DataProto] | None:
    """``RolloutContext.process_new_prompt``: the committed responses, or ``None`` when aborted."""
    num_return_sequences = context.meta_info["generation_config"]["num_return_sequences"]
    responses = asyncio.run(loop.process_new_prompt(context=context))
    if responses is None:
        return None
    committed = expand_responses(responses)
    assert len(committed) == num_return_sequences, "is_use_additional_prompts is required"
    return committed


_REDUCERS: dict[str, Callable[[Any], Any]] = {
    "mean": np.mean,
    "max": np.max,
    "min": np.min,
    "p50": lambda x: np.percentile(x, 50),
    "p99": lambda x: np.percentile(x, 99),
    "std": np.std,
    "sum": np.sum,
}


def reduce_metrics(metrics: dict[str, Any], reduce_func: Callable[[Any], Any] = np.mean) -> dict[str, Any]:
    """ROLL's ``reduce_metrics``: the reducer comes from an ``@tag`` or ``_tag`` suffix of the name."""

    def parse(name: str) -> Callable[[Any], Any]:
        if "@" in name:
            tag = name.rsplit("@", 1)[1].strip()
            if tag not in _REDUCERS:
                msg = f"Unknown reducer tag '{tag}' in metric '{name}'"
                raise ValueError(msg)
            return _REDUCERS[tag]
        for suffix, reducer in _REDUCERS.items():
            if name.endswith(f"_{suffix}"):
                return reducer
        return reduce_func

    for key, value in list(metrics.items()):
        if isinstance(value, (int, float, np.number, torch.Tensor)):
            continue
        if isinstance(value, (list, tuple, np.ndarray)) and len(value):
            metrics[key] = float(parse(key)(value))
    return metrics


def collect_metrics(domain: str, responses: list[DataProto]) -> dict[str, Any]:
    """
    A domain batch's metrics as the RLVR pipeline logs them.

    ``collect_items_as_batch`` concatenates the responses (their ``meta_info["metrics"]``
    become per-key lists) and adds ``scheduler/<domain>/<key>/{mean,max,min}``; the
    pipeline then applies ``reduce_metrics`` to the whole dict.
    """
    batch = DataProto.concat(responses)
    metrics = dict(batch.meta_info.get("metrics", {}))
    for key, values in batch.meta_info.get("metrics", {}).items():
        metrics[f"scheduler/{domain}/{key}/mean"] = float(np.mean(values))
        metrics[f"scheduler/{domain}/{key}/max"] = float(np.max(values))
        metrics[f"scheduler/{domain}/{key}/min"] = float(np.min(values))
    return reduce_metrics(metrics)


def agentic_batch_metrics(trajectories: list[DataProto]) -> dict[str, Any]:
    """``RolloutScheduler.get_batch`` appends each trajectory's metrics; the pipeline reduces them."""
    metrics: dict[str, list[Any]] = {}
    for data in trajectories:
        for key, value in data.meta_info["metrics"].items():
            metrics.setdefault(key, []).append(value)
    return reduce_metrics(metrics)


def rlvr_responses(
    rewards: list[float], *, domain: str = "math_rule", tokens: list[list[int]] | None = None
) -> DataProto:
    """One prompt's generated and rewarded responses, one row each (``postprocess_generate`` + reward)."""
    rows = len(rewards)
    prompt = [[5, 6]] * rows
    answers = tokens or [[10 + i, 20 + i, 30 + i] for i in range(rows)]
    width = 2 + max(len(a) for a in answers)
    input_ids = torch.zeros((rows, width), dtype=torch.long)
    response_mask = torch.zeros((rows, width), dtype=torch.long)
    for row, answer in enumerate(answers):
        input_ids[row, : 2 + len(answer)] = torch.tensor(prompt[row] + answer)
        response_mask[row, 2 : 2 + len(answer)] = 1
    reward = torch.tensor(rewards, dtype=torch.float16)
    token_level = torch.zeros((rows, width))
    return DataProto.from_dict(
        {
            "input_ids": input_ids,
            "attention_mask": (input_ids != 0).long(),
            "response_mask": response_mask,
            "token_level_rewards": token_level,
            "response_level_rewards": reward,
            "scores": reward.clone(),
        },
        {"domain": [domain] * rows, "rollout_id": [f"r{row}" for row in range(rows)]},
        {"metrics": {"reward/mean": float(np.mean([r for r in rewards if math.isfinite(r)] or [0.0]))}},
    )


# -- agentic -----------------------------------------------------------------------------
@dataclass
class EnvManagerConfig:
    num_env_groups: int = 128
    group_size: int = 1
    group_size_redundancy: int = 0
    tags: list[str] = field(default_factory=lambda: ["SimpleSokoban"])
    group_filter_cls: str = "roll.pipeline.agentic.agentic_pipeline.GroupFilter"
    system_envs: dict[str, str] = field(default_factory=dict)


@dataclass
class AgenticConfig:
    rollout_batch_size: int = 128
    train_env_manager: EnvManagerConfig = field(default_factory=EnvManagerConfig)
    val_env_manager: EnvManagerConfig = field(default_factory=EnvManagerConfig)
    system_envs: dict[str, str] = field(default_factory=dict)
    custom_envs: dict[str, Any] = field(default_factory=dict)


class GroupFilter:
    def __init__(self, config: AgenticConfig, env_manager_config: EnvManagerConfig, mode: str) -> None:
        pass

    def filter(self, group_id: int, episode_id: int, group: list[DataProto]) -> bool:
        return False


class DropFlagGroupFilter:
    def __init__(self, config: AgenticConfig, env_manager_config: EnvManagerConfig, mode: str) -> None:
        self.config = config
        self.env_manager_config = env_manager_config
        self.mode = mode
        self.global_filter_stats = {"total": 0, "filtered": 0}

    def filter(self, group_id: int, episode_id: int, group: list[DataProto]) -> bool:
        self.global_filter_stats["total"] += 1
        if not any(data.meta_info.get("drop_flag", False) for data in group):
            return False
        total, filtered = self.global_filter_stats["total"], self.global_filter_stats["filtered"]
        if filtered / total >= 0.5 or (filtered + 1) / total > 0.5:
            return False
        self.global_filter_stats["filtered"] += 1
        return True


@dataclass
class GroupData:
    group_id: int
    episode_id: int
    create_step: int
    rollouts: list[Any] = field(default_factory=list)


class GroupQueue:
    def __init__(self, group_id: int, group_size: int, group_filter: Any) -> None:
        self.group_id = group_id
        self.group_size = group_size
        self.group_filter = group_filter
        self.group_filter_count = 0
        self.current_step = 0
        self.next_episode_id = 0
        self.groups: dict[int, GroupData] = {}
        self.completed: list[GroupData] = []
        self.exited = False

    def advance_group(self, create_step: int) -> None:
        self.groups[self.next_episode_id] = GroupData(self.group_id, self.next_episode_id, create_step)
        self.next_episode_id += 1

    def put(self, episode_id: int, start_step: int, rollout: DataProto | None) -> None:
        if episode_id not in self.groups:
            return
        group = self.groups[episode_id]
        group.rollouts.append(rollout)
        if len(group.rollouts) == self.group_size:
            if all(r is None for r in group.rollouts):
                self.exited = True
            elif self.group_filter.filter(
                group_id=self.group_id, episode_id=episode_id, group=group.rollouts
            ):
                self.group_filter_count += 1
                self.groups.pop(episode_id)
                self.advance_group(create_step=self.current_step)
            else:
                self.completed.append(group)


def make_group_filter(config: AgenticConfig, env_manager_config: EnvManagerConfig, mode: str) -> Any:
    """What ``GroupQueueManager.__init__`` does with ``group_filter_cls``."""
    group_filter_cls = safe_import_class(env_manager_config.group_filter_cls)
    assert group_filter_cls
    return group_filter_cls(config, env_manager_config, mode)


def traj_rollout(
    score: float, *, tokens: list[int] | None = None, group_id: int = 0, env_id: int = 0
) -> DataProto:
    """``TrajEnvManager.formulate_rollouts``: one row, the episode score at the last real token."""
    response = tokens or [40 + env_id, 50 + env_id]
    token_ids = [1, 2, *response]
    length = len(token_ids) + 2  # right padding up to sequence_length
    input_ids = torch.zeros((1, length), dtype=torch.long)
    input_ids[0, : len(token_ids)] = torch.tensor(token_ids)
    response_mask = torch.zeros((1, length), dtype=torch.bool)
    response_mask[0, 2 : len(token_ids)] = True
    scores = torch.zeros((1, length))
    scores[0, len(token_ids) - 1] = score
    return DataProto.from_dict(
        {
            "input_ids": input_ids,
            "attention_mask": (input_ids != 0).long(),
            "position_ids": torch.arange(length).unsqueeze(0),
            "response_mask": response_mask,
            "prompt_mask": ~response_mask,
            "scores": scores,
        },
        {
            "env_ids": [env_id],
            "group_ids": [group_id],
            "tags": ["SimpleSokoban"],
            "step_scores": [[score]],
            "episode_scores": [score],
        },
        {"metrics": {"env/SimpleSokoban/success": float(score > 0), "env/response_length": 2.0}},
    )


def step_rollout(step_rewards: list[float], *, env_id: int = 0) -> DataProto:
    """``StepEnvManager.formulate_rollouts``: one row per step, each with the episode score."""
    rows = [traj_rollout(r, env_id=env_id) for r in step_rewards]
    merged = DataProto.concat(rows)
    merged._non_tensor_batch["episode_scores"] = np.array([sum(step_rewards)] * len(rows), dtype=object)
    merged.meta_info = {"metrics": {"env/SimpleSokoban/num_actions": len(rows)}}
    return merged


def placeholder_rollout() -> DataProto:
    """``AgentNativeStepEnvManager.create_placeholder_rollout``: all-zero, ``drop_flag`` set."""
    data = traj_rollout(0.0)
    data._batch["scores"] = torch.zeros_like(data._batch["scores"])  # type: ignore[index]
    data.meta_info = {"metrics": {}, "drop_flag": True}
    return data


# -- loading -----------------------------------------------------------------------------
def safe_import_class(class_path: str) -> Any:
    module_path, class_name = class_path.rsplit(".", 1)
    try:
        return getattr(importlib.import_module(module_path), class_name)
    except (ImportError, AttributeError):
        return None


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import roll...`` find these doubles."""
    modules = {
        "roll": {},
        "roll.distributed": {},
        "roll.distributed.scheduler": {},
        "roll.distributed.scheduler.protocol": {"DataProto": DataProto},
        "roll.distributed.scheduler.user_defined_rollout_loop": {
            "UserDefinedRolloutLoop": UserDefinedRolloutLoop,
            "query_filter": query_filter,
            "response_filter": response_filter,
        },
        "roll.pipeline": {},
        "roll.pipeline.agentic": {},
        "roll.pipeline.agentic.agentic_pipeline": {"GroupFilter": GroupFilter},
    }
    for name, attributes in modules.items():
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        monkeypatch.setitem(sys.modules, name, module)
