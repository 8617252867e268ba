"""
Setting one field must not silently turn others off (issue 28).

A policy with ``gate_on`` but no reward gate admits every group, an all-wrong phantom group
too; a budget with resample rounds but no extra groups never resamples. Both warn, once,
with a ``HalfConfiguredWarning`` that names what is off and points to the recommended
preset; the command line prints the same on one stderr line and shows the zero it ran with.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import group_admission._exceptions as exceptions
from group_admission import (
    AdmissionSession,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    HalfConfiguredWarning,
    SamplingBudgetConfig,
    SamplingBudgetController,
    SamplingBudgetState,
    SessionConfig,
    plan_stream,
)
from group_admission._cli import main
from group_admission.simulation import DEFAULT_POLICY

PHANTOM = {"accuracy": [0.0, 0.0, 0.0, 0.0], "brevity": [0.5, 0.0, 0.5, 0.25]}


@pytest.fixture(autouse=True)
def fresh_process() -> Iterator[None]:
    """Each test starts as a new process would: nothing warned yet (the warning is once per process)."""
    saved = set(exceptions._warned)
    exceptions._warned.clear()
    yield
    exceptions._warned.clear()
    exceptions._warned.update(saved)


def test_gate_on_without_a_reward_gate_warns_and_says_what_to_do() -> None:
    with pytest.warns(HalfConfiguredWarning) as caught:
        policy = GroupAdmissionPolicy({"gate_on": ["accuracy"]})

    (warning,) = caught
    message = str(warning.message)
    assert message.startswith("'gate_on' is ['accuracy'] but every reward gate is off")
    assert "min_reward_std=1e-6 is the zero-std filter" in message
    assert message.endswith("SessionConfig.preset('recommended', policy={'gate_on': ['accuracy']})")
    assert warning.filename == __file__  # it names the caller's line, not the library's
    assert policy.evaluate(PHANTOM).admitted  # what the warning is about: the phantom gets through


def test_the_advice_is_a_working_configuration() -> None:
    advised = SessionConfig.preset("recommended", policy={"gate_on": ["accuracy"]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", HalfConfiguredWarning)  # the advice itself is whole
        advised.session()
        budget = SamplingBudgetConfig.for_target(8, max_resample_rounds=4)

    assert not GroupAdmissionPolicy(advised.policy).evaluate(PHANTOM).admitted
    assert budget.max_extra_groups > 0
    assert budget.max_resample_rounds == 4


def test_the_budget_advice_names_the_caps_that_follow_the_target() -> None:
    with pytest.warns(HalfConfiguredWarning) as caught:
        SamplingBudgetConfig(max_resample_rounds=3)

    (warning,) = caught
    assert str(warning.message).endswith(
        "SamplingBudgetConfig.for_target(target_groups, max_resample_rounds=3)"
    )


def test_rounds_without_extra_groups_warn() -> None:
    with pytest.warns(
        HalfConfiguredWarning, match=r"^'max_resample_rounds' is 4 but 'max_extra_groups' is 0, "
    ):
        AdmissionSession({"min_reward_std": 1e-6}, budget={"max_resample_rounds": 4})
    with pytest.warns(HalfConfiguredWarning, match="'max_extra_groups_per_round' is 0, so no group"):
        SamplingBudgetConfig(max_extra_groups=8, max_extra_groups_per_round=0, max_resample_rounds=2)


@pytest.mark.parametrize(
    "build",
    [
        GroupAdmissionConfig,
        SamplingBudgetConfig,
        lambda: GroupAdmissionConfig(min_reward_std=1e-6, gate_on=["accuracy"]),
        lambda: GroupAdmissionConfig(min_reward_range=0.02, gate_on=["accuracy"]),
        lambda: SamplingBudgetConfig(max_extra_groups=8, max_resample_rounds=2),
        # Extra groups without rounds: a streaming plan launches them in its first round.
        lambda: SamplingBudgetConfig(max_extra_groups=8),
        lambda: SessionConfig.preset(
            "recommended", budget={"max_resample_rounds": 4, "max_extra_groups": 16}
        ),
        lambda: SamplingBudgetConfig.for_target(8, max_resample_rounds=4),
        lambda: SessionConfig.preset("zero_std"),
    ],
)
def test_whole_and_blank_configs_do_not_warn(build: object) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", HalfConfiguredWarning)
        build()  # type: ignore[operator]


def test_extra_groups_without_rounds_are_what_a_stream_plan_launches() -> None:
    controller = SamplingBudgetController(SamplingBudgetConfig(max_extra_groups=8))
    state = SamplingBudgetState(effective_rate_ema=0.5)  # half the groups are admitted
    plan = plan_stream(controller, state, target_groups=4, in_flight=4, num_generations=4)

    assert plan.launch > 0  # beyond the target's 4: the extra groups, in a step of one round


def test_each_warning_is_given_once_per_process() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            AdmissionSession({"gate_on": ["accuracy"]}, budget={"max_resample_rounds": 2})

    assert [str(w.message)[:22] for w in caught] == ["'gate_on' is ['accurac", "'max_resample_rounds' "]


def test_an_error_filter_raises_it_every_time() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", HalfConfiguredWarning)
        for _ in range(2):
            with pytest.raises(HalfConfiguredWarning):
                GroupAdmissionConfig(gate_on=["accuracy"])


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


SMALL = ["--steps", "3", "--target-groups", "6", "--group-size", "4", "--strategies", "controller"]


def test_the_cli_says_that_rounds_alone_resample_nothing_and_shows_the_zero(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "simulate", *SMALL, "--max-resample-rounds", "4")

    assert 0 == code
    assert err.startswith(
        "group-admission simulate: warning: 'max_resample_rounds' is 4 but 'max_extra_groups' is 0"
    )
    assert 1 == len(err.splitlines())
    assert "  budget: max_extra_groups=0 max_resample_rounds=4" in out.splitlines()


def test_the_cli_says_that_gate_on_alone_gates_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "simulate", *SMALL, "--tasks", "composite", "--gate-on", "outcome")

    assert 0 == code
    assert err.startswith("group-admission simulate: warning: 'gate_on' is ['outcome'] but every reward gate")
    assert "  policy: gate_on=outcome" in out.splitlines()


def test_the_cli_and_the_library_build_a_section_alike(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One rule: a section you give is the blank config plus your fields, in code and on the command line."""
    path = tmp_path / "half.yaml"
    path.write_text("policy: {gate_on: [outcome]}\nbudget: {max_resample_rounds: 3}\n")

    code, out, err = run(capsys, "explain", str(path))

    assert 0 == code
    assert len(err.splitlines()) == 2
    assert "every group is admitted" in err
    assert "no group is ever resampled" in err
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HalfConfiguredWarning)
        assert not GroupAdmissionConfig.from_yaml(path, key="policy").reward_gate_enabled
    assert "std gate: off" in out


def test_without_a_policy_the_simulators_run_the_zero_std_preset() -> None:
    assert SessionConfig.preset("zero_std").policy == DEFAULT_POLICY
