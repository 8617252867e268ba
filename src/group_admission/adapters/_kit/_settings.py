"""
Adapter settings: the fields and coercers every settings class uses, and ``SessionConfig`` blocks in them.

An adapter's settings are its host config's ``group_admission`` block (or an environment
variable's): :func:`settings_from` builds a settings class from it, errors naming the
setting, and reads a ``preset:`` key as a :class:`SessionConfig` block whose sections fill
the ``policy``, ``budget``, ``limits``, ``history`` and ``loss_scale`` fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from ..._budget import SamplingBudgetConfig
from ..._config import GroupAdmissionConfig
from ..._limits import DropLimits
from ..._loading import coerce_config, from_mapping
from ..._loss_scale import DEFAULT_LOSS_SCALE, LOSS_SCALES, LossScale
from ..._policy import GroupAdmissionPolicy
from ..._session import SessionConfig
from ..._stream_types import ON_EXHAUSTED
from ..._validation import check_ge, check_one_of, describe, int_field

R = TypeVar("R")


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


def token_ids_only(
    adapter: str, holder: str
) -> Callable[[object, attrs.Attribute[Any], GroupAdmissionConfig], None]:
    """
    A ``policy`` validator refusing the redundancy gate, for hosts whose rollouts hold token ids.

    ``holder`` says what holds them (``"its experiences hold"``): comparing texts would mean
    decoding every completion, which is not an adapter's job.
    """

    def check(_inst: object, attribute: attrs.Attribute[Any], value: GroupAdmissionConfig) -> None:
        if value.similarity_gate_enabled:
            msg = (
                f"'{attribute.name}.max_mean_pairwise_similarity' is not supported by the {adapter} adapter: "
                f"{holder} token ids, not completion texts (got {value.max_mean_pairwise_similarity!r})"
            )
            raise ValueError(msg)

    return check


def as_budget(value: Any) -> SamplingBudgetConfig:
    """Convert the ``budget`` setting (:class:`SamplingBudgetConfig` fields, or ``None``: the defaults)."""
    return coerce_config(SamplingBudgetConfig, value, name="budget")


def as_limits(value: Any) -> DropLimits:
    """Convert the ``limits`` setting (:class:`DropLimits` fields, or ``None``: none)."""
    return coerce_config(DropLimits, value, name="limits")


def loss_scale_field() -> Any:
    """The ``loss_scale`` setting: the session's loss-scale mode (default: the sessions' own)."""
    return attrs.field(default=DEFAULT_LOSS_SCALE, validator=check_one_of(LOSS_SCALES))


def on_exhausted_field() -> Any:
    """The ``on_exhausted`` setting: ``"train"`` (the default) on what the step kept, or ``"raise"``."""
    return attrs.field(default="train", validator=check_one_of(ON_EXHAUSTED))


def failed_streak_field() -> Any:
    """The ``max_consecutive_failed_groups`` setting: an integer >= 1 or ``None``, 8 by default."""
    return int_field(8, check_ge(1), optional=True)


def to_str_tuple(value: Any) -> Any:
    """Turn a YAML list (or one string) into a tuple; leave anything else for the validator."""
    if isinstance(value, str):
        return (value,)
    return tuple(value) if isinstance(value, Sequence) else value


#: The keys of a :class:`SessionConfig` block that a settings mapping may carry.
SESSION_KEYS = ("preset", "policy", "budget", "limits", "history", "loss_scale")


def _with_preset(cls: type, raw: Mapping[str, Any]) -> dict[str, Any]:
    """
    ``raw`` with its :class:`SessionConfig` block (``preset`` plus overrides) resolved into ``cls``'s fields.

    A section ``cls`` has no field for is passed on when ``raw`` gives it (so that the
    settings refuse it by name) and left out when only the preset gives it (a host that
    does not choose prompts has no use for ``history``).
    """
    names = {field.name for field in attrs.fields(cls)}
    config = SessionConfig.from_mapping({key: raw[key] for key in SESSION_KEYS if key in raw})
    out = {key: value for key, value in raw.items() if key not in SESSION_KEYS or key not in names}
    out.pop("preset")
    for key in SESSION_KEYS[1:]:
        if key in names:
            out[key] = config.history if key == "history" else getattr(config, key)
    return out


def session_config_of(value: Any) -> SessionConfig | None:
    """
    ``value`` as a :class:`SessionConfig` when it is one or a block naming a ``preset``, else ``None``.

    For hosts whose admission argument also takes a policy or its config: a
    ``{"preset": "recommended", ...}`` mapping is the whole block.
    """
    if isinstance(value, SessionConfig):
        return value
    if isinstance(value, Mapping) and "preset" in value:
        return SessionConfig.from_mapping(value)
    return None


def unpack_block(
    policy: Any, *, budget: Any = None, limits: Any = None, loss_scale: LossScale = DEFAULT_LOSS_SCALE
) -> tuple[GroupAdmissionPolicy | GroupAdmissionConfig | Mapping[str, Any] | None, Any, Any, LossScale]:
    """
    A hook's ``(policy, budget, limits, loss_scale)`` arguments, reading ``policy`` as a block if it is one.

    For hook objects whose ``policy`` argument may also be a :class:`SessionConfig` (or a
    ``preset`` block): its sections fill the other arguments left at their defaults; its
    budget counts as given only when it differs from the defaults (no resampling).
    """
    block = session_config_of(policy)
    if block is None:
        return policy, budget, limits, loss_scale
    if budget is None and block.budget != SamplingBudgetConfig():
        budget = block.budget
    scale = block.loss_scale if loss_scale == DEFAULT_LOSS_SCALE else loss_scale
    return block.policy, budget, block.limits if limits is None else limits, scale


def settings_from(cls: type[R], raw: Any, source: str, *, where: str | None = None) -> R:
    """
    Build ``cls`` from a raw mapping (``None``: defaults); errors name ``source`` (or ``where``).

    A mapping with a ``preset`` key is a :class:`SessionConfig` block plus the adapter's
    own keys: the preset's sections, with the block's overrides, fill the settings'
    ``policy``, ``budget``, ``limits``, ``history`` and ``loss_scale`` fields.
    """
    if raw is None:
        return cls()
    if not isinstance(raw, Mapping):
        msg = f"{source} must be a mapping (got {describe(raw)})"
        raise TypeError(msg)
    if "preset" in raw:
        raw = _with_preset(cls, raw)
    return from_mapping(cls, raw, source=where or source)


def settings_key(raw: Any) -> str:
    """A canonical text form of a raw settings mapping, to keep one session per configuration."""
    try:
        return json.dumps(raw, sort_keys=True, default=repr, separators=(",", ":"))
    except (TypeError, ValueError):
        # Mixed-type keys cannot be sorted; their repr still identifies the configuration.
        return repr(raw)
