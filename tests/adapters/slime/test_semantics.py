"""What the slime adapter decides, reports and refuses: semantics, loop statistics, failures, bad settings."""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

import group_admission
from adapters.slime import slime_types
from group_admission import GroupAdmissionPolicy, SessionConfig
from group_admission.adapters import slime as slime_adapter
from group_admission.adapters.slime import _hooks
from strategies import configs, floats

Status = slime_types.Sample.Status
FILTER_PATH = "group_admission.adapters.slime.admission_filter"
PROCESS_PATH = "group_admission.adapters.slime.record_all_samples"
LOG_PATH = "group_admission.adapters.slime.log_rollout_metrics"
STD = {"policy": {"min_reward_std": 1e-6}}


pytestmark = pytest.mark.usefixtures("fresh_slime_state")


def sample(index: int, reward: Any, **fields: Any) -> slime_types.Sample:
    return slime_types.make_sample(index, reward=reward, **fields)


def group(*rewards: Any, **fields: Any) -> list[slime_types.Sample]:
    return [sample(i, r, **fields) for i, r in enumerate(rewards)]


def args_with(settings: dict[str, Any] | None = None, **overrides: Any) -> Any:
    return slime_types.make_args(group_admission=STD if settings is None else settings, **overrides)


def verdict(output: Any) -> tuple[bool, str | None, bool]:
    return bool(output.keep), output.reason, output.keep_when_insufficient


# -- one group at a time ---------------------------------------------------------------
SEMANTICS = [
    ("informative group", group(1.0, 0.0), {}, (True, None, False)),
    ("all correct", group(1.0, 1.0, 1.0), {}, (False, "exact_dead", True)),
    ("all wrong", group(0.0, 0.0), {}, (False, "exact_dead", True)),
    ("tie below the std threshold", group(0.5, 0.5 + 1e-9), {}, (False, "near_tie", True)),
    ("one reward missing", group(None, 1.0), {}, (False, "external_missing_reward", False)),
    ("non-finite reward", group(math.nan, 1.0), {}, (False, "external_non_finite_reward", False)),
    (
        "aborted sample",
        [sample(0, None, status=Status.ABORTED), sample(1, 1.0)],
        {},
        (False, "external_aborted", False),
    ),
    (
        "failed sample",
        [sample(0, 0.0, status=Status.FAILED), sample(1, 1.0)],
        {},
        (False, "external_failed", False),
    ),
    (
        "truncated sample is usable",
        [sample(0, 0.0, status=Status.TRUNCATED), sample(1, 1.0)],
        {},
        (True, None, False),
    ),
    (
        "dict reward without --reward-key",
        group({"acc": 1.0}, {"acc": 0.0}),
        {},
        (False, "external_dict_reward_without_key", False),
    ),
    (
        "dict reward read through --reward-key",
        group({"acc": 1.0}, {"acc": 0.0}),
        {"reward_key": "acc"},
        (True, None, False),
    ),
    (
        "dict reward lacking the key",
        group({"acc": 1.0}, {"f1": 0.0}),
        {"reward_key": "acc"},
        (False, "external_reward_key_missing", False),
    ),
    ("text reward", group("1.0", 0.0), {}, (False, "external_non_numeric_reward", False)),
    ("list reward", group([1.0], 0.0), {}, (False, "external_non_scalar_reward", False)),
    ("0-d tensor rewards", group(torch.tensor(1.0), torch.tensor(0.0)), {}, (True, None, False)),
    ("0-d tensor tie", group(torch.tensor(1.0), torch.tensor(1.0)), {}, (False, "exact_dead", True)),
    ("empty group", [], {}, (False, "external_malformed_group", False)),
    ("member that is not a Sample", [None, sample(1, 1.0)], {}, (False, "external_malformed_member", False)),
    (
        "fan-out: segments of one rollout count once",
        [[sample(0, 1.0, rollout_id=0), sample(1, 1.0, rollout_id=0)], [sample(2, 0.0, rollout_id=2)]],
        {},
        (True, None, False),
    ),
    (
        "fan-out: two rollouts that tie",
        [[sample(0, 1.0), sample(1, 1.0)], [sample(2, 1.0)]],
        {},
        (False, "exact_dead", True),
    ),
    (
        "fan-out: segments that disagree",
        [[sample(0, 1.0), sample(1, 0.0)], [sample(2, 0.0)]],
        {},
        (False, "external_inconsistent_rollout_rewards", False),
    ),
    ("fan-out: empty rollout", [[], [sample(2, 0.0)]], {}, (False, "external_empty_rollout", False)),
]


@pytest.mark.parametrize(
    ("samples", "overrides", "expected"), [c[1:] for c in SEMANTICS], ids=[c[0] for c in SEMANTICS]
)
def test_semantics(samples: Any, overrides: dict[str, Any], expected: tuple[bool, str | None, bool]) -> None:
    output = slime_adapter.admission_filter(args_with(**overrides), samples)

    assert expected == verdict(output)


SETTINGS_SEMANTICS = [
    ("fallback off", {**STD, "keep_when_insufficient": False}, group(1.0, 1.0), (False, "exact_dead", False)),
    ("default policy admits ties", {}, group(1.0, 1.0), (True, None, False)),
    (
        "truncated rejected on request",
        {"reject_statuses": ["truncated"]},
        [sample(0, 1.0, status=Status.TRUNCATED), sample(1, 0.0)],
        (False, "external_truncated", False),
    ),
    (
        "aborted accepted on request",
        {"reject_statuses": []},
        [sample(0, 1.0, status=Status.ABORTED), sample(1, 0.0)],
        (True, None, False),
    ),
    (
        "near-duplicate completions",
        {"policy": {"max_mean_pairwise_similarity": 0.5}},
        group(1.0, 0.0, response="the same answer every time"),
        (False, "redundant", True),
    ),
    (
        "distinct completions",
        {"policy": {"max_mean_pairwise_similarity": 0.5}},
        [sample(0, 1.0, response="alpha beta gamma delta"), sample(1, 0.0, response="one two three four")],
        (True, None, False),
    ),
]


@pytest.mark.parametrize(
    ("settings", "samples", "expected"),
    [c[1:] for c in SETTINGS_SEMANTICS],
    ids=[c[0] for c in SETTINGS_SEMANTICS],
)
def test_settings_semantics(
    settings: dict[str, Any], samples: Any, expected: tuple[bool, str | None, bool]
) -> None:
    output = slime_adapter.admission_filter(args_with(settings), samples)

    assert expected == verdict(output)


REWARD = st.one_of(st.sampled_from([0.0, 1.0, 0.5]), floats)
MAYBE_REWARD = st.one_of(REWARD, st.none(), st.just(math.nan))


@given(config=configs(), rewards=st.lists(MAYBE_REWARD, min_size=1, max_size=8))
def test_decisions_equal_the_policy_on_the_same_rewards(config: Any, rewards: list[float | None]) -> None:
    args = args_with({"policy": config.to_dict(), "max_consecutive_failed_groups": None})
    samples = [sample(i, r, group_index=0) for i, r in enumerate(rewards)]

    output = slime_adapter.admission_filter(args, samples)
    decision = slime_adapter.judge_group(args, samples)
    expected = GroupAdmissionPolicy(config).evaluate(rewards, group_key=0)

    assert expected.to_dict() == decision.to_dict()
    assert (expected.admitted, slime_adapter.drop_reason(expected)) == (bool(output.keep), output.reason)


@given(config=configs(), rollouts=st.lists(st.tuples(REWARD, st.integers(1, 3)), min_size=1, max_size=6))
def test_fan_out_decisions_equal_the_policy_with_rollout_ids(
    config: Any, rollouts: list[tuple[float, int]]
) -> None:
    args = args_with({"policy": config.to_dict()})
    samples = [
        [sample(10 * slot + k, reward, group_index=0) for k in range(segments)]
        for slot, (reward, segments) in enumerate(rollouts)
    ]
    flat = [reward for reward, segments in rollouts for _ in range(segments)]
    ids = [slot for slot, (_, segments) in enumerate(rollouts) for _ in range(segments)]

    decision = slime_adapter.judge_group(args, samples)
    expected = GroupAdmissionPolicy(config).evaluate(flat, rollout_ids=ids, group_key=0)

    assert expected.to_dict() == decision.to_dict()
    assert len(rollouts) == decision.unique_rollouts


def test_the_policy_is_built_once_per_configuration() -> None:
    first = _hooks._runtime(args_with(dict(STD)))
    same = _hooks._runtime(args_with({"policy": {"min_reward_std": 1e-6}}))
    other = _hooks._runtime(args_with({"policy": {"min_reward_std": 0.1}}))

    assert first is same
    assert first.session.policy is same.session.policy
    assert first is not other


# -- a whole rollout through slime's loop ------------------------------------------------
def data_source_of(patterns: list[tuple[float, ...]], n: int = 2) -> Any:
    """A data source handing out groups with the given rewards, in order, then informative groups."""
    counter = iter(range(10_000))

    def get_samples(count: int) -> list[list[slime_types.Sample]]:
        groups = []
        for _ in range(count):
            g = next(counter)
            rewards = patterns[g] if g < len(patterns) else (1.0, 0.0)
            groups.append([sample(g * n + k, r, group_index=g) for k, r in enumerate(rewards)])
        return groups

    return get_samples


def loop_args(settings: dict[str, Any], *, target: int, over: int, **extra: Any) -> Any:
    return slime_types.make_args(
        group_admission=settings,
        rollout_batch_size=target,
        over_sampling_batch_size=over,
        dynamic_sampling_filter_path=FILTER_PATH,
        rollout_all_samples_process_path=PROCESS_PATH,
        custom_rollout_log_function_path=LOG_PATH,
        **extra,
    )


DEAD, GOOD = (1.0, 1.0), (1.0, 0.0)


class TestRolloutLoop:
    @pytest.mark.parametrize("installed", [True, False], ids=["live-state", "estimated"])
    def test_fallback_groups_and_effective_rate_are_reported(
        self, installed: bool, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        slime_types.install(monkeypatch)
        if not installed:
            monkeypatch.delitem(sys.modules, "slime.rollout.sglang_rollout")
        # target 4, wave 8: the first 4 dead groups are dropped (remaining 8 -> 4), then dead groups are kept.
        patterns = [DEAD, GOOD, DEAD, DEAD, DEAD, DEAD, GOOD, DEAD]
        args = loop_args(STD, target=4, over=8)

        with capture_logs() as logs:
            data, metrics = slime_types.generate_rollout(args, 0, data_source_of(patterns))
        logged = slime_types.log_rollout_data(0, args, data, metrics, 1.0)

        kept_dead = sum(1 for g in data if g[0].reward == g[1].reward)
        assert [1, 5, 6, 7] == [g[0].group_index for g in data]
        assert 2 == kept_dead
        assert {
            "rollout/dynamic_filter/drop_exact_dead": 4,
            "rollout/group_admission/candidate_group_count": 8,
            "rollout/group_admission/admitted_group_count": 2,
            "rollout/group_admission/exact_dead_group_count": 6,
            "rollout/group_admission/fallback_admitted_group_count": kept_dead,
            "rollout/group_admission/effective_group_rate": 2 / 8,
            "rollout/group_admission/fallback_estimated": 0 if installed else 1,
        }.items() <= logged.items()
        assert [("group_admission_rollout", 8)] == [(e["event"], e["candidate_group_count"]) for e in logs]
        assert 8 == args.processed_group_count

    def test_fallback_is_a_no_op_when_over_sampling_equals_the_batch(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        slime_types.install(monkeypatch)
        args = loop_args(STD, target=4, over=4)

        data, metrics = slime_types.generate_rollout(args, 0, data_source_of([DEAD, DEAD, GOOD, DEAD]))

        assert {} == metrics
        assert 4 == len(data)
        assert (
            3
            == slime_adapter.last_rollout_metrics(args)[
                "rollout/group_admission/fallback_admitted_group_count"
            ]
        )

    def test_external_groups_are_always_dropped_and_counted(self, monkeypatch: pytest.MonkeyPatch) -> None:
        slime_types.install(monkeypatch)
        args = loop_args(STD, target=2, over=2)
        aborted = [
            sample(0, None, status=Status.ABORTED, group_index=0),
            sample(1, None, status=Status.ABORTED, group_index=0),
        ]
        source = data_source_of([])

        def with_aborted(count: int) -> list[list[slime_types.Sample]]:
            nonlocal aborted
            groups = source(count)
            if aborted:
                groups[0], aborted = aborted, []
            return groups

        data, metrics = slime_types.generate_rollout(args, 0, with_aborted)
        stats = slime_adapter.admission_stats(args)

        assert {"rollout/dynamic_filter/drop_external_aborted": 1} == metrics
        assert (3, 2, 1, 0) == (stats.candidates, stats.admitted, stats.external, stats.fallback_admitted)
        assert {"aborted": 1, "missing_reward": 1} == stats.external_details
        assert all(g[0].reward is not None for g in data)

    def test_statistics_accumulate_across_rollouts_and_each_rollout_is_logged_once(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        slime_types.install(monkeypatch)
        args = loop_args(STD, target=2, over=4)

        for rollout_id in range(3):
            data, metrics = slime_types.generate_rollout(args, rollout_id, data_source_of([DEAD, GOOD]))
        first_log = slime_types.log_rollout_data(2, args, data, metrics, 1.0)
        second_log = slime_types.log_rollout_data(3, args, data, {}, 1.0)
        stats = slime_adapter.admission_stats(args)

        assert (9, 6, 3) == (stats.candidates, stats.admitted, stats.exact_dead)
        assert "rollout/group_admission/candidate_group_count" in first_log
        assert {} == second_log
        assert (
            6 / 9
            == slime_adapter.last_rollout_metrics(args)[
                "rollout/group_admission/cumulative_effective_group_rate"
            ]
        )

    def test_slime_v030_loop_drops_strictly(self, monkeypatch: pytest.MonkeyPatch) -> None:
        slime_types.install(monkeypatch, version="v0.3.0")
        args = loop_args(STD, target=2, over=2, slime_version="v0.3.0")

        with pytest.warns(RuntimeWarning, match="dropped strictly"):
            _, metrics = slime_types.generate_rollout(args, 0, data_source_of([DEAD, DEAD, GOOD]))

        assert {"rollout/dynamic_filter/drop_exact_dead": 2} == metrics
        assert 0 == slime_adapter.admission_stats(args).fallback_admitted

    def test_process_hook_judges_groups_the_filter_never_saw(self) -> None:
        args = slime_types.make_args(group_admission=STD, rollout_batch_size=2)

        slime_adapter.record_all_samples(args, [group(1.0, 1.0), group(1.0, 0.0)], object())
        stats = slime_adapter.admission_stats(args)

        assert (2, 1, 1, 0) == (stats.candidates, stats.admitted, stats.exact_dead, stats.fallback_admitted)


# -- failures ----------------------------------------------------------------------------
def aborted_group(index: int) -> list[slime_types.Sample]:
    return [sample(index, None, status=Status.ABORTED), sample(index + 1, None, status=Status.ABORTED)]


class TestConsecutiveFailures:
    def test_the_eighth_consecutive_external_group_stops_the_run_naming_the_reasons(self) -> None:
        args = args_with()
        for index in range(5):
            slime_adapter.admission_filter(args, aborted_group(index))
        for _ in range(2):
            slime_adapter.admission_filter(args, group(None, 1.0))

        with pytest.raises(group_admission.ConsecutiveFailedGroupsError) as raised:
            slime_adapter.admission_filter(args, group(math.inf, 1.0))

        assert (
            "8 consecutive groups were rejected as external (aborted x5, missing_reward x2, "
            "non_finite_reward x1): the slime rollout is not producing usable groups, so the run stops "
            "here. Fix the generation or reward path that fails, or raise 'max_consecutive_failed_groups' "
            "(now 8) in the group_admission settings."
        ) == str(raised.value)

    def test_a_usable_group_resets_the_streak(self) -> None:
        args = args_with({**STD, "max_consecutive_failed_groups": 2})
        slime_adapter.admission_filter(args, aborted_group(0))
        slime_adapter.admission_filter(args, group(1.0, 1.0))  # a gate rejection is not a failure

        output = slime_adapter.admission_filter(args, aborted_group(2))

        assert (False, "external_aborted", False) == verdict(output)

    def test_null_never_stops(self) -> None:
        args = args_with({**STD, "max_consecutive_failed_groups": None})

        outputs = [slime_adapter.admission_filter(args, aborted_group(i)) for i in range(20)]

        assert {"external_aborted"} == {o.reason for o in outputs}


# -- bad settings ------------------------------------------------------------------------
BAD_SETTINGS = [
    (
        "nope",
        TypeError,
        "'group_admission' (set on slime's args by --custom-config-path) must be a mapping (got 'nope')",
    ),
    (
        {"bogus": 1},
        ValueError,
        "unknown key(s) 'bogus' in 'group_admission' settings for SlimeAdmissionSettings "
        "(known: keep_when_insufficient, max_consecutive_failed_groups, policy, reject_statuses)",
    ),
    ({"policy": 3}, TypeError, "'policy' must be a mapping of GroupAdmissionConfig fields (got 3)"),
    ({"policy": {"min_reward_std": -0.1}}, ValueError, "'min_reward_std' must be >= 0 (got -0.1)"),
    ({"policy": {"min_std": 0.1}}, ValueError, "unknown key(s) 'min_std' in GroupAdmissionConfig mapping"),
    (
        {"policy": {"gate_on": ["acc"]}},
        ValueError,
        "'policy.gate_on' is not supported here: the framework gives one scalar reward per member "
        "(got ['acc'])",
    ),
    (
        {"keep_when_insufficient": "yes"},
        TypeError,
        "'keep_when_insufficient' must be a bool (got 'yes')",
    ),
    (
        {"max_consecutive_failed_groups": 0},
        ValueError,
        "'max_consecutive_failed_groups' must be >= 1 (got 0)",
    ),
    (
        {"max_consecutive_failed_groups": 2.5},
        TypeError,
        "'max_consecutive_failed_groups' must be an integer (got 2.5)",
    ),
    (
        {"reject_statuses": ["exploded"]},
        ValueError,
        "'reject_statuses' has unknown sample status name(s) ['exploded'] "
        "(known: pending, completed, truncated, aborted, failed)",
    ),
    ({"reject_statuses": 5}, TypeError, "'reject_statuses' must be a list of sample status names (got 5)"),
]


@pytest.mark.parametrize(
    ("settings", "error", "message"), BAD_SETTINGS, ids=[m[:40] for _, _, m in BAD_SETTINGS]
)
@pytest.mark.parametrize("entry", ["filter", "process", "log", "stats"])
def test_bad_settings_fail_at_every_entry_point(
    settings: Any, error: type[Exception], message: str, entry: str
) -> None:
    args = slime_types.make_args(group_admission=settings)
    calls = {
        "filter": lambda: slime_adapter.admission_filter(args, group(1.0, 0.0)),
        "process": lambda: slime_adapter.record_all_samples(args, [group(1.0, 0.0)], object()),
        "log": lambda: slime_adapter.log_rollout_metrics(0, args, [], {}, 1.0),
        "stats": lambda: slime_adapter.admission_stats(args),
    }

    with pytest.raises(error) as raised:
        calls[entry]()

    assert str(raised.value).startswith(message)


def test_the_recommended_block_builds_the_filters_session() -> None:
    block = {"preset": "recommended", "keep_when_insufficient": False}

    live = slime_adapter.admission_filter(args_with(block), group(1.0, 0.0))
    dead = slime_adapter.admission_filter(args_with(block), group(1.0, 1.0))

    assert verdict(live) == (True, None, False)
    assert verdict(dead) == (False, "exact_dead", False)
    runtime = _hooks._runtime(args_with(block))
    assert runtime.settings.policy == SessionConfig.preset("recommended").policy
    assert runtime.stats.candidates == 2
