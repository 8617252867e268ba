"""
Malformed host data through slime's own rollout machinery: each group is ``external``, counted, never trained.

The bad group comes out of slime's real ``generate_and_rm_group`` (``SLIME_SRC``; the doubles
in the fast lane): its rewards from the scripted reward model (``--custom-rm-path``), its
shape from the data source. The rollout goes on: the batch is filled with healthy groups,
and the counts conserve.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import pytest

from adapters.slime.scripted_engine import GroupScript
from adapters.slime.stream_hosts import Host, make_args
from adapters.slime.test_streaming import PREFIX, streaming

HEALTHY = (1.0, 0.0)


def bad_rewards(rewards: tuple[Any, ...]) -> Callable[[int, int], GroupScript]:
    """The first group of rollout 0 has ``rewards``; every other group is healthy."""

    def script(rollout_id: int, position: int) -> GroupScript:
        first = rollout_id == 0 and position == 0
        return GroupScript(lengths=(3, 4), rewards=rewards if first else HEALTHY)

    return script


def shorten(group: list[Any]) -> list[Any]:
    return group[:-1]


def lengthen(group: list[Any]) -> list[Any]:
    extra = copy.deepcopy(group[-1])
    extra.index = group[-1].index + 1000
    return [*group, extra]


def hole(group: list[Any]) -> list[Any]:
    return [group[0], None]


REWARDS: list[tuple[str, tuple[Any, ...], str]] = [
    ("a NaN reward", (math.nan, 1.0), "non_finite_reward"),
    ("an infinite reward", (math.inf, 0.0), "non_finite_reward"),
    ("an integer beyond float64", (10**400, 0.0), "non_finite_reward"),
    ("a reward beyond float32", (1e39, 0.0), "reward_overflows_float32"),
    ("rewards whose sum leaves float32", (3e38, 2e38), "reward_overflows_float32"),
    ("a missing reward", (None, 1.0), "missing_reward"),
    ("a text reward", ("high", 0.0), "non_numeric_reward"),
    ("a dict reward without --reward-key", ({"acc": 1.0}, 0.0), "dict_reward_without_key"),
    ("a list reward", ([1.0, 0.0], 0.0), "non_scalar_reward"),
]
SHAPES: list[tuple[str, Callable[[list[Any]], list[Any]], str]] = [
    ("one member short", shorten, "wrong_group_size"),
    ("one member extra", lengthen, "wrong_group_size"),
    ("a missing member", hole, "generation_failed"),
]


def reshape_first_group(data_source: Any, change: Callable[[list[Any]], list[Any]]) -> None:
    """The data source hands out its first group changed (a custom data source or buffer filter would)."""
    get = data_source.get_samples

    def get_samples(count: int) -> list[list[Any]]:
        groups = get(count)
        return [change(group) if group[0].group_index == 0 else group for group in groups]

    data_source.get_samples = get_samples


def rollout(host: Host, script: Any, change: Callable[[list[Any]], list[Any]] | None = None) -> Any:
    args = make_args(rollout_batch_size=2, n_samples_per_prompt=2, group_admission_streaming=streaming())
    host.install_engine(script, 2)
    data_source = host.data_source(args)
    if change is not None:
        reshape_first_group(data_source, change)
    return host.streaming(args, 0, data_source)


def assert_external_and_counted(output: Any, detail: str) -> None:
    metrics = output.metrics
    assert 2 == len(output.samples)
    assert 0 not in [group[0].group_index for group in output.samples]  # the bad group is not trained
    assert 1 == metrics[f"{PREFIX}externally_rejected_group_count"]
    assert 1 == metrics[f"rollout/dynamic_filter/drop_external_{detail}"]
    assert metrics[f"{PREFIX}candidate_group_count"] == (
        metrics[f"{PREFIX}admitted_group_count"] + metrics[f"{PREFIX}rejected_group_count"]
    )


@pytest.mark.parametrize(("rewards", "detail"), [r[1:] for r in REWARDS], ids=[r[0] for r in REWARDS])
def test_a_group_with_an_unusable_reward_is_external_and_counted(
    slime_host: Host, rewards: tuple[Any, ...], detail: str
) -> None:
    assert_external_and_counted(rollout(slime_host, bad_rewards(rewards)), detail)


@pytest.mark.parametrize(("change", "detail"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_a_group_of_the_wrong_shape_is_external_and_counted(
    slime_host: Host, change: Callable[[list[Any]], list[Any]], detail: str
) -> None:
    assert_external_and_counted(rollout(slime_host, bad_rewards(HEALTHY), change), detail)
