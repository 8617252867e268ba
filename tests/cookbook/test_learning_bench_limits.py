"""The learning bench's limits of prediction: the pass-rate oracle and its member-by-member stop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from cookbook.learning_bench.arms import KNOWN_ARMS, PROFILES  # noqa: E402
from cookbook.learning_bench.learning_bench import prepare_task, resummarise  # noqa: E402
from cookbook.learning_bench.limits import pass_rates, spread_chance, stop_points  # noqa: E402
from cookbook.learning_bench.model import build_policy  # noqa: E402
from cookbook.learning_bench.report import format_tables  # noqa: E402
from cookbook.learning_bench.rollout import decode, group_scores, new_group  # noqa: E402
from cookbook.learning_bench.runner import run_arm  # noqa: E402
from cookbook.learning_bench.task import TASKS, make_split, prompt_tokens  # noqa: E402

QUICK = PROFILES["quick"]
rates = st.floats(0.0, 1.0)


@given(rates, st.integers(2, 16))
def test_the_chance_of_spread_is_a_probability_symmetric_in_the_outcome(p: float, members: int) -> None:
    chance = spread_chance(np.array([p, 1.0 - p]), members)

    assert np.all((chance >= 0.0) & (chance <= 1.0))
    assert chance[0] == pytest.approx(chance[1])
    assert spread_chance(np.array([p]), members + 1)[0] >= chance[0] - 1e-12  # more members, more spread


def test_the_chance_of_spread_is_zero_for_a_certain_prompt_and_largest_at_one_half() -> None:
    chance = spread_chance(np.array([0.0, 1.0, 0.5, 0.9]), 8)

    np.testing.assert_allclose(chance[:2], 0.0)
    assert chance[2] == pytest.approx(1.0 - 2 / 256)
    assert chance[2] > chance[3]


@given(
    st.lists(st.lists(st.integers(0, 1), min_size=8, max_size=8), min_size=1, max_size=6),
    st.lists(rates, min_size=6, max_size=6),
    st.floats(0.0, 1.0),
)
def test_a_group_stops_only_after_members_that_agree_and_a_tie_unlikely_to_break(
    rows: list[list[int]], p: list[float], bound: float
) -> None:
    outcomes = np.array(rows, dtype=float)
    rate = np.array(p[: len(rows)])
    stops = stop_points(outcomes, rate, bound)

    for row, k, r in zip(outcomes, stops.tolist(), rate.tolist(), strict=True):
        assert 1 <= k <= 8
        if k < 8:
            assert len(set(row[:k].tolist())) == 1  # a group whose members disagree is never stopped
            q = r if row[0] else 1.0 - r
            assert 1.0 - q ** (8 - k) < bound


def test_a_pilot_stops_at_the_first_member_whose_tie_is_unlikely_to_break() -> None:
    outcomes = np.array(
        [[1, 1, 1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0]], dtype=float
    )
    # Row 0: one right member of a prompt right 99% of the time; the other seven all right with
    # chance 0.93, so the stop comes at once. Row 1: a wrong first member of the same prompt is
    # almost sure to be followed by a right one: never stopped, and its group is mixed.

    np.testing.assert_array_equal(stop_points(outcomes, np.array([0.99, 0.99, 0.5]), 0.1), [1, 8, 8])
    np.testing.assert_array_equal(stop_points(outcomes, np.array([0.99, 0.99, 0.5]), 0.0), [8, 8, 8])
    # At p = 0.5 the tie of k wrong members breaks with chance 1 - 0.5^(8 - k): below 0.6 from k = 7.
    np.testing.assert_array_equal(stop_points(outcomes[2:], np.array([0.5]), 0.6), [7])


@pytest.fixture(scope="module")
def warm() -> dict[str, Any]:
    """The quick profile's warm start of the neutral task, its split and its policy."""
    torch.set_num_threads(1)
    split = make_split(QUICK.held_out, QUICK.pool, QUICK.warm)
    task = TASKS["neutral"]
    weights = prepare_task(QUICK, task, split)["weights"]
    policy = build_policy(QUICK.size, lr=QUICK.lr)
    policy.model.load_state_dict(weights)
    return {"split": split, "task": task, "policy": policy, "weights": weights}


@pytest.mark.torch
@pytest.mark.slow
def test_the_measured_pass_rate_is_the_policys_and_not_the_groups_own_luck(warm: dict[str, Any]) -> None:
    task, policy = warm["task"], warm["policy"]
    ids = [int(p) for p in warm["split"].pool[:4]]
    keys = [(1, 0, p) for p in ids]
    measured = pass_rates(policy, task, ids, samples=512, seed=3, keys=keys)
    again = pass_rates(policy, task, ids, samples=512, seed=3, keys=keys)
    prompts = prompt_tokens(task, np.array(ids))
    groups = [new_group(task, p, prompts[i], members=512, seed=9, key=(i,)) for i, p in enumerate(ids)]
    decode(policy, groups, 0)
    fresh = np.array([group_scores(task, g).outcome.mean() for g in groups])
    own = [new_group(task, p, prompts[i], members=8, seed=3, key=keys[i]) for i, p in enumerate(ids)]
    decode(policy, own, 0)

    np.testing.assert_array_equal(measured, again)
    np.testing.assert_allclose(measured, fresh, atol=0.1)  # two samples of 512 of the same rate
    assert not np.array_equal(  # the measurement does not replay the group's own uniforms
        np.stack([g.noise for g in own]), np.stack([g.noise[:8] for g in groups])
    )


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("arm", ["rate_oracle", "rate_oracle_stop"])
def test_the_rate_oracle_charges_every_token_it_decodes_and_measures_its_skips(
    warm: dict[str, Any], arm: str
) -> None:
    profile = attrs.evolve(QUICK, token_budget=3_000, evaluations=1, rate_samples=32)
    record = run_arm(KNOWN_ARMS[arm], warm["task"], 0, profile, warm["split"], warm["weights"])
    counts = record["counts"]

    assert counts["tokens"] >= profile.token_budget
    assert counts["session_decoded_tokens"] == counts["tokens"]  # judged groups' and pilots' tokens
    assert counts["session_generated_tokens"] == counts["tokens"] - counts["stopped_tokens"]
    assert counts["skipped"] > 0  # the warm start has prompts it nearly never solves
    assert 0 <= counts["skipped_informative"] <= counts["skipped"]
    assert counts["trained_dead"] == 0  # gated on the outcome
    if arm == "rate_oracle":
        assert counts["stopped"] == counts["stopped_tokens"] == 0
    else:
        assert counts["stopped"] > 0
        assert counts["stopped_tokens"] > 0
        assert 0 <= counts["stopped_informative"] <= counts["stopped"]


def test_the_published_limits_are_the_published_runs_paired_with_the_bench() -> None:
    """docs/evidence.md shows the limit arms' rows as this code summarises the two published reports."""
    root = Path(__file__).resolve().parents[2]
    results = root / "cookbook" / "learning_bench" / "results"
    reports = [
        json.loads((results / name).read_text())
        for name in ("learning_bench.json", "learning_bench_limits.json")
    ]
    together = resummarise(reports)
    page = (root / "docs" / "evidence.md").read_text(encoding="utf-8")
    rows = [line for line in format_tables(together).splitlines() if line.startswith("| rate_oracle")]

    assert len(rows) == 12  # two arms, three tables, two tasks
    assert [row for row in rows if row not in page] == []
    for task, seeds in (("neutral", 8), ("conflict", 5)):
        arms = together["tasks"][task]["arms"]
        for arm in ("rate_oracle", "rate_oracle_stop"):
            assert arms[arm]["seeds"] == list(range(seeds))
            assert arms[arm]["ratio_to_reference_90pct"]["seeds"] == seeds  # paired with the reference's
