"""The budgets derived from a step's target have one home: ``SamplingBudgetConfig.for_target``."""

from __future__ import annotations

import re
from typing import Any

import pytest

from group_admission import SamplingBudgetConfig
from group_admission.adapters.slime import SlimeStreamingSettings
from group_admission.simulation import ControllerResampling, PoolController, StreamingLaunches
from group_admission.simulation._planning_strategies import SessionPoolStrategy


def test_the_extra_groups_scale_with_the_target_and_the_other_fields_pass_through() -> None:
    budget = SamplingBudgetConfig.for_target(8, max_resample_rounds=3, mode="confidence")

    assert (16, 3, "confidence") == (budget.max_extra_groups, budget.max_resample_rounds, budget.mode)
    assert 40 == SamplingBudgetConfig.for_target(8, extra_per_target=5).max_extra_groups
    assert 0 == SamplingBudgetConfig.for_target(0).max_extra_groups


def _defaults(target: int) -> dict[str, int]:
    """The extra groups each target-scaled default allows at ``target``."""
    return {
        "controller": ControllerResampling().effective_budget(target).max_extra_groups,
        "streaming": StreamingLaunches()._budget(target).max_extra_groups,
        "slime streaming": SlimeStreamingSettings().budget_for(target).max_extra_groups,
    }


def test_every_target_scaled_default_reads_the_one_multiplier(monkeypatch: pytest.MonkeyPatch) -> None:
    """Change the multiplier in its one place and every default that scales with a target follows."""
    shipped = _defaults(4)
    monkeypatch.setattr(SamplingBudgetConfig, "EXTRA_GROUPS_PER_TARGET", 5)

    assert dict.fromkeys(shipped, 8) == shipped
    assert dict.fromkeys(shipped, 20) == _defaults(4)


def test_a_pool_default_is_its_own_multiple_of_the_target() -> None:
    """A hard pool needs more room (6 x target); it is written once, at the pool strategies' base."""
    budget = PoolController().effective_budget(3)

    assert (18, 8, "confidence") == (budget.max_extra_groups, budget.max_resample_rounds, budget.mode)
    assert PoolController.effective_budget is SessionPoolStrategy.effective_budget


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((-1,), {}, ValueError, "'target_groups' must be >= 0 (got -1)"),
        ((1.5,), {}, TypeError, "'target_groups' must be an integer (got 1.5)"),
        ((True,), {}, TypeError, "'target_groups' must be an integer (got True)"),
        ((4,), {"extra_per_target": -2}, ValueError, "'extra_per_target' must be >= 0 (got -2)"),
        ((4,), {"extra_per_target": 0.5}, TypeError, "'extra_per_target' must be an integer (got 0.5)"),
        ((4,), {"max_extra_groups": 3}, ValueError, "'max_extra_groups' is extra_per_target x target_groups"),
        ((4,), {"max_rounds": 3}, ValueError, "unknown key(s) 'max_rounds' in SamplingBudgetConfig mapping"),
        ((4,), {"max_resample_rounds": -1}, ValueError, "'max_resample_rounds' must be >= 0 (got -1)"),
    ],
)
def test_bad_inputs_are_refused_by_name(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        SamplingBudgetConfig.for_target(*args, **kwargs)
