"""The step metrics the sampler returns to verl, under ``group_admission/``."""

from __future__ import annotations

from collections import Counter

from ..._budget import ResamplePlan
from ..._metrics import AdmissionStats
from ._interim_session import StepReport

__all__ = ["METRIC_PREFIX", "step_metrics"]

#: verl merges ``sample()``'s second return value into the step's metrics as they are.
METRIC_PREFIX = "group_admission/"


def step_metrics(
    report: StepReport,
    plan: ResamplePlan,
    stats: AdmissionStats,
    rejections: Counter[str],
    trained_groups: int,
    discarded_groups: int,
) -> dict[str, int | float]:
    """
    One training step's admission metrics, plus the run's cumulative counts.

    Every value is an int or float: verl's ``MetricsAggregator`` silently drops bools.
    Per-step keys: ``target_groups``, ``admitted_groups``, ``trained_groups``,
    ``discarded_surplus_groups``, ``generated_groups``, ``generated_samples``,
    ``rounds``, ``resample_rounds``, ``exhausted`` (0/1), ``effective_rate`` and
    ``rejected/<reason>``; cumulative keys live under ``total/``.
    """
    prefix = METRIC_PREFIX
    metrics: dict[str, int | float] = {
        f"{prefix}target_groups": report.target_groups,
        f"{prefix}admitted_groups": report.admitted_groups,
        f"{prefix}trained_groups": trained_groups,
        f"{prefix}discarded_surplus_groups": discarded_groups,
        f"{prefix}generated_groups": report.generated_groups,
        f"{prefix}generated_samples": report.generated_samples,
        f"{prefix}rounds": report.rounds,
        f"{prefix}resample_rounds": max(0, report.rounds - 1),
        f"{prefix}exhausted": int(report.exhausted),
        f"{prefix}effective_rate": float(plan.effective_rate),
    }
    for reason, count in sorted(rejections.items()):
        metrics[f"{prefix}rejected/{reason}"] = count
    for name, value in stats.metrics().items():
        metrics[f"{prefix}total/{name}"] = value
    return metrics
