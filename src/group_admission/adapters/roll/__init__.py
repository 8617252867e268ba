"""
ROLL adapter: the admission policy as an RLVR rollout loop, a ``query_filter`` and an agentic group filter.

:class:`AdmissionRolloutLoop` (``user_defined_rollout_loop_cls``, settings
:class:`RollRLVRSettings`), :func:`query_filter`, and :class:`AdmissionGroupFilter`
(``train_env_manager.group_filter_cls``, settings :class:`RollAgenticSettings`), all selected
in ROLL's YAML. ``import group_admission`` never imports ROLL. See docs/adapters/roll.md.
"""

from __future__ import annotations

from .._kit import moved_names as _moved_names
from .._kit import publish as _publish
from ._hooks import METRIC_PREFIX, AdmissionGroupFilter, admission_stats, query_filter, reset
from ._loop import ROLL_IMPORTABLE, AdmissionRolloutLoop
from ._settings import (
    AGENTIC_SETTINGS_ENV,
    RLVR_SETTINGS_KEY,
    SUPPORTED_VERSIONS,
    RollAgenticSettings,
    RollRLVRSettings,
)

__all__ = [
    "AGENTIC_SETTINGS_ENV",
    "METRIC_PREFIX",
    "RLVR_SETTINGS_KEY",
    "ROLL_IMPORTABLE",
    "SUPPORTED_VERSIONS",
    "AdmissionGroupFilter",
    "AdmissionRolloutLoop",
    "RollAgenticSettings",
    "RollRLVRSettings",
    "admission_stats",
    "query_filter",
    "reset",
]

#: Exported by 0.1.0, defined elsewhere: they warn until the deprecation release.
__getattr__ = _moved_names(
    __name__,
    {"ConsecutiveFailedGroupsError": "group_admission.ConsecutiveFailedGroupsError"},
)

_publish(__name__)
