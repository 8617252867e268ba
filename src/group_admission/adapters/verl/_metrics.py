"""The step metrics the sampler returns to verl, under ``group_admission/``."""

from __future__ import annotations

from ..._budget import ResamplePlan
from ..._session import AdmissionSession, StepReport

__all__ = ["METRIC_PREFIX", "step_metrics"]

#: verl merges ``sample()``'s second return value into the step's metrics as they are.
METRIC_PREFIX = "group_admission/"

_REPORT_FIELDS = (
    "target_groups",
    "admitted_groups",
    "kept_groups",
    "trained_groups",
    "surplus_groups",
    "short_groups",
    "generated_groups",
    "generated_samples",
    "generated_tokens",
    "sampling_rounds",
)


def step_metrics(report: StepReport, plan: ResamplePlan, session: AdmissionSession) -> dict[str, int | float]:
    """
    One training step's admission metrics: the step report, the step's and the run's counts.

    Every value is an int or float, because verl's ``MetricsAggregator`` silently drops
    bools: ``exhausted`` is 0 or 1, and each binding cap of the step's last plan is a
    ``limited_by/<cap>`` key set to 1. The step's counts (``AdmissionStats`` names) live
    under ``step/``, the run's under ``total/``.
    """
    prefix = METRIC_PREFIX
    metrics: dict[str, int | float] = {f"{prefix}{name}": getattr(report, name) for name in _REPORT_FIELDS}
    metrics[f"{prefix}exhausted"] = int(report.exhausted)
    metrics[f"{prefix}effective_rate"] = float(plan.effective_rate)
    for cap in report.limited_by:
        metrics[f"{prefix}limited_by/{cap}"] = 1
    for scope, stats in (("step", session.step_stats), ("total", session.stats)):
        for name, value in stats.metrics().items():
            metrics[f"{prefix}{scope}/{name}"] = value
    return metrics
