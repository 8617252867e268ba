"""``simulate``: determinism, conservation, the metric definitions, results and errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from group_admission import GroupAdmissionConfig, GroupAdmissionPolicy, SamplingBudgetConfig
from group_admission.simulation import (
    STRATEGY_KINDS,
    BinaryTaskModel,
    CompositeTaskModel,
    ControllerResampling,
    NoFiltering,
    Oracle,
    SimulationConfig,
    SimulationResult,
    StepOutcome,
    Strategy,
    default_strategies,
    plot_result,
    simulate,
    strategy_from_mapping,
    summarize,
)

MIXED = SimulationConfig(
    tasks=CompositeTaskModel(alpha=0.6, beta=0.9, shaping_spread=0.01, shaping_task_share=0.5),
    group_size=4,
    target_groups=8,
    steps=8,
    seed=3,
    failure_rate=0.1,
)
POLICY = GroupAdmissionConfig(min_reward_std=1e-6, min_reward_range=0.02)


@pytest.fixture(scope="module")
def mixed() -> SimulationResult:
    return simulate(MIXED, policy=POLICY)


def outcome(**fields: object) -> StepOutcome:
    counts: dict[str, object] = {
        "target_groups": 4,
        "first_round_groups": 4,
        "first_round_admitted": 3,
        "rounds": 1,
        "generated_groups": 4,
        "generated_samples": 12,
        "generated_tokens": 100,
        "admitted_groups": 3,
        "rejected": {"external": 0, "exact_dead": 1, "near_tie": 0, "redundant": 0},
        "delivered_groups": 3,
        "delivered_informative": 3,
        "stop": "target_met",
    }
    counts.update(fields)
    return StepOutcome(**counts)  # type: ignore[arg-type]


class TestDeterminism:
    def test_the_same_seed_gives_the_same_result(self, mixed: SimulationResult) -> None:
        again = simulate(MIXED, policy=POLICY)
        assert mixed.to_dict(include_steps=True) == again.to_dict(include_steps=True)

    def test_another_seed_gives_another_result(self, mixed: SimulationResult) -> None:
        other = simulate(SimulationConfig(**{**MIXED.to_dict(), "seed": 4}), policy=POLICY)
        assert mixed.to_dict()["results"] != other.to_dict()["results"]

    def test_strategies_see_the_same_first_groups(self, mixed: SimulationResult) -> None:
        # Common random numbers: every strategy whose first round is the target draws it
        # from the same stream, whatever runs before it.
        alone = simulate(MIXED, policy=POLICY, strategies=[Oracle()]).results[0]
        firsts = {
            name: [(o.first_round_groups, o.first_round_admitted) for o in mixed.result(name).outcomes]
            for name in ("no_filtering", "roll", "ragen(top_p=0.9)", "per_task_retry", "controller(expected)")
        }
        expected = [(o.first_round_groups, o.first_round_admitted) for o in alone.outcomes]
        assert all(expected == first for first in firsts.values())


class TestConservation:
    def test_every_default_strategy_conserves_counts(self, mixed: SimulationResult) -> None:
        assert len(mixed.results) == 10
        for result in mixed.results:
            total_rejected = sum(result.rejected.values())
            completed = result.generated_groups - result.aborted_groups
            assert completed == result.admitted_groups + total_rejected, result.name
            assert completed == result.delivered_groups + result.discarded_groups, result.name
            assert result.generated_samples == result.generated_groups * MIXED.group_size, result.name
            assert result.delivered_informative <= min(result.delivered_groups, result.admitted_groups)
            assert result.delivered_groups <= result.target_groups == MIXED.steps * MIXED.target_groups
            assert result.rejected["external"] > 0, result.name  # failures are counted, not lost
            for step in result.outcomes:
                assert step.generated_groups == step.completed_groups + step.aborted_groups

    def test_outcomes_that_do_not_conserve_are_refused(self) -> None:
        with pytest.raises(ValueError, match="completed != admitted \\+ rejected"):
            outcome(admitted_groups=2)
        with pytest.raises(ValueError, match="delivered_groups exceeds the target"):
            outcome(target_groups=2, first_round_admitted=2, delivered_informative=2)
        with pytest.raises(ValueError, match="exhausted_slots without a limit stop"):
            outcome(exhausted_slots=1)
        with pytest.raises(ValueError, match="rejected keys"):
            outcome(rejected={"exact_dead": 1})
        with pytest.raises(ValueError, match="surplus_groups exceeds the completed groups not delivered"):
            outcome(surplus_groups=2)

    def test_no_strategy_trains_on_more_than_the_target(self, mixed: SimulationResult) -> None:
        for result in mixed.results:
            for step in result.outcomes:
                assert step.delivered_groups <= step.target_groups, result.name
                assert step.surplus_groups <= step.discarded_groups, result.name
            assert result.surplus_groups == sum(step.surplus_groups for step in result.outcomes)


class TestMetricDefinitions:
    def test_a_hand_computed_case(self) -> None:
        steps = [
            # Round 1: 3 of 4 admitted; round 2: 1 of 2; the target of 4 is met.
            outcome(
                rounds=2,
                generated_groups=6,
                generated_samples=18,
                admitted_groups=4,
                rejected={"external": 0, "exact_dead": 1, "near_tie": 1, "redundant": 0},
                delivered_groups=4,
                delivered_informative=4,
            ),
            # Round 1: 2 of 4; round 2: 0 of 2; the budget is spent with 2 slots empty.
            outcome(
                first_round_admitted=2,
                rounds=2,
                generated_groups=6,
                generated_samples=18,
                admitted_groups=2,
                rejected={"external": 1, "exact_dead": 3, "near_tie": 0, "redundant": 0},
                delivered_groups=2,
                delivered_informative=2,
                exhausted_slots=2,
                stop="budget_exhausted",
            ),
        ]
        result = summarize("s", "controller", steps)
        assert 5 / 8 == result.initial_informative_rate  # (3 + 2) / (4 + 4)
        assert 6 / 8 == result.final_informative_rate  # (4 + 2) / (4 + 4)
        assert 1 / 3 == result.recovery_rate  # shortfalls 1 + 2, recovered 1 + 0
        assert 12 / 8 == result.sampling_cost_multiplier
        assert 2 / 8 == result.budget_exhaustion_rate
        assert (2.0, 2, 1, 0) == (
            result.rounds_per_step,
            result.max_rounds_per_step,
            result.exhausted_steps,
            result.error_steps,
        )
        assert {"external": 1, "exact_dead": 4, "near_tie": 1, "redundant": 0} == dict(result.rejected)
        assert 6 == result.discarded_groups

    def test_recovery_is_none_without_an_initial_shortfall(self) -> None:
        full = outcome(
            first_round_admitted=4,
            admitted_groups=4,
            rejected=dict.fromkeys(("external", "exact_dead", "near_tie", "redundant"), 0),
            delivered_groups=4,
            delivered_informative=4,
        )
        assert summarize("s", "oracle", [full]).recovery_rate is None

    def test_summarize_needs_steps(self) -> None:
        with pytest.raises(ValueError, match="'outcomes' must hold at least one step"):
            summarize("s", "oracle", [])

    def test_pull_request_definitions_for_the_per_task_strategy(self, mixed: SimulationResult) -> None:
        result = mixed.result("per_task_retry")
        rejected_first = sum(o.target_groups - o.first_round_admitted for o in result.outcomes)
        recovered = sum(o.delivered_informative - o.first_round_admitted for o in result.outcomes)
        assert result.recovery_rate == pytest.approx(recovered / rejected_first)
        assert result.budget_exhaustion_rate == pytest.approx(1 - result.final_informative_rate)


class TestResults:
    def test_to_dict_is_json_safe(self, mixed: SimulationResult) -> None:
        data = json.loads(json.dumps(mixed.to_dict(include_steps=True)))
        assert MIXED.to_dict() == data["config"]
        assert POLICY.to_dict() == data["policy"]
        assert [r.name for r in mixed.results] == [r["name"] for r in data["results"]]
        assert MIXED.steps == len(data["results"][0]["outcomes"])
        assert "outcomes" not in mixed.to_dict()["results"][0]

    def test_table_and_rows_hold_every_strategy(self, mixed: SimulationResult) -> None:
        table = mixed.format_table().splitlines()
        assert table[0].split()[:3] == ["strategy", "initial", "final"]
        assert len(table) == 2 + len(mixed.results)
        rows = mixed.rows()
        assert [r.name for r in mixed.results] == [row["name"] for row in rows]
        assert {"rejected_exact_dead", "sampling_cost_multiplier", "uninformative_delivered"} <= set(rows[0])

    def test_result_lookup_names_the_choices(self, mixed: SimulationResult) -> None:
        assert "oracle" == mixed.result("oracle").name
        with pytest.raises(KeyError, match="no strategy named 'dapo'"):
            mixed.result("dapo")

    def test_plot_writes_a_png(self, mixed: SimulationResult, tmp_path: Path) -> None:
        path = tmp_path / "sim.png"
        plot_result(mixed, path)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    def test_plot_without_matplotlib_names_the_extra(
        self, mixed: SimulationResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        with pytest.raises(ImportError, match=r"pip install 'group-admission\[plot\]'"):
            plot_result(mixed, tmp_path / "x.png")


class TestStrategySpecs:
    def test_every_kind_builds_from_its_name_and_round_trips(self) -> None:
        for kind in STRATEGY_KINDS:
            strategy = strategy_from_mapping(kind)
            assert isinstance(strategy, Strategy)
            spec = strategy.to_dict()
            assert kind == spec["kind"]
            assert strategy == strategy_from_mapping(spec)

    def test_controller_specs_take_the_shared_budget(self) -> None:
        budget = SamplingBudgetConfig(max_extra_groups=9, max_resample_rounds=2)
        built = strategy_from_mapping({"kind": "controller", "mode": "confidence"}, budget=budget)
        assert ControllerResampling(budget=budget, mode="confidence") == built
        own = strategy_from_mapping({"kind": "controller", "budget": {"max_extra_groups": 1}}, budget=budget)
        assert SamplingBudgetConfig(max_extra_groups=1) == own.budget  # type: ignore[attr-defined]

    def test_defaults_over_sample_twice_the_target(self) -> None:
        names = [s.name for s in default_strategies(SimulationConfig(target_groups=5))]
        assert "slime(strict,10)" in names
        assert "slime(fallback,10)" in names
        assert len(names) == len(set(names)) == 10

    def test_a_policy_object_is_used_as_is(self) -> None:
        policy = GroupAdmissionPolicy({"min_reward_range": 0.5})
        result = simulate(
            SimulationConfig(steps=1, tasks=BinaryTaskModel()), policy=policy, strategies=["oracle"]
        )
        assert policy.config == result.policy


BAD_SIMULATIONS = [
    ({"config": 3}, TypeError, "'config' must be a SimulationConfig, a mapping or None (got 3)"),
    ({"config": {"stepz": 1}}, ValueError, "unknown key(s) 'stepz'"),
    ({"policy": "strict"}, TypeError, "'policy' must be a GroupAdmissionPolicy"),
    (
        {"policy": {"max_mean_pairwise_similarity": 0.5}},
        ValueError,
        "'max_mean_pairwise_similarity' must be None",
    ),
    ({"policy": {"gate_on": ["accuracy"]}}, ValueError, "'gate_on' names reward component(s) ['accuracy']"),
    ({"budget": 5}, TypeError, "'budget' must be a SamplingBudgetConfig, a mapping or None (got 5)"),
    ({"budget": {"max_extra_groups": -1}}, ValueError, "'max_extra_groups' must be >= 0 (got -1)"),
    ({"strategies": "roll"}, TypeError, "'strategies' must be a list of strategies (got 'roll')"),
    ({"strategies": []}, ValueError, "'strategies' must name at least one strategy"),
    (
        {"strategies": ["roll", "roll"]},
        ValueError,
        "strategy names must be unique; give each a 'name' (repeated: ['roll'])",
    ),
    ({"strategies": ["rol"]}, ValueError, "strategy 'kind' must be one of"),
    (
        {"strategies": [{"kind": "slime", "oversampling": 3}]},
        ValueError,
        "unknown key(s) 'oversampling' in strategy 'slime'",
    ),
    ({"strategies": [{"kind": "ragen", "top_p": 0}]}, ValueError, "'top_p' must be in (0, 1] (got 0.0)"),
    (
        {"strategies": [{"kind": "dapo", "max_num_gen_batches": -1}]},
        ValueError,
        "'max_num_gen_batches' must be >= 0",
    ),
    (
        {"strategies": [{"kind": "controller", "mode": "greedy"}]},
        ValueError,
        "'mode' must be one of 'expected', 'confidence' (got 'greedy')",
    ),
    (
        {"strategies": [{"kind": "slime", "keep_when_insufficient": "yes"}]},
        TypeError,
        "'keep_when_insufficient' must be a bool",
    ),
    ({"strategies": [{"kind": "oracle", "name": ""}]}, TypeError, "'name' must be a non-empty string"),
    # The default names were formatted from the fields before these were checked (a wrong
    # type raised ValueError from the format, a huge int OverflowError).
    (
        {"strategies": [{"kind": "streaming", "confidence": "0.9"}]},
        TypeError,
        "'confidence' must be a real number (got '0.9')",
    ),
    (
        {"strategies": [{"kind": "streaming", "race": "2"}]},
        TypeError,
        "'race' must be a real number (got '2')",
    ),
    (
        {"strategies": [{"kind": "streaming", "confidence": 10**400}]},
        ValueError,
        "'confidence' must be finite",
    ),
    (
        {"strategies": [{"kind": "ragen", "top_p": "0.5"}]},
        TypeError,
        "'top_p' must be a real number (got '0.5')",
    ),
    ({"strategies": [{"kind": "ragen", "top_p": 10**400}]}, ValueError, "'top_p' must be finite"),
    # Rounds or budgets no step could draw: they hung, or crashed in numpy.
    (
        {"strategies": [{"kind": "slime", "over_sampling_batch_size": 10**30}]},
        ValueError,
        "'over_sampling_batch_size' x 'group_size' x 'safety_max_rounds' must be <= 100000000 samples",
    ),
    (
        {"strategies": [{"kind": "dapo", "gen_batch_size": 10**30}]},
        ValueError,
        "'gen_batch_size' x 'group_size' x 'safety_max_rounds' must be <= 100000000 samples",
    ),
    (
        {"strategies": [{"kind": "controller", "budget": {"max_extra_groups": 10**30}}]},
        ValueError,
        "the budget of strategy 'controller(expected)' lets a simulated step generate",
    ),
    (
        {"budget": {"max_extra_groups": 10**30}},
        ValueError,
        "lower 'max_extra_groups' or set 'max_total_samples'",
    ),
    (
        {"strategies": [{"kind": "per_task_retry", "budget": {"max_extra_groups": 10**6}}]},
        ValueError,
        "the budget of strategy 'per_task_retry' lets a simulated step generate 128000128 samples",
    ),
    (
        {"strategies": [{"kind": "streaming", "budget": {"max_extra_groups": 10**30}}]},
        ValueError,
        "the budget of strategy 'streaming(0.99)'",
    ),
    (
        {"strategies": [{"kind": "controller", "budget": 3, "mode": "greedy"}]},
        TypeError,
        "'budget' must be a SamplingBudgetConfig or a mapping (got 3)",
    ),
    ({"strategies": [7]}, TypeError, "a strategy must be a kind name or a mapping with a 'kind' (got 7)"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_SIMULATIONS)
def test_bad_simulations_are_refused_before_running(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    arguments: dict[str, object] = {"config": {"steps": 1}}
    arguments.update(kwargs)
    with pytest.raises(error) as info:
        simulate(**arguments)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_importing_the_simulator_and_cli_loads_no_heavy_module() -> None:
    code = (
        "import sys, group_admission.simulation, group_admission._cli\n"
        "heavy = ('torch', 'matplotlib', 'prometheus_client', 'slime', 'yaml')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "[]" == done.stdout.strip()


def test_custom_strategy_objects_run_next_to_builtin_ones() -> None:
    result = simulate({"steps": 2}, strategies=[NoFiltering(name="a"), NoFiltering(name="b")])
    assert ["a", "b"] == [r.name for r in result.results]
    assert result.results[0].to_dict() == {**result.results[1].to_dict(), "name": "a"}
