"""
Pieces the slime and ROLL adapters share: settings fields, reading one reward, the failure streak.

Nothing here decides admission: verdicts come from :class:`GroupAdmissionPolicy`.
"""

from __future__ import annotations

import json
import numbers
import threading
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import attrs

from .._config import GroupAdmissionConfig
from .._decision import GroupAdmissionDecision
from .._policy import GroupAdmissionPolicy
from .._reasons import RejectionReason
from .._validation import describe

__all__ = [
    "ConsecutiveFailedGroupsError",
    "FailureStreak",
    "GroupInput",
    "as_policy_config",
    "check_bool",
    "check_gate_on_unset",
    "check_ratio",
    "primary_detail",
    "scalar_reward",
    "settings_key",
    "to_str_tuple",
]


class ConsecutiveFailedGroupsError(RuntimeError):
    """
    Raised when too many consecutive groups were rejected as ``external`` and dropped.

    The framework would otherwise keep sampling replacements forever (slime and ROLL put
    no cap on resampling), so the adapter stops the run and names the reasons.

    .. versionadded:: 0.1.0
    """


def as_policy_config(value: Any) -> GroupAdmissionConfig:
    """Convert the ``policy`` setting (a mapping of config fields, or ``None``) to a config."""
    if value is None:
        return GroupAdmissionConfig()
    if isinstance(value, GroupAdmissionConfig):
        return value
    if isinstance(value, Mapping):
        return GroupAdmissionConfig.from_mapping(value)
    msg = f"'policy' must be a mapping of GroupAdmissionConfig fields (got {describe(value)})"
    raise TypeError(msg)


def check_gate_on_unset(_inst: object, attribute: attrs.Attribute[Any], value: GroupAdmissionConfig) -> None:
    """Reject ``gate_on``: these frameworks hand the adapter one scalar reward per member."""
    if value.gate_on is not None:
        msg = (
            f"'{attribute.name}.gate_on' is not supported here: the framework gives one scalar "
            f"reward per member (got {list(value.gate_on)!r})"
        )
        raise ValueError(msg)


def check_bool(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require a real bool (YAML ``true``/``false``), not a truthy string or number."""
    if not isinstance(value, bool):
        msg = f"'{attribute.name}' must be true or false (got {describe(value)})"
        raise TypeError(msg)


def check_ratio(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require ``None`` or a number in ``[0, 1]``."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) <= 1.0:
        msg = f"'{attribute.name}' must be null or a number in [0, 1] (got {describe(value)})"
        raise ValueError(msg)


def to_str_tuple(value: Any) -> Any:
    """Turn a YAML list (or one string) into a tuple; leave anything else for the validator."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence):
        return tuple(value)
    return value


def settings_key(raw: Any) -> str:
    """A canonical text form of a raw settings mapping, used to cache one runtime per configuration."""
    try:
        return json.dumps(raw, sort_keys=True, default=repr, separators=(",", ":"))
    except (TypeError, ValueError):
        # Mixed-type keys cannot be sorted; their repr still identifies the configuration.
        return repr(raw)


def scalar_reward(value: Any) -> tuple[float | None, str | None]:
    """
    Read one reward as a float, or say why it is unusable.

    Returns ``(value, None)`` for a real number or a one-element tensor/array,
    ``(None, None)`` for ``None`` (the policy reports ``missing_reward`` itself), and
    ``(None, detail)`` for anything else. Non-finite numbers pass through: the policy
    rejects them as ``non_finite_reward``.
    """
    if value is None:
        return None, None
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
        value = value.item()  # a 0-d tensor or array holds one number
    if isinstance(value, numbers.Real):
        return float(value), None
    if isinstance(value, Mapping):
        problem = "dict_reward_without_key"
    elif isinstance(value, (str, bytes)) or not (hasattr(value, "__len__") or hasattr(value, "ndim")):
        problem = "non_numeric_reward"
    else:
        problem = "non_scalar_reward"
    return None, problem


class GroupInput:
    """
    One group translated for the policy: a reward, completion and rollout id per member.

    Members whose data is unusable are added with a ``None`` reward and a named external
    reason; the policy turns them into an ``external`` decision.
    """

    __slots__ = ("completions", "external", "group_key", "rewards", "rollout_ids")

    def __init__(self, group_key: Hashable | None = None) -> None:
        self.rewards: list[float | None] = []
        self.completions: list[str | None] = []
        self.rollout_ids: list[Hashable] = []
        self.external: list[str] = []
        self.group_key = group_key

    def add(self, reward: float | None, completion: str | None, rollout_id: Hashable) -> None:
        """Add one member."""
        self.rewards.append(reward)
        self.completions.append(completion)
        self.rollout_ids.append(rollout_id)

    def reject(self, detail: str, rollout_id: Hashable) -> None:
        """Add a member that has no usable data, and name why."""
        self.external.append(detail)
        self.add(None, None, rollout_id)

    def evaluate(self, policy: GroupAdmissionPolicy) -> GroupAdmissionDecision:
        """The policy's decision on this group."""
        return policy.evaluate(
            self.rewards,
            self.completions if policy.config.similarity_gate_enabled else None,
            external_reasons=self.external,
            rollout_ids=self.rollout_ids,
            group_key=self.group_key,
        )


def primary_detail(decision: GroupAdmissionDecision) -> str:
    """The first external reason of an external decision (what the adapters report it as)."""
    return decision.external_reasons[0] if decision.external_reasons else "external"


class FailureStreak:
    """
    Count consecutive dropped ``external`` rejections and stop the run at a limit.

    Any other outcome (admitted, a gate rejection, a group admitted by a fallback) ends
    the streak. Thread-safe.
    """

    __slots__ = ("_count", "_framework", "_limit", "_lock", "_reasons")

    def __init__(self, limit: int | None, framework: str) -> None:
        self._limit = limit
        self._framework = framework
        self._count = 0
        self._reasons: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        """The current streak length."""
        return self._count

    def observe(self, decision: GroupAdmissionDecision, *, dropped: bool) -> None:
        """
        Fold one outcome into the streak.

        Raises:
            ConsecutiveFailedGroupsError: this outcome made the streak reach the limit.
        """
        with self._lock:
            if not dropped or decision.reason is not RejectionReason.EXTERNAL:
                self._count = 0
                self._reasons.clear()
                return
            self._count += 1
            self._reasons[primary_detail(decision)] += 1
            if self._limit is None or self._count < self._limit:
                return
            count, reasons = self._count, self._reasons.most_common()
            self._count = 0
            self._reasons = Counter()
        details = ", ".join(f"{reason} x{n}" for reason, n in reasons)
        msg = (
            f"{count} consecutive groups were rejected as external ({details}): the {self._framework} "
            "rollout is not producing usable groups, so the run stops here. Fix the generation or "
            "reward path that fails, or raise 'max_consecutive_failed_groups' "
            f"(now {self._limit}) in the group_admission settings."
        )
        raise ConsecutiveFailedGroupsError(msg)
