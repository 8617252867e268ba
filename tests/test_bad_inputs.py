"""
The same mistake raises the same type everywhere, and every message names its field.

The tables by the module that raises are ``test_bad_inputs_<area>.py``. Here are the
mistakes that cut across them, each checked at every public entry point that can meet it: a
bool where a count is expected (``TypeError``), an empty name (``ValueError``), and an int
too long to print (more than 4,300 digits: Python refuses to write it, so a message that
tried would crash instead of naming the field).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

import test_bad_inputs_history
import test_bad_inputs_metrics
import test_bad_inputs_planning
import test_bad_inputs_policy
import test_bad_inputs_session
from bad_inputs_common import ADMITTED, stepping
from group_admission import (
    AdmissionSession,
    AdmissionStats,
    DropLimits,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    PromptHistory,
    PromptHistoryConfig,
    SamplingBudgetConfig,
    SamplingBudgetController,
    SamplingBudgetState,
    binomial_groups_needed,
    informative_probability,
    loss_scale,
    prompts_needed,
)

COUNTS_GIVEN_A_BOOL: list[tuple[str, Callable[[], Any]]] = [
    ("begin_step", lambda: AdmissionSession().begin_step(True)),  # type: ignore[arg-type]
    ("record samples", lambda: AdmissionSession().record(ADMITTED, samples=True)),  # type: ignore[arg-type]
    ("judge tokens", lambda: AdmissionSession().judge([0, 1], generated_tokens=True)),  # type: ignore[arg-type]
    ("plan size", lambda: stepping().plan(num_generations=True)),  # type: ignore[arg-type]
    ("stream in flight", lambda: stepping().stream_plan(True)),  # type: ignore[arg-type]
    ("can_launch groups", lambda: stepping().can_launch(True)),  # type: ignore[arg-type]
    (
        "observe groups",
        lambda: SamplingBudgetController().observe_round(
            SamplingBudgetState(),
            groups=True,
            admitted=0,
            num_generations=1,  # type: ignore[arg-type]
        ),
    ),
    ("binomial remaining", lambda: binomial_groups_needed(True, 0.5, 0.9)),  # type: ignore[arg-type]
    ("prompts needed remaining", lambda: prompts_needed([0.5], True)),  # type: ignore[arg-type]
    ("informative group size", lambda: informative_probability(1, 1, True)),  # type: ignore[arg-type]
    ("history config group size", lambda: PromptHistoryConfig(group_size=True)),  # type: ignore[arg-type]
    ("budget config cap", lambda: SamplingBudgetConfig(max_extra_groups=True)),  # type: ignore[arg-type]
    ("drop limit count", lambda: DropLimits(max_rejected_groups=True)),  # type: ignore[arg-type]
    ("stats fallback count", lambda: AdmissionStats().record_fallback(True)),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("call", [c[1] for c in COUNTS_GIVEN_A_BOOL], ids=[c[0] for c in COUNTS_GIVEN_A_BOOL])
def test_a_bool_where_a_count_is_expected_is_a_type_error_everywhere(call: Callable[[], Any]) -> None:
    with pytest.raises(TypeError, match=r"must be an integer \(got True\)"):
        call()


EMPTY_NAMES: list[tuple[str, Callable[[], Any], str]] = [
    ("gate_on", lambda: GroupAdmissionConfig(gate_on=[""]), "'gate_on'"),
    ("forceable_external", lambda: DropLimits(forceable_external=[""]), "'forceable_external'"),
    ("forceable_external as one name", lambda: DropLimits(forceable_external=""), "'forceable_external'"),
    (
        "evaluate's external reasons",
        lambda: GroupAdmissionPolicy().evaluate([0, 1], external_reasons=[""]),
        "'external_reasons'",
    ),
    (
        "judge's external reasons",
        lambda: AdmissionSession().judge([0, 1], external_reasons=[""]),
        "'external",
    ),
    (
        "evaluate_batch's external reasons",
        lambda: GroupAdmissionPolicy().evaluate_batch([[0, 1]], external_reasons=[[""]]),
        "'external_reasons[0]'",
    ),
]


@pytest.mark.parametrize(("call", "field"), [c[1:] for c in EMPTY_NAMES], ids=[c[0] for c in EMPTY_NAMES])
def test_an_empty_name_is_a_value_error_everywhere(call: Callable[[], Any], field: str) -> None:
    with pytest.raises(ValueError, match=re.escape(field) + r".* must be non-empty strings \(got ''\)"):
        call()


LONG = 10**5000  # more than 4,300 digits: ``str`` refuses it
LONG_INTS: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    (
        "a prompt id",
        lambda: PromptHistory({"group_size": 2}).observe(LONG, ADMITTED, step=0),
        ValueError,
        "'prompt_id'",
    ),
    (
        "a candidate id",
        lambda: PromptHistory({"group_size": 2}).pick([1, -LONG], step=0),
        ValueError,
        "'prompt_ids[1]'",
    ),
    ("a step", lambda: PromptHistory({"group_size": 2}).pick([1], step=LONG), ValueError, "'step'"),
    ("a rank", lambda: PromptHistory({"group_size": 2}, rank=-LONG), ValueError, "'rank'"),
    ("a target", lambda: AdmissionSession().begin_step(-LONG), ValueError, "'target_groups'"),
    ("a group count", lambda: stepping().can_launch(-LONG), ValueError, "'groups'"),
    ("a token count", lambda: AdmissionSession().charge(-LONG, kind="aborted"), ValueError, "'tokens'"),
    ("a remaining count", lambda: binomial_groups_needed(-LONG, 0.5, 0.9), ValueError, "'remaining'"),
    ("a cap", lambda: SamplingBudgetConfig(max_extra_groups=-LONG), ValueError, "'max_extra_groups'"),
    ("a threshold", lambda: GroupAdmissionConfig(min_reward_std=LONG), ValueError, "'min_reward_std'"),
    (
        "admitted beyond the round's groups",
        lambda: SamplingBudgetController().observe_round(
            SamplingBudgetState(), groups=1, admitted=LONG, num_generations=1
        ),
        ValueError,
        "'admitted'",
    ),
    (
        "trained beyond the generated groups",
        lambda: loss_scale("linear", trained_groups=LONG, target_groups=1, generated_groups=LONG - 1),
        ValueError,
        "'trained_groups'",
    ),
    (
        "a batch index",
        lambda: GroupAdmissionPolicy().evaluate_batch([[0, 1]]).decision(LONG),
        IndexError,
        "'index'",
    ),
    ("a group size", lambda: informative_probability(1, 1, -LONG), ValueError, "'group_size'"),
]


@pytest.mark.parametrize(
    ("call", "error", "field"), [c[1:] for c in LONG_INTS], ids=[c[0] for c in LONG_INTS]
)
def test_an_int_too_long_to_print_is_named_by_its_size_and_the_field_named(
    call: Callable[[], Any], error: type[Exception], field: str
) -> None:
    with pytest.raises(error) as raised:
        call()

    message = str(raised.value)
    assert message.startswith(field), message
    assert re.search(r"\(got (a negative |an )?int of 1661\d bits\)", message), message


def test_a_history_config_is_required_and_none_is_not_offered() -> None:
    for config in (None, "x", 3):
        with pytest.raises(TypeError) as raised:
            PromptHistory(config)  # type: ignore[arg-type]
        message = str(raised.value)
        assert message.startswith("'config' must be a PromptHistoryConfig or a mapping of its fields (got ")
        assert "or None" not in message


def test_the_tables_cover_every_area_with_many_kinds_of_bad_input() -> None:
    tables = [test_bad_inputs_policy, test_bad_inputs_planning, test_bad_inputs_session]
    tables += [test_bad_inputs_history, test_bad_inputs_metrics]
    sizes = {module.__name__: len(module.CASES) for module in tables}

    assert all(size >= 10 for size in sizes.values()), sizes
    assert (
        sum(sizes.values()) + len(COUNTS_GIVEN_A_BOOL) + len(EMPTY_NAMES) + len(LONG_INTS) >= 240
    )  # 0.2: 204
