"""StepReport.metrics(): the one step vocabulary every host logs a step under."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

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


# -- the samples handed to the trainer without a trainable token ---------------------------
MASKS = st.one_of(
    st.none(),
    st.lists(st.integers(0, 1), max_size=6),
    st.lists(st.floats(0, 1, allow_nan=False), max_size=6),
)


@given(masks=st.lists(MASKS, max_size=12))
def test_masked_samples_are_the_masks_without_a_nonzero_entry(masks: list[Any]) -> None:
    report = short_step().with_loss_masks(iter(masks))

    masked = sum(mask is not None and not any(mask) for mask in masks)
    metrics = report.metrics(prefix="p/")
    assert (masked, len(masks)) == (report.masked_samples, report.returned_samples)
    assert masked == metrics["p/masked_samples"]
    assert metrics["p/masked_sample_share"] == (masked / len(masks) if masks else 0.0)
    assert attrs.evolve(report, masked_samples=None, returned_samples=None) == short_step()


def test_masks_may_be_arrays_and_tensors_and_unmeasured_reports_say_nothing() -> None:
    torch = pytest.importorskip("torch")
    masks = [np.zeros(3), torch.zeros(2, dtype=torch.bool), torch.tensor([0, 1]), (1,), None]

    report = short_step().with_loss_masks(masks)

    assert (2, 5, 0.4) == (
        report.masked_samples,
        report.returned_samples,
        report.metrics()["masked_sample_share"],
    )
    assert not {"masked_samples", "masked_sample_share"} & set(short_step().metrics())


BAD_MASKS: list[tuple[str, Any, str]] = [
    ("a string", "0011", r"'loss_masks' must be an iterable of loss masks, one per sample \(got '0011'\)"),
    ("a number", 3, r"'loss_masks' must be an iterable of loss masks, one per sample \(got 3\)"),
    ("a mask of text", [["a", "b"]], r"'loss_masks\[0\]' must be a sequence of 0/1 numbers"),
    ("a 2-D mask", [[1], [[1, 0]]], r"'loss_masks\[1\]' must be a sequence of 0/1 numbers"),
    ("a scalar mask", [0], r"'loss_masks\[0\]' must be a sequence of 0/1 numbers \(got 0\)"),
]


@pytest.mark.parametrize(("masks", "match"), [c[1:] for c in BAD_MASKS], ids=[c[0] for c in BAD_MASKS])
def test_bad_loss_masks_are_refused_naming_the_field(masks: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        short_step().with_loss_masks(masks)
