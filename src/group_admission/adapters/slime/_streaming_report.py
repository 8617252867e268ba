"""The metrics one streaming rollout returns to slime, under ``rollout/group_admission/``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..._session import AdmissionSession, StepReport
from ..._streaming import StreamPlan
from ._hooks import METRIC_PREFIX

__all__ = ["leaves", "rollout_metrics"]

_REPORT_FIELDS = ("generated_groups", "generated_samples", "generated_tokens", "short_groups")


def leaves(group: Any) -> Iterator[Any]:
    """The samples of a slime group, the segments of a fan-out rollout included."""
    for member in group:
        yield from member if isinstance(member, (list, tuple)) else (member,)


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
    One rollout's metrics: the session's counts for it, the cost, the groups carried, and the resumed ones.

    Every value is an int or a float. ``resumed_ages`` holds, for each kept group that
    resumed from slime's buffer, the rollouts since it started (``rollout_id -
    metadata['start_rollout_id']``); ``counts`` are the rollout function's own counts.
    """
    metrics: dict[str, int | float] = dict(session.step_stats.metrics())
    metrics["cumulative_effective_group_rate"] = session.stats.effective_group_rate
    metrics.update({name: getattr(report, name) for name in _REPORT_FIELDS})
    metrics["exhausted"] = int(bool(report.short_groups))
    metrics["effective_rate"] = float(plan.effective_rate)
    metrics.update(counts)
    metrics["resumed_group_count"] = len(resumed_ages)
    metrics["resumed_share"] = len(resumed_ages) / len(kept) if kept else 0.0
    metrics["resumed_mean_age"] = sum(resumed_ages) / len(resumed_ages) if resumed_ages else 0.0
    metrics["resumed_max_age"] = max(resumed_ages, default=0)
    metrics["max_weight_versions"] = max((_weight_versions(group) for group in kept), default=0)
    for cap in plan.limited_by:
        metrics[f"limited_by/{cap}"] = 1
    return {f"{METRIC_PREFIX}{name}": value for name, value in metrics.items()}
