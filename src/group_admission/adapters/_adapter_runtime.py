"""What adapters share to read host data: rewards, groups, settings, one session per configuration."""

from __future__ import annotations

import json
import math
import numbers
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import attrs

from .._config import GroupAdmissionConfig
from .._decision import GroupAdmissionDecision
from .._loading import from_mapping
from .._policy import GroupAdmissionPolicy
from .._session import AdmissionSession, AdmissionVerdict
from .._validation import describe

__all__ = [
    "GroupInput",
    "HostSupport",
    "Registry",
    "as_policy_config",
    "check_bool",
    "check_gate_on_unset",
    "check_ratio",
    "scalar_reward",
    "settings_from",
    "settings_key",
    "to_str_tuple",
]

R = TypeVar("R")


@attrs.frozen(kw_only=True)
class HostSupport:
    """
    The host versions an adapter supports, as data: ``(range, what works there)`` pairs, newest first.

    ``checked_commit`` is the host commit the adapter and its test doubles were read from.

    .. versionadded:: 0.2.0
    """

    host: str
    versions: tuple[tuple[str, str], ...]
    checked_commit: str


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
    """Reject ``gate_on``: these hosts hand the adapter one scalar reward per member."""
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


def settings_from(cls: type[R], raw: Any, source: str, *, where: str | None = None) -> R:
    """Build ``cls`` from a raw mapping (``None``: defaults); errors name ``source`` (or ``where``)."""
    if raw is None:
        return cls()
    if not isinstance(raw, Mapping):
        msg = f"{source} must be a mapping (got {describe(raw)})"
        raise TypeError(msg)
    return from_mapping(cls, raw, source=where or source)


def settings_key(raw: Any) -> str:
    """A canonical text form of a raw settings mapping, to keep one session per configuration."""
    try:
        return json.dumps(raw, sort_keys=True, default=repr, separators=(",", ":"))
    except (TypeError, ValueError):
        # Mixed-type keys cannot be sorted; their repr still identifies the configuration.
        return repr(raw)


class Registry(Generic[R]):
    """Objects built on first use, one per key, until :meth:`clear`: a process's sessions (thread-safe)."""

    def __init__(self) -> None:
        self._items: dict[str, R] = {}
        self._lock = threading.Lock()

    def get(self, key: str, build: Callable[[], R]) -> R:
        """The object of ``key``, built by ``build`` (which may raise) the first time."""
        item = self._items.get(key)
        if item is None:
            built = build()
            with self._lock:
                item = self._items.setdefault(key, built)
        return item

    def items(self) -> list[tuple[str, R]]:
        """A snapshot of the keys and objects."""
        with self._lock:
            return list(self._items.items())

    def clear(self) -> None:
        """Forget every object."""
        with self._lock:
            self._items.clear()


def scalar_reward(value: Any) -> tuple[float | None, str | None]:
    """
    Read one reward as a float: ``(value, None)``, or ``(None, detail)`` when it is unusable.

    ``None`` reads as ``(None, None)`` (the policy reports ``missing_reward``). Non-finite
    numbers, and integers too large for a float (as infinities), pass through for the
    policy to reject as ``non_finite_reward``.
    """
    if value is None:
        return None, None
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
        value = value.item()  # a 0-d tensor or array holds one number
    if isinstance(value, numbers.Real):
        try:
            return float(value), None
        except OverflowError:
            return (-math.inf if value < 0 else math.inf), None
    if isinstance(value, Mapping):
        problem = "dict_reward_without_key"
    elif isinstance(value, (str, bytes)) or not (hasattr(value, "__len__") or hasattr(value, "ndim")):
        problem = "non_numeric_reward"
    else:
        problem = "non_scalar_reward"
    return None, problem


class GroupInput:
    """One group translated for the policy: a reward, completion and rollout id per member, and problems."""

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
        """The policy's decision on this group, counted nowhere."""
        return policy.evaluate(
            self.rewards,
            self.completions if policy.config.similarity_gate_enabled else None,
            external_reasons=self.external,
            rollout_ids=self.rollout_ids,
            group_key=self.group_key,
        )

    def judge(self, session: AdmissionSession, *, step: int | str | None = None) -> AdmissionVerdict:
        """The session's verdict on this group: counted, with its drop limits applied."""
        return session.record(self.evaluate(session.policy), step=step)
