"""What adapters share: reading rewards and groups, settings fields, one session per configuration."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from .._config import GroupAdmissionConfig
from .._decision import GroupAdmissionDecision
from .._loading import from_mapping
from .._policy import GroupAdmissionPolicy
from .._session import AdmissionSession, AdmissionVerdict
from .._validation import check_ge, check_int, check_optional, describe

R = TypeVar("R")


@attrs.frozen(kw_only=True)
class HostSupport:
    """
    The host versions an adapter supports: ``(range, what works there)`` pairs, newest first.

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


def scalar_policy_config(value: Any) -> GroupAdmissionConfig:
    """:func:`as_policy_config`, refusing ``gate_on``: these hosts give one scalar reward per member."""
    config = as_policy_config(value)
    if config.gate_on is not None:
        msg = (
            "'policy.gate_on' is not supported here: the framework gives one scalar "
            f"reward per member (got {list(config.gate_on)!r})"
        )
        raise ValueError(msg)
    return config


def failed_streak_field() -> Any:
    """The ``max_consecutive_failed_groups`` setting: an integer >= 1 or ``None``, 8 by default."""
    return attrs.field(default=8, validator=check_optional(check_int, check_ge(1)))


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
    return tuple(value) if isinstance(value, Sequence) else value


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


def scalar_reward(value: Any) -> tuple[float | None, str | None]:
    """
    Read one reward as a float: ``(value, None)``, or ``(None, detail)`` when it is unusable.

    ``None`` reads as ``(None, None)`` (the policy reports ``missing_reward``); non-finite
    numbers and ints too large for a float (as infinities) pass for the policy to reject.
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
        return None, "dict_reward_without_key"
    if isinstance(value, (str, bytes)) or not (hasattr(value, "__len__") or hasattr(value, "ndim")):
        return None, "non_numeric_reward"
    return None, "non_scalar_reward"


@attrs.define
class GroupInput:
    """One group translated for the policy: a reward, completion and rollout id per member, and problems."""

    group_key: Hashable | None = None
    rewards: list[float | None] = attrs.Factory(list)
    completions: list[str | None] = attrs.Factory(list)
    rollout_ids: list[Hashable] = attrs.Factory(list)
    external: list[str] = attrs.Factory(list)

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
