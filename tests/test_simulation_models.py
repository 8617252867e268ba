"""Task models, response lengths and the simulation config."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from group_admission import GroupAdmissionConfig
from group_admission.simulation import (
    BinaryTaskModel,
    CompositeTaskModel,
    NoFiltering,
    ResponseLengthModel,
    SimulationConfig,
    simulate,
    task_model_from_mapping,
)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


class TestBinaryTaskModel:
    @pytest.mark.parametrize(("alpha", "beta"), [(1.0, 1.0), (2.0, 5.0), (0.3, 0.7)])
    def test_pass_rates_follow_the_beta_mean(self, alpha: float, beta: float) -> None:
        model = BinaryTaskModel(alpha=alpha, beta=beta)
        rates = model.draw_tasks(rng(), 40_000)[:, 0]
        assert abs(rates.mean() - alpha / (alpha + beta)) < 0.01
        assert model.mean_pass_rate == pytest.approx(alpha / (alpha + beta))
        assert ((rates >= 0) & (rates <= 1)).all()

    def test_rewards_are_binary_and_follow_each_task_rate(self) -> None:
        model = BinaryTaskModel()
        tasks = np.array([[0.0], [1.0], [0.25]])
        rewards = model.draw_rewards(rng(), np.repeat(tasks, 4000, axis=0), 2)
        assert list(rewards) == ["outcome"]
        outcome = rewards["outcome"].reshape(3, 4000, 2)
        assert set(np.unique(outcome).tolist()) <= {0.0, 1.0}
        assert outcome[0].sum() == 0
        assert outcome[1].min() == 1
        assert abs(outcome[2].mean() - 0.25) < 0.02

    def test_to_dict_names_the_kind(self) -> None:
        assert {"kind": "binary", "alpha": 2.0, "beta": 3.0} == BinaryTaskModel(alpha=2, beta=3).to_dict()


class TestCompositeTaskModel:
    def test_shaping_lies_on_the_grid(self) -> None:
        model = CompositeTaskModel(shaping_mean=0.5, shaping_spread=0.2, shaping_resolution=0.05)
        tasks = model.draw_tasks(rng(), 500)
        shaping = model.draw_rewards(rng(1), tasks, 4)["shaping"]
        steps = shaping / 0.05
        np.testing.assert_allclose(steps, np.round(steps), atol=1e-9)
        assert len(np.unique(np.round(steps))) > 5

    def test_tasks_without_shaping_get_exactly_the_mean(self) -> None:
        model = CompositeTaskModel(shaping_mean=0.3, shaping_spread=0.5, shaping_task_share=0.0)
        tasks = model.draw_tasks(rng(), 50)
        assert (tasks[:, 1] == 0).all()
        shaping = model.draw_rewards(rng(), tasks, 3)["shaping"]
        np.testing.assert_allclose(shaping, 0.3)

    def test_shaping_task_share_is_the_share_of_shaped_tasks(self) -> None:
        model = CompositeTaskModel(shaping_spread=0.04, shaping_task_share=0.7)
        tasks = model.draw_tasks(rng(), 20_000)
        assert abs((tasks[:, 1] > 0).mean() - 0.7) < 0.02
        assert set(np.unique(tasks[:, 1]).tolist()) == {0.0, 0.04}

    def test_a_fine_grid_with_small_spread_makes_near_ties(self) -> None:
        # All-wrong tasks (pass rate ~0): only the shaping term spreads the rewards, and a
        # spread of 0.005 on a 0.01 grid leaves differences of 0 or 0.01.
        config = SimulationConfig(
            tasks=CompositeTaskModel(alpha=0.001, beta=1000, shaping_spread=0.005, shaping_resolution=0.01),
            group_size=4,
            target_groups=50,
            steps=4,
        )
        policy = GroupAdmissionConfig(min_reward_std=1e-6, min_reward_range=0.02)
        result = simulate(config, policy=policy, strategies=[NoFiltering()]).results[0]
        assert result.rejected["near_tie"] > result.admitted_groups
        assert result.rejected["exact_dead"] > 20
        assert result.rejected["near_tie"] + result.rejected["exact_dead"] > 0.6 * result.generated_groups

    def test_gating_on_the_outcome_turns_shaping_ties_into_exact_dead(self) -> None:
        config = SimulationConfig(
            tasks=CompositeTaskModel(alpha=0.001, beta=1000, shaping_spread=0.05),
            group_size=4,
            target_groups=50,
            steps=2,
        )
        policy = GroupAdmissionConfig(min_reward_std=1e-6, gate_on=["outcome"])
        result = simulate(config, policy=policy, strategies=[NoFiltering()]).results[0]
        assert 100 == result.rejected["exact_dead"]
        assert 0 == result.rejected["near_tie"]


class TestResponseLengthModel:
    def test_zero_cv_gives_every_response_the_mean(self) -> None:
        tokens = ResponseLengthModel(mean_tokens=300, cv=0).draw(rng(), (4, 3))
        assert (tokens == 300).all()
        assert tokens.dtype == np.int64

    def test_lengths_have_the_mean_and_respect_the_cut(self) -> None:
        tokens = ResponseLengthModel(mean_tokens=500, cv=0.5).draw(rng(), (20_000, 1))
        assert abs(tokens.mean() - 500) < 10
        assert abs(tokens.std() / tokens.mean() - 0.5) < 0.03
        assert tokens.min() >= 1
        cut = ResponseLengthModel(mean_tokens=500, cv=0.5, max_tokens=600).draw(rng(), (5000, 1))
        assert cut.max() == 600


class TestSimulationConfig:
    def test_builds_nested_models_from_mappings_and_round_trips(self) -> None:
        config = SimulationConfig.from_mapping(
            {
                "tasks": {"kind": "composite", "alpha": 2, "shaping_spread": 0.02},
                "lengths": {"mean_tokens": 100, "cv": 0},
                "group_size": 3,
                "target_groups": 5,
            }
        )
        assert config.tasks == CompositeTaskModel(alpha=2, shaping_spread=0.02)
        assert config.lengths == ResponseLengthModel(mean_tokens=100, cv=0)
        assert config == SimulationConfig.from_mapping(config.to_dict())

    def test_from_yaml_reads_the_simulation_section(self, tmp_path: Path) -> None:
        path = tmp_path / "sim.yaml"
        path.write_text("simulation:\n  steps: 7\n  tasks: {kind: binary, alpha: 3}\npolicy: {}\n")
        config = SimulationConfig.from_yaml(path)
        assert 7 == config.steps
        assert BinaryTaskModel(alpha=3) == config.tasks

    def test_task_kind_defaults_to_binary(self) -> None:
        assert BinaryTaskModel(beta=2) == task_model_from_mapping({"beta": 2})


BAD_INPUTS = [
    (BinaryTaskModel, {"alpha": 0}, ValueError, "'alpha' must be > 0 (got 0.0)"),
    (BinaryTaskModel, {"beta": -1}, ValueError, "'beta' must be > 0 (got -1.0)"),
    (BinaryTaskModel, {"alpha": "1"}, TypeError, "'alpha' must be a real number (got '1')"),
    (BinaryTaskModel, {"alpha": float("inf")}, ValueError, "'alpha' must be finite (got inf)"),
    (CompositeTaskModel, {"shaping_resolution": 0}, ValueError, "'shaping_resolution' must be > 0"),
    (CompositeTaskModel, {"shaping_spread": -0.1}, ValueError, "'shaping_spread' must be >= 0 (got -0.1)"),
    (CompositeTaskModel, {"shaping_task_share": 1.5}, ValueError, "'shaping_task_share' must be in [0, 1]"),
    # A response has at least one token: a mean below that is not the mean of any draw.
    (ResponseLengthModel, {"mean_tokens": 0}, ValueError, "'mean_tokens' must be >= 1 (got 0.0)"),
    (ResponseLengthModel, {"mean_tokens": 1e-30}, ValueError, "'mean_tokens' must be >= 1 (got 1e-30)"),
    (ResponseLengthModel, {"mean_tokens": 1e30}, ValueError, "'mean_tokens' must be <= 10000000 tokens"),
    (ResponseLengthModel, {"cv": -0.1}, ValueError, "'cv' must be >= 0 (got -0.1)"),
    (ResponseLengthModel, {"cv": 1e-300}, ValueError, "'cv' must be 0 or in [1e-06, 10] (got 1e-300)"),
    (ResponseLengthModel, {"cv": 11}, ValueError, "'cv' must be 0 or in [1e-06, 10] (got 11.0)"),
    (ResponseLengthModel, {"max_tokens": 0}, ValueError, "'max_tokens' must be >= 1 (got 0)"),
    (ResponseLengthModel, {"max_tokens": 10**400}, ValueError, "'max_tokens' must be <= 10000000 tokens"),
    (ResponseLengthModel, {"max_tokens": 1.5}, TypeError, "'max_tokens' must be an integer (got 1.5)"),
    (SimulationConfig, {"group_size": 0}, ValueError, "'group_size' must be >= 1 (got 0)"),
    (SimulationConfig, {"target_groups": 0}, ValueError, "'target_groups' must be >= 1 (got 0)"),
    (SimulationConfig, {"steps": 0}, ValueError, "'steps' must be >= 1 (got 0)"),
    (SimulationConfig, {"steps": 2.0}, TypeError, "'steps' must be an integer (got 2.0)"),
    (SimulationConfig, {"seed": -1}, ValueError, "'seed' must be >= 0 (got -1)"),
    (SimulationConfig, {"failure_rate": 1.0}, ValueError, "'failure_rate' must be < 1"),
    (SimulationConfig, {"failure_rate": -0.1}, ValueError, "'failure_rate' must be in [0, 1] (got -0.1)"),
    (SimulationConfig, {"safety_max_rounds": 0}, ValueError, "'safety_max_rounds' must be >= 1 (got 0)"),
    # No upper bound: a huge target or group hung drawing it, or crashed in numpy.
    (
        SimulationConfig,
        {"group_size": 10**30},
        ValueError,
        "'target_groups' x 'group_size' must be <= 1000000",
    ),
    (SimulationConfig, {"target_groups": 10**30}, ValueError, "(got 1000000000000000000000000000000 x 8)"),
    (
        SimulationConfig,
        {"target_groups": 1000, "group_size": 1001},
        ValueError,
        "samples, the most a simulated",
    ),
    # What slime, ROLL or the oracle may refill on dead tasks before the safety limit.
    (
        SimulationConfig,
        {"target_groups": 1000, "group_size": 1000, "safety_max_rounds": 101},
        ValueError,
        "'target_groups' x 'group_size' x 'safety_max_rounds' must be <= 100000000 samples",
    ),
    (SimulationConfig, {"steps": 10**30}, ValueError, "'steps' must be <= 100000 steps"),
    (
        SimulationConfig,
        {"safety_max_rounds": 10**30},
        ValueError,
        "'safety_max_rounds' must be <= 10000 rounds",
    ),
    # A grid step below ~1e-308 overflowed every shaping term to NaN: exit 0, nonsense figures.
    (
        CompositeTaskModel,
        {"shaping_resolution": 1e-320},
        ValueError,
        "'shaping_resolution' must be in [1e-09, 1e+06]",
    ),
    (
        CompositeTaskModel,
        {"shaping_resolution": 1e300},
        ValueError,
        "'shaping_resolution' must be in [1e-09, 1e+06]",
    ),
    (
        CompositeTaskModel,
        {"shaping_spread": 1e300},
        ValueError,
        "'shaping_spread' must be in [0, 1e+06] (got 1e+300)",
    ),
    (CompositeTaskModel, {"shaping_mean": -1e300}, ValueError, "'shaping_mean' must be in [-1e+06, 1e+06]"),
    (
        SimulationConfig,
        {"tasks": "binary"},
        TypeError,
        "'tasks' must be a task model or a mapping (got 'binary')",
    ),
    (
        SimulationConfig,
        {"tasks": {"kind": "gauss"}},
        ValueError,
        "'tasks.kind' must be one of ['binary', 'composite']",
    ),
    (SimulationConfig, {"tasks": {"shaping_spread": 1}}, ValueError, "unknown key(s) 'shaping_spread'"),
    (SimulationConfig, {"lengths": {"mean": 1}}, ValueError, "unknown key(s) 'mean' in 'lengths'"),
    (
        SimulationConfig,
        {"lengths": 5},
        TypeError,
        "'lengths' must be a ResponseLengthModel or a mapping (got 5)",
    ),
]


@pytest.mark.parametrize(("factory", "kwargs", "error", "message"), BAD_INPUTS)
def test_bad_inputs_are_rejected_with_the_field_named(
    factory: type, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as info:
        factory(**kwargs)
    assert message in str(info.value)


def test_from_mapping_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match="unknown key\\(s\\) 'step' in SimulationConfig mapping"):
        SimulationConfig.from_mapping({"step": 3})
