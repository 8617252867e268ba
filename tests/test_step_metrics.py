"""StepReport.metrics(): the one step vocabulary every host logs a step under."""

from __future__ import annotations

import attrs
import pytest

from group_admission import AdmissionSession, SamplingBudgetConfig, StepReport
from group_admission._reasons import STEP_COUNTS

GATE = {"min_reward_std": 1e-6}
LIVE, DEAD = [0.0, 1.0], [1.0, 1.0]


def short_step() -> StepReport:
    """Target 4: 2 admitted of 6 generated over 2 rounds, stopped by the extra-group cap."""
    session = AdmissionSession(GATE, budget=SamplingBudgetConfig(max_extra_groups=2, max_resample_rounds=3))
    session.begin_step(4)
    for rewards in (LIVE, DEAD, DEAD, DEAD):
        session.judge(rewards, generated_tokens=10)
    plan = session.plan(num_generations=2)
    for rewards in [LIVE, DEAD][: plan.extra_groups]:
        session.judge(rewards, generated_tokens=10)
    session.plan(num_generations=2)
    return session.end_step()


def test_the_counts_are_the_report_fields_and_the_flags_are_numbers() -> None:
    report = short_step()

    metrics = report.metrics()

    assert {name: getattr(report, name) for name in STEP_COUNTS} == {n: metrics[n] for n in STEP_COUNTS}
    assert (2, 2, 2, 6, 2) == (
        metrics["admitted_groups"],
        metrics["trained_groups"],
        metrics["short_groups"],
        metrics["generated_groups"],
        metrics["sampling_rounds"],
    )
    assert 1 == metrics["exhausted"]
    assert 1 == metrics["limited_by/extra_group_budget"]
    assert 0.5 == metrics["trained_group_rate"]
    assert 1.5 == metrics["sampling_cost_multiplier"]
    assert all(type(value) in (int, float) for value in metrics.values())
    assert "effective_rate" not in metrics


def test_admitted_counts_the_surplus_and_trained_stops_at_the_target() -> None:
    session = AdmissionSession(GATE)
    session.begin_step(2)
    for _ in range(3):
        session.judge(LIVE)

    metrics = session.end_step().metrics()

    assert (3, 2, 1) == (metrics["admitted_groups"], metrics["trained_groups"], metrics["surplus_groups"])
    assert 1.0 == metrics["trained_group_rate"]
    assert 0 == metrics["exhausted"]


def test_the_prefix_and_the_followed_plans_rate() -> None:
    report = short_step()

    metrics = report.metrics(prefix="group_admission/", effective_rate=0.25)

    assert all(name.startswith("group_admission/") for name in metrics)
    assert 0.25 == metrics["group_admission/effective_rate"]
    assert {f"group_admission/{k}": v for k, v in report.metrics().items()} == {
        k: v for k, v in metrics.items() if k != "group_admission/effective_rate"
    }


def test_a_step_with_no_target_reports_what_it_generated_over_one() -> None:
    session = AdmissionSession(GATE)
    session.begin_step(0)

    metrics = session.end_step().metrics()

    assert (0.0, 0.0) == (metrics["trained_group_rate"], metrics["sampling_cost_multiplier"])


def test_every_count_of_the_report_is_a_step_metric() -> None:
    """A new count on StepReport must join the vocabulary (the step index is a label, not a count)."""
    counts = [f.name for f in attrs.fields(StepReport) if f.type == "int" and f.name != "step"]

    assert counts == list(STEP_COUNTS)


def test_the_simulator_counts_a_step_under_the_same_names_and_meanings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The controller strategy's step outcome says what the session's step report says."""
    from group_admission.simulation import simulate

    reports: list[StepReport] = []
    end_step = AdmissionSession.end_step

    def recording(session: AdmissionSession) -> StepReport:
        reports.append(end_step(session))
        return reports[-1]

    monkeypatch.setattr(AdmissionSession, "end_step", recording)
    config = {"steps": 6, "target_groups": 8, "group_size": 4, "seed": 3}
    outcomes = simulate(config, strategies=["controller"]).results[0].outcomes

    assert len(reports) == len(outcomes) == 6
    for report, outcome in zip(reports, outcomes, strict=True):
        metrics = report.metrics()
        assert metrics["admitted_groups"] == outcome.admitted_groups  # surplus included, in both
        assert metrics["trained_groups"] == outcome.delivered_groups
        assert metrics["surplus_groups"] == outcome.surplus_groups
        assert metrics["generated_groups"] == outcome.generated_groups
        assert metrics["generated_samples"] == outcome.generated_samples
        assert metrics["generated_tokens"] == outcome.generated_tokens
        assert metrics["sampling_rounds"] == outcome.rounds
    assert any(outcome.surplus_groups for outcome in outcomes)  # the steps where the names could differ
