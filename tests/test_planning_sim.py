"""The planning strategies in the simulator: streaming launches, and skipping on a drifting prompt pool."""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest

from group_admission import AdmissionSession, GroupAdmissionConfig, PromptHistory, PromptHistoryConfig
from group_admission.simulation import (
    DIFFICULTY_BINS,
    BinaryTaskModel,
    ControllerResampling,
    HistorySkipping,
    OracleSkipping,
    PoolContext,
    PoolController,
    PromptPool,
    PromptPoolConfig,
    ResponseLengthModel,
    SimulationConfig,
    SlimeWaves,
    StreamingLaunches,
    partial_tokens,
    simulate,
    simulate_pool,
    strategy_from_mapping,
)
from group_admission.simulation._stream import GroupStream

POLICY = GroupAdmissionConfig(min_reward_std=1e-6)
STREAM_CONFIG = SimulationConfig(
    tasks=BinaryTaskModel(alpha=1.0, beta=1.0),
    lengths=ResponseLengthModel(mean_tokens=256, cv=0.6),
    group_size=8,
    target_groups=16,
    steps=30,
    seed=4,
)
POOL = PromptPoolConfig(size=96, target_groups=8, steps=40, logit_std=4.0, seed=2)


@pytest.fixture(scope="module")
def streamed() -> Any:
    strategies = [
        SlimeWaves(over_sampling_batch_size=32),
        ControllerResampling(mode="confidence", carry_rate=True),
        StreamingLaunches(confidence=0.999),
        StreamingLaunches(confidence=0.9),
    ]
    return simulate(STREAM_CONFIG, policy=POLICY, strategies=strategies)


@pytest.fixture(scope="module")
def pooled() -> Any:
    return simulate_pool(POOL, policy=POLICY)


class TestStreamingLaunches:
    def test_meets_every_target_faster_than_rounds(self, streamed: Any) -> None:
        fast, rounds = streamed.result("streaming(0.999)"), streamed.result("controller(confidence,carry)")

        assert 1.0 == fast.final_informative_rate
        assert fast.time_per_step < rounds.time_per_step

    def test_higher_confidence_is_faster_and_costs_more(self, streamed: Any) -> None:
        high, low = streamed.result("streaming(0.999)"), streamed.result("streaming(0.9)")

        assert high.time_per_step < low.time_per_step
        assert high.generated_groups > low.generated_groups
        assert high.aborted_groups > 0

    def test_counts_aborted_tokens_as_slime_does(self, streamed: Any) -> None:
        # In a step with one launch (one wave) every group started at 0, so the tokens are
        # each member's length cut at the step's end, for the aborted groups as for the finished.
        checked = 0
        for name, width in (("streaming(0.999)", None), ("slime(strict,32)", 32)):
            for step, outcome in enumerate(streamed.result(name).outcomes):
                if outcome.rounds != 1:
                    continue
                launched = GroupStream(STREAM_CONFIG, step).groups(0, width or outcome.generated_groups)
                assert partial_tokens(launched.tokens, outcome.generation_time) == outcome.generated_tokens
                checked += 1
        assert checked > 10

    def test_is_deterministic_and_builds_from_its_kind(self) -> None:
        small = attrs.evolve(STREAM_CONFIG, steps=5)
        spec = {"kind": "streaming", "confidence": 0.95}
        first = simulate(small, policy=POLICY, strategies=[spec])
        second = simulate(small, policy=POLICY, strategies=[strategy_from_mapping(spec)])

        assert first.results == second.results
        assert StreamingLaunches(confidence=0.95) == strategy_from_mapping(spec)

    def test_rejects_a_confidence_outside_the_unit_interval(self) -> None:
        with pytest.raises(ValueError, match="'confidence' must be in"):
            StreamingLaunches(confidence=1.0)


class TestPromptPool:
    def test_learnable_prompts_improve_and_others_stay(self) -> None:
        pool = PromptPool(PromptPoolConfig(size=200, learnable_share=0.5))
        early, late = pool.rates(0), pool.rates(500)

        assert np.all(late >= early)
        assert 0 < np.sum(late > early) < 200

    def test_each_epoch_visits_every_prompt_in_a_new_order(self) -> None:
        pool = PromptPool(POOL)

        assert sorted(pool.order(0).tolist()) == list(range(POOL.size))
        assert pool.order(0).tolist() != pool.order(1).tolist()

    def test_a_prompt_gets_the_same_group_at_a_step_whoever_generates_it(self) -> None:
        pool = PromptPool(POOL)
        first, _ = pool.groups(3, np.array([5, 9]), np.zeros(2, dtype=np.int64))
        again, _ = pool.groups(3, np.array([9]), np.zeros(1, dtype=np.int64))
        second_visit, _ = pool.groups(3, np.array([9]), np.ones(1, dtype=np.int64))

        assert np.array_equal(first[1], again[0])
        assert first.shape == (2, POOL.group_size)
        assert second_visit.shape == (1, POOL.group_size)

    @pytest.mark.parametrize(
        ("fields", "error", "message"),
        [
            ({"size": 0}, ValueError, "'size' must be >= 1"),
            ({"learnable_share": 1.5}, ValueError, "'learnable_share' must be in"),
            ({"logit_std": "wide"}, TypeError, "'logit_std' must be a real number"),
            ({"lengths": 3}, TypeError, "'lengths' must be a ResponseLengthModel"),
            ({"epochs": 3}, ValueError, "unknown key"),
            # No upper bound: a huge target hung, a huge pool or group crashed in numpy.
            ({"target_groups": 10**30}, ValueError, r"'target_groups' x 'group_size' must be <= 1000000"),
            ({"group_size": 10**30}, ValueError, r"'target_groups' x 'group_size' must be <= 1000000"),
            ({"size": 10**30}, ValueError, r"'size' x 'group_size' must be <= 10000000 samples"),
            ({"size": 2_000_000, "group_size": 8}, ValueError, r"'size' x 'group_size' must be <= 10000000"),
            ({"steps": 10**30}, ValueError, "'steps' must be <= 100000 steps"),
            ({"safety_max_rounds": 10**30}, ValueError, "'safety_max_rounds' must be <= 10000 rounds"),
        ],
    )
    def test_bad_fields_name_the_field(
        self, fields: dict[str, Any], error: type[Exception], message: str
    ) -> None:
        with pytest.raises(error, match=message):
            PromptPoolConfig.from_mapping(fields)


#: Bad pool strategy specs for simulate_pool: (strategies, error, message).
BAD_POOL_STRATEGIES = [
    # Unknown keys raised attrs' own TypeError ("got an unexpected keyword argument").
    (
        [{"kind": "controller", "bogus": 1}],
        ValueError,
        "unknown key(s) 'bogus' in pool strategy 'controller'",
    ),
    (
        [{"kind": "oracle_skip", "bogus": 1}],
        ValueError,
        "unknown key(s) 'bogus' in pool strategy 'oracle_skip'",
    ),
    ([{"kind": "history", "history": {"bogus": 1}}], ValueError, "unknown key(s) 'bogus' in 'history'"),
    (
        [{"kind": "history", "history": {"group_size": 4}}],
        ValueError,
        "'history' must not set 'group_size': the pool's group size is used (got 4)",
    ),
    (
        [{"kind": "history", "history": {"skip_below": 2}}],
        ValueError,
        "'skip_below' must be in [0, 1] (got 2.0)",
    ),
]


@pytest.mark.parametrize(("strategies", "error", "message"), BAD_POOL_STRATEGIES)
def test_bad_pool_strategies_name_the_field(
    strategies: list[Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        simulate_pool(attrs.evolve(POOL, steps=1), strategies=strategies)


class TestSimulatePool:
    def test_every_strategy_meets_its_targets(self, pooled: Any) -> None:
        assert ["controller", "greso", "history", "oracle_skip"] == [r.name for r in pooled.results]
        for result in pooled.results:
            assert 1.0 == result.final_informative_rate, result.name

    def test_skipping_generates_fewer_groups_per_trained_group(self, pooled: Any) -> None:
        controller = pooled.result("controller")

        assert 0 == controller.skipped_prompts
        for name in ("greso", "history", "oracle_skip"):
            result = pooled.result(name)
            assert result.skipped_prompts > 0
            assert result.groups_per_informative < controller.groups_per_informative, name

    def test_difficulty_bins_add_up(self, pooled: Any) -> None:
        for result in pooled.results:
            bins = result.by_difficulty
            assert [label for label, _ in DIFFICULTY_BINS] == list(bins)
            assert result.generated_groups == sum(b["generated"] for b in bins.values())
            assert result.skipped_prompts == sum(b["skipped"] for b in bins.values())
            assert result.wrongly_skipped == sum(b["wrongly_skipped"] for b in bins.values())
            assert result.trained_groups == sum(b["trained"] for b in bins.values())
            assert all(b["wrongly_skipped"] <= b["skipped"] for b in bins.values())

    def test_a_history_strategy_reports_its_histories_skip_report(self, pooled: Any) -> None:
        for name in ("controller", "oracle_skip"):
            assert pooled.result(name).skip_report is None
            assert pooled.result(name).to_dict()["skip_report"] is None
        for name in ("greso", "history"):
            report = pooled.result(name).skip_report
            assert 0 <= report.rechecks_informative <= report.rechecks
            assert 0 < report.skip_below <= PromptHistoryConfig(group_size=8).skip_below
            assert pooled.result(name).to_dict()["skip_report"] == attrs.asdict(report)

    def test_re_checks_come_from_the_exploration_floor(self) -> None:
        short = attrs.evolve(POOL, steps=12)
        strategies = [
            HistorySkipping(name="never", history={"exploration": 0.0}),
            HistorySkipping(name="often", history={"exploration": 0.5}),
        ]
        result = simulate_pool(short, policy=POLICY, strategies=strategies)

        assert 0 == result.result("never").skip_report.rechecks
        assert result.result("often").skip_report.rechecks > 0

    def test_is_deterministic_and_json_safe(self, pooled: Any) -> None:
        again = simulate_pool(POOL, policy=POLICY)

        assert pooled.results == again.results
        assert pooled.to_dict() == json.loads(json.dumps(pooled.to_dict()))
        assert "greso" in pooled.format_table()

    def test_a_skipped_prompt_is_judged_on_the_group_it_would_have_got(self) -> None:
        @attrs.frozen
        class SkipThenGenerate:
            kind: ClassVar[str] = "probe"
            name: str = "probe"

            def check(self, config: PromptPoolConfig) -> None:
                pass

            def run_step(self, context: PoolContext) -> None:
                prompts = context.next_prompts(12)
                session = AdmissionSession(context.policy)
                context.skip(prompts)
                context.generate(prompts, session)

            def to_dict(self) -> dict[str, Any]:
                return {"kind": self.kind}

        result = simulate_pool(attrs.evolve(POOL, steps=10), policy=POLICY, strategies=[SkipThenGenerate()])
        probe = result.result("probe")
        assert probe.wrongly_skipped == probe.admitted_groups > 0

    def test_a_restored_history_and_session_replay_exactly(self) -> None:
        @attrs.frozen
        class Restoring:
            kind: ClassVar[str] = "history"
            name: str = "history"
            at: int = 17
            inner: HistorySkipping = attrs.field(factory=lambda: HistorySkipping(history={"half_life": 20}))

            def check(self, config: PromptPoolConfig) -> None:
                pass

            def run_step(self, context: PoolContext) -> None:
                if context.step == self.at:
                    memory = context.memory
                    saved = json.loads(
                        json.dumps([memory["history"].to_dict(), memory["session"].state_dict()])
                    )
                    memory["history"] = PromptHistory.from_dict(saved[0])
                    session = AdmissionSession(context.policy, budget=memory["session"].controller.config)
                    session.load_state_dict(saved[1])
                    memory["session"] = session
                self.inner.run_step(context)

            def to_dict(self) -> dict[str, Any]:
                return self.inner.to_dict()

        config = attrs.evolve(POOL, steps=30)
        straight = simulate_pool(
            config, policy=POLICY, strategies=[HistorySkipping(history={"half_life": 20})]
        )
        restored = simulate_pool(config, policy=POLICY, strategies=[Restoring()])
        assert straight.results[0].per_step == restored.results[0].per_step
        assert straight.results[0] == restored.results[0]

    @pytest.mark.parametrize(
        ("spec", "error", "message"),
        [
            # The default name read the history before it was checked (AttributeError).
            (
                {"kind": "history", "history": 5},
                TypeError,
                "'history' must be a mapping of PromptHistoryConfig",
            ),
            ({"kind": "history", "history": ["greso"]}, TypeError, "(got ['greso'] of type list)"),
            # skip_below is an informative probability; 2 skipped every prompt, for ever.
            (
                {"kind": "oracle_skip", "skip_below": 2},
                ValueError,
                "'skip_below' must be in [0, 1] (got 2.0)",
            ),
            (
                {"kind": "oracle_skip", "skip_below": -0.5},
                ValueError,
                "'skip_below' must be in [0, 1] (got -0.5)",
            ),
            ({"kind": "oracle_skip", "skip_below": "0.1"}, TypeError, "'skip_below' must be a real number"),
            # A budget no step could draw: it hung generating the rounds it allows.
            (
                {"kind": "controller", "budget": {"max_extra_groups": 10**30}},
                ValueError,
                "the budget of strategy",
            ),
            (
                {"kind": "history", "budget": {"max_extra_groups": 10**8}},
                ValueError,
                "generate 800000064 samples",
            ),
            (
                {"kind": "oracle_skip", "budget": {"max_extra_groups": 10**30}},
                ValueError,
                "set 'max_total_samples'",
            ),
        ],
    )
    def test_bad_strategy_fields_name_the_field(
        self, spec: dict[str, Any], error: type[Exception], message: str
    ) -> None:
        with pytest.raises(error) as info:
            simulate_pool(attrs.evolve(POOL, steps=1), strategies=[spec])
        assert message in str(info.value)

    @pytest.mark.parametrize(
        ("policy", "message"),
        [
            # Both crashed in the first step, after the run had started.
            (
                {"max_mean_pairwise_similarity": 0.5},
                "'max_mean_pairwise_similarity' must be None for a simulation",
            ),
            (
                {"gate_on": ["outcome"]},
                "'gate_on' must be None for simulate_pool: the pool's rewards have no",
            ),
        ],
    )
    def test_a_policy_the_pool_cannot_judge_is_refused_before_running(
        self, policy: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(ValueError) as info:
            simulate_pool(attrs.evolve(POOL, steps=1), policy=policy)
        assert message in str(info.value)

    def test_an_all_dead_pool_ends_every_strategy(self) -> None:
        """The oracle looked for a prompt above skip_below for ever; one pass a round now."""
        dead = attrs.evolve(POOL, steps=2, logit_mean=-30.0, logit_std=0.0)
        result = simulate_pool(dead, policy=POLICY)

        oracle = result.result("oracle_skip")
        assert (0, 0) == (oracle.generated_groups, oracle.trained_groups)
        assert 2 * dead.size == oracle.skipped_prompts
        assert all(r.final_informative_rate == 0.0 for r in result.results)

    def test_a_budget_allowing_endless_rounds_stops_at_the_safety_limit(self) -> None:
        """Every pool strategy runs at most safety_max_rounds rounds a step, and counts the hit."""
        dead = attrs.evolve(POOL, steps=2, logit_mean=-30.0, logit_std=0.0, safety_max_rounds=4)
        budget = {"max_extra_groups": 10**4, "max_extra_groups_per_round": 8, "max_resample_rounds": 10**6}
        kinds = ("controller", "history", "oracle_skip")
        strategies = [{"kind": kind, "budget": budget, "skip_below": 0.0} for kind in kinds[2:]]
        result = simulate_pool(
            dead,
            policy=POLICY,
            strategies=[{"kind": kind, "budget": budget} for kind in kinds[:2]] + strategies,
        )

        for strategy in result.results:
            assert strategy.rounds_per_step == 4, strategy.name
            assert strategy.safety_limit_hits == 2, strategy.name

    def test_logits_beyond_the_exponent_range_give_rates_of_0_and_1(self) -> None:
        """exp overflowed with a RuntimeWarning (an error under -W error); the rates were right."""
        rates = PromptPool(attrs.evolve(POOL, logit_std=1e308)).rates(0)

        assert set(np.unique(rates).tolist()) <= {0.0, 1.0}

    def test_the_pool_keeps_a_few_epoch_orders_and_recomputes_the_rest(self) -> None:
        pool = PromptPool(POOL)
        first = pool.order(0).copy()
        for epoch in range(1, 100):
            pool.order(epoch)

        assert len(pool._orders) <= 16
        assert np.array_equal(first, pool.order(0))

    def test_strategies_build_from_kinds_and_reject_bad_specs(self) -> None:
        config = attrs.evolve(POOL, steps=2)
        built = simulate_pool(config, strategies=["controller", {"kind": "oracle_skip", "skip_below": 0.2}])

        assert ["controller", "oracle_skip"] == [r.name for r in built.results]
        with pytest.raises(ValueError, match="must be one of"):
            simulate_pool(config, strategies=["bandit"])
        with pytest.raises(ValueError, match="unique name"):
            simulate_pool(config, strategies=["controller", PoolController()])
        with pytest.raises(TypeError, match="list of pool strategies"):
            simulate_pool(config, strategies="controller")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="must not set 'group_size'"):
            HistorySkipping(history={"group_size": 4})
        with pytest.raises(ValueError, match="'skip_below' must be in"):
            HistorySkipping(history={"skip_below": 2})
        assert "greso" == HistorySkipping(history={"mode": "greso"}).name
        assert 0.3 == OracleSkipping(skip_below=0.3).skip_below
