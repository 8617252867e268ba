"""
The loss scale after admission: how large a step's update should be, given what it kept.

A host that averages its loss over the groups it trains on makes a step of two kept groups
as large as a step of eight: filtering changes the update a step takes, not only which
groups it learns from. The session knows the step's target and what it generated and
kept, so it reports the factor a host multiplies that kept-group average by:

- ``"kept"``: 1, the loss averaged over the kept groups (what a host does without this).
- ``"target"``: ``trained / target``, a constant normaliser: the loss a full target of
  groups would have, the rejected ones at zero advantage (Dr. GRPO's constant
  denominator). Under Adam-style optimisers the constant's value does not matter, only
  that it is the same every step.
- ``"linear"``: RAGEN's kept fraction, ``trained / generated``.
- ``"sqrt"``: its square root (RAGEN's ``filter_loss_scaling: sqrt``).
"""

from __future__ import annotations

import math
from typing import Literal, get_args

from ._validation import check_choice, check_count, describe

__all__ = ["DEFAULT_LOSS_SCALE", "LOSS_SCALES", "LossScale", "loss_scale"]

#: How a step's loss is scaled after admission; see :func:`loss_scale`.
LossScale = Literal["kept", "target", "linear", "sqrt"]
LOSS_SCALES: tuple[LossScale, ...] = get_args(LossScale)
#: The sessions' default, chosen on the learning bench (docs/evidence.md).
DEFAULT_LOSS_SCALE: LossScale = "target"


def loss_scale(mode: str, *, trained_groups: int, target_groups: int, generated_groups: int) -> float:
    """
    The factor to multiply a loss averaged over a step's trained groups by.

    Args:
        mode: ``"kept"``, ``"target"``, ``"linear"`` or ``"sqrt"`` (see the module's text).
        trained_groups: Groups the step trains on (at most the target).
        target_groups: Groups the step needed.
        generated_groups: Groups the step generated and judged.

    A step that trains on nothing has no loss to scale: 0.0 in every mode but
    ``"kept"`` (1.0). A step without a target (0) is scaled as ``"kept"``.

    Raises:
        ValueError: ``mode`` is not one of :data:`LOSS_SCALES`, or a count is negative or
            ``trained_groups`` exceeds ``generated_groups``.
        TypeError: a count is not an integer.

    .. versionadded:: 0.2.0
    """
    mode = check_choice(mode, "loss_scale", LOSS_SCALES)
    trained = check_count(trained_groups, "trained_groups")
    target = check_count(target_groups, "target_groups")
    generated = check_count(generated_groups, "generated_groups")
    if trained > generated:
        bound = describe(generated)
        msg = f"'trained_groups' must be <= generated_groups ({bound}) (got {describe(trained)})"
        raise ValueError(msg)
    if mode == "kept" or target == 0:
        return 1.0
    if mode == "target":
        return min(trained, target) / target
    fraction = trained / generated if generated else 0.0
    return fraction if mode == "linear" else math.sqrt(fraction)
