"""The ROLL adapter's RLVR path: settings in ``filter_args``, reading responses, per-step budgets."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from typing import Any

import attrs

from .._config import GroupAdmissionConfig
from .._decision import GroupAdmissionDecision
from .._metrics import AdmissionStats
from .._policy import GroupAdmissionPolicy
from .._reasons import RejectionReason
from .._validation import check_ge, check_int, check_optional, describe
from ._adapter_runtime import (
    FailureStreak,
    GroupInput,
    as_policy_config,
    check_gate_on_unset,
    check_ratio,
    scalar_reward,
    settings_key,
)
from ._roll_common import Reporter, flat, keeps, response_text, rows, settings_from

__all__ = [
    "RLVR_SETTINGS_KEY",
    "RLVRRuntime",
    "RollRLVRSettings",
    "domain_of",
    "read_responses",
    "reset_runtimes",
    "rlvr_runtime",
    "rlvr_totals",
]

#: Key of the adapter's settings inside ``rewards.<domain>.query_filter_config.filter_args``.
RLVR_SETTINGS_KEY = "group_admission"

_STEP_WINDOWS = 16  # steps whose counts are kept; async training overlaps only a few


@attrs.frozen(kw_only=True)
class RollRLVRSettings:
    """
    Settings of the RLVR rollout loop and ``query_filter``.

    They live in ``rewards.<domain>.query_filter_config.filter_args.group_admission``.

    Args:
        policy: The :class:`GroupAdmissionConfig` fields.
        max_rejection_ratio: Per training step, a gate rejection is honoured only while
            the dropped groups stay within this share of the step's judged groups,
            counting the group at hand: ``(dropped + 1) / judged <= ratio``. ``null``: no
            ratio cap (ROLL's uncapped resampling).
        max_rejected_groups_per_step: At most this many dropped groups per training step
            (``null``: no cap).
        max_consecutive_failed_groups: Stop the run after this many consecutive external
            rejections (``null``: never).

    .. versionadded:: 0.1.0
    """

    policy: GroupAdmissionConfig = attrs.field(
        factory=GroupAdmissionConfig, converter=as_policy_config, validator=check_gate_on_unset
    )
    max_rejection_ratio: float | None = attrs.field(default=0.5, validator=check_ratio)
    max_rejected_groups_per_step: int | None = attrs.field(
        default=None, validator=check_optional(check_int, check_ge(0))
    )
    max_consecutive_failed_groups: int | None = attrs.field(
        default=8, validator=check_optional(check_int, check_ge(1))
    )


def read_responses(data_list: Any, *, texts: bool = False) -> GroupInput:
    """
    Translate one RLVR prompt's responses for the policy: one member per row.

    ``data_list`` holds DataProtos (possibly nested lists, as ROLL's
    ``expand_responses`` accepts); a multi-row DataProto contributes each of its rows.
    Rewards come from ``batch["response_level_rewards"]``; with ``texts``, each row's
    response token ids (for the redundancy gate).
    """
    out = GroupInput()
    stack = [data_list] if not isinstance(data_list, list) else list(reversed(data_list))
    while stack:
        data = stack.pop()
        if isinstance(data, list):
            stack.extend(reversed(data))
            continue
        count = rows(data) if hasattr(data, "batch") else None
        if not count:
            out.reject("malformed_response", len(out.rewards))
            continue
        try:
            values = flat(data.batch["response_level_rewards"])
        except KeyError:
            out.external.append("missing_response_level_rewards")
            values = [None] * count
        if len(values) != count:
            out.external.append("malformed_response_level_rewards")
            values = [None] * count
        for row, value in enumerate(values):
            reward, problem = scalar_reward(value)
            if problem is not None:
                out.external.append(problem)
            out.add(reward, response_text(data, row) if texts else None, len(out.rewards))
    if not out.rewards:
        out.reject("malformed_group", 0)
    return out


def domain_of(data_list: Any) -> str:
    """The reward domain of an RLVR prompt's responses, as ROLL's ``query_filter`` reads it."""
    first = data_list
    while isinstance(first, list) and first:
        first = first[0]
    try:
        return str(first.non_tensor_batch["domain"][0])
    except (AttributeError, KeyError, IndexError, TypeError):
        msg = f"'data_list' must hold DataProtos with a non_tensor_batch 'domain' (got {describe(data_list)})"
        raise ValueError(msg) from None


def _leaves(data_list: Any) -> list[Any]:
    if not isinstance(data_list, list):
        return [data_list]
    return [leaf for item in data_list for leaf in _leaves(item)]


class RLVRRuntime:
    """The policy, per-step budget windows and totals of one RLVR domain configuration."""

    def __init__(self, settings: RollRLVRSettings) -> None:
        self.settings = settings
        self.policy = GroupAdmissionPolicy(settings.policy)
        self.reporter = Reporter()
        self.streak = FailureStreak(settings.max_consecutive_failed_groups, "ROLL RLVR")
        self._windows: dict[Hashable, AdmissionStats] = {}
        self._lock = threading.Lock()

    def judge(self, data_list: Any, group_key: Hashable | None = None) -> GroupAdmissionDecision:
        """The policy's decision on one prompt's responses."""
        group = read_responses(data_list, texts=self.settings.policy.similarity_gate_enabled)
        group.group_key = group_key
        return group.evaluate(self.policy)

    def admit(self, data_list: Any, *, global_step: Hashable | None, group_key: Hashable | None) -> bool:
        """Judge, apply the step's budget, count, and annotate the kept responses."""
        decision = self.judge(data_list, group_key)
        with self._lock:
            window = self._windows.get(global_step)
            if window is None:
                window = self._windows[global_step] = AdmissionStats()
                if len(self._windows) > _STEP_WINDOWS:
                    self._windows.pop(next(iter(self._windows)))
            keep = keeps(
                decision,
                window,
                ratio=self.settings.max_rejection_ratio,
                cap=self.settings.max_rejected_groups_per_step,
                budgeted=decision.reason is not RejectionReason.EXTERNAL,
            )
            fallback = keep and not decision.admitted
            window.add(decision, fallback_admitted=fallback)
            self.reporter.add(decision, fallback_admitted=fallback)
            if keep:
                self.reporter.report(_leaves(data_list))
        self.streak.observe(decision, dropped=not keep)
        return keep


_RLVR_RUNTIMES: dict[str, RLVRRuntime] = {}
_RLVR_LOCK = threading.Lock()


def rlvr_runtime(pipeline_config: Any, domain: str) -> RLVRRuntime:
    """
    The runtime of ``domain``'s settings in ``pipeline_config``, built on first use.

    Raises:
        ValueError, TypeError: the domain has no reward config, or the settings are invalid.
    """
    rewards = getattr(pipeline_config, "rewards", None)
    if not isinstance(rewards, Mapping) or domain not in rewards:
        known = sorted(rewards) if isinstance(rewards, Mapping) else []
        msg = f"'rewards.{domain}' is missing from the pipeline config (reward domains: {known})"
        raise ValueError(msg)
    source = f"'rewards.{domain}.query_filter_config.filter_args'"
    filter_args = getattr(getattr(rewards[domain], "query_filter_config", None), "filter_args", None)
    if filter_args is not None and not isinstance(filter_args, Mapping):
        msg = f"{source} must be a mapping (got {describe(filter_args)})"
        raise TypeError(msg)
    raw = (filter_args or {}).get(RLVR_SETTINGS_KEY)
    key = f"{domain}\n{settings_key(raw)}"
    runtime = _RLVR_RUNTIMES.get(key)
    if runtime is None:
        settings = settings_from(RollRLVRSettings, raw, f"{source[:-1]}.{RLVR_SETTINGS_KEY}'")
        with _RLVR_LOCK:
            runtime = _RLVR_RUNTIMES.setdefault(key, RLVRRuntime(settings))
    return runtime


def reset_runtimes() -> None:
    """Forget every RLVR runtime and its counts (for tests and notebooks)."""
    with _RLVR_LOCK:
        _RLVR_RUNTIMES.clear()


def rlvr_totals(domain: str | None = None) -> AdmissionStats:
    """The summed counts of every RLVR runtime (of ``domain`` only, when given)."""
    total = AdmissionStats()
    with _RLVR_LOCK:
        runtimes = [(key.split("\n", 1)[0], runtime) for key, runtime in _RLVR_RUNTIMES.items()]
    for runtime_domain, runtime in runtimes:
        if domain is None or runtime_domain == domain:
            total = total.merge(runtime.reporter.total)
    return total
