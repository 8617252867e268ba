"""
slime adapter: the admission policy behind slime's dynamic-sampling filter, with no change to slime.

:func:`admission_filter` (``--dynamic-sampling-filter-path``), :func:`record_all_samples`
(``--rollout-all-samples-process-path``) and :func:`log_rollout_metrics`
(``--custom-rollout-log-function-path``); settings: :class:`SlimeAdmissionSettings`. Or, for
streaming launches, :func:`streaming_rollout` (``--rollout-function-path``; settings:
:class:`SlimeStreamingSettings`). Importing it imports neither slime nor torch. See
docs/adapters/slime.md.
"""

from __future__ import annotations

from .._kit import moved_names as _moved_names
from .._kit import publish as _publish
from ._hooks import (
    SUPPORTED_VERSIONS,
    DynamicFilterOutput,
    SlimeAdmissionSettings,
    admission_filter,
    admission_stats,
    drop_reason,
    judge_group,
    last_rollout_metrics,
    log_rollout_metrics,
    record_all_samples,
)
from ._streaming import STREAMING_SUPPORTED_VERSIONS, reset, streaming_rollout
from ._streaming_settings import SlimeStreamingSettings

__all__ = [
    "STREAMING_SUPPORTED_VERSIONS",
    "SUPPORTED_VERSIONS",
    "DynamicFilterOutput",
    "SlimeAdmissionSettings",
    "SlimeStreamingSettings",
    "admission_filter",
    "admission_stats",
    "drop_reason",
    "judge_group",
    "last_rollout_metrics",
    "log_rollout_metrics",
    "record_all_samples",
    "reset",
    "streaming_rollout",
]

#: Exported by 0.1.0, defined elsewhere: they warn until the deprecation release.
__getattr__ = _moved_names(
    __name__,
    {
        "ConsecutiveFailedGroupsError": "group_admission.ConsecutiveFailedGroupsError",
        "should_drop": "group_admission._host_rules.slime.should_drop",
    },
)

_publish(__name__)
