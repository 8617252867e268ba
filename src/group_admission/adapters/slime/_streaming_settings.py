"""The streaming rollout function's settings: the ``group_admission_streaming`` mapping on slime's args."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from ... import SamplingBudgetConfig
from .._kit import (
    LossScale,
    OnExhausted,
    as_budget,
    check_ge,
    check_probability,
    describe,
    field_check,
    history_field,
    loss_scale_field,
    on_exhausted_field,
    probability_field,
    real_field,
)
from ._hooks import ArgsSettings

__all__ = ["STREAMING_SETTINGS_ATTR", "SlimeStreamingSettings"]

#: The ``args`` attribute that ``--custom-config-path`` sets from the YAML's top-level key.
STREAMING_SETTINGS_ATTR = "group_admission_streaming"
#: The plan's confidence when neither ``confidence`` nor ``budget.confidence`` is given.
DEFAULT_CONFIDENCE = 0.99


def _with_confidence(value: Any, settings: Any) -> SamplingBudgetConfig | None:
    """
    The ``budget`` setting, holding the plan's confidence: ``confidence`` or ``budget.confidence``.

    A budget mapping without ``confidence`` gets the top-level one (else 0.99, not the
    budget's own default); both given must agree, so that neither is silently ignored.
    """
    if value is None:
        return None
    given = value.confidence if isinstance(value, SamplingBudgetConfig) else None
    if isinstance(value, Mapping):
        given = value.get("confidence")
        if given is None:
            fill = DEFAULT_CONFIDENCE if settings.confidence is None else settings.confidence
            value = {**value, "confidence": fill}
    if given is not None and settings.confidence is not None and given != settings.confidence:
        msg = (
            "'confidence' and 'budget.confidence' must agree, or give only one of them "
            f"(got {settings.confidence!r} and {given!r})"
        )
        raise ValueError(msg)
    return as_budget(value)


def _check_key(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        msg = f"'{attribute.name}' must be None or a non-empty key of Sample.metadata (got {describe(value)})"
        raise ValueError(msg) if isinstance(value, str) else TypeError(msg)


@attrs.frozen(kw_only=True)
class SlimeStreamingSettings(ArgsSettings):
    """
    The settings of :func:`streaming_rollout`: the caps, the plan's knobs, and what exhaustion does.

    The policy, the failure streak and the statuses that make a group external come from
    the ``group_admission`` mapping (:class:`SlimeAdmissionSettings`), as for the filter.

    Args:
        budget: :class:`SamplingBudgetConfig` fields, the hard caps of one rollout
            (``max_extra_groups``, ``max_total_samples``, ``max_total_tokens``; groups
            resumed from slime's buffer count against them). ``None``:
            ``SamplingBudgetConfig.for_target(rollout_batch_size)``, at most ``2 x
            rollout_batch_size`` extra groups. Its ``confidence`` is the plan's.
        confidence: The probability that the groups in flight meet the target
            (:meth:`AdmissionSession.stream_plan`); higher is faster and launches more.
            The same knob as ``budget.confidence``: give either (both must agree);
            ``None`` with neither: 0.99.
        race: Admitted groups raced for each open place (at least 1).
        top_up_below: Launch more only once the probability of meeting the target with
            the groups in flight has fallen below this.
        on_exhausted: When the caps stop the launches before the target is met:
            ``"train"`` fills the missing places with finished rejected groups whose
            samples are all marked ``remove_sample`` (no gradient) and logs it;
            ``"raise"`` stops the run with :class:`group_admission.BudgetExhaustedError`.
        loss_scale: The loss scale the rollout's metrics report (``loss_scale``). The
            default, ``"target"``, is what slime's per-sample mean does to a short rollout
            (its padded groups count as samples at zero loss); with
            ``--calculate-per-token-loss`` slime applies ``"kept"`` (docs/adapters/slime.md).
        history: Skip likely-dead prompts before they are launched: a
            :class:`PromptHistory` picks the prompts each launch draws from slime's data
            source. A preset's name (``recommended``: its ``history`` section), or
            :class:`PromptHistoryConfig` fields without ``group_size`` (which is
            ``n_samples_per_prompt``; ``seed`` defaults to ``rollout_seed``). ``None``: no
            history, every drawn prompt is launched.
        prompt_id_key: The key of ``Sample.metadata`` (the dataset's ``--metadata-key``
            column) that names each prompt for the history, a ``str`` or an ``int``.
            ``None``: a hash of the sample's ``prompt`` and ``label``.

    .. versionadded:: 0.2.0
    """

    ATTR: ClassVar[str] = STREAMING_SETTINGS_ATTR
    # Before ``budget``, whose converter reads it.
    confidence: float | None = real_field(None, field_check(check_probability), optional=True)
    budget: SamplingBudgetConfig | None = attrs.field(
        default=None,
        converter=attrs.Converter(_with_confidence, takes_self=True),  # type: ignore[misc]  # mypy's attrs plugin
    )
    race: float = real_field(1.0, check_ge(1))
    top_up_below: float = probability_field(0.5)
    on_exhausted: OnExhausted = on_exhausted_field()
    loss_scale: LossScale = loss_scale_field()
    history: dict[str, Any] | None = history_field()
    prompt_id_key: str | None = attrs.field(default=None, validator=_check_key)

    def budget_for(self, rollout_batch_size: int) -> SamplingBudgetConfig:
        """The caps of one rollout of ``rollout_batch_size`` groups, and the plan's confidence."""
        if self.budget is not None:
            return self.budget
        confidence = DEFAULT_CONFIDENCE if self.confidence is None else self.confidence
        return SamplingBudgetConfig.for_target(rollout_batch_size, confidence=confidence)
