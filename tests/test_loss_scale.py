"""The loss scale a step reports, and every decoded token a session charges."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from group_admission import AdmissionSession, CheckpointError, TokenTally, loss_scale

LIVE = {"outcome": [[0.0, 1.0, 0.0, 1.0]]}
DEAD = {"outcome": [[1.0, 1.0, 1.0, 1.0]]}
GATE = {"min_reward_std": 1e-6}


@given(
    trained=st.integers(0, 50),
    extra=st.integers(0, 50),
    target=st.integers(0, 50),
    mode=st.sampled_from(["kept", "target", "linear", "sqrt"]),
)
def test_every_mode_gives_a_factor_in_the_unit_interval(
    trained: int, extra: int, target: int, mode: str
) -> None:
    trained = min(trained, target)
    value = loss_scale(mode, trained_groups=trained, target_groups=target, generated_groups=trained + extra)
    assert 0.0 <= value <= 1.0
    if mode == "kept" or target == 0:
        assert value == 1.0
    elif mode == "target":
        assert value == trained / target
    elif trained + extra:
        linear = trained / (trained + extra)
        assert value == pytest.approx(linear if mode == "linear" else math.sqrt(linear))


def test_a_full_step_is_scaled_as_kept_in_every_mode_but_a_resampled_one_only_by_target() -> None:
    for mode in ("kept", "target", "linear", "sqrt"):
        assert loss_scale(mode, trained_groups=8, target_groups=8, generated_groups=8) == 1.0
    assert loss_scale("target", trained_groups=8, target_groups=8, generated_groups=16) == 1.0
    assert loss_scale("linear", trained_groups=8, target_groups=8, generated_groups=16) == 0.5


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"mode": "mean"},
            ValueError,
            "'loss_scale' must be one of 'kept', 'target', 'linear', 'sqrt' (got 'mean')",
        ),
        ({"mode": None}, ValueError, "'loss_scale' must be one of"),
        ({"trained_groups": -1}, ValueError, "'trained_groups' must be >= 0 (got -1)"),
        ({"target_groups": 1.5}, TypeError, "'target_groups' must be an integer"),
        ({"generated_groups": True}, TypeError, "'generated_groups' must be an integer"),
        (
            {"trained_groups": 3, "generated_groups": 2},
            ValueError,
            "'trained_groups' must be <= generated_groups (2) (got 3)",
        ),
    ],
)
def test_bad_loss_scale_arguments_name_the_field(
    kwargs: dict[str, object], error: type, message: str
) -> None:
    arguments: dict[str, object] = {
        "mode": "target",
        "trained_groups": 1,
        "target_groups": 2,
        "generated_groups": 2,
    }
    arguments.update(kwargs)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        loss_scale(**arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mode", "expected"), [("kept", 1.0), ("target", 0.25), ("linear", 0.5), ("sqrt", math.sqrt(0.5))]
)
def test_the_step_report_carries_the_sessions_mode(mode: str, expected: float) -> None:
    session = AdmissionSession(GATE, loss_scale=mode)  # type: ignore[arg-type]
    session.begin_step(target_groups=4)
    session.judge_batch({"outcome": LIVE["outcome"] + DEAD["outcome"]})
    report = session.end_step()
    assert report.trained_groups == 1
    assert report.loss_scale == pytest.approx(expected)
    assert report.metrics()["loss_scale"] == pytest.approx(expected)


def test_the_default_is_the_constant_normaliser() -> None:
    assert AdmissionSession().loss_scale == "target"


def test_a_bad_mode_is_refused_when_the_session_is_built() -> None:
    with pytest.raises(ValueError, match=r"'loss_scale' must be one of .* \(got 'token_mean'\)"):
        AdmissionSession(loss_scale="token_mean")  # type: ignore[arg-type]


def test_a_state_saved_under_another_mode_is_refused() -> None:
    saved = AdmissionSession(loss_scale="kept").state_dict()
    with pytest.raises(CheckpointError, match="different loss_scale configuration"):
        AdmissionSession(loss_scale="target").load_state_dict(saved)


def test_charged_tokens_are_reported_beside_the_judged_ones() -> None:
    session = AdmissionSession(GATE)
    session.begin_step(target_groups=2)
    session.judge_batch(LIVE, generated_tokens=40)
    session.charge(7, kind="aborted")
    session.charge(5, kind="carried")
    session.charge(3, kind="pilot")
    report = session.end_step()
    assert (report.generated_tokens, report.aborted_tokens, report.carried_tokens, report.pilot_tokens) == (
        40,
        7,
        5,
        3,
    )
    assert report.decoded_tokens == 55
    metrics = report.metrics()
    assert metrics["decoded_tokens"] == 55
    assert metrics["aborted_tokens"] == 7
    assert session.tokens == TokenTally(generated=40, aborted=7, carried=5, pilot=3)


def test_tokens_charged_outside_a_step_count_for_the_session_only() -> None:
    session = AdmissionSession()
    session.charge(9, kind="aborted")
    session.begin_step(target_groups=1)
    session.judge_batch(LIVE, generated_tokens=4)
    report = session.end_step()
    assert report.decoded_tokens == 4
    assert session.tokens.decoded == 13


@pytest.mark.parametrize(
    ("tokens", "kind", "error", "message"),
    [
        (-1, "aborted", ValueError, "'tokens' must be >= 0 (got -1)"),
        (1.0, "aborted", TypeError, "'tokens' must be an integer"),
        (1, "generated", ValueError, "'kind' must be one of 'aborted', 'carried', 'pilot' (got 'generated')"),
        (1, "", ValueError, "'kind' must be one of"),
    ],
)
def test_bad_charges_name_the_field_and_change_nothing(
    tokens: object, kind: str, error: type, message: str
) -> None:
    session = AdmissionSession()
    session.begin_step(target_groups=1)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        session.charge(tokens, kind=kind)  # type: ignore[arg-type]
    assert session.tokens == TokenTally()


@given(
    charges=st.lists(
        st.tuples(st.sampled_from(["aborted", "carried", "pilot"]), st.integers(0, 1000)), max_size=8
    )
)
def test_a_state_with_charges_restores_exactly(charges: list[tuple[str, int]]) -> None:
    session = AdmissionSession(GATE)
    session.begin_step(target_groups=2)
    session.judge_batch(LIVE, generated_tokens=10)
    for kind, tokens in charges:
        session.charge(tokens, kind=kind)
    state = json.loads(json.dumps(session.state_dict()))
    restored = AdmissionSession(GATE)
    restored.load_state_dict(state)
    assert restored.tokens == session.tokens
    assert restored.end_step() == session.end_step()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s["step"]["charged"].update(aborted=10**6), "the step's aborted tokens (1000000) exceed"),
        (lambda s: s["tokens"].update(generated=0), "the step's generated tokens (10) exceed"),
        (lambda s: s["step"]["charged"].update(generated=1), "'step.charged.generated' must be 0"),
        (lambda s: s["tokens"].update(pilot=-1), "'tokens.pilot' must be a non-negative integer"),
        (lambda s: s["tokens"].pop("carried"), "'tokens' must map exactly"),
        (lambda s: s["step"]["charged"].update(extra=1), "'step.charged' must map exactly"),
    ],
)
def test_forged_token_counts_are_refused(edit: object, message: str) -> None:
    session = AdmissionSession(GATE)
    session.begin_step(target_groups=2)
    session.judge_batch(LIVE, generated_tokens=10)
    session.charge(3, kind="aborted")
    state = json.loads(json.dumps(session.state_dict()))
    edit(state)  # type: ignore[operator]
    with pytest.raises(CheckpointError, match=message.replace("(", r"\(").replace(")", r"\)")):
        AdmissionSession(GATE).load_state_dict(state)


def test_tallies_merge_and_refuse_what_is_not_a_tally() -> None:
    total = TokenTally(generated=1, aborted=2).merge(TokenTally(carried=3, pilot=4))
    assert total.to_dict() == {"generated": 1, "aborted": 2, "carried": 3, "pilot": 4}
    assert total.metrics("ga/") == {
        "ga/decoded_tokens": 10,
        "ga/aborted_tokens": 2,
        "ga/carried_tokens": 3,
        "ga/pilot_tokens": 4,
    }
    with pytest.raises(TypeError, match="'other' must be a TokenTally"):
        total.merge({"generated": 1})  # type: ignore[arg-type]
