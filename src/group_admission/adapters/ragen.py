"""
RAGEN adapter: a rollout filter backed by the admission policy, installed without editing RAGEN.

RAGEN (``mll-lab-nu/RAGEN@20daedc``) calls ``trainer.rollout_filter.filter(batch)`` once per
step, between the rollout and the advantage computation, and expects ``(batch, metrics)``.
:class:`RagenGroupAdmissionFilter` keeps the same contract: the admission gates judge every
group first, then RAGEN's own selection (``top_p``, ``top_k``, ``top_k_abs``, ``min_p``) may
pick among the admitted groups, and the metrics keep RAGEN's names so that its loss scaling
and its collapse early stop keep working. :func:`install` swaps the filter in when the
config says ``actor_rollout_ref.rollout.rollout_filter_strategy: group_admission``;
:func:`worker_process_setup_hook` does it inside Ray's TaskRunner process.

This module never imports RAGEN, verl or torch at import time, and holds no gate logic of
its own. See ``docs/adapters/ragen.md`` for the config lines and the metrics.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

from .._batch import BatchAdmissionResult
from .._loading import require_extra
from .._metrics import AdmissionStats, group_admission_metrics
from .._policy import GroupAdmissionPolicy
from .._validation import describe
from ._ragen_batch import GroupLayout, apply_row_mask, assistant_text, read_layout
from ._ragen_install import STRATEGY_NAME, install, is_selected, uninstall, worker_process_setup_hook
from ._ragen_selection import ZERO_SCORE, RagenSelection, select_groups

__all__ = [
    "STRATEGY_NAME",
    "RagenGroupAdmissionFilter",
    "RagenSelection",
    "install",
    "is_selected",
    "select_groups",
    "uninstall",
    "worker_process_setup_hook",
]

#: Prefix of the admission counts among the filter metrics.
METRIC_PREFIX = "rollout/group_admission/"
_SETTINGS_KEYS = ("policy", "selection")


def _plain(value: Any) -> Any:
    """Turn OmegaConf containers (or any mapping) into plain dicts and lists."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_plain(item) for item in value]
    return value


def _setting(config: Any, key: str, default: Any) -> Any:
    # RAGEN reads its keys with getattr(cfg, key, default); OmegaConf raises an
    # AttributeError subclass for a missing key, so this is the same rule.
    return getattr(config, key, default)


class RagenGroupAdmissionFilter:
    """
    A RAGEN rollout filter: admission gates first, then (optionally) RAGEN's selection.

    ``filter(batch)`` groups the rows as RAGEN does (``num_groups`` contiguous blocks, or
    blocks of episodes in turn-level modes), judges every group with
    ``policy.evaluate_batch``, lets ``selection`` choose among the admitted groups, drops
    every other group whole, and returns ``(batch, metrics)``. The batch is changed in
    place, as RAGEN's own filter does. A step where no group survives returns an empty
    batch, which RAGEN skips (and counts towards ``rollout_filter_empty_stop_steps``).

    Args:
        policy: The admission policy (or a config / mapping for one). ``None`` admits every
            group with finite rewards.
        num_groups: Groups per batch (RAGEN's ``es_manager.train.env_groups``).
        selection: RAGEN's selection among the admitted groups; ``None`` keeps them all.

    Attributes:
        stats: Admission counts summed over every call.
        empty_batches: Steps that ended with no group kept.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        policy: GroupAdmissionPolicy | Mapping[str, Any] | None = None,
        *,
        num_groups: int,
        selection: RagenSelection | None = None,
    ) -> None:
        if not isinstance(policy, GroupAdmissionPolicy):
            policy = GroupAdmissionPolicy(policy)
        if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
            msg = f"'num_groups' must be an integer >= 1 (got {describe(num_groups)})"
            raise ValueError(msg)
        if selection is not None and not isinstance(selection, RagenSelection):
            msg = f"'selection' must be a RagenSelection or None (got {describe(selection)})"
            raise TypeError(msg)
        self._policy = policy
        self._num_groups = num_groups
        self._selection = selection
        self.stats = AdmissionStats()
        self.empty_batches = 0

    @property
    def policy(self) -> GroupAdmissionPolicy:
        """The admission policy."""
        return self._policy

    @property
    def num_groups(self) -> int:
        """Groups per batch."""
        return self._num_groups

    @property
    def selection(self) -> RagenSelection | None:
        """RAGEN's selection among admitted groups, or ``None`` (keep every admitted group)."""
        return self._selection

    def __repr__(self) -> str:
        return (
            f"RagenGroupAdmissionFilter({self._policy!r}, num_groups={self._num_groups}, "
            f"selection={self._selection!r})"
        )

    @classmethod
    def from_config(cls, config: Any, *, logger: Any | None = None) -> RagenGroupAdmissionFilter:
        """
        Build the filter from a RAGEN trainer config (an OmegaConf ``DictConfig``).

        Reads ``es_manager.train.env_groups`` and, under ``actor_rollout_ref.rollout``,
        ``group_admission.policy`` (the :class:`GroupAdmissionConfig` fields, or the path of
        a YAML file holding them), ``group_admission.selection`` (``none`` or a RAGEN
        strategy) and, when a strategy is set, RAGEN's own ``rollout_filter_value``,
        ``rollout_filter_type``, ``rollout_filter_include_zero``,
        ``rollout_filter_top_p_prob_mode``, ``rollout_filter_selection_eps`` and
        ``rollout_filter_metric``.

        Raises:
            ValueError, TypeError: a setting is unknown or invalid; the message names it.
        """
        rollout = config.actor_rollout_ref.rollout
        settings = _plain(_setting(rollout, "group_admission", None)) or {}
        where = "actor_rollout_ref.rollout.group_admission"
        if not isinstance(settings, dict):
            msg = f"'{where}' must be a mapping with keys 'policy' and 'selection' (got {describe(settings)})"
            raise TypeError(msg)
        unknown = sorted(str(key) for key in settings if key not in _SETTINGS_KEYS)
        if unknown:
            msg = f"unknown key(s) {unknown} in '{where}' (known: {', '.join(_SETTINGS_KEYS)})"
            raise ValueError(msg)
        policy_settings = settings.get("policy") or {}
        if isinstance(policy_settings, (str, os.PathLike)):
            from .._config import GroupAdmissionConfig  # noqa: PLC0415

            policy_settings = GroupAdmissionConfig.from_yaml(policy_settings)
        policy = GroupAdmissionPolicy(policy_settings, logger=logger)
        strategy = settings.get("selection")
        selection = None
        if strategy is not None and strategy != "none":
            value = _setting(rollout, "rollout_filter_value", _setting(rollout, "rollout_filter_ratio", 0.25))
            try:
                selection = RagenSelection(
                    strategy=strategy,
                    value=value,
                    filter_type=_setting(rollout, "rollout_filter_type", "largest"),
                    include_zero=_setting(rollout, "rollout_filter_include_zero", True),
                    top_p_prob_mode=_setting(rollout, "rollout_filter_top_p_prob_mode", "linear"),
                    selection_eps=_setting(rollout, "rollout_filter_selection_eps", 0.01),
                    metric=_setting(rollout, "rollout_filter_metric", "reward_variance"),
                )
            except (TypeError, ValueError) as exc:
                msg = f"invalid RAGEN selection settings for '{where}.selection={strategy}': {exc}"
                raise type(exc)(msg) from None
        return cls(policy, num_groups=int(config.es_manager.train.env_groups), selection=selection)

    # -- the filter contract ------------------------------------------------------------
    def filter(self, batch: Any) -> tuple[Any, dict[str, Any]]:
        """
        Keep the admitted (and selected) groups of ``batch``; return it with RAGEN's metrics.

        Raises:
            ValueError: the batch does not have RAGEN's structure (see ``read_layout``):
                a missing ``original_rm_scores``, rows or episodes that do not divide into
                ``num_groups``, ``group_ids`` that disagree with the positional groups.
                Data problems (non-finite rewards, missing completions) reject the group
                as ``external`` instead.
        """
        torch = require_extra("torch", "torch", "The RAGEN rollout filter")
        layout = read_layout(torch, batch, self._num_groups)
        result = self._policy.evaluate_batch(
            layout.rewards,
            self._completions(batch, layout),
            group_keys=list(layout.group_keys),
        )
        rewards = layout.rewards
        with warnings.catch_warnings():
            # One-member groups have no sample std (NaN, as in RAGEN); torch warns about it.
            warnings.filterwarnings("ignore", message=".*degrees of freedom", category=UserWarning)
            std = rewards.std(dim=-1)
        high, mean, total = rewards.max(dim=-1).values, rewards.mean(dim=-1), rewards.sum(dim=-1)
        scores = {"reward": mean, "reward_sum": total}.get(
            self._selection.metric if self._selection else "reward_variance", std
        )
        admitted = torch.as_tensor(result.admitted, device=rewards.device)
        if self._selection is None:
            kept = torch.nonzero(admitted).flatten()
        else:
            kept = select_groups(torch, scores, self._selection, candidates=admitted)
        row_group = torch.as_tensor(layout.row_group, device=rewards.device)
        group_mask = torch.zeros(self._num_groups, dtype=torch.bool, device=rewards.device)
        group_mask[kept] = True
        row_mask = group_mask[row_group]
        batch = apply_row_mask(batch, row_mask.cpu())
        # Like RAGEN: every kept row carries the std of its whole original group.
        batch.batch["reward_std"] = std[row_group][row_mask]
        self.stats.add_many(result)
        if kept.numel() == 0:
            self.empty_batches += 1
        metrics = self._ragen_metrics(torch, layout, (std, high, mean, total), scores, kept)
        metrics.update(self._admission_metrics(result, int(kept.numel())))
        return batch, metrics

    def _completions(self, batch: Any, layout: GroupLayout) -> list[list[str | None]] | None:
        """Each member's assistant text, only when the redundancy gate needs it."""
        if not self._policy.config.similarity_gate_enabled:
            return None
        conversations = (getattr(batch, "non_tensor_batch", None) or {}).get("messages_list")
        if conversations is None:
            msg = (
                "the redundancy gate (max_mean_pairwise_similarity) needs "
                "non_tensor_batch['messages_list'] in the RAGEN batch (absent)"
            )
            raise ValueError(msg)
        texts = [assistant_text(conversations[row]) for row in layout.member_last_row.tolist()]
        size = layout.group_size
        return [texts[start : start + size] for start in range(0, len(texts), size)]

    def _ragen_metrics(
        self,
        torch: Any,
        layout: GroupLayout,
        stats: tuple[Any, Any, Any, Any],
        scores: Any,
        kept: Any,
    ) -> dict[str, Any]:
        """RAGEN's reward-filter metrics, computed as RAGEN computes them."""

        def chosen(values: Any) -> Any:
            if kept.numel() == 0:
                return torch.zeros((), dtype=values.dtype, device=values.device)
            return values[kept].mean()

        std, high, mean, total = stats
        keys = layout.group_keys
        numeric = all(isinstance(key, int) and not isinstance(key, bool) for key in keys)
        group_ids = torch.as_tensor(keys if numeric else range(len(keys)))
        metrics: dict[str, Any] = {}
        for name, values in (("std", std), ("max", high), ("mean", mean)):
            metrics[f"rollout/in_group_{name}"] = values.mean()
            metrics[f"rollout/chosen_in_group_{name}"] = chosen(values)
        for name, values in (("std", std), ("max", high), ("mean", mean), ("sum", total)):
            metrics[f"rollout/in_group_reward_{name}"] = values.mean()
            metrics[f"rollout/chosen_in_group_reward_{name}"] = chosen(values)
        metrics["rollout/filter_kept_count"] = torch.tensor(float(kept.numel()))
        metrics["rollout/filter_kept_ratio"] = torch.tensor(kept.numel() / self._num_groups)
        metrics["rollout/filter_zero_count"] = (torch.abs(scores) <= ZERO_SCORE).sum()
        # Private keys: RAGEN's trainer pops them to build its W&B reward and RV tables.
        metrics["rollout/_reward_matrix"] = layout.rewards.detach().cpu()
        metrics["rollout/_group_reward_std"] = std.detach().cpu()
        metrics["rollout/_group_ids"] = group_ids
        metrics["rollout/_selected_group_ids"] = group_ids[kept.cpu()]
        return metrics

    def _admission_metrics(self, result: BatchAdmissionResult, kept: int) -> dict[str, Any]:
        counts = group_admission_metrics(result)
        metrics: dict[str, Any] = {f"{METRIC_PREFIX}{key}": value for key, value in counts.items()}
        metrics[f"{METRIC_PREFIX}selection_dropped_group_count"] = counts["admitted_group_count"] - kept
        metrics[f"{METRIC_PREFIX}kept_group_count"] = kept
        metrics[f"{METRIC_PREFIX}empty_batch"] = float(kept == 0)
        metrics[f"{METRIC_PREFIX}empty_batch_count"] = self.empty_batches
        return metrics


# Reprs and docs name the public module, not the private one that defines them.
for _public in (RagenSelection, select_groups, install, is_selected, uninstall, worker_process_setup_hook):
    _public.__module__ = __name__
del _public
