"""
Bad inputs to the Challenger adapter's readers of host objects: hand-offs, trajectories, token counts.

A malformed hand-off or a broken ``tokens_of`` raises, naming the argument, the requirement
and the value; a bad value inside a trajectory rejects its group as ``external`` and is
counted, never raised.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from group_admission import StepLifecycleError
from group_admission.adapters.challenger import ChallengerAdmission, last_assistant_text, with_group_admission

from .twinkle_types import trajectory

STRICT = {"min_reward_std": 1e-6}
SIMILAR = {"max_mean_pairwise_similarity": 0.9}
BUDGET = {"max_extra_groups": 10, "max_resample_rounds": 10}


def _hand_off(groups: Any, reasons: Any = None, **kwargs: Any) -> Any:
    return ChallengerAdmission(STRICT, **kwargs).admitted_groups(
        groups, Counter() if reasons is None else reasons
    )


def _counted(tokens: Any) -> Any:
    admission = ChallengerAdmission(STRICT, budget=BUDGET, tokens_of=lambda _trajectory: tokens)
    admission.begin_batch(2)
    return admission.admitted_groups([[trajectory(0.0), trajectory(1.0)]], Counter())


CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    (
        "groups a dict",
        lambda: _hand_off({"rewards": 1.0}),
        TypeError,
        "'groups' must be a list of groups (lists of trajectory dicts) (got {'rewards': 1.0} of type dict)",
    ),
    (
        "a group a string",
        lambda: _hand_off(["abc"]),
        TypeError,
        "'groups' entry 0 must be a list of trajectory dicts (got 'abc')",
    ),
    (
        "a member a list",
        lambda: _hand_off([[trajectory(1.0), [("rewards", 1.0)]]]),
        TypeError,
        "'groups' entry 0 must hold trajectory dicts (got [('rewards', 1.0)] of type list)",
    ),
    (
        "empty group",
        lambda: _hand_off([[]]),
        ValueError,
        "'groups' entry 0 must hold at least one trajectory (got an empty group)",
    ),
    (
        "reasons a set",
        lambda: _hand_off([], reasons={"external"}),
        TypeError,
        "'rejection_reasons' must be a Counter of reason names (got {'external'} of type set)",
    ),
    (
        "tokens_of returns None",
        lambda: _counted(None),
        TypeError,
        "'tokens_of' must return an integer for each trajectory (got None)",
    ),
    (
        "tokens_of returns a float",
        lambda: _counted(12.5),
        TypeError,
        "'tokens_of' must return an integer for each trajectory (got 12.5)",
    ),
    (
        "tokens_of returns a negative count",
        lambda: _counted(-3),
        ValueError,
        "'tokens_of' must return >= 0 for each trajectory (got -3)",
    ),
    (
        "hand-off before begin_batch",
        lambda: _hand_off([[trajectory(0.0), trajectory(1.0)]], budget=BUDGET),
        StepLifecycleError,
        "call begin_batch(target_groups) before admitted_groups() when a sampling budget is set",
    ),
    (
        # It raised AttributeError ('list' object has no attribute 'get').
        "last_assistant_text of a list",
        lambda: last_assistant_text([1]),
        TypeError,
        "'trajectory' must be a trajectory dict (got [1] of type list)",
    ),
    (
        "mixin on an instance",
        lambda: with_group_admission(object()),
        TypeError,
        "'challenger_cls' must be a Challenger class (got <object object at",
    ),
]


@pytest.mark.parametrize(("name", "call", "error", "message"), CASES, ids=[case[0] for case in CASES])
def test_bad_input(name, call, error, message):
    """Each bad hand-off fails with one message naming the argument, requirement and value."""
    with pytest.raises(error) as info:
        call()

    assert str(info.value).startswith(message), name


def _member(**fields: Any) -> dict[str, Any]:
    return {"messages": [{"role": "assistant", "content": "x"}], "rewards": 1.0, **fields}


# Bad values inside trajectories: (the odd member, the policy, the external detail counted).
DATA_CASES = [
    (_member(rewards=None), STRICT, "missing_reward"),
    (_member(rewards=np.array([1.0, 0.0])), STRICT, "non_numeric_reward"),
    (_member(rewards=[[1.0], [0.0, 1.0]]), STRICT, "non_numeric_reward"),
    (_member(rewards=object()), STRICT, "non_numeric_reward"),
    (_member(rewards=float("nan")), STRICT, "non_finite_reward"),
    # Beyond the float range: the reader raised OverflowError.
    (_member(rewards=10**400), STRICT, "non_finite_reward"),
    (_member(rewards=-(10**400)), STRICT, "non_finite_reward"),
    (_member(rewards=Fraction(10**400, 3)), STRICT, "non_finite_reward"),
    (_member(messages=5), SIMILAR, "missing_completion"),
    (_member(messages="the answer"), SIMILAR, "missing_completion"),
    (_member(messages=[{"role": "tool", "content": "out"}, "noise"]), SIMILAR, "missing_completion"),
]


@pytest.mark.parametrize(("odd", "policy", "detail"), DATA_CASES)
def test_data_problems_are_counted_not_raised(odd, policy, detail):
    """A bad value inside a trajectory rejects its group as external, with the detail counted."""
    admission = ChallengerAdmission(policy)
    reasons: Counter[str] = Counter()

    kept = admission.admitted_groups([[odd, trajectory(0.0, "another answer")]], reasons)

    assert [] == kept
    assert Counter({"external": 1}) == reasons
    assert 1 == admission.stats.external_details[detail]
