"""``AdmissionRolloutLoop``: the one class that subclasses ROLL's, when ROLL is importable."""

from __future__ import annotations

import importlib
from typing import Any

from ._hooks import admit
from ._read import global_step

__all__ = ["ROLL_IMPORTABLE", "AdmissionRolloutLoop"]


class _StandInRolloutLoop:
    """``UserDefinedRolloutLoop``'s interface, used when ROLL is not importable."""

    def __init__(self) -> None:
        pass

    async def process_new_prompt(self, context: Any) -> Any:
        msg = (
            "AdmissionRolloutLoop runs inside ROLL, which is not importable here: install ROLL "
            "(https://github.com/alibaba/ROLL) in this environment"
        )
        raise ImportError(msg)


def _loop_base() -> tuple[type[Any], bool]:
    try:
        module = importlib.import_module("roll.distributed.scheduler.user_defined_rollout_loop")
        return module.UserDefinedRolloutLoop, True
    except (ImportError, AttributeError):
        return _StandInRolloutLoop, False


_LoopBase, ROLL_IMPORTABLE = _loop_base()


class AdmissionRolloutLoop(_LoopBase):  # type: ignore[misc,valid-type]
    """
    ROLL's RLVR rollout loop with the admission policy as its prompt-level filter.

    Set ``user_defined_rollout_loop_cls: group_admission.adapters.roll.AdmissionRolloutLoop``.
    ROLL builds it with no arguments, once per scheduler actor. Each prompt runs ROLL's
    default loop (generation, reward, ROLL's own filters), then the domain's session
    judges the ``num_return_sequences`` responses on ``batch["response_level_rewards"]``
    under the step's drop limits: a dropped prompt returns ``None``, which ROLL aborts and
    replaces with a new prompt. Validation (``context.is_val``) is never filtered or counted.

    .. versionadded:: 0.1.0
    """

    async def process_new_prompt(self, context: Any) -> Any:
        """Run ROLL's loop for one prompt, then keep its responses or return ``None``."""
        responses = await super().process_new_prompt(context)
        if responses is None or context.is_val:
            return responses
        keep = admit(
            responses,
            context.pipeline_config,
            step=global_step(context.meta_info),
            domain=getattr(context, "domain", None),
            group_key=getattr(context, "prompt_id", None),
        )
        return responses if keep else None
