"""
ROLL adapter: the admission policy as an RLVR rollout loop, a ``query_filter`` and an agentic group filter.

Selected by class or function path in ROLL's own YAML, with no change to ROLL:

- :class:`AdmissionRolloutLoop` for the top-level ``user_defined_rollout_loop_cls``
  (RLVR); settings in ``rewards.<domain>.query_filter_config.filter_args.group_admission``
  (:class:`RollRLVRSettings`), with ``type: no_filter``;
- :func:`query_filter`, a drop-in for ROLL's module function of that name (True keeps);
- :class:`AdmissionGroupFilter` for ``train_env_manager.group_filter_cls`` (agentic);
  settings in the ``GROUP_ADMISSION_ROLL_CONFIG`` entry of ``system_envs``
  (:class:`RollAgenticSettings`). Its ``filter`` returns True to **drop**.

:data:`HOST_SUPPORT` lists the ROLL versions supported. ``import group_admission`` never
imports ROLL; this package imports it only to subclass ROLL's rollout loop when it can.
"""

from __future__ import annotations

from ..._exceptions import ConsecutiveFailedGroupsError
from ._hooks import METRIC_PREFIX, AdmissionGroupFilter, admission_stats, query_filter, reset
from ._loop import ROLL_IMPORTABLE, AdmissionRolloutLoop
from ._settings import (
    AGENTIC_SETTINGS_ENV,
    HOST_SUPPORT,
    RLVR_SETTINGS_KEY,
    RollAgenticSettings,
    RollRLVRSettings,
)

__all__ = [
    "AGENTIC_SETTINGS_ENV",
    "HOST_SUPPORT",
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
    "reset",
]
