"""The values an ``AdmissionSession`` returns: verdicts and step reports."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from ._decision import BatchAdmissionResult, GroupAdmissionDecision
from ._reasons import (
    STEP_COST_MULTIPLIER,
    STEP_COUNTS,
    STEP_DECODED_TOKENS,
    STEP_EXHAUSTED,
    STEP_LIMITED_BY,
    STEP_LOSS_SCALE,
    STEP_MASKED_SAMPLES,
    STEP_MASKED_SHARE,
    STEP_PLAN_RATE,
    STEP_TRAINED_RATE,
)
from ._validation import describe

__all__ = ["AdmissionVerdict", "BatchAdmissionVerdict", "StepReport"]


@attrs.frozen(kw_only=True)
class AdmissionVerdict:
    """
    What the host does with one group: keep it (train on it) or drop it.

    ``keep`` is true for an admitted group and for a rejected one that a drop limit
    forced through (``fallback_admitted``). ``decision`` is the policy's verdict.

    .. versionadded:: 0.2.0
    """

    keep: bool
    decision: GroupAdmissionDecision
    fallback_admitted: bool = False


@attrs.frozen(kw_only=True, eq=False)
class BatchAdmissionVerdict:
    """
    The verdicts of :meth:`AdmissionSession.judge_batch`, as arrays over groups.

    .. versionadded:: 0.2.0
    """

    keep: npt.NDArray[np.bool_]
    fallback_admitted: npt.NDArray[np.bool_]
    result: BatchAdmissionResult

    def __len__(self) -> int:
        return len(self.keep)


@attrs.frozen(kw_only=True)
class StepReport:
    """
    What one step generated and admitted, returned by :meth:`AdmissionSession.end_step`.

    Attributes:
        step: The step's index (0 for the first step of the session).
        target_groups: The groups the step needed.
        admitted_groups: Groups the policy admitted.
        kept_groups: Groups kept for training: admitted plus ``fallback_admitted``.
        trained_groups: Kept groups the step trains on (at most the target).
        surplus_groups: Kept groups beyond the target, discarded (as DAPO and slime do).
        short_groups: Groups missing from the target.
        exhausted: The target was not met and the budget left no room for more.
        generated_groups, generated_samples, generated_tokens, sampling_rounds: The cost
            of the judged groups (``generated_tokens``: their tokens decoded in this step).
        limited_by: The caps that bound the step's last plan.
        aborted_tokens, carried_tokens, pilot_tokens: Tokens decoded in this step outside
            the judged groups, charged with :meth:`AdmissionSession.charge`.
        loss_scale: The factor to multiply the step's loss, averaged over its trained
            groups, by (the session's ``loss_scale`` mode; see :func:`loss_scale`).
        masked_samples, returned_samples: Of the samples the host hands to the trainer
            (``returned_samples``), those whose loss mask is all zero: they cost their
            tokens and train on nothing. ``None`` unless the host counts them with
            :meth:`with_loss_masks`.

    .. versionadded:: 0.2.0
    """

    step: int
    target_groups: int
    admitted_groups: int
    kept_groups: int
    trained_groups: int
    surplus_groups: int
    short_groups: int
    exhausted: bool
    generated_groups: int
    generated_samples: int
    generated_tokens: int
    sampling_rounds: int
    limited_by: tuple[str, ...] = ()
    aborted_tokens: int = 0
    carried_tokens: int = 0
    pilot_tokens: int = 0
    loss_scale: float = 1.0
    masked_samples: int | None = None
    returned_samples: int | None = None

    @property
    def decoded_tokens(self) -> int:
        """Every token decoded in the step: the judged groups' and every charged kind."""
        return self.generated_tokens + self.aborted_tokens + self.carried_tokens + self.pilot_tokens

    def with_loss_masks(self, loss_masks: Iterable[Any]) -> StepReport:
        """
        This report with the loss masks of the samples handed to the trainer counted.

        One mask per sample, in any order: a sequence of 0/1 values (a list, an array or a
        tensor), or ``None`` for a sample without a mask (every token trains). A mask with
        no non-zero entry (empty included) is masked: slime's
        ``--mask-offpolicy-in-partial-rollout`` does that to a sample that had finished
        before its group was carried into the next rollout. :meth:`metrics` then adds
        ``masked_samples`` and ``masked_sample_share`` (their share of the samples).

        Raises:
            TypeError: ``loss_masks`` is not an iterable of masks, or a mask is not a
                sequence of numbers.

        .. versionadded:: 0.2.0
        """
        if isinstance(loss_masks, (str, bytes)) or not isinstance(loss_masks, Iterable):
            msg = (
                f"'loss_masks' must be an iterable of loss masks, one per sample (got {describe(loss_masks)})"
            )
            raise TypeError(msg)
        returned = masked = 0
        for index, mask in enumerate(loss_masks):
            returned += 1
            if mask is None:
                continue
            values = np.asarray(mask.detach().cpu() if hasattr(mask, "detach") else mask)
            if values.ndim != 1 or not (values.dtype.kind in "biuf" or values.size == 0):
                msg = f"'loss_masks[{index}]' must be a sequence of 0/1 numbers (got {describe(mask)})"
                raise TypeError(msg)
            masked += not values.any()
        return attrs.evolve(self, masked_samples=masked, returned_samples=returned)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot."""
        data = attrs.asdict(self)
        data["limited_by"] = list(self.limited_by)
        return data

    def metrics(self, *, prefix: str = "", effective_rate: float | None = None) -> dict[str, int | float]:
        """
        The step under the step metric names, the vocabulary every host logs a step with.

        The counts (``target_groups``, ``admitted_groups``, ``kept_groups``,
        ``trained_groups``, ``surplus_groups``, ``short_groups``, ``generated_groups``,
        ``generated_samples``, ``generated_tokens``, ``sampling_rounds``, ``aborted_tokens``,
        ``carried_tokens``, ``pilot_tokens``), ``decoded_tokens`` (every token the step
        decoded), ``loss_scale``, ``exhausted``
        as 0 or 1, ``trained_group_rate`` (trained / target) and
        ``sampling_cost_multiplier`` (generated / target; both over a target of at least
        1), ``masked_samples`` and ``masked_sample_share`` once counted
        (:meth:`with_loss_masks`), and ``limited_by/<cap>`` set to 1 for each cap that
        bound the step's last plan. Values are ints and floats only: some loggers silently
        drop bools.

        Args:
            prefix: Put before every name (``"group_admission/"``).
            effective_rate: The admission rate assumed by the plan the host followed,
                logged as ``effective_rate`` when given.

        .. versionadded:: 0.2.0
        """
        target = max(1, self.target_groups)
        values: dict[str, int | float] = {name: getattr(self, name) for name in STEP_COUNTS}
        values[STEP_DECODED_TOKENS] = self.decoded_tokens
        values[STEP_LOSS_SCALE] = self.loss_scale
        values[STEP_EXHAUSTED] = int(self.exhausted)
        values[STEP_TRAINED_RATE] = self.trained_groups / target
        values[STEP_COST_MULTIPLIER] = self.generated_groups / target
        if self.masked_samples is not None:
            values[STEP_MASKED_SAMPLES] = self.masked_samples
            values[STEP_MASKED_SHARE] = self.masked_samples / max(1, self.returned_samples or 0)
        if effective_rate is not None:
            values[STEP_PLAN_RATE] = float(effective_rate)
        values.update({f"{STEP_LIMITED_BY}{cap}": 1 for cap in self.limited_by})
        return {f"{prefix}{name}": value for name, value in values.items()}
