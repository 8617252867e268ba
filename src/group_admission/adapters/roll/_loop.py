"""``AdmissionRolloutLoop``: the one class that subclasses ROLL's, when ROLL is importable."""

from __future__ import annotations

from typing import Any

from .._kit import find_host
from ._hooks import admit, global_step
from ._settings import SUPPORTED_VERSIONS


class _StandInRolloutLoop:
    """``UserDefinedRolloutLoop``'s interface, used when ROLL is not importable."""

    async def process_new_prompt(self, context: Any) -> Any:
        msg = (
            "AdmissionRolloutLoop runs inside ROLL, which is not importable here: install ROLL "
            "(https://github.com/alibaba/ROLL) in this environment"
        )
        raise ImportError(msg)


_module = find_host(
    "roll.distributed.scheduler.user_defined_rollout_loop",
    adapter="group_admission.adapters.roll",
    versions=SUPPORTED_VERSIONS,
)
_ROLL_LOOP: type[Any] | None = getattr(_module, "UserDefinedRolloutLoop", None)
#: Whether ROLL's rollout loop is importable here (else :class:`AdmissionRolloutLoop` is a stand-in).
ROLL_IMPORTABLE = _ROLL_LOOP is not None
_LoopBase: type[Any] = _ROLL_LOOP or _StandInRolloutLoop


class AdmissionRolloutLoop(_LoopBase):  # type: ignore[misc]
    """
    ROLL's RLVR rollout loop with the admission policy as its prompt-level filter.

    Set ``user_defined_rollout_loop_cls: group_admission.adapters.roll.AdmissionRolloutLoop``.
    After ROLL's default loop, the domain's session judges the prompt's responses; a dropped
    prompt returns ``None``, which ROLL replaces. Validation is never filtered or counted.

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
