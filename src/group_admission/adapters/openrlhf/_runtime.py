"""
The adapter's whole use of the shared adapter runtime: one session per settings, and the metrics of a call.

Kept in one place so that it moves to the consolidated runtime as one piece.
"""

from __future__ import annotations

from ..._session import AdmissionSession, StepReport
from ._settings import OpenRLHFAdmissionSettings, forget_settings

__all__ = ["METRIC_PREFIX", "reset", "session_for", "step_metrics"]

#: The prefix of every metric the adapter reports (OpenRLHF logs them as ``train/group_admission/...``).
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
)

# One session per settings in a process: OpenRLHF builds one generator per trainer actor.
_SESSIONS: dict[OpenRLHFAdmissionSettings, AdmissionSession] = {}


def session_for(settings: OpenRLHFAdmissionSettings) -> AdmissionSession:
    """The process's session for ``settings``, made on first use."""
    session = _SESSIONS.get(settings)
    if session is None:
        made = AdmissionSession(
            settings.policy, budget=settings.budget, limits=settings.limits, host="OpenRLHF"
        )
        session = _SESSIONS.setdefault(settings, made)
    return session


def reset() -> None:
    """
    Forget every session, its counts, and the settings read so far (for tests and notebooks).

    .. versionadded:: 0.2.0
    """
    _SESSIONS.clear()
    forget_settings()


def step_metrics(
    report: StepReport, session: AdmissionSession, *, prompts_consumed: int, exhausted: bool
) -> dict[str, int | float]:
    """
    One ``_generate_vllm`` call's metrics: the step report, the step's counts by reason, the run's rate.

    ``exhausted`` is the streaming plan's verdict (the caps left no room short of the
    target): a streaming step's ``StepReport.exhausted`` comes from the round planner.
    ``effective_group_rate`` is the call's admitted groups over its judged groups, in
    ``[0, 1]``; ``cumulative_effective_group_rate`` the same over the run.
    """
    values: dict[str, int | float] = {name: getattr(report, name) for name in _REPORT_FIELDS}
    values["exhausted"] = int(exhausted)
    values["prompts_consumed"] = prompts_consumed
    values.update(session.step_stats.metrics())
    values["cumulative_effective_group_rate"] = session.stats.effective_group_rate
    return {f"{METRIC_PREFIX}{name}": value for name, value in values.items()}
