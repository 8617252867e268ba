"""The metrics one streaming rollout returns to slime, under ``rollout/group_admission/``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ... import AdmissionSession, StepReport, StreamPlan
from .._kit import stream_step_metrics
from ._groups import leaves
from ._hooks import METRIC_PREFIX

__all__ = ["rollout_metrics"]


def _weight_versions(group: Any) -> int:
    """The distinct policy versions that generated a group (slime's ``Sample.weight_versions``)."""
    return len({str(v) for sample in leaves(group) for v in getattr(sample, "weight_versions", None) or ()})


def rollout_metrics(
    *,
    session: AdmissionSession,
    report: StepReport,
    plan: StreamPlan,
    kept: Sequence[Any],
    resumed_ages: Sequence[int],
    counts: Mapping[str, int],
) -> dict[str, int | float]:
    """
    One rollout's metrics: the step, the session's counts, the groups carried, and the resumed ones.

    Every value is an int or a float. The step is :func:`stream_step_metrics`';
    ``resumed_ages`` holds, for each kept group that resumed from slime's buffer, the
    rollouts since it started (``rollout_id - metadata['start_rollout_id']``); ``counts``
    are the rollout function's own counts.
    """
    metrics = stream_step_metrics(session, report, prefix=METRIC_PREFIX, effective_rate=plan.effective_rate)
    resumed: dict[str, int | float] = {
        **counts,
        "resumed_group_count": len(resumed_ages),
        "resumed_share": len(resumed_ages) / len(kept) if kept else 0.0,
        "resumed_mean_age": sum(resumed_ages) / len(resumed_ages) if resumed_ages else 0.0,
        "resumed_max_age": max(resumed_ages, default=0),
        "max_weight_versions": max((_weight_versions(group) for group in kept), default=0),
    }
    metrics.update({f"{METRIC_PREFIX}{name}": value for name, value in resumed.items()})
    return metrics
