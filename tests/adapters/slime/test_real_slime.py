"""
slime's own drop rule and filter output, loaded from slime's source when ``SLIME_SRC`` names it.

``slime/rollout/filter_hub/base_types.py`` imports nothing but the standard library, so its
real ``DynamicFilterOutput``, ``should_drop_dynamic_filter_output`` and
``call_dynamic_filter`` run here without torch. Checked against THUDM/slime
624b824a898ab0ec1fcb4d373004c7f3852bf515.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.slime import slime_types
from group_admission._host_rules.slime import should_drop
from group_admission.adapters import slime as slime_adapter

BASE_TYPES = "slime/rollout/filter_hub/base_types.py"
PACKAGES = ("slime", "slime.rollout", "slime.rollout.filter_hub")


@pytest.fixture
def base_types(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """slime's real ``base_types``, importable as ``slime.rollout.filter_hub.base_types`` for the test."""
    source = os.environ.get("SLIME_SRC")
    if not source:
        pytest.skip("SLIME_SRC is not set: point it at a slime source tree to check against slime itself")
    path = Path(source) / BASE_TYPES
    if not path.is_file():
        pytest.skip(f"SLIME_SRC={source!r} holds no {BASE_TYPES}")
    for name in PACKAGES:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    spec = importlib.util.spec_from_file_location(f"{PACKAGES[-1]}.base_types", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    slime_adapter.reset()  # forget the output class detected before slime was importable
    yield module
    slime_adapter.reset()


def test_should_drop_agrees_with_slimes_own_rule_on_every_small_case(base_types: types.ModuleType) -> None:
    grid = list(itertools.product([True, False], [True, False], range(-1, 7), range(6)))

    ours = [
        should_drop(
            keep, keep_when_insufficient=fallback, remaining_batch_size=remaining, target_data_size=target
        )
        for keep, fallback, remaining, target in grid
    ]
    theirs = [
        base_types.should_drop_dynamic_filter_output(
            base_types.DynamicFilterOutput(keep=keep, keep_when_insufficient=fallback),
            remaining_batch_size=remaining,
            target_data_size=target,
        )
        for keep, fallback, remaining, target in grid
    ]

    assert 192 == len(grid)
    assert theirs == ours
    assert 0 < sum(ours) < len(grid)


@pytest.mark.parametrize(
    ("rewards", "expected"),
    [((1.0, 0.0), (True, None, False)), ((1.0, 1.0), (False, "exact_dead", True))],
    ids=["admitted", "exact_dead"],
)
def test_slimes_call_dynamic_filter_gets_slimes_own_output_unwrapped(
    base_types: types.ModuleType, rewards: tuple[float, float], expected: tuple[bool, str | None, bool]
) -> None:
    args = slime_types.make_args(group_admission={"policy": {"min_reward_std": 1e-6}})
    group = [slime_types.make_sample(i, reward=r) for i, r in enumerate(rewards)]

    output = base_types.call_dynamic_filter(slime_adapter.admission_filter, args, group)

    assert base_types.DynamicFilterOutput is type(output)
    assert expected == (output.keep, output.reason, output.keep_when_insufficient)
