"""Bad data in slime's groups: each row is rejected as external with a named detail, never raised."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from adapters.slime import slime_types
from group_admission.adapters import slime as slime_adapter

pytestmark = pytest.mark.usefixtures("fresh_slime_state")


class Unreadable(slime_types.Sample):
    def get_reward_value(self, args: Any) -> float:
        msg = "reward model timed out"
        raise RuntimeError(msg)


def member(reward: Any, **fields: Any) -> slime_types.Sample:
    return slime_types.make_sample(0, reward=reward, **fields)


CASES: list[tuple[str, Any, str]] = [
    ("a huge int reward", [member(10**400), member(0.0)], "external_non_finite_reward"),
    ("a huge negative int reward", [member(-(10**400)), member(0.0)], "external_non_finite_reward"),
    ("a huge fraction reward", [member(Fraction(10**400, 3)), member(0.0)], "external_non_finite_reward"),
    ("an infinite reward", [member(math.inf), member(0.0)], "external_non_finite_reward"),
    ("a reward whose reader raises", [Unreadable(reward=1.0), member(0.0)], "external_unreadable_reward"),
    ("a complex reward", [member(1j), member(0.0)], "external_non_numeric_reward"),
    ("a bytes reward", [member(b"1"), member(0.0)], "external_non_numeric_reward"),
    ("an array reward", [member(np.ones(2)), member(0.0)], "external_non_scalar_reward"),
    ("a status given as text", [member(1.0, status="failed"), member(0.0)], "external_failed"),
    ("a member that is not a Sample", [3, member(0.0)], "external_malformed_member"),
    ("a group that is None", None, "external_malformed_group"),
    ("a group that is text", "samples", "external_malformed_group"),
    ("a group that is a mapping", {"a": member(1.0)}, "external_malformed_group"),
    ("a fan-out group with an empty rollout", [[], [member(1.0)]], "external_empty_rollout"),
]


@pytest.mark.parametrize(("samples", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_filter_rejects_bad_groups_as_external(samples: Any, reason: str) -> None:
    args = slime_types.make_args(group_admission={"max_consecutive_failed_groups": None})

    output = slime_adapter.admission_filter(args, samples)

    assert (False, reason, False) == (output.keep, output.reason, output.keep_when_insufficient)
    assert reason == slime_adapter.drop_reason(slime_adapter.judge_group(args, samples))


def test_the_process_hook_counts_every_bad_group_without_raising() -> None:
    args = slime_types.make_args(rollout_batch_size=1)

    slime_adapter.record_all_samples(args, [samples for _, samples, _ in CASES], object())
    stats = slime_adapter.admission_stats(args)

    assert (len(CASES), len(CASES)) == (stats.candidates, stats.external)
    assert len(CASES) == args.processed_group_count


def test_the_table_covers_at_least_ten_kinds_of_bad_group() -> None:
    assert len(CASES) >= 10
