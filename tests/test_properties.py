"""Invariants of the admission policy, checked by Hypothesis."""

from __future__ import annotations

import asyncio
import json
import math
import random
import threading
from typing import Any

import attrs
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from group_admission import (
    AdmissionStats,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    RejectionReason,
    _checks,
    group_admission_metrics,
)
from strategies import configs, dyadic_groups, float_groups, reward_matrices

REWARD_CHECKS = {check.name for check in _checks.TABLE.reward}


@given(config=configs(), rewards=dyadic_groups, seed=st.integers(0, 2**16))
def test_decision_is_invariant_to_permuting_members(
    config: GroupAdmissionConfig, rewards: list[float], seed: int
) -> None:
    shuffled = list(rewards)
    random.Random(seed).shuffle(shuffled)
    policy = GroupAdmissionPolicy(config)

    first, second = policy.evaluate(rewards), policy.evaluate(shuffled)

    assert first.reason == second.reason
    assert first.failed_checks == second.failed_checks
    assert first.reward_range == second.reward_range


@given(config=configs(), rewards=dyadic_groups, shift=st.integers(-64, 64))
def test_every_reward_gate_is_invariant_to_shifting_rewards(
    config: GroupAdmissionConfig, rewards: list[float], shift: int
) -> None:
    policy = GroupAdmissionPolicy(config)

    base, moved = policy.evaluate(rewards), policy.evaluate([r + shift for r in rewards])

    assert base.reason == moved.reason
    assert base.failed_checks == moved.failed_checks
    assert base.nontrivial_advantage_count == moved.nontrivial_advantage_count


@given(config=configs(), rewards=float_groups)
def test_evaluation_is_deterministic(config: GroupAdmissionConfig, rewards: list[float]) -> None:
    policy = GroupAdmissionPolicy(config)

    assert (
        policy.evaluate(rewards).to_dict() == GroupAdmissionPolicy(config).evaluate(list(rewards)).to_dict()
    )


@given(
    config=configs(),
    rewards=st.lists(
        st.one_of(st.none(), st.sampled_from([0.0, 1.0, float("nan")]), st.floats(-5, 5)),
        min_size=1,
        max_size=8,
    ),
    external=st.lists(st.sampled_from(["stale", "timeout"]), max_size=2),
)
def test_exactly_one_primary_reason_consistent_with_the_failed_checks(
    config: GroupAdmissionConfig, rewards: list[float | None], external: list[str]
) -> None:
    decision = GroupAdmissionPolicy(config).evaluate(rewards, external_reasons=external)
    failed = set(decision.failed_checks)

    assert decision.admitted == (decision.reason is None) == (not failed)
    if decision.external_reasons:
        assert RejectionReason.EXTERNAL == decision.reason
    elif failed & REWARD_CHECKS:
        expected = RejectionReason.EXACT_DEAD if decision.reward_range == 0 else RejectionReason.NEAR_TIE
        assert expected == decision.reason
    elif failed:
        assert RejectionReason.REDUNDANT == decision.reason
    assert set(decision.external_reasons) <= failed


@given(
    config=configs(similarity=True),
    rewards=st.lists(st.sampled_from([0.0, 0.5, 1.0, 0.51]), min_size=1, max_size=5),
    texts=st.lists(st.sampled_from(["answer is 4", "carry the one"]), min_size=5, max_size=5),
    external=st.lists(
        st.sampled_from(["stale", *sorted(REWARD_CHECKS), "mean_pairwise_similarity_above_threshold"]),
        min_size=1,
        max_size=3,
    ),
)
def test_external_reasons_never_change_which_gates_failed(
    config: GroupAdmissionConfig, rewards: list[float], texts: list[str], external: list[str]
) -> None:
    policy = GroupAdmissionPolicy(config)
    texts = texts[: len(rewards)]
    plain = policy.evaluate(rewards, texts)
    with_reasons = policy.evaluate(rewards, texts, external_reasons=external)

    assert plain.failed_checks == with_reasons.gate_checks
    assert plain.reward_rejected == with_reasons.reward_rejected
    assert plain.near_duplicate_rejected == with_reasons.near_duplicate_rejected
    counted = group_admission_metrics([with_reasons])
    assert (
        counted["reward_rejected_group_count"]
        == group_admission_metrics([plain])["reward_rejected_group_count"]
    )


@given(
    config=configs(similarity=True),
    reward=st.one_of(st.sampled_from([0.0, 1.0, 0.5]), st.floats(-1e6, 1e6)),
    segments=st.integers(1, 4),
    with_ids=st.booleans(),
)
def test_a_group_of_one_rollout_is_judged_as_identical_rewards(
    config: GroupAdmissionConfig, reward: float, segments: int, with_ids: bool
) -> None:
    """
    The one-member rule (docs/concepts.md): admitted with every reward gate off, else
    ``exact_dead`` failing every enabled reward check; the similarity gate has no pair to
    compare. The same for one member and for segments of one rollout, in both paths.
    """
    policy = GroupAdmissionPolicy(config)
    size = segments if with_ids else 1
    texts = ["the answer is 4"] * size
    ids = ["only"] * size if with_ids else None
    decision = policy.evaluate([reward] * size, texts, rollout_ids=ids)
    batch = policy.evaluate_batch([[reward] * size], [texts], rollout_ids=None if ids is None else [ids])
    enabled = tuple(check.name for check in _checks.TABLE.reward if check.enabled(config))

    assert 1 == decision.unique_rollouts
    assert decision.admitted == (not config.reward_gate_enabled)
    assert enabled == decision.failed_checks
    assert (None if decision.admitted else RejectionReason.EXACT_DEAD) == decision.reason
    assert decision.mean_pairwise_similarity is None
    assert decision.to_dict() == batch.decision(0).to_dict()


@given(config=configs(), rewards=reward_matrices())
def test_evaluate_batch_agrees_exactly_with_evaluate(
    config: GroupAdmissionConfig, rewards: np.ndarray
) -> None:
    policy = GroupAdmissionPolicy(config)

    batch = policy.evaluate_batch(rewards)

    for row, decision in zip(rewards, batch.decisions(), strict=True):
        assert policy.evaluate(row).to_dict() == decision.to_dict()
    primary = [None if d.reason is None else d.reason.value for d in batch.decisions()]
    assert primary == batch.primary_reasons.tolist()


@given(
    config=configs(similarity=True),
    accuracy=st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=3, max_size=3), min_size=1, max_size=6),
    data=st.data(),
)
def test_evaluate_batch_agrees_on_composites_ids_texts_and_reasons(
    config: GroupAdmissionConfig, accuracy: list[list[float]], data: st.DataObject
) -> None:
    groups = len(accuracy)
    grid = st.sampled_from([0.0, 0.05, 0.1])
    brevity = data.draw(st.lists(st.lists(grid, min_size=3, max_size=3), min_size=groups, max_size=groups))
    ids = data.draw(
        st.lists(
            st.lists(st.sampled_from([0, 1, 2]), min_size=3, max_size=3), min_size=groups, max_size=groups
        )
    )
    words = st.sampled_from(["add the numbers", "carry the one", "answer is 4", None])
    texts = data.draw(st.lists(st.lists(words, min_size=3, max_size=3), min_size=groups, max_size=groups))
    external = data.draw(st.lists(st.sampled_from([(), ("stale",)]), min_size=groups, max_size=groups))
    config = GroupAdmissionConfig(**{**config.to_dict(), "gate_on": ["accuracy"]})
    policy = GroupAdmissionPolicy(config)
    rewards = {"accuracy": np.array(accuracy), "brevity": np.array(brevity)}

    batch = policy.evaluate_batch(rewards, texts, external_reasons=external, rollout_ids=ids)

    for row in range(groups):
        single = policy.evaluate(
            {"accuracy": accuracy[row], "brevity": brevity[row]},
            texts[row],
            external_reasons=external[row],
            rollout_ids=ids[row],
        )
        assert single.to_dict() == batch.decision(row).to_dict()


@given(
    batches=st.lists(st.lists(st.sampled_from([0, 1, 2, 3, 4]), max_size=20), max_size=6),
    seed=st.integers(0, 99),
)
def test_counts_conserve_under_random_merges(batches: list[list[int]], seed: int) -> None:
    policy = GroupAdmissionPolicy(GroupAdmissionConfig(min_reward_std=1e-6, min_reward_range=0.2))
    menu = {
        0: ([0.0, 1.0], ()),
        1: ([1.0, 1.0], ()),
        2: ([0.5, 0.6], ()),
        3: ([0.0, 1.0], ("stale",)),
        4: ([float("nan"), 1.0], ()),
    }
    parts = []
    everything = []
    for batch in batches:
        decisions = [policy.evaluate(menu[k][0], external_reasons=menu[k][1]) for k in batch]
        everything += decisions
        stats = AdmissionStats()
        stats.add_many(decisions)
        parts.append(stats)
    random.Random(seed).shuffle(parts)
    total = AdmissionStats()
    for part in parts:
        total = total.merge(AdmissionStats.from_dict(part.to_dict()))

    assert {**group_admission_metrics(everything), "fallback_admitted_group_count": 0} == total.metrics()
    assert (
        total.candidates
        == total.admitted + total.external + total.exact_dead + total.near_tie + total.redundant
    )


def test_counts_conserve_under_concurrent_thread_and_asyncio_updates() -> None:
    policy = GroupAdmissionPolicy(GroupAdmissionConfig(min_reward_std=1e-6))
    decisions = [policy.evaluate(r) for r in ([0, 1], [1, 1], [float("nan"), 0])]
    stats = AdmissionStats()

    def worker() -> None:
        for i in range(600):
            stats.add(decisions[i % 3])

    async def task() -> None:
        for i in range(300):
            stats.add_many([decisions[i % 3]])
            await asyncio.sleep(0)

    async def tasks() -> None:
        await asyncio.gather(*(task() for _ in range(4)))

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    asyncio.run(tasks())
    for thread in threads:
        thread.join()

    assert 6 * 600 + 4 * 300 == stats.candidates
    assert stats.candidates == stats.admitted + stats.exact_dead + stats.external
    assert stats.admitted == stats.exact_dead == stats.external


# Values that exercise every data path: ordinary, exact ties, None, non-finite, values whose
# statistics overflow float64, and Python ints beyond the float range.
_ELEMENTS = st.one_of(
    st.sampled_from([0.0, 1.0, 0.5, 0.25]),
    st.sampled_from([None, math.nan, math.inf, -math.inf]),
    st.sampled_from([1e308, -1e308, 1.7e308, 10**400, -(10**400)]),
    st.floats(-10, 10, allow_nan=False),
)
_TEXTS = st.sampled_from(["add the numbers", "carry the one", "answer is 4", "answer is 4", None])
# Caller reasons that happen to be named like gate checks are still only caller reasons.
_REASONS = st.sampled_from(
    [
        (),
        ("stale",),
        "timeout",
        ("missing_reward", "stale"),
        ("missing_completion",),
        ("reward_std_below_threshold",),
        ("mean_pairwise_similarity_above_threshold", "insufficient_nontrivial_advantages"),
    ]
)


@st.composite
def _batches(draw: st.DrawFn) -> dict[str, Any]:
    """A batch of groups and the per-group arguments, in every form evaluate_batch takes."""
    groups, size = draw(st.integers(1, 4)), draw(st.integers(1, 4))

    def matrix(elements: st.SearchStrategy[Any]) -> list[list[Any]]:
        row = st.lists(elements, min_size=size, max_size=size)
        return draw(st.lists(row, min_size=groups, max_size=groups))

    composite = draw(st.booleans())
    if composite:
        gate_on = draw(st.sampled_from([None, ["accuracy"], ["accuracy", "length"]]))
        rewards: Any = {"accuracy": matrix(_ELEMENTS), "length": matrix(_ELEMENTS)}
    else:
        gate_on, rewards = None, matrix(_ELEMENTS)
    config = attrs.evolve(draw(configs(similarity=True)), gate_on=gate_on)
    with_texts = config.similarity_gate_enabled or draw(st.booleans())
    return {
        "config": config,
        "rewards": rewards,
        "completions": matrix(_TEXTS) if with_texts else None,
        "rollout_ids": matrix(st.sampled_from([0, 1, 2, None])) if draw(st.booleans()) else None,
        "external_reasons": draw(st.none() | st.lists(_REASONS, min_size=groups, max_size=groups)),
        "group_keys": draw(
            st.none()
            | st.just([f"g{row}" for row in range(groups)])
            | st.just([("prompt", row, (row, "turn")) for row in range(groups)])
        ),
    }


@given(batch=_batches())
def test_evaluate_batch_agrees_with_evaluate_row_by_row_on_every_input_kind(batch: dict[str, Any]) -> None:
    policy = GroupAdmissionPolicy(batch["config"])
    rewards = batch["rewards"]
    groups = len(next(iter(rewards.values())) if isinstance(rewards, dict) else rewards)

    def row_of(value: Any, row: int) -> Any:
        return None if value is None else value[row]

    result = policy.evaluate_batch(
        rewards,
        batch["completions"],
        external_reasons=batch["external_reasons"],
        rollout_ids=batch["rollout_ids"],
        group_keys=batch["group_keys"],
    )
    singles = [
        policy.evaluate(
            {name: column[row] for name, column in rewards.items()}
            if isinstance(rewards, dict)
            else rewards[row],
            row_of(batch["completions"], row),
            external_reasons=row_of(batch["external_reasons"], row) or (),
            rollout_ids=row_of(batch["rollout_ids"], row),
            group_key=row_of(batch["group_keys"], row),
        )
        for row in range(groups)
    ]

    for row, single in enumerate(singles):
        assert single.to_dict() == result.decision(row).to_dict()
        assert single.to_dict() == result.decision(row - groups).to_dict()  # negative indices
    assert [d.primary_rejection_reason for d in singles] == result.primary_reasons.tolist()
    counted, from_batch = AdmissionStats(), AdmissionStats()
    counted.add_many(singles)
    from_batch.add_many(result)
    assert counted == from_batch


@given(batch=_batches())
def test_every_decision_dict_is_json_safe(batch: dict[str, Any]) -> None:
    policy = GroupAdmissionPolicy(batch["config"])

    for decision in policy.evaluate_batch(
        batch["rewards"], batch["completions"], group_keys=batch["group_keys"]
    ).decisions():
        data = json.loads(json.dumps(decision.to_dict(), allow_nan=False))
        assert (data["admitted"], data["reason"]) == (decision.admitted, decision.primary_rejection_reason)
        assert data["failed_checks"] == list(decision.failed_checks)


@settings(max_examples=6, deadline=None)
@given(
    shape=st.sampled_from([(2049, 3), (4500, 16), (2100, 1), (12, 300)]),
    seed=st.integers(0, 2**16),
    broken=st.integers(0, 5),
)
def test_evaluate_batch_agrees_with_evaluate_across_blocks_and_wide_groups(
    shape: tuple[int, int], seed: int, broken: int
) -> None:
    """Several blocks of the vectorised gate, groups of 300 members, and scattered non-finite members."""
    rng = np.random.default_rng(seed)
    groups, members = shape
    rewards = rng.choice([0.0, 1.0, 0.5], size=shape) * rng.choice([1.0, 1e-9, 3.0], size=(groups, 1))
    rewards += rng.standard_normal(shape) * (rng.random((groups, 1)) < 0.3)
    for _ in range(broken):
        rewards[rng.integers(groups), rng.integers(members)] = rng.choice([math.nan, math.inf, 1e308])
    policy = GroupAdmissionPolicy(
        GroupAdmissionConfig(min_reward_std=0.05, min_reward_range=0.02, min_nontrivial_advantages=2)
    )

    batch = policy.evaluate_batch(rewards)

    for row in range(groups):
        assert policy.evaluate(rewards[row]).to_dict() == batch.decision(row).to_dict()


def test_a_member_at_the_tolerance_edge_counts_the_same_after_a_shift() -> None:
    """Deviations are measured from the lowest reward, so a grid of rewards shifts exactly."""
    config = GroupAdmissionConfig(advantage_tolerance=0.1, min_nontrivial_advantages=1)
    rewards = [0.0] * 8 + [-117 / 64, -989 / 64]  # one member exactly 0.1 from the mean
    policy = GroupAdmissionPolicy(config)

    counts = {
        policy.evaluate([r + shift for r in rewards]).nontrivial_advantage_count for shift in range(-3, 4)
    }

    assert counts == {9}


def test_one_group_of_many_members_is_summed_in_the_scalar_order() -> None:
    """A batch of one group: its contiguous column must not be summed pairwise."""
    rewards = np.array([[0.0] + [1.0] * 8])
    policy = GroupAdmissionPolicy(GroupAdmissionConfig())

    batch = policy.evaluate_batch(rewards).decision(0)

    assert batch.reward_std == policy.evaluate(rewards[0].tolist()).reward_std
