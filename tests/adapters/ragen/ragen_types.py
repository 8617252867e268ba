"""
Doubles of the RAGEN pieces the RAGEN adapter meets, at mll-lab-nu/RAGEN ``20daedc``.

- ``Config``: an OmegaConf ``DictConfig`` stand-in (attribute access, a missing key raises
  an ``AttributeError`` subclass, ``.get``), and ``base_config()`` with the defaults of
  ``config/base.yaml`` that the filter and ``init_workers`` read.
- ``make_batch``: a rollout batch with the keys ``ContextManager._build_dataproto`` writes
  (``ragen/llm_agent/ctx_manager.py``), on verl's ``DataProto`` (real or double).
- ``RayAgentTrainer``: ``init_workers`` builds the filters as RAGEN's does (one shared
  object, or a separate gradient-analysis filter built from a rescaled config copy), and
  ``train_step`` runs the filter section of ``fit()`` (agent_trainer.py:1078-1235 and the
  loss scaling at :1401-1408).
"""

from __future__ import annotations

import collections
import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from .verl_types import DataProto

RAGEN_COMMIT = "20daedc47558e000f7de912b060646bf2e8026bd"


class ConfigAttributeError(AttributeError):
    """OmegaConf raises this (an AttributeError) for a missing key."""


class Config(dict):  # type: ignore[type-arg]
    """A nested mapping with attribute access, like OmegaConf's DictConfig."""

    def __init__(self, data: dict[str, Any] | None = None, **items: Any) -> None:
        super().__init__()
        for key, value in {**(data or {}), **items}.items():
            self[key] = Config(value) if isinstance(value, dict) and not isinstance(value, Config) else value

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            msg = f"Missing key {name}"
            raise ConfigAttributeError(msg) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = Config(value) if isinstance(value, dict) and not isinstance(value, Config) else value

    def __deepcopy__(self, memo: dict[int, Any]) -> Config:
        return Config(copy.deepcopy(dict(self), memo))


def base_config(**rollout: Any) -> Config:
    """RAGEN's base.yaml defaults (the keys the filter path reads); ``rollout`` overrides rollout keys."""
    rollout_keys = {
        "rollout_filter_value": 1.0,
        "rollout_filter_strategy": "top_p",
        "rollout_filter_type": "largest",
        "rollout_filter_include_zero": True,
        "rollout_filter_top_p_prob_mode": "linear",
        "rollout_filter_selection_eps": 0.01,
        "rollout_filter_empty_stop_steps": 5,
        "rollout_filter_metric": "reward_variance",
        "gradient_analysis_num_buckets": 6,
        "gradient_analysis_bucket_mode": "quantile",
    }
    rollout_keys.update(rollout)
    return Config(
        {
            "actor_rollout_ref": {
                "rollout": rollout_keys,
                "actor": {"filter_loss_scaling": "none", "ppo_mini_batch_size": 32},
            },
            "es_manager": {"train": {"env_groups": 8, "group_size": 16}},
            "trainer": {
                "logger": ["console"],
                "n_gpus_per_node": 1,
                "gradient_analysis_env_groups": None,
                "gradient_analysis_group_size": None,
            },
            "agent_proxy": {"context_window_mode": "full"},
        }
    )


def make_batch(
    rewards: Sequence[float] | np.ndarray,
    *,
    group_ids: Sequence[Any] | None = None,
    episode_ids: Sequence[int] | None = None,
    messages: Sequence[Any] | None = None,
    tokens: int = 6,
    dtype: torch.dtype = torch.float32,
) -> Any:
    """
    A rollout batch: one row per reward, the reward at the last token of ``original_rm_scores``.

    ``group_ids`` defaults to the row index (callers pass RAGEN's ``env_id // group_size``);
    ``episode_ids`` adds the turn-level key; ``messages`` fills ``messages_list``.
    """
    rows = len(rewards)
    scores = torch.zeros(rows, tokens - 1, dtype=dtype)
    scores[:, -1] = torch.as_tensor(np.asarray(rewards, dtype=np.float64), dtype=dtype)
    input_ids = torch.arange(rows * tokens).reshape(rows, tokens)
    attention = torch.ones(rows, tokens, dtype=torch.long)
    tensors = TensorDict(
        {
            "input_ids": input_ids,
            "attention_mask": attention,
            "position_ids": attention.cumsum(-1) - 1,
            "responses": input_ids[:, 1:],
            "loss_mask": torch.ones(rows, tokens - 1),
            "rm_scores": scores,
            "original_rm_scores": scores.clone(),
        },
        batch_size=[rows],
    )
    if messages is None:
        messages = [
            [{"role": "user", "content": "go"}, {"role": "assistant", "content": f"a{i}"}]
            for i in range(rows)
        ]
    non_tensor: dict[str, Any] = {
        "env_ids": np.arange(rows, dtype=int),
        "group_ids": np.asarray(range(rows) if group_ids is None else group_ids),
        # As RAGEN builds it: equal-length conversations become a 2-D object array of dicts.
        "messages_list": np.array(list(messages), dtype=object),
    }
    if episode_ids is not None:
        non_tensor["episode_ids"] = np.asarray(episode_ids, dtype=int)
        non_tensor["uid"] = np.array([f"ep{e}" for e in episode_ids], dtype=object)
    return DataProto(batch=tensors, non_tensor_batch=non_tensor, meta_info={"metrics": {}})


class StockRolloutFilter:
    """What RAGEN's ``build_rollout_filter`` returns; records the arguments it was built with."""

    def __init__(self, **arguments: Any) -> None:
        self.arguments = arguments

    def filter(self, batch: Any) -> tuple[Any, dict[str, Any]]:
        # RAGEN's filters raise on a strategy they do not know (rollout_filter.py:185).
        if self.arguments["strategy"] not in ("top_p", "top_k", "top_k_abs", "min_p"):
            msg = f"Unknown strategy: {self.arguments['strategy']}"
            raise ValueError(msg)
        return batch, {"rollout/filter_kept_ratio": torch.tensor(1.0)}


def _build_stock_filter(rollout: Any, train: Any) -> StockRolloutFilter:
    return StockRolloutFilter(
        value=getattr(rollout, "rollout_filter_value", getattr(rollout, "rollout_filter_ratio", 0.25)),
        filter_type=rollout.rollout_filter_type,
        num_groups=train.env_groups,
        group_size=train.group_size,
        strategy=getattr(rollout, "rollout_filter_strategy", "top_p"),
    )


class RayAgentTrainer:
    """RAGEN's trainer, reduced to the filter's life cycle and the filter section of ``fit``."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.rollout_filter: Any = None
        self.gradient_analysis_rollout_filter: Any = None
        self.gradient_analysis_config: Config | None = None
        self.init_workers_calls = 0
        self.global_steps = 1
        self.first_10_steps_variances: list[float] = []
        self.base_variance: float | None = None
        self.consecutive_variances: collections.deque[float] = collections.deque(maxlen=10)
        self.consecutive_empty_filtered_steps = 0
        self.early_stopped = False
        self.early_stop_type: str | None = None

    def _build_gradient_analysis_config(self) -> Config | None:
        trainer = self.config.trainer
        train = self.config.es_manager.train
        groups = trainer.get("gradient_analysis_env_groups") or train.env_groups
        size = trainer.get("gradient_analysis_group_size") or train.group_size
        if (groups, size) == (train.env_groups, train.group_size):
            return None
        analysis = copy.deepcopy(self.config)
        analysis.es_manager.train.env_groups = groups
        analysis.es_manager.train.group_size = size
        return analysis

    def init_workers(self) -> None:
        self.init_workers_calls += 1
        if self.gradient_analysis_config is None:
            self.gradient_analysis_config = self._build_gradient_analysis_config()
        rollout = self.config.actor_rollout_ref.rollout
        self.rollout_filter = _build_stock_filter(rollout, self.config.es_manager.train)
        if self.gradient_analysis_config is not None:
            analysis = self.gradient_analysis_config
            self.gradient_analysis_rollout_filter = _build_stock_filter(
                analysis.actor_rollout_ref.rollout, analysis.es_manager.train
            )
        else:
            self.gradient_analysis_rollout_filter = self.rollout_filter

    def train_step(self, batch: Any) -> tuple[Any, dict[str, Any]]:
        """Filter, then what fit() does with the result; returns (batch or None if skipped, metrics)."""
        metrics: dict[str, Any] = {}
        batch, filter_metrics = self.rollout_filter.filter(batch)
        self.popped = {
            key: filter_metrics.pop(key, None)
            for key in (
                "rollout/_reward_matrix",
                "rollout/_group_reward_std",
                "rollout/_group_ids",
                "rollout/_selected_group_ids",
            )
        }
        metrics.update(filter_metrics)
        batch.meta_info["filter_kept_ratio"] = metrics.get("rollout/filter_kept_ratio", 1.0)
        if len(batch) == 0:
            self.consecutive_empty_filtered_steps += 1
            stop_steps = getattr(self.config.actor_rollout_ref.rollout, "rollout_filter_empty_stop_steps", 10)
            metrics["rollout/empty_after_filter"] = 1.0
            if stop_steps > 0 and self.consecutive_empty_filtered_steps >= stop_steps:
                self.early_stopped, self.early_stop_type = True, "empty_filtered_steps"
            self.global_steps += 1
            return None, metrics
        self.consecutive_empty_filtered_steps = 0
        self._track_reward_variance(metrics)
        scaling = getattr(self.config.actor_rollout_ref.actor, "filter_loss_scaling", "none")
        ratio = batch.meta_info.get("filter_kept_ratio", 1.0)
        batch.batch["advantages"] = torch.ones(len(batch))
        if scaling == "linear":
            batch.batch["advantages"] *= ratio
        elif scaling == "sqrt":
            batch.batch["advantages"] *= ratio**0.5
        self.global_steps += 1
        return batch, metrics

    def _track_reward_variance(self, metrics: dict[str, Any]) -> None:
        if "rollout/in_group_reward_std" not in metrics:
            return
        value = metrics["rollout/in_group_reward_std"]
        value = value.item() if isinstance(value, torch.Tensor) else value
        if len(self.first_10_steps_variances) < 10:
            self.first_10_steps_variances.append(value)
            if len(self.first_10_steps_variances) == 10:
                self.base_variance = sum(self.first_10_steps_variances) / 10
                self.consecutive_variances.clear()
        elif self.base_variance is not None:
            self.consecutive_variances.append(value)
            if len(self.consecutive_variances) == 10 and all(
                v < 0.1 * self.base_variance for v in self.consecutive_variances
            ):
                self.early_stopped, self.early_stop_type = True, "reward_variance_collapse"
