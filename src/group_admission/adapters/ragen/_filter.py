"""
``RagenGroupAdmissionFilter``: RAGEN's rollout filter contract, judged by an ``AdmissionSession``.

RAGEN calls ``trainer.rollout_filter.filter(batch)`` once per step, between the rollout and
the advantage computation, and expects ``(batch, metrics)``. The metrics keep RAGEN's names
and values, so its loss scaling and its collapse early stop keep working.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

from ..._config import GroupAdmissionConfig
from ..._host_rules.ragen import ZERO_SCORE, RagenSelection, select_top_groups
from ..._loading import require_extra
from ..._metrics import AdmissionStats
from ..._policy import GroupAdmissionPolicy
from ..._session import AdmissionSession
from ..._validation import describe
from ._batch import GroupLayout, apply_row_mask, assistant_text, non_tensor_column, read_layout

__all__ = ["METRIC_PREFIX", "RagenGroupAdmissionFilter", "select_groups"]

#: Prefix of the admission counts among the filter metrics.
METRIC_PREFIX = "rollout/group_admission/"
_SETTINGS_KEYS = ("policy", "selection")
_WHERE = "actor_rollout_ref.rollout.group_admission"
# RAGEN's config key (under actor_rollout_ref.rollout) and default for each selection field.
_SELECTION_KEYS = {
    "filter_type": ("rollout_filter_type", "largest"),
    "include_zero": ("rollout_filter_include_zero", True),
    "top_p_prob_mode": ("rollout_filter_top_p_prob_mode", "linear"),
    "selection_eps": ("rollout_filter_selection_eps", 0.01),
    "metric": ("rollout_filter_metric", "reward_variance"),
}


def select_groups(torch: Any, scores: Any, selection: RagenSelection, *, candidates: Any = None) -> Any:
    """
    RAGEN's selection on torch tensors: the kept group indices, in RAGEN's order.

    Args:
        torch: The torch module.
        scores: One score per group (1-D tensor).
        selection: The selection parameters.
        candidates: Boolean tensor marking the groups that may be selected (``None``:
            every group, which reproduces RAGEN's ``_select_top_groups``).

    Returns:
        A ``torch.long`` tensor of group indices on the device of ``scores``.

    .. versionadded:: 0.1.0
    """
    mask = None if candidates is None else candidates.detach().cpu().numpy()
    kept = select_top_groups(scores.detach().float().cpu().numpy(), selection, candidates=mask)
    return torch.as_tensor(kept, dtype=torch.long, device=scores.device)


def _plain(value: Any) -> Any:
    """Turn OmegaConf containers (or any mapping) into plain dicts and lists."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_plain(item) for item in value]
    return value


def _selection(rollout: Any, strategy: Any) -> RagenSelection | None:
    """RAGEN's own ``rollout_filter_*`` keys, read only when a strategy is named."""
    if strategy is None or strategy == "none":
        return None
    # RAGEN reads with getattr(cfg, key, default); OmegaConf's missing-key error is an AttributeError.
    value = getattr(rollout, "rollout_filter_value", getattr(rollout, "rollout_filter_ratio", 0.25))
    fields: dict[str, Any] = {
        name: getattr(rollout, key, default) for name, (key, default) in _SELECTION_KEYS.items()
    }
    try:
        return RagenSelection(strategy=strategy, value=value, **fields)
    except (TypeError, ValueError) as exc:
        msg = f"invalid RAGEN selection settings for '{_WHERE}.selection={strategy}': {exc}"
        raise type(exc)(msg) from None


class RagenGroupAdmissionFilter:
    """
    A RAGEN rollout filter: admission gates first, then (optionally) RAGEN's selection.

    ``filter(batch)`` groups the rows as RAGEN does (``num_groups`` contiguous blocks, or
    blocks of episodes in turn-level modes), judges every group with
    :meth:`AdmissionSession.judge_batch`, lets ``selection`` choose among the kept groups,
    drops every other group whole, and returns ``(batch, metrics)``. The batch is changed
    in place, as RAGEN's own filter does. A step where no group survives returns an empty
    batch, which RAGEN skips (and counts towards ``rollout_filter_empty_stop_steps``).

    Args:
        policy: The admission policy (or a config / mapping for one). ``None`` admits every
            group with finite rewards.
        num_groups: Groups per batch (RAGEN's ``es_manager.train.env_groups``).
        selection: RAGEN's selection among the admitted groups; ``None`` keeps them all.

    Attributes:
        empty_batches: Steps that ended with no group kept.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        policy: GroupAdmissionPolicy | GroupAdmissionConfig | Mapping[str, Any] | None = None,
        *,
        num_groups: int,
        selection: RagenSelection | None = None,
    ) -> None:
        if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
            msg = f"'num_groups' must be an integer >= 1 (got {describe(num_groups)})"
            raise ValueError(msg)
        if selection is not None and not isinstance(selection, RagenSelection):
            msg = f"'selection' must be a RagenSelection or None (got {describe(selection)})"
            raise TypeError(msg)
        self._session = AdmissionSession(policy, host="RAGEN")
        self._num_groups = num_groups
        self._selection = selection
        self.empty_batches = 0

    @property
    def session(self) -> AdmissionSession:
        """The session that judges and counts every group."""
        return self._session

    @property
    def policy(self) -> GroupAdmissionPolicy:
        """The admission policy."""
        return self._session.policy

    @property
    def stats(self) -> AdmissionStats:
        """A copy of the admission counts summed over every call."""
        return self._session.stats

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
            f"RagenGroupAdmissionFilter({self.policy!r}, num_groups={self._num_groups}, "
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
        settings = _plain(getattr(rollout, "group_admission", None)) or {}
        if not isinstance(settings, dict):
            msg = (
                f"'{_WHERE}' must be a mapping with keys 'policy' and 'selection' (got {describe(settings)})"
            )
            raise TypeError(msg)
        unknown = sorted(str(key) for key in settings if key not in _SETTINGS_KEYS)
        if unknown:
            msg = f"unknown key(s) {unknown} in '{_WHERE}' (known: {', '.join(_SETTINGS_KEYS)})"
            raise ValueError(msg)
        policy_settings = settings.get("policy") or {}
        if isinstance(policy_settings, (str, os.PathLike)):
            policy_settings = GroupAdmissionConfig.from_yaml(policy_settings)
        groups = config.es_manager.train.env_groups
        if isinstance(groups, bool) or not isinstance(groups, int):
            msg = f"'es_manager.train.env_groups' must be an integer (got {describe(groups)})"
            raise TypeError(msg)
        if groups < 1:
            msg = f"'es_manager.train.env_groups' must be >= 1 (got {groups})"
            raise ValueError(msg)
        return cls(
            GroupAdmissionPolicy(policy_settings, logger=logger),
            num_groups=groups,
            selection=_selection(rollout, settings.get("selection")),
        )

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
        before = self._session.stats
        verdicts = self._session.judge_batch(
            layout.rewards, self._completions(batch, layout), group_keys=list(layout.group_keys)
        )
        counts = self._session.stats.difference(before).metrics()
        rewards = layout.rewards
        with warnings.catch_warnings():
            # One-member groups have no sample std (NaN, as in RAGEN); torch warns about it.
            warnings.filterwarnings("ignore", message=".*degrees of freedom", category=UserWarning)
            std = rewards.std(dim=-1)
        stats = {"std": std, "max": rewards.max(dim=-1).values, "mean": rewards.mean(dim=-1)}
        stats["sum"] = rewards.sum(dim=-1)
        metric = self._selection.metric if self._selection else "reward_variance"
        scores = {"reward": stats["mean"], "reward_sum": stats["sum"]}.get(metric, std)
        keep = torch.as_tensor(verdicts.keep, device=rewards.device)
        if self._selection is None:
            kept = torch.nonzero(keep).flatten()
        else:
            kept = select_groups(torch, scores, self._selection, candidates=keep)
        row_group = torch.as_tensor(layout.row_group, device=rewards.device)
        group_mask = torch.zeros(self._num_groups, dtype=torch.bool, device=rewards.device)
        group_mask[kept] = True
        row_mask = group_mask[row_group]
        batch = apply_row_mask(batch, row_mask.cpu())
        # Like RAGEN: every kept row carries the std of its whole original group.
        batch.batch["reward_std"] = std[row_group][row_mask]
        if kept.numel() == 0:
            self.empty_batches += 1
        metrics = self._ragen_metrics(torch, layout, stats, scores, kept)
        metrics.update({f"{METRIC_PREFIX}{key}": value for key, value in counts.items()})
        metrics[f"{METRIC_PREFIX}selection_dropped_group_count"] = int(verdicts.keep.sum()) - kept.numel()
        metrics[f"{METRIC_PREFIX}kept_group_count"] = kept.numel()
        metrics[f"{METRIC_PREFIX}empty_batch"] = float(kept.numel() == 0)
        metrics[f"{METRIC_PREFIX}empty_batch_count"] = self.empty_batches
        return batch, metrics

    def _completions(self, batch: Any, layout: GroupLayout) -> list[list[str | None]] | None:
        """Each member's assistant text, only when the redundancy gate needs it."""
        if not self.policy.config.similarity_gate_enabled:
            return None
        conversations = non_tensor_column(batch, "messages_list", len(layout.row_group))
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
        self, torch: Any, layout: GroupLayout, stats: dict[str, Any], scores: Any, kept: Any
    ) -> dict[str, Any]:
        """RAGEN's reward-filter metrics, computed as RAGEN computes them."""

        def chosen(values: Any) -> Any:
            if kept.numel() == 0:
                return torch.zeros((), dtype=values.dtype, device=values.device)
            return values[kept].mean()

        metrics: dict[str, Any] = {}
        for name, values in stats.items():
            if name != "sum":  # RAGEN's base-filter names, without the sum
                metrics[f"rollout/in_group_{name}"] = values.mean()
                metrics[f"rollout/chosen_in_group_{name}"] = chosen(values)
            metrics[f"rollout/in_group_reward_{name}"] = values.mean()
            metrics[f"rollout/chosen_in_group_reward_{name}"] = chosen(values)
        keys = layout.group_keys
        numeric = all(isinstance(key, int) and not isinstance(key, bool) for key in keys)
        group_ids = torch.as_tensor(keys if numeric else range(len(keys)))
        metrics["rollout/filter_kept_count"] = torch.tensor(float(kept.numel()))
        metrics["rollout/filter_kept_ratio"] = torch.tensor(kept.numel() / self._num_groups)
        metrics["rollout/filter_zero_count"] = (torch.abs(scores) <= ZERO_SCORE).sum()
        # Private keys: RAGEN's trainer pops them to build its W&B reward and RV tables.
        metrics["rollout/_reward_matrix"] = layout.rewards.detach().cpu()
        metrics["rollout/_group_reward_std"] = stats["std"].detach().cpu()
        metrics["rollout/_group_ids"] = group_ids
        metrics["rollout/_selected_group_ids"] = group_ids[kept.cpu()]
        return metrics
