"""
ROLL adapter: the admission policy as an RLVR rollout loop, a ``query_filter`` and an agentic group filter.

Selected by class or function path in ROLL's own YAML, with no change to ROLL:

- :class:`AdmissionRolloutLoop` for the top-level ``user_defined_rollout_loop_cls``
  (RLVR). Settings: ``rewards.<domain>.query_filter_config.filter_args.group_admission``
  (see :class:`RollRLVRSettings`), with ``type: no_filter``.
- :func:`query_filter`, a drop-in for ROLL's module function of that name (True keeps), for
  users who patch it.
- :class:`AdmissionGroupFilter` for ``train_env_manager.group_filter_cls`` (agentic).
  Settings: the ``GROUP_ADMISSION_ROLL_CONFIG`` entry of ``system_envs`` (see
  :class:`RollAgenticSettings`). Its ``filter`` returns True to **drop**, as ROLL's call
  site expects.

ROLL resamples without a cap, so each path bounds the rejections it honours and admits the
rest as ``fallback_admitted``. Admission counts go into the kept groups'
``meta_info["metrics"]`` as ``group_admission/<name>@sum``, which ROLL sums over a batch.
When ROLL is importable the loop subclasses ROLL's ``UserDefinedRolloutLoop``;
``import group_admission`` never imports ROLL. The adapter holds no gate logic of its own.
"""

from __future__ import annotations

import importlib
from typing import Any

from .._metrics import AdmissionStats
from ._adapter_runtime import ConsecutiveFailedGroupsError
from ._roll_agentic import AGENTIC_SETTINGS_ENV, AgenticRuntime, RollAgenticSettings, agentic_settings
from ._roll_common import METRIC_PREFIX
from ._roll_rlvr import RLVR_SETTINGS_KEY, RollRLVRSettings, domain_of, rlvr_runtime, rlvr_totals

__all__ = [
    "AGENTIC_SETTINGS_ENV",
    "METRIC_PREFIX",
    "RLVR_SETTINGS_KEY",
    "ROLL_IMPORTABLE",
    "AdmissionGroupFilter",
    "AdmissionRolloutLoop",
    "ConsecutiveFailedGroupsError",
    "RollAgenticSettings",
    "RollRLVRSettings",
    "admission_stats",
    "query_filter",
]


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


def _global_step(data_list: Any) -> Any:
    first = data_list
    while isinstance(first, list) and first:
        first = first[0]
    meta = getattr(first, "meta_info", None)
    return meta.get("global_step") if isinstance(meta, dict) else None


class AdmissionRolloutLoop(_LoopBase):  # type: ignore[misc,valid-type]
    """
    ROLL's RLVR rollout loop with the admission policy as its prompt-level filter.

    Set ``user_defined_rollout_loop_cls: group_admission.adapters.roll.AdmissionRolloutLoop``.
    ROLL builds it with no arguments, once per scheduler actor. Each prompt runs ROLL's
    default loop (generation, reward, ROLL's own filters), then the policy judges the
    ``num_return_sequences`` responses on ``batch["response_level_rewards"]``: a rejected
    prompt returns ``None``, which ROLL aborts and replaces with a new prompt. Validation
    (``context.is_val``) is never filtered or counted.

    .. versionadded:: 0.1.0
    """

    async def process_new_prompt(self, context: Any) -> Any:
        """Run ROLL's loop for one prompt, then keep its responses or return ``None``."""
        responses = await super().process_new_prompt(context)
        if responses is None or context.is_val:
            return responses
        domain = getattr(context, "domain", None) or domain_of(responses)
        runtime = rlvr_runtime(context.pipeline_config, domain)
        keep = runtime.admit(
            responses,
            global_step=context.meta_info.get("global_step"),
            group_key=getattr(context, "prompt_id", None),
        )
        return responses if keep else None


def query_filter(data_list: Any, config: Any) -> bool:
    """
    Judge one prompt's responses with ROLL's ``query_filter`` signature: True keeps.

    For users who replace ``roll.distributed.scheduler.user_defined_rollout_loop.query_filter``
    with this function. ``data_list`` holds the prompt's responses; a multi-row DataProto
    counts row by row (ROLL's own function keeps any one-element list). The settings are
    read from ``config.rewards[domain]`` as for :class:`AdmissionRolloutLoop`, and the same
    budget applies, per ``meta_info["global_step"]``.

    Raises:
        ValueError: the responses carry no ``domain``, or the domain has no reward config.
        ConsecutiveFailedGroupsError: too many consecutive external rejections.

    .. versionadded:: 0.1.0
    """
    runtime = rlvr_runtime(config, domain_of(data_list))
    return runtime.admit(data_list, global_step=_global_step(data_list), group_key=None)


def admission_stats(domain: str | None = None) -> AdmissionStats:
    """
    The RLVR admission counts of this process since it started (of one reward domain, if given).

    .. versionadded:: 0.1.0
    """
    return rlvr_totals(domain)


class AdmissionGroupFilter:
    """
    ROLL's agentic ``GroupFilter`` backed by the admission policy: ``filter`` returns True to drop.

    Set ``train_env_manager.group_filter_cls: group_admission.adapters.roll.AdmissionGroupFilter``.
    ROLL builds one per scheduler mode as ``cls(config, env_manager_config, mode)`` and calls
    ``filter(group_id=..., episode_id=..., group=...)`` once per completed group. In a
    mode outside the settings' ``modes`` (default: only ``"train"``) nothing is dropped or
    counted.

    Args:
        config: ROLL's ``AgenticConfig``.
        env_manager_config: The ``EnvManagerConfig`` of this scheduler.
        mode: ``"train"`` or ``"val"``.

    Raises:
        TypeError, ValueError: ``GROUP_ADMISSION_ROLL_CONFIG`` holds invalid settings.
        FileNotFoundError: it names a YAML file that does not exist.

    .. versionadded:: 0.1.0
    """

    def __init__(self, config: Any, env_manager_config: Any, mode: str) -> None:
        self.config = config
        self.env_manager_config = env_manager_config
        self.mode = mode
        self.settings = agentic_settings(config, env_manager_config)
        self._runtime = AgenticRuntime(self.settings)

    def filter(self, group_id: int, episode_id: int, group: list[Any]) -> bool:
        """Judge one trajectory group: True drops it (ROLL starts a new episode), False keeps it."""
        if self.mode not in self.settings.modes:
            return False
        return self._runtime.drop(group, group_key=(group_id, episode_id))

    @property
    def stats(self) -> AdmissionStats:
        """A copy of this filter's admission counts."""
        return AdmissionStats().merge(self._runtime.reporter.total)
