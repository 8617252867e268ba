"""
The prompt history in an adapter whose host lets it choose prompts: the setting, the history, the metrics.

An adapter that picks prompts (slime's streaming rollout, verl's prompt sampler, TRL's
rounds) reads one ``history`` setting, builds its :class:`PromptHistory` at the host's
group size, and logs the same keys each step. This module owns those three pieces so that
no host spells them twice; the picking itself is :meth:`PromptHistory.pick`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..._exceptions import CheckpointError
from ..._history import PromptHistory
from ..._history_config import PromptHistoryConfig
from ..._session import SessionConfig
from ..._validation import describe

__all__ = [
    "HISTORY_METRICS",
    "as_history_section",
    "build_history",
    "history_field",
    "history_metrics",
    "restored_history",
]

#: The keys :func:`history_metrics` gives (under the adapter's prefix), in order.
HISTORY_METRICS = (
    "prompts_skipped",
    "prompts_forced",
    "prompts_unnamed",
    "history_prompts",
    "history_rechecks",
    "history_rechecks_informative",
    "history_wrong_skip_share",
    "history_skip_below",
)


def as_history_section(value: Any) -> dict[str, Any] | None:
    """
    The ``history`` setting: ``None`` (no history), a preset's name, or ``PromptHistoryConfig`` fields.

    A name (``"recommended"``) takes that :class:`SessionConfig` preset's ``history`` section;
    a mapping holds the fields other than ``group_size``, which is the host's.

    Raises:
        TypeError: ``value`` is none of those, or a field has the wrong type.
        ValueError: the preset is unknown or has no history section, ``group_size`` is set,
            or a field is unknown or out of range.
    """
    if value is None:
        return None
    if isinstance(value, str):
        with_history = [name for name, preset in SessionConfig.PRESETS.items() if preset.get("history")]
        if value not in with_history:
            msg = (
                f"'history' must name a preset with a history section, one of {with_history}, "
                f"or be a mapping of PromptHistoryConfig fields (got {value!r})"
            )
            raise ValueError(msg)
        section = SessionConfig.preset(value).history
        assert section is not None  # the preset has one
        return dict(section)
    if isinstance(value, Mapping):
        section = SessionConfig(history=value).history  # checks the fields, refuses group_size
        assert section is not None  # a mapping stays a mapping
        return dict(section)
    msg = (
        "'history' must be a preset's name, a mapping of PromptHistoryConfig fields or None "
        f"(got {describe(value)})"
    )
    raise TypeError(msg)


def history_field() -> Any:
    """The ``history`` setting of an adapter's settings class (see :func:`as_history_section`)."""
    return attrs.field(default=None, converter=as_history_section)


def build_history(section: Mapping[str, Any], group_size: int, *, seed: int) -> PromptHistory:
    """A new history from a ``history`` section at the host's ``group_size`` (``seed`` unless it sets one)."""
    history = SessionConfig(history=section).prompt_history(group_size, seed=seed)
    assert history is not None  # the section is given
    return history


def restored_history(
    state: Mapping[str, Any], config: PromptHistoryConfig, *, settings: str
) -> PromptHistory:
    """
    A checkpoint's history, refused when it was saved under another config than ``settings``' ``config``.

    Raises:
        CheckpointError: the state cannot be restored, or holds another config.
    """
    history = PromptHistory.from_dict(state)
    if history.config != config:
        msg = f"the checkpoint's prompt history was saved with {history.config!r}, not {settings} {config!r}"
        raise CheckpointError(msg)
    return history


def history_metrics(
    history: PromptHistory, *, step: int, prefix: str, skipped: int, forced: int, unnamed: int | None = None
) -> dict[str, int | float]:
    """
    One step's prompt-history metrics, ints and floats only (:data:`HISTORY_METRICS`).

    ``skipped`` and ``forced`` are the step's prompts the history skipped and those taken
    without its pick (it refused a whole pass); ``unnamed``, where a host's data may not
    name a prompt, those launched without a pick and never observed; the rest is
    :meth:`PromptHistory.skip_report` with the step's own groups counted (``step + 1``):
    the re-checks so far, the informative ones, the estimated share of skipped prompts that
    would have been informative (left out without ``max_wrong_skip_share``, which it is
    measured against) and the threshold the next picks skip below; and the prompts the
    history holds.
    """
    report = history.skip_report(step=step + 1)
    values: dict[str, int | float] = {
        "prompts_skipped": skipped,
        "prompts_forced": forced,
        **({} if unnamed is None else {"prompts_unnamed": unnamed}),
        "history_prompts": len(history),
        "history_rechecks": report.rechecks,
        "history_rechecks_informative": report.rechecks_informative,
        "history_skip_below": report.skip_below,
    }
    if report.wrong_skip_share is not None:
        values["history_wrong_skip_share"] = report.wrong_skip_share
    return {f"{prefix}{name}": values[name] for name in HISTORY_METRICS if name in values}
