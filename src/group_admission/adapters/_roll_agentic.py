"""The ROLL adapter's agentic path: settings from ``GROUP_ADMISSION_ROLL_CONFIG``, reading trajectories."""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import attrs

from .._config import GroupAdmissionConfig
from .._decision import GroupAdmissionDecision
from .._loading import load_yaml_mapping, require_extra
from .._policy import GroupAdmissionPolicy
from .._reasons import RejectionReason
from .._validation import check_ge, check_int, check_names_in, check_optional, describe
from ._adapter_runtime import (
    FailureStreak,
    GroupInput,
    as_policy_config,
    check_gate_on_unset,
    check_ratio,
    scalar_reward,
    to_str_tuple,
)
from ._roll_common import Reporter, flat, keeps, response_text, rows, settings_from

__all__ = [
    "AGENTIC_SETTINGS_ENV",
    "AgenticRuntime",
    "RollAgenticSettings",
    "agentic_settings",
    "read_trajectories",
]

#: Environment variable (or ``system_envs`` entry) with the settings: a YAML path or inline YAML.
AGENTIC_SETTINGS_ENV = "GROUP_ADMISSION_ROLL_CONFIG"

_MODES = ("train", "val")


@attrs.frozen(kw_only=True)
class RollAgenticSettings:
    """
    Settings of the agentic group filter, read from ``GROUP_ADMISSION_ROLL_CONFIG``.

    Args:
        policy: The :class:`GroupAdmissionConfig` fields.
        max_drop_ratio: Over the filter's lifetime, a rejection is honoured only while
            ``(dropped + 1) / judged <= ratio`` (ROLL's own ``drop_flag`` filter uses 0.5).
            External groups with a missing trajectory or an unusable score are dropped
            regardless. ``null``: no cap.
        modes: The scheduler modes in which the filter judges groups; in the others it
            keeps everything.
        max_consecutive_failed_groups: Stop the run after this many consecutive dropped
            external groups (``null``: never).

    .. versionadded:: 0.1.0
    """

    policy: GroupAdmissionConfig = attrs.field(
        factory=GroupAdmissionConfig, converter=as_policy_config, validator=check_gate_on_unset
    )
    max_drop_ratio: float | None = attrs.field(default=0.5, validator=check_ratio)
    modes: tuple[str, ...] = attrs.field(
        default=("train",), converter=to_str_tuple, validator=check_names_in(_MODES, "scheduler mode")
    )
    max_consecutive_failed_groups: int | None = attrs.field(
        default=8, validator=check_optional(check_int, check_ge(1))
    )


def _trajectory(out: GroupInput, slot: int, data: Any, texts: bool) -> None:
    count = rows(data) if hasattr(data, "non_tensor_batch") else None
    if not count:
        out.reject("malformed_trajectory", slot)
        return
    meta = getattr(data, "meta_info", None)
    if isinstance(meta, Mapping) and meta.get("drop_flag", False):
        out.external.append("drop_flag")
    text = None
    if texts:
        parts = [response_text(data, row) for row in range(count)]
        text = None if None in parts else " ".join(parts)  # type: ignore[arg-type]
    episode_scores = data.non_tensor_batch.get("episode_scores")
    if episode_scores is not None:
        # Every row of a multi-step trajectory carries the episode score; the policy checks they agree.
        for value in flat(episode_scores):
            reward, problem = scalar_reward(value)
            if problem is not None:
                out.external.append(problem)
            out.add(reward, text, slot)
        return
    scores = data.batch.get("scores")
    if scores is None:
        out.external.append("missing_scores")
        out.add(None, text, slot)
        return
    # Token-level scores hold each step's reward at its last token: their sum is the episode score.
    out.add(float(sum(flat(scores))), text, slot)


def read_trajectories(group: Any, *, texts: bool = False) -> GroupInput:
    """
    Translate one agentic group for the policy: one rollout per trajectory.

    The reward is ``non_tensor_batch["episode_scores"]``, else ``batch["scores"]`` summed.
    A ``None`` trajectory or one flagged ``meta_info["drop_flag"]`` makes the group external.
    """
    out = GroupInput()
    if isinstance(group, (str, bytes)) or not isinstance(group, Sequence) or not group:
        out.reject("malformed_group", 0)
        return out
    for slot, data in enumerate(group):
        if data is None:
            out.reject("missing_trajectory", slot)
        else:
            _trajectory(out, slot, data, texts)
    return out


def _read_settings_text(value: str) -> Any:
    text = value.strip()
    if "\n" not in text and (os.path.isfile(text) or text.endswith((".yaml", ".yml"))):
        return load_yaml_mapping(text)
    yaml = require_extra("yaml", "yaml", f"Reading {AGENTIC_SETTINGS_ENV}")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        msg = f"'{AGENTIC_SETTINGS_ENV}' is neither a YAML file path nor valid inline YAML: {exc}"
        raise ValueError(msg) from None
    if data is not None and not isinstance(data, Mapping):
        msg = f"'{AGENTIC_SETTINGS_ENV}' must hold a YAML mapping or a YAML file path (got {describe(data)})"
        raise ValueError(msg)
    return data


def agentic_settings(config: Any, env_manager_config: Any) -> RollAgenticSettings:
    """
    Read the agentic settings from ``GROUP_ADMISSION_ROLL_CONFIG``.

    Looked up in ``env_manager_config.system_envs``, then ``config.system_envs``, then
    the process environment (ROLL copies ``system_envs`` there on the driver). Absent:
    every default applies.
    """
    for owner in (env_manager_config, config):
        envs = getattr(owner, "system_envs", None)
        if isinstance(envs, Mapping) and envs.get(AGENTIC_SETTINGS_ENV):
            value = envs[AGENTIC_SETTINGS_ENV]
            break
    else:
        value = os.environ.get(AGENTIC_SETTINGS_ENV)
    if value is None:
        return RollAgenticSettings()
    if not isinstance(value, str):
        msg = f"'{AGENTIC_SETTINGS_ENV}' must be a YAML file path or inline YAML (got {describe(value)})"
        raise TypeError(msg)
    return settings_from(RollAgenticSettings, _read_settings_text(value), f"'{AGENTIC_SETTINGS_ENV}'")  # type: ignore[no-any-return]


class AgenticRuntime:
    """The policy, lifetime drop budget and counts of one agentic group filter (the budget is lifetime)."""

    def __init__(self, settings: RollAgenticSettings) -> None:
        self.settings = settings
        self.policy = GroupAdmissionPolicy(settings.policy)
        self.reporter = Reporter()
        self.streak = FailureStreak(settings.max_consecutive_failed_groups, "ROLL agentic")
        self._lock = threading.Lock()

    def judge(self, group: Any, group_key: Hashable | None = None) -> GroupAdmissionDecision:
        """The policy's decision on one trajectory group."""
        data = read_trajectories(group, texts=self.settings.policy.similarity_gate_enabled)
        data.group_key = group_key
        return data.evaluate(self.policy)

    def drop(self, group: Any, group_key: Hashable | None = None) -> bool:
        """Judge, apply the drop budget, count, and annotate the kept trajectories."""
        decision = self.judge(group, group_key)
        # A drop_flag placeholder is trainable (all-zero masks), so the budget may keep it,
        # as ROLL's own filter does; any other external problem is never trained on.
        budgeted = decision.reason is not RejectionReason.EXTERNAL or set(decision.external_reasons) == {
            "drop_flag"
        }
        with self._lock:
            keep = keeps(
                decision, self.reporter.total, ratio=self.settings.max_drop_ratio, cap=None, budgeted=budgeted
            )
            self.reporter.add(decision, fallback_admitted=keep and not decision.admitted)
            if keep:
                self.reporter.report([item for item in group if item is not None])
        self.streak.observe(decision, dropped=not keep)
        return not keep
