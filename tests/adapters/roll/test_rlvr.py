"""The ROLL RLVR adapter: the rollout loop and the drop-in query_filter, as ROLL loads and calls them."""

from __future__ import annotations

import importlib.util
import inspect
import math
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from hypothesis import given
from hypothesis import strategies as st

import group_admission
from adapters.roll import roll_types
from group_admission import GroupAdmissionPolicy, SessionConfig
from group_admission.adapters import roll as roll_adapter
from group_admission.adapters.roll import _hooks, _loop
from group_admission.adapters.roll._hooks import read_responses
from strategies import configs, floats

LOOP_PATH = "group_admission.adapters.roll.AdmissionRolloutLoop"
STD = {"policy": {"min_reward_std": 1e-6}, "max_rejection_ratio": None}
GOOD, DEAD = [1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    roll_adapter.reset()
    yield
    roll_adapter.reset()


@pytest.fixture
def adapter(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """The adapter module as it loads where ROLL is importable (a fresh copy, beside the normal one)."""
    roll_types.install(monkeypatch)
    spec = importlib.util.spec_from_file_location(
        "group_admission.adapters.roll._loop_with_roll", _loop.__file__
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules["group_admission.adapters.roll"].__dict__, "_loop_with_roll", module)
    return module


def pipeline(settings: Any = None, *, filter_type: str = "no_filter", n: int = 4, **filter_args: Any) -> Any:
    args = dict(filter_args)
    if settings is not None:
        args["group_admission"] = settings
    reward = roll_types.RewardConfig(query_filter_config=roll_types.RewardFilterConfig(filter_type, args))  # type: ignore[arg-type]
    return roll_types.RLVRConfig(rewards={"math_rule": reward}, num_return_sequences_in_group=n)


def judge(data_list: Any, config: Any = None) -> Any:
    """The decision of the domain's session on ``data_list``, counted nowhere."""
    runtime = _hooks.rlvr_runtime(config or pipeline(STD), "math_rule")
    return read_responses(data_list, texts=runtime.texts).evaluate(runtime.session.policy)


def run(adapter: types.ModuleType, config: Any, rewards: list[float], **context: Any) -> list[Any] | None:
    ctx = roll_types.RolloutContext(
        0, config, lambda _: roll_types.rlvr_responses(rewards), num_return_sequences=len(rewards), **context
    )
    return roll_types.run_prompt(adapter.AdmissionRolloutLoop(), ctx)


# -- contract ------------------------------------------------------------------------------
class TestContract:
    def test_loop_subclasses_rolls_loop_when_roll_is_importable(self, adapter: types.ModuleType) -> None:
        assert adapter.ROLL_IMPORTABLE is True
        assert issubclass(adapter.AdmissionRolloutLoop, roll_types.UserDefinedRolloutLoop)

    def test_roll_builds_the_loop_from_its_path_with_no_arguments(self, adapter: types.ModuleType) -> None:
        loop = roll_types.safe_import_class(
            "group_admission.adapters.roll._loop_with_roll.AdmissionRolloutLoop"
        )()

        assert inspect.iscoroutinefunction(loop.process_new_prompt)
        assert ("self", "context") == tuple(inspect.signature(type(loop).process_new_prompt).parameters)

    def test_without_roll_the_loop_has_the_interface_and_says_what_is_missing(self) -> None:
        import asyncio

        loop = roll_types.safe_import_class(LOOP_PATH)()

        assert roll_adapter.ROLL_IMPORTABLE is False
        with pytest.raises(ImportError, match=r"ROLL, which is not importable here: install ROLL"):
            asyncio.run(loop.process_new_prompt(object()))

    def test_query_filter_has_rolls_signature(self) -> None:
        ours = inspect.signature(roll_adapter.query_filter).parameters
        theirs = inspect.signature(roll_types.query_filter).parameters

        assert tuple(theirs) == tuple(ours)

    def test_query_filter_is_a_drop_in_for_rolls_module_function(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(roll_types, "query_filter", roll_adapter.query_filter)
        ctx = roll_types.RolloutContext(
            0, pipeline(STD), lambda _: roll_types.rlvr_responses(DEAD), num_return_sequences=4
        )

        committed = roll_types.run_prompt(roll_types.UserDefinedRolloutLoop(), ctx)

        assert committed is None
        assert 1 == roll_adapter.admission_stats().exact_dead


# -- semantics -----------------------------------------------------------------------------
SEMANTICS = [
    ("informative", GOOD, {}, True),
    ("all correct", DEAD, {}, False),
    ("all wrong", [0.0] * 4, {}, False),
    ("one response", [1.0], {}, False),
    ("non-finite reward", [math.nan, 1.0, 0.0, 1.0], {}, False),
    ("validation is never filtered", DEAD, {"is_val": True}, True),
]


@pytest.mark.parametrize(
    ("rewards", "context", "kept"), [c[1:] for c in SEMANTICS], ids=[c[0] for c in SEMANTICS]
)
def test_semantics(
    adapter: types.ModuleType, rewards: list[float], context: dict[str, Any], kept: bool
) -> None:
    committed = run(adapter, pipeline(STD), rewards, **context)

    assert kept == (committed is not None)
    if committed is not None:
        assert len(rewards) == len(committed)


def test_validation_is_not_counted(adapter: types.ModuleType) -> None:
    run(adapter, pipeline(STD), DEAD, is_val=True)

    assert 0 == roll_adapter.admission_stats().candidates


def test_rolls_own_filter_runs_first_and_its_drops_are_not_counted(adapter: types.ModuleType) -> None:
    config = pipeline(STD, filter_type="std_filter", std_threshold=0.0)

    committed = run(adapter, config, DEAD)

    assert committed is None
    assert 0 == roll_adapter.admission_stats().candidates


def test_external_details_are_counted(adapter: types.ModuleType) -> None:
    run(adapter, pipeline(STD), [math.nan, 1.0, 0.0, 1.0])

    assert {"non_finite_reward": 1} == roll_adapter.admission_stats("math_rule").external_details


class TestMultiRow:
    def test_a_one_element_list_with_many_rows_is_judged_row_by_row(self) -> None:
        data_list = [roll_types.rlvr_responses(DEAD)]

        ours = roll_adapter.query_filter(data_list, pipeline(STD))
        rolls = roll_types.query_filter(
            data_list, pipeline(None, filter_type="std_filter", std_threshold=0.0)
        )

        assert (False, True) == (ours, rolls)
        assert 4 == judge(data_list).group_size

    def test_rows_split_or_not_give_the_same_decision(self) -> None:
        whole = roll_types.rlvr_responses([1.0, 0.0, 0.0, 1.0])

        split = judge([whole[[i]] for i in range(4)])
        nested = judge([[whole[[0]], whole[[1]]], whole[2:4]])

        assert split.to_dict() == judge([whole]).to_dict() == nested.to_dict()


# -- budget --------------------------------------------------------------------------------
def decide(config: Any, rewards: list[float], step: int = 0) -> bool:
    responses = roll_types.rlvr_responses(rewards)
    responses.meta_info["global_step"] = step
    return roll_adapter.query_filter([responses[[i]] for i in range(len(rewards))], config)


class TestBudget:
    def test_ratio_guard_admits_by_fallback_once_the_step_would_exceed_it(self) -> None:
        config = pipeline({"policy": {"min_reward_std": 1e-6}})  # default max_rejection_ratio 0.5

        kept = [decide(config, DEAD) for _ in range(4)]
        stats = roll_adapter.admission_stats()

        assert [True, False, True, False] == kept
        assert (4, 4, 2) == (stats.candidates, stats.exact_dead, stats.fallback_admitted)

    def test_each_training_step_has_its_own_budget(self) -> None:
        config = pipeline({"policy": {"min_reward_std": 1e-6}, "max_rejection_ratio": 0.5})

        kept = [decide(config, DEAD, step=0), decide(config, DEAD, step=0), decide(config, DEAD, step=1)]

        assert [True, False, True] == kept

    def test_per_step_cap_on_dropped_groups(self) -> None:
        config = pipeline({**STD, "max_rejected_groups_per_step": 2})

        kept = [decide(config, DEAD) for _ in range(4)] + [decide(config, DEAD, step=1)]

        assert [False, False, True, True, False] == kept

    def test_without_a_budget_every_rejection_is_honoured(self) -> None:
        config = pipeline(STD)

        assert not any(decide(config, DEAD) for _ in range(5))

    def test_external_groups_are_dropped_even_past_the_budget(self) -> None:
        config = pipeline({"policy": {"min_reward_std": 1e-6}, "max_rejection_ratio": 0.0})

        kept = [decide(config, DEAD), decide(config, [math.inf, 0.0, 1.0, 0.0]), decide(config, DEAD)]

        assert [True, False, True] == kept
        assert 2 == roll_adapter.admission_stats().fallback_admitted


# -- metrics -------------------------------------------------------------------------------
def test_counts_reach_rolls_batch_metrics_once_per_judged_group(adapter: types.ModuleType) -> None:
    config = pipeline(STD)
    committed: list[Any] = []
    for rewards in (DEAD, GOOD, [math.nan] * 4, [math.nan] * 4, GOOD):
        committed += run(adapter, config, rewards) or []

    metrics = roll_types.collect_metrics("math_rule", committed)

    assert 8 == len(committed)
    assert {
        "group_admission/candidate_group_count@sum": 5.0,
        "group_admission/admitted_group_count@sum": 2.0,
        "group_admission/exact_dead_group_count@sum": 1.0,
        "group_admission/externally_rejected_group_count@sum": 2.0,
        "group_admission/fallback_admitted_group_count@sum": 0.0,
        "group_admission/cumulative_effective_group_rate": 0.45,  # the mean of 1/2 and 2/5
        "reward/mean": 0.5,
    }.items() <= metrics.items()


def test_every_judged_groups_response_tokens_reach_the_batch_metrics(adapter: types.ModuleType) -> None:
    config = pipeline(STD)
    committed: list[Any] = []
    groups = (DEAD, GOOD, [math.nan] * 4, GOOD)
    for rewards in groups:
        committed += run(adapter, config, rewards) or []
    # Each response of rlvr_responses has 3 tokens; the dead and the NaN group count too.
    decoded = sum(int(roll_types.rlvr_responses(rewards).batch["response_mask"].sum()) for rewards in groups)

    metrics = roll_types.collect_metrics("math_rule", committed)

    assert (decoded, 0.0) == (
        metrics["group_admission/decoded_tokens@sum"],
        metrics["group_admission/aborted_tokens@sum"],
    )
    assert 4 * 4 * 3 == decoded  # four groups of four 3-token responses


def test_counts_since_the_last_kept_group_ride_on_one_response(adapter: types.ModuleType) -> None:
    config = pipeline({"policy": {"min_reward_std": 1e-6}})  # a budget: the 1st dead group is kept
    first = run(adapter, config, DEAD)
    assert run(adapter, config, DEAD) is None
    second = run(adapter, config, GOOD)
    assert first is not None
    assert second is not None

    carried = [
        r.meta_info["metrics"].get("group_admission/candidate_group_count@sum") for r in first + second
    ]

    assert [1, None, None, None, 2, None, None, None] == carried
    assert 1 == first[0].meta_info["metrics"]["group_admission/fallback_admitted_group_count@sum"]


# -- failures ------------------------------------------------------------------------------
def test_consecutive_external_groups_stop_the_run(adapter: types.ModuleType) -> None:
    config = pipeline({**STD, "max_consecutive_failed_groups": 3})
    for _ in range(2):
        assert run(adapter, config, [math.nan] * 4) is None

    with pytest.raises(
        group_admission.ConsecutiveFailedGroupsError, match=r"^3 consecutive groups .*non_finite_reward x3"
    ):
        run(adapter, config, [math.nan] * 4)


# -- equivalence with the policy -----------------------------------------------------------
@given(
    config=configs(),
    rewards=st.lists(st.one_of(floats, st.sampled_from([0.0, 1.0, math.nan])), min_size=1, max_size=8),
)
def test_decisions_equal_the_policy_on_the_same_rewards(config: Any, rewards: list[float]) -> None:
    roll_adapter.reset()
    settings = {
        "policy": config.to_dict(),
        "max_rejection_ratio": None,
        "max_consecutive_failed_groups": None,
    }
    responses = roll_types.rlvr_responses(rewards)
    held = responses.batch["response_level_rewards"].tolist()  # ROLL's float16 rewards

    kept = roll_adapter.query_filter([responses], pipeline(settings))
    decision = judge([responses], pipeline(settings))
    expected = GroupAdmissionPolicy(config).evaluate(held)

    assert expected.to_dict() == decision.to_dict()
    assert expected.admitted == kept


def test_token_ids_feed_the_redundancy_gate() -> None:
    settings = {"policy": {"max_mean_pairwise_similarity": 0.5}, "max_rejection_ratio": None}
    same = roll_types.rlvr_responses([1.0, 0.0], tokens=[[7, 8, 9, 10]] * 2)
    different = roll_types.rlvr_responses([1.0, 0.0], tokens=[[7, 8, 9, 10], [11, 12, 13, 14]])

    assert (False, True) == (
        roll_adapter.query_filter([same], pipeline(settings)),
        roll_adapter.query_filter([different], pipeline(settings)),
    )
    assert 1 == roll_adapter.admission_stats().redundant


# -- bad input -----------------------------------------------------------------------------
BAD = [
    (
        "x",
        TypeError,
        "'rewards.math_rule.query_filter_config.filter_args.group_admission' must be a mapping (got 'x')",
    ),
    (
        {"bogus": 1},
        ValueError,
        "unknown key(s) 'bogus' in 'rewards.math_rule.query_filter_config.filter_args."
        "group_admission' for RollRLVRSettings (known: max_consecutive_failed_groups, "
        "max_rejected_groups_per_step, max_rejection_ratio, policy)",
    ),
    (
        {"max_rejection_ratio": 1.5},
        ValueError,
        "'max_rejection_ratio' must be in [0, 1] (got 1.5)",
    ),
    (
        {"max_rejection_ratio": "0.5"},
        TypeError,
        "'max_rejection_ratio' must be a real number (got '0.5')",
    ),
    (
        {"max_rejected_groups_per_step": -1},
        ValueError,
        "'max_rejected_groups_per_step' must be >= 0 (got -1)",
    ),
    (
        {"policy": {"min_reward_std": "1e-6"}},
        TypeError,
        "'min_reward_std' must be a real number (got '1e-6')",
    ),
    ({"policy": {"gate_on": ["acc"]}}, ValueError, "'policy.gate_on' is not supported here"),
]


@pytest.mark.parametrize(("settings", "error", "message"), BAD, ids=[m[:40] for _, _, m in BAD])
def test_bad_settings(settings: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as raised:
        roll_adapter.query_filter([roll_types.rlvr_responses(GOOD)], pipeline(settings))

    assert str(raised.value).startswith(message)


def test_filter_args_must_be_a_mapping() -> None:
    config = pipeline(None)
    config.rewards["math_rule"].query_filter_config.filter_args = ["x"]  # type: ignore[assignment]

    with pytest.raises(TypeError) as raised:
        roll_adapter.query_filter([roll_types.rlvr_responses(GOOD)], config)

    assert (
        "'rewards.math_rule.query_filter_config.filter_args' must be a mapping (got ['x'] of type list)"
        == str(raised.value)
    )


def test_a_domain_without_reward_config_is_named() -> None:
    with pytest.raises(
        ValueError,
        match=r"^'rewards.code' is missing from the pipeline config \(reward domains: \['math_rule'\]\)$",
    ):
        roll_adapter.query_filter([roll_types.rlvr_responses(GOOD, domain="code")], pipeline(STD))


def test_responses_without_a_domain_are_refused() -> None:
    with pytest.raises(
        ValueError,
        match=r"^'data_list' must hold DataProtos with a non_tensor_batch 'domain' "
        r"\(got \[\] of type list\)$",
    ):
        roll_adapter.query_filter([], pipeline(STD))


BAD_DATA = [
    ("missing rewards", lambda d: d._batch.pop("response_level_rewards"), "missing_response_level_rewards"),
    (
        "rewards of the wrong length",
        lambda d: d._batch.set("response_level_rewards", torch.zeros(4, 2)),
        "malformed_response_level_rewards",
    ),
]


@pytest.mark.parametrize(("damage", "detail"), [c[1:] for c in BAD_DATA], ids=[c[0] for c in BAD_DATA])
def test_unusable_responses_are_external_never_a_crash(damage: Any, detail: str) -> None:
    responses = roll_types.rlvr_responses(GOOD)
    damage(responses)

    kept = roll_adapter.query_filter([responses], pipeline(STD))

    assert kept is False
    assert detail in roll_adapter.admission_stats().external_details


def test_a_member_that_is_not_a_dataproto_is_external() -> None:
    responses = roll_types.rlvr_responses(GOOD)

    kept = roll_adapter.query_filter([responses, None], pipeline(STD))

    assert kept is False
    assert {"malformed_response": 1, "missing_reward": 1} == roll_adapter.admission_stats().external_details


def test_cookbook_rlvr_config_selects_the_loop_with_valid_settings(adapter: types.ModuleType) -> None:
    root = Path(__file__).resolve().parents[3]
    snippet = yaml.safe_load((root / "cookbook/configs/roll/rlvr_group_admission.yaml").read_text())
    filter_config = snippet["rewards"]["math_rule"]["query_filter_config"]
    config = pipeline(filter_config["filter_args"]["group_admission"], filter_type=filter_config["type"])

    loop = roll_types.safe_import_class(snippet["user_defined_rollout_loop_cls"])
    settings = _hooks.rlvr_runtime(config, "math_rule").settings

    assert roll_adapter.AdmissionRolloutLoop is loop
    assert "no_filter" == filter_config["type"]
    assert (1e-6, 0.5, None) == (
        settings.policy.min_reward_std,
        settings.max_rejection_ratio,
        settings.max_rejected_groups_per_step,
    )


def test_the_recommended_block_builds_the_domains_session() -> None:
    block = {"preset": "recommended", "max_rejection_ratio": None}
    config = pipeline(block)

    assert decide(config, [1.0, 0.0, 1.0, 0.0])
    assert not decide(config, [1.0, 1.0, 1.0, 1.0])
    runtime = _hooks.rlvr_runtime(config, "math_rule")
    assert runtime.session.policy.config == SessionConfig.preset("recommended").policy
    assert runtime.stats.candidates == 2
