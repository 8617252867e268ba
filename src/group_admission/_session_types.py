"""The values an ``AdmissionSession`` returns: verdicts and step reports."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from ._batch import BatchAdmissionResult
from ._decision import GroupAdmissionDecision

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
        generated_groups, generated_samples, generated_tokens, sampling_rounds: The cost.
        limited_by: The caps that bound the step's last plan.

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

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot."""
        data = attrs.asdict(self)
        data["limited_by"] = list(self.limited_by)
        return data
