"""The adapter runtime's step metrics for streaming hosts, and its shared settings pieces."""

from __future__ import annotations

import attrs
import pytest

from group_admission import AdmissionSession, GroupAdmissionConfig, SamplingBudgetConfig
from group_admission.adapters._kit import as_budget, stream_step_metrics, token_ids_only


def _short_stream() -> tuple[AdmissionSession, object, object]:
    """A streaming step of target 3 that the extra-group cap stops at one admitted group."""
    session = AdmissionSession({"min_reward_std": 1e-6}, budget={"max_extra_groups": 1})
    session.begin_step(3)
    plan = None
    for rewards in ([1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0]):
        session.record(session.policy.evaluate(rewards), generated_tokens=4)
        plan = session.stream_plan(0, num_generations=2)
    return session, session.end_step(), plan


def test_the_step_is_reported_as_the_stream_plan_bounded_it() -> None:
    session, report, plan = _short_stream()

    metrics = stream_step_metrics(session, report, prefix="p/", effective_rate=plan.effective_rate)

    assert plan.exhausted
    assert plan.limited_by == ("extra_group_budget",)
    assert report.exhausted  # end_step asks the stream again
    assert report.limited_by == plan.limited_by
    assert {k for k in metrics if k.startswith("p/limited_by/")} == {"p/limited_by/extra_group_budget"}
    assert metrics["p/exhausted"] == 1
    assert metrics["p/effective_rate"] == plan.effective_rate
    # The rest is the step vocabulary of the report, unchanged.
    expected = report.metrics(prefix="p/", effective_rate=plan.effective_rate)
    assert {k: metrics[k] for k in expected} == expected


def test_the_step_counts_and_the_runs_rate_follow_the_vocabulary() -> None:
    session, report, plan = _short_stream()

    metrics = stream_step_metrics(session, report, prefix="", effective_rate=plan.effective_rate)

    assert metrics["exhausted"] == 1  # the cap stopped the stream short of its target
    assert (metrics["candidate_group_count"], metrics["exact_dead_group_count"]) == (4, 3)
    assert metrics["effective_group_rate"] == pytest.approx(1 / 4)
    assert metrics["cumulative_effective_group_rate"] == pytest.approx(1 / 4)
    assert (metrics["target_groups"], metrics["short_groups"], metrics["generated_tokens"]) == (3, 2, 16)
    assert all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in metrics.values())


def test_without_a_plan_the_report_gives_the_caps_and_no_rate_is_reported() -> None:
    session = AdmissionSession()
    session.begin_step(1)
    report = session.end_step()

    metrics = stream_step_metrics(session, report, prefix="", effective_rate=None)

    assert "effective_rate" not in metrics
    caps = {k for k in metrics if k.startswith("limited_by/")}
    assert caps == {f"limited_by/{cap}" for cap in report.limited_by}


def test_token_ids_only_refuses_the_redundancy_gate_naming_the_host() -> None:
    @attrs.frozen
    class Settings:
        policy: GroupAdmissionConfig = attrs.field(validator=token_ids_only("Host", "its rows hold"))

    Settings(GroupAdmissionConfig())
    with pytest.raises(
        ValueError, match=r"^'policy.max_mean_pairwise_similarity' is not supported by the Host"
    ):
        Settings(GroupAdmissionConfig(max_mean_pairwise_similarity=0.9))


def test_as_budget_takes_a_mapping_a_config_or_none() -> None:
    assert as_budget(None) == SamplingBudgetConfig()
    assert as_budget({"max_extra_groups": 2}) == SamplingBudgetConfig(max_extra_groups=2)
    with pytest.raises(TypeError, match="'budget' must be a SamplingBudgetConfig"):
        as_budget([2])
