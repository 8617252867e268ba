"""
slime adapter: the admission policy behind slime's dynamic-sampling filter, with no change to slime.

- :func:`admission_filter` for ``--dynamic-sampling-filter-path``: judges each completed
  group and returns slime's ``DynamicFilterOutput``;
- :func:`record_all_samples` for ``--rollout-all-samples-process-path``: closes each
  rollout's counts, including the groups kept only by slime's ``keep_when_insufficient``;
- :func:`log_rollout_metrics` for ``--custom-rollout-log-function-path``: adds them to
  slime's rollout metrics.

Settings come from the ``group_admission`` mapping of the ``--custom-config-path`` YAML
(:class:`SlimeAdmissionSettings`); :data:`HOST_SUPPORT` lists the slime versions supported.
Importing this package imports neither slime nor torch.
"""

from __future__ import annotations

from ..._exceptions import ConsecutiveFailedGroupsError
from ..._host_rules.slime import should_drop
from ._hooks import (
    DynamicFilterOutput,
    admission_filter,
    admission_stats,
    drop_reason,
    judge_group,
    last_rollout_metrics,
    log_rollout_metrics,
    record_all_samples,
    reset,
)
from ._settings import HOST_SUPPORT, SlimeAdmissionSettings

__all__ = [
    "HOST_SUPPORT",
    "ConsecutiveFailedGroupsError",
    "DynamicFilterOutput",
    "SlimeAdmissionSettings",
    "admission_filter",
    "admission_stats",
    "drop_reason",
    "judge_group",
    "last_rollout_metrics",
    "log_rollout_metrics",
    "record_all_samples",
    "reset",
    "should_drop",
]
