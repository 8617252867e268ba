"""
The prompt history in an adapter whose host lets it choose prompts: the setting, the history, the metrics.

An adapter that picks prompts (slime's streaming rollout, verl's prompt sampler, TRL's
rounds) reads one ``history`` setting, builds its :class:`PromptHistory` at the host's
group size, walks its prompt order through the history a step at a time, and logs the same
keys each step. This module owns those pieces so that no host spells them twice; the picking
itself is :meth:`PromptHistory.pick`, and :class:`PromptScan` is the one rule that keeps a
host's draw from stalling on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..._exceptions import CheckpointError
from ..._history import PromptHistory
from ..._history_config import PromptHistoryConfig
from ..._history_ids import PromptId
from ..._session import SessionConfig
from ..._validation import check_count, describe

__all__ = [
    "HISTORY_METRICS",
    "PromptScan",
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


class PromptScan:
    """
    A host's prompt order walked through a history a step at a time, so that a draw cannot stall.

    Each step looks at up to one pass of the data (``pass_length`` candidates) through
    :meth:`PromptHistory.pick`; the candidates after that are taken as drawn, unpicked
    (``forced``). A history that believes every prompt dead therefore cannot stall a host
    that draws until it has enough prompts: one pass a step is the most it refuses.
    ``skipped`` and ``forced`` count since the last :meth:`take_counts`; ``step`` and
    ``looked`` (the candidates seen at that step) are the position within a step, which a
    host that saves mid-step keeps. The history is given at each call, because a restored
    checkpoint replaces the host's.
    """

    def __init__(self) -> None:
        self.step = -1
        self.looked = self.skipped = self.forced = 0

    def keep(
        self, history: PromptHistory, candidates: Sequence[PromptId], *, step: int, pass_length: int
    ) -> list[bool]:
        """
        Whether to generate each candidate at ``step``: the history's pick within the pass, then all.

        Raises:
            TypeError, ValueError: ``pass_length`` is not an integer >= 1.
        """
        check_count(pass_length, "pass_length", minimum=1)
        if step != self.step:
            self.step, self.looked = step, 0
        within = list(candidates[: max(0, pass_length - self.looked)])
        picked = set(history.pick(within, step=step).picked) if within else set()
        kept = [candidate in picked for candidate in within]
        self.looked += len(candidates)
        self.skipped += kept.count(False)
        self.forced += len(candidates) - len(within)
        return kept + [True] * (len(candidates) - len(within))

    def take_counts(self) -> tuple[int, int]:
        """The candidates skipped and those forced since the last call, which starts both again."""
        counts, self.skipped, self.forced = (self.skipped, self.forced), 0, 0
        return counts
