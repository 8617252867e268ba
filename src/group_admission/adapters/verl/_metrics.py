"""The step metrics the sampler returns to verl, under ``group_admission/``."""

from __future__ import annotations

from ... import AdmissionSession, ResamplePlan, StepReport
from .._kit import step_metrics as _step_metrics

__all__ = ["METRIC_PREFIX", "step_metrics"]

#: verl merges ``sample()``'s second return value into the step's metrics as they are.
METRIC_PREFIX = "group_admission/"


def step_metrics(report: StepReport, plan: ResamplePlan, session: AdmissionSession) -> dict[str, int | float]:
    """
    One training step's admission metrics: :meth:`StepReport.metrics`, the step's and the run's counts.

    Every value is an int or float, because verl's ``MetricsAggregator`` silently drops
    bools. ``effective_rate`` is the rate of the step's last plan; the step's counts
    (``AdmissionStats`` names) live under ``step/``, the run's under ``total/``.
    """
    return _step_metrics(session, report, prefix=METRIC_PREFIX, effective_rate=plan.effective_rate)
