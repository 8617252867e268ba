"""The adapter step helpers: one step opened and closed however its block ends, and the exhaustion message."""

from __future__ import annotations

import pytest

from group_admission import AdmissionSession, StepLifecycleError
from group_admission.adapters._kit import admission_step, exhausted_message, log_metrics


def test_the_step_is_ended_and_its_report_kept() -> None:
    session = AdmissionSession({"min_reward_std": 1e-6})

    with admission_step(session, 2) as step:
        assert session.step_open
        with pytest.raises(StepLifecycleError, match="once its 'with admission_step"):
            step.report
        session.judge([0.0, 1.0])

    assert not session.step_open
    assert (step.report.target_groups, step.report.kept_groups, step.report.short_groups) == (2, 1, 1)


def test_the_bodys_error_wins_over_one_from_ending_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    session = AdmissionSession()

    def broken_end() -> None:
        raise RuntimeError("end_step failed")

    with pytest.raises(ValueError, match="the reward server is down"):  # noqa: PT012
        with admission_step(session, 1):
            monkeypatch.setattr(session, "end_step", broken_end)
            raise ValueError("the reward server is down")


def test_a_failed_body_still_ends_the_step_and_keeps_its_report() -> None:
    session = AdmissionSession()

    with pytest.raises(KeyError), admission_step(session, 3) as step:  # noqa: PT012
        session.judge([0.0, 1.0])
        raise KeyError("boom")

    assert not session.step_open
    assert (step.report.kept_groups, step.report.target_groups) == (1, 3)
    session.begin_step(1)  # the next call can begin its step


def test_an_error_from_ending_the_step_propagates_when_the_body_succeeded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    session = AdmissionSession()

    def broken_end() -> None:
        raise RuntimeError("end_step failed")

    with pytest.raises(RuntimeError, match="end_step failed"):
        with admission_step(session, 1):
            monkeypatch.setattr(session, "end_step", broken_end)


def test_the_exhaustion_message_tallies_rejections_and_caps_then_the_hosts_advice() -> None:
    session = AdmissionSession({"min_reward_std": 1e-6}, budget={"max_extra_groups": 1})
    session.begin_step(2)
    for rewards in ([1.0, 1.0], [0.0, 0.0], [0.0, 1.0]):
        session.judge(rewards)
    session.plan(num_generations=2)
    report = session.end_step()

    message = exhausted_message("myhost", report, session, "Raise the budget.")

    assert message == (
        "group admission (myhost): the step kept 1 of 2 target groups after 3 generated groups in "
        f"{report.sampling_rounds} round(s) (rejections: exact_dead x2; binding caps: "
        f"{', '.join(report.limited_by)}). Raise the budget."
    )
    assert report.limited_by  # the cap that bound is named


def test_log_metrics_drops_the_prefix() -> None:
    lines: list[tuple[str, dict[str, float]]] = []

    class Log:
        def info(self, event: str, **values: float) -> None:
            lines.append((event, values))

    log_metrics(Log(), "step", {"p/a": 1, "p/b/c": 0.5}, "p/")

    assert lines == [("step", {"a": 1, "b/c": 0.5})]
