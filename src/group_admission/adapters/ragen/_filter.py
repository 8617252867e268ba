"""``RagenGroupAdmissionFilter``: RAGEN's rollout filter contract, judged by an ``AdmissionSession``."""

from __future__ import annotations

import os
import warnings
from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ... import AdmissionSession, GroupAdmissionConfig, GroupAdmissionPolicy, SessionConfig, loss_scale
from ..._host_rules.ragen import ZERO_SCORE, RagenSelection, select_top_groups
from .._kit import (
    DEFAULT_LOSS_SCALE,
    AdapterSession,
    HoldsAdmission,
    LossScale,
    check_count,
    chunk,
    describe,
    require_extra,
    unpack_block,
)

#: Prefix of the admission counts among the filter metrics.
METRIC_PREFIX = "rollout/group_admission/"
_SETTINGS_KEYS = ("preset", "policy", "selection")
_WHERE = "actor_rollout_ref.rollout.group_admission"
# RAGEN's config key (under actor_rollout_ref.rollout) and default for each selection field.
_SELECTION_KEYS = {
    "filter_type": ("rollout_filter_type", "largest"),
    "include_zero": ("rollout_filter_include_zero", True),
    "top_p_prob_mode": ("rollout_filter_top_p_prob_mode", "linear"),
    "selection_eps": ("rollout_filter_selection_eps", 0.01),
    "metric": ("rollout_filter_metric", "reward_variance"),
}
IntArray = npt.NDArray[np.int64]
#: RAGEN's ``actor_rollout_ref.actor.filter_loss_scaling`` and the loss scale it applies:
#: ``none`` leaves verl's loss over the kept groups; ``linear`` multiplies the advantages by
#: ``filter_kept_ratio`` (kept / ``env_groups``: RAGEN generates the target exactly, so it is
#: the ``"target"`` scale too), ``sqrt`` by its square root (agent_trainer.py:1401-1408).
RAGEN_LOSS_SCALES: dict[str, LossScale] = {"none": "kept", "linear": "linear", "sqrt": "sqrt"}


class GroupLayout(NamedTuple):
    """How the rows of one batch form groups; a member is a row, or an episode in turn-level modes."""

    rewards: Any  # (num_groups, group_size) member rewards
    row_group: IntArray  # the group of every row
    member_last_row: IntArray  # the last row of every member, group-major
    group_keys: tuple[Hashable, ...]  # RAGEN's group ids, or the group indices when absent


def _score_rows(torch: Any, batch: Any) -> Any:
    """Each row's reward, ``original_rm_scores.sum(-1)``."""
    if isinstance(batch, Mapping):
        msg = f"'batch' must be a verl DataProto (got a dict with keys {sorted(map(str, batch))})"
        raise TypeError(msg)
    tensors = getattr(batch, "batch", None)
    # TensorDict refuses `key in td`; membership goes through keys().
    if tensors is None or "original_rm_scores" not in tensors.keys():  # noqa: SIM118
        msg = (
            "the RAGEN batch must hold batch.batch['original_rm_scores'] (the per-token scores "
            "RAGEN's ContextManager writes) (got keys "
            f"{[] if tensors is None else sorted(tensors.keys())})"
        )
        raise ValueError(msg)
    scores = tensors["original_rm_scores"]
    where = "batch.batch['original_rm_scores']"
    if not torch.is_tensor(scores):
        msg = f"{where} must be a torch tensor (rows, tokens) (got {describe(scores)})"
        raise TypeError(msg)
    if scores.ndim != 2:
        msg = f"{where} must be a 2-D tensor (rows, tokens) (got {tuple(scores.shape)})"
        raise ValueError(msg)
    if isinstance(tensors, dict):
        # The kept rows are masked as TensorDict rows; a dict would fail only after judging.
        msg = (
            "'batch.batch' must be a TensorDict, as in a verl DataProto (got a dict with keys "
            f"{sorted(map(str, tensors))})"
        )
        raise TypeError(msg)
    if not scores.is_floating_point():
        # Integer or bool scores (a 0/1 verifier) are rewards too; torch's std refuses them.
        scores = scores.to(torch.get_default_dtype())
    return scores.sum(dim=-1)


def non_tensor_column(batch: Any, key: str, rows: int) -> Any:
    """``batch.non_tensor_batch[key]`` (``None`` when absent), checked to hold one entry per row."""
    values = (getattr(batch, "non_tensor_batch", None) or {}).get(key)
    if values is not None and (not hasattr(values, "__len__") or len(values) != rows):
        got = len(values) if hasattr(values, "__len__") else describe(values)
        msg = f"non_tensor_batch['{key}'] must have one entry per row ({rows}) (got {got})"
        raise ValueError(msg)
    return values


def _ids(batch: Any, key: str, rows: int) -> list[Hashable] | None:
    """A per-row id column (``episode_ids``, ``group_ids``) as Python values usable as keys."""
    values = non_tensor_column(batch, key, rows)
    if values is None:
        return None
    ids: list[Hashable] = np.asarray(values).tolist()
    for row, value in enumerate(ids):
        if not isinstance(value, Hashable):
            msg = f"non_tensor_batch['{key}'] must hold one id per row (row {row} has {describe(value)})"
            raise TypeError(msg)
    return ids


def _episodes(episode_ids: list[Hashable], num_groups: int) -> tuple[IntArray, IntArray, IntArray]:
    """Each row's episode (first-seen order), each episode's first and last row."""
    slot: dict[Hashable, int] = {}
    row_episode = np.asarray([slot.setdefault(e, len(slot)) for e in episode_ids], dtype=np.int64)
    if len(slot) % num_groups:
        msg = (
            f"Number of episodes ({len(slot)}) must be divisible by num_groups ({num_groups}): "
            "in RAGEN's turn-level modes (non_tensor_batch['episode_ids'] present) every group "
            "must hold the same number of episodes; an episode without an LLM turn has no row "
            "and unbalances its group"
        )
        raise ValueError(msg)
    first = np.unique(row_episode, return_index=True)[1]
    last = len(row_episode) - 1 - np.unique(row_episode[::-1], return_index=True)[1]
    return row_episode, first.astype(np.int64), last.astype(np.int64)


def _group_keys(batch: Any, row_group: IntArray, num_groups: int, block: str) -> tuple[Hashable, ...]:
    """RAGEN's ``group_ids`` (one per positional group, distinct), or the group indices when absent."""
    ids = _ids(batch, "group_ids", len(row_group))
    if ids is None:
        return tuple(range(num_groups))
    keys: list[Hashable] = [None] * num_groups
    seen = [False] * num_groups
    for row, (group, key) in enumerate(zip(row_group.tolist(), ids, strict=True)):
        if not seen[group]:
            keys[group], seen[group] = key, True
        elif key != keys[group]:
            found = sorted({ids[r] for r in np.flatnonzero(row_group == group).tolist()}, key=repr)
            msg = (
                f"non_tensor_batch['group_ids'] disagrees with RAGEN's positional grouping: "
                f"group {group} of {num_groups} ({block}) holds rows with group ids {found} "
                f"(row {row} has {key!r}, expected {keys[group]!r}); RAGEN assigns rows to groups "
                "by position, so the batch must be ordered by group"
            )
            raise ValueError(msg)
    owner: dict[Hashable, int] = {}
    for group, key in enumerate(keys):
        if key in owner:
            msg = (
                f"non_tensor_batch['group_ids'] disagrees with RAGEN's positional grouping: "
                f"groups {owner[key]} and {group} both hold group id {key!r}, and GRPO would "
                "merge them (it groups rows by uid = group_ids)"
            )
            raise ValueError(msg)
        owner[key] = group
    return tuple(keys)


def read_layout(torch: Any, batch: Any, num_groups: int) -> GroupLayout:
    """Group the rows of ``batch`` exactly as RAGEN's reward filter does, checking every step."""
    row_rewards = _score_rows(torch, batch)
    rows = int(row_rewards.shape[0])
    episode_ids = _ids(batch, "episode_ids", rows)
    if episode_ids is None:
        if rows == 0 or rows % num_groups:
            msg = (
                f"the batch has {rows} rows, which do not divide into num_groups={num_groups} "
                "groups (es_manager.train.env_groups): RAGEN groups contiguous rows, so every "
                "group must have the same number of rows"
            )
            raise ValueError(msg)
        size = rows // num_groups
        rewards = row_rewards.view(num_groups, size)
        row_group = np.arange(rows, dtype=np.int64) // size
        member_last_row = np.arange(rows, dtype=np.int64)
        block = f"a contiguous block of {size} rows"
    else:
        row_episode, first, member_last_row = _episodes(episode_ids, num_groups)
        size = len(first) // num_groups
        # RAGEN collects episode rewards in a default-dtype tensor; so do we, for parity.
        picked = row_rewards[torch.as_tensor(first, device=row_rewards.device)]
        rewards = picked.to(torch.get_default_dtype()).view(num_groups, size)
        row_group = row_episode // size
        block = f"a block of {size} episodes"
    return GroupLayout(rewards, row_group, member_last_row, _group_keys(batch, row_group, num_groups, block))


def assistant_text(messages: Any) -> str | None:
    """The assistant turns of one ``messages_list`` entry joined by newlines; ``None`` if there are none."""
    if not isinstance(messages, (list, tuple, np.ndarray)):
        return None
    parts: list[str] = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, list):  # OpenAI-style content parts
                content = "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            parts.append("" if content is None else str(content))
    return "\n".join(parts) if parts else None


def apply_row_mask(batch: Any, row_mask: Any) -> Any:
    """Keep the masked rows of ``batch`` in place (tensors, numpy and list columns), as RAGEN does."""
    batch.batch = batch.batch[row_mask]
    non_tensor = getattr(batch, "non_tensor_batch", None)
    if non_tensor:
        keep = row_mask.cpu().numpy()
        for key, value in list(non_tensor.items()):
            if isinstance(value, np.ndarray):
                non_tensor[key] = value[keep]
            else:
                non_tensor[key] = [item for item, kept in zip(value, keep, strict=True) if kept]
    return batch


def select_groups(torch: Any, scores: Any, selection: RagenSelection, *, candidates: Any = None) -> Any:
    """
    RAGEN's selection on torch tensors: the kept group indices (``torch.long``, on the device of ``scores``).

    Args:
        torch: The torch module.
        scores: One score per group (1-D tensor).
        selection: The selection parameters.
        candidates: Boolean tensor marking the groups that may be selected (``None``:
            every group, which reproduces RAGEN's ``_select_top_groups``).

    .. versionadded:: 0.1.0
    """
    mask = None if candidates is None else candidates.detach().cpu().numpy()
    kept = select_top_groups(scores.detach().float().cpu().numpy(), selection, candidates=mask)
    return torch.as_tensor(kept, dtype=torch.long, device=scores.device)


def _decoded_tokens(torch: Any, batch: Any) -> int:
    """The tokens the policy decoded for the batch: ``loss_mask`` (RAGEN's mask of model tokens), summed."""
    mask = batch.batch.get("loss_mask", None) if hasattr(batch.batch, "get") else None
    if mask is None or not torch.is_tensor(mask):
        return 0
    return int(mask.sum().item())


def _ragen_loss_scale(config: Any) -> LossScale:
    """The loss scale of RAGEN's ``actor_rollout_ref.actor.filter_loss_scaling`` (``none`` when absent)."""
    actor = getattr(config.actor_rollout_ref, "actor", None)
    value = getattr(actor, "filter_loss_scaling", "none")
    if value not in RAGEN_LOSS_SCALES:
        known = ", ".join(map(repr, RAGEN_LOSS_SCALES))
        msg = f"'actor_rollout_ref.actor.filter_loss_scaling' must be one of {known} (got {value!r})"
        raise ValueError(msg)
    return RAGEN_LOSS_SCALES[value]


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


class RagenGroupAdmissionFilter(HoldsAdmission):
    """
    A RAGEN rollout filter: admission gates first, then (optionally) RAGEN's selection.

    ``filter(batch)`` groups the rows as RAGEN does, judges every group with the session,
    lets ``selection`` choose among the kept groups, drops every other group whole (in
    place, as RAGEN does) and returns ``(batch, metrics)`` with RAGEN's metric names.

    Args:
        policy: The admission policy (or a config / mapping for one), or a
            :class:`SessionConfig` block (its policy and limits). ``None`` admits every
            group with finite rewards.
        num_groups: Groups per batch (RAGEN's ``es_manager.train.env_groups``).
        selection: RAGEN's selection among the admitted groups; ``None`` keeps them all.
        loss_scale: The loss scale RAGEN applies after the filter, logged as
            ``rollout/group_admission/loss_scale``; :meth:`from_config` reads it from RAGEN's
            ``filter_loss_scaling`` (:data:`RAGEN_LOSS_SCALES`).

    Attributes:
        empty_batches: Steps that ended with no group kept.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        policy: GroupAdmissionPolicy | GroupAdmissionConfig | SessionConfig | Mapping[str, Any] | None = None,
        *,
        num_groups: int,
        selection: RagenSelection | None = None,
        loss_scale: LossScale = DEFAULT_LOSS_SCALE,
    ) -> None:
        num_groups = check_count(num_groups, "num_groups", 1)
        if selection is not None and not isinstance(selection, RagenSelection):
            msg = f"'selection' must be a RagenSelection or None (got {describe(selection)})"
            raise TypeError(msg)
        # RAGEN applies its own filter_loss_scaling: a block's loss scale does not change it.
        policy, _, limits, _ = unpack_block(policy)
        session = AdmissionSession(policy, limits=limits, host="RAGEN", loss_scale=loss_scale)
        self.admission = AdapterSession(None, host="RAGEN", session=session)
        self._num_groups = num_groups
        self._selection = selection
        self.empty_batches = 0

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
        ``group_admission.policy`` (config fields or a YAML path), ``group_admission.selection``
        and RAGEN's ``rollout_filter_*`` keys (see ``docs/adapters/ragen.md``).

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
        if "preset" in settings:  # a SessionConfig block: the preset's policy, then the block's
            policy_settings = SessionConfig.from_mapping(
                {"preset": settings["preset"], "policy": policy_settings}
            ).policy
        groups = check_count(config.es_manager.train.env_groups, "es_manager.train.env_groups", 1)
        return cls(
            GroupAdmissionPolicy(policy_settings, logger=logger),
            num_groups=groups,
            selection=_selection(rollout, settings.get("selection")),
            loss_scale=_ragen_loss_scale(config),
        )

    def filter(self, batch: Any) -> tuple[Any, dict[str, Any]]:
        """
        Keep the admitted (and selected) groups of ``batch``; return it with RAGEN's metrics.

        Raises:
            ValueError, TypeError: the batch does not have RAGEN's structure; data problems
                (non-finite rewards, missing completions) reject the group as ``external``.
        """
        torch = require_extra("torch", "torch", "The RAGEN rollout filter")
        layout = read_layout(torch, batch, self._num_groups)
        rewards = layout.rewards
        # One step per call: RAGEN generates exactly env_groups groups and never resamples.
        with self.admission.step(self._num_groups) as step:
            verdicts = self.session.judge_batch(
                rewards,
                self._completions(batch, layout),
                group_keys=list(layout.group_keys),
                generated_tokens=_decoded_tokens(torch, batch),
            )
        counts = self.session.step_stats.metrics()
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
        tokens = step.report.metrics(prefix=METRIC_PREFIX)
        metrics.update({name: value for name, value in tokens.items() if name.endswith("_tokens")})
        # The scale RAGEN applies: of the groups kept after its selection, not only the admitted.
        groups = self._num_groups
        metrics[f"{METRIC_PREFIX}loss_scale"] = loss_scale(
            self.session.loss_scale,
            trained_groups=kept.numel(),
            target_groups=groups,
            generated_groups=groups,
        )
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
        size = int(layout.rewards.shape[1])
        return chunk(texts, size)

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
