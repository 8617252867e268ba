"""
One admission step in an adapter: open and close it, log it, and explain a short one.

- :func:`admission_step`: ``with admission_step(session, target) as step:`` begins the
  session's step and ends it however the block leaves (``step.report`` afterwards); an
  error of the block is the one that propagates.
- :func:`step_metrics`: a step under the one step vocabulary (:meth:`StepReport.metrics`),
  the step's counts under ``step/`` and the run's under ``total/``: every host that logs
  a step (verl, twinkle, TRL, OpenRLHF).
- :func:`stream_step_metrics`: slime's streaming rollout only, whose per-rollout window
  logs the counts under their own names.
- :func:`log_metrics`: a metrics dict as one structured log line, without the prefix.
- :func:`exhausted_message`: why a step ended short, with the rejection tally and the
  binding caps, and the host's advice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from ..._exceptions import StepLifecycleError
from ..._reasons import CUMULATIVE_EFFECTIVE_GROUP_RATE, RejectionReason
from ..._session import AdmissionSession, StepReport

__all__ = [
    "OpenStep",
    "admission_step",
    "exhausted_message",
    "log_metrics",
    "step_metrics",
    "stream_step_metrics",
]


class OpenStep:
    """The step :func:`admission_step` opened: its :attr:`report` once the ``with`` block ends."""

    def __init__(self) -> None:
        self._report: StepReport | None = None

    @property
    def report(self) -> StepReport:
        """
        The step's report.

        Raises:
            StepLifecycleError: the ``with`` block has not ended yet.
        """
        if self._report is None:
            msg = "the step's report exists once its 'with admission_step(...)' block has ended"
            raise StepLifecycleError(msg)
        return self._report


@contextlib.contextmanager
def admission_step(session: AdmissionSession, target_groups: int) -> Iterator[OpenStep]:
    """
    Begin a step of ``target_groups`` on ``session``; end it when the block ends, whatever happens.

    A failed generation, read or refill must not leave the step open for the next call. If
    the block raised, its error propagates, not one from ending the step (that one is
    dropped: the step's error comes first).
    """
    session.begin_step(target_groups)
    step = OpenStep()
    try:
        yield step
    except BaseException:
        with contextlib.suppress(Exception):
            step._report = session.end_step()
        raise
    step._report = session.end_step()


def step_metrics(
    session: AdmissionSession,
    report: StepReport | None = None,
    *,
    prefix: str = "group_admission/",
    effective_rate: float | None = None,
) -> dict[str, int | float]:
    """
    A step's metrics for hosts that log flat numeric dicts (verl, twinkle, TRL, OpenRLHF).

    :meth:`StepReport.metrics` (when ``report`` is given), then the step's counts under
    ``step/`` and the run's under ``total/`` (``AdmissionStats`` names). Every value is an
    int or a float: some host loggers silently drop bools.
    """
    metrics = {} if report is None else report.metrics(prefix=prefix, effective_rate=effective_rate)
    for scope, stats in (("step", session.step_stats), ("total", session.stats)):
        metrics.update({f"{prefix}{scope}/{name}": value for name, value in stats.metrics().items()})
    return metrics


def stream_step_metrics(
    session: AdmissionSession,
    report: StepReport,
    *,
    prefix: str,
    effective_rate: float | None,
) -> dict[str, int | float]:
    """
    A slime streaming rollout's metrics, in one flat dict (the other hosts use :func:`step_metrics`).

    slime's rollout metrics are one window per rollout, logged as the filter's are: the
    counts under their own names. So: :meth:`StepReport.metrics` (the report describes
    the last stream plan the rollout followed), with that plan's ``effective_rate``; then
    the step's :class:`AdmissionStats` counts under their own names
    (``exact_dead_group_count``, ``effective_group_rate``, ...) and the session's
    ``cumulative_effective_group_rate``.
    """
    metrics = report.metrics(prefix=prefix, effective_rate=effective_rate)
    metrics.update({f"{prefix}{name}": value for name, value in session.step_stats.metrics().items()})
    metrics[f"{prefix}{CUMULATIVE_EFFECTIVE_GROUP_RATE}"] = session.stats.effective_group_rate
    return metrics


def log_metrics(log: Any, event: str, metrics: Mapping[str, int | float], prefix: str) -> None:
    """Log ``metrics`` as one info line named ``event``, their names without ``prefix``."""
    log.info(event, **{name.removeprefix(prefix): value for name, value in metrics.items()})


def exhausted_message(host: str, report: StepReport, session: AdmissionSession, advice: str) -> str:
    """
    Why a step ended short of its target: its counts, rejections and binding caps, then ``advice``.

    ``advice`` is the host's: what to check and which of its settings to raise.
    """
    counts = session.step_stats.to_dict()["counts"]
    reasons = ", ".join(f"{r.value} x{counts[r.value]}" for r in RejectionReason if counts[r.value])
    return (
        f"group admission ({host}): the step kept {report.kept_groups} of {report.target_groups} target "
        f"groups after {report.generated_groups} generated groups in {report.sampling_rounds} round(s) "
        f"(rejections: {reasons or 'none'}; binding caps: {', '.join(report.limited_by) or 'none'}). "
        f"{advice}"
    )
