"""AdmissionGRPOTrainer end to end: gating, None rewards, resampling, exhaustion, metrics, eval."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
from trl_helpers import accuracy, brevity, grpo_config, prompt_dataset

from group_admission import SessionConfig
from group_admission.adapters.trl import SUPPORTED_VERSIONS, AdmissionGRPOTrainer
from group_admission.adapters.trl._masking import zero_std_fraction
from group_admission.adapters.trl._trainer import session_rewards

GATE = {"min_reward_std": 1e-6, "gate_on": ["accuracy"]}


def make(tiny_model: str, tmp_path: Path, *, dataset: Any = None, funcs: Any = None, **kwargs: Any) -> Any:
    config_overrides = kwargs.pop("config", {})
    return AdmissionGRPOTrainer(
        model=tiny_model,
        reward_funcs=funcs or [accuracy, brevity],
        args=grpo_config(tmp_path, **config_overrides),
        train_dataset=prompt_dataset() if dataset is None else dataset,
        **kwargs,
    )


def admission_logs(trainer: Any) -> list[dict[str, float]]:
    return [
        {k.removeprefix("group_admission/"): v for k, v in row.items() if k.startswith("group_admission/")}
        for row in trainer.state.log_history
        if any(k.startswith("group_admission/") for k in row)
    ]


class TestSessionRewards:
    def test_gated_column_only_and_none_of_an_ungated_function_is_ignored(self) -> None:
        rewards = torch.tensor([[1.0, float("nan")], [0.0, float("nan")], [1.0, 0.5], [1.0, 0.2]])

        gated = session_rewards(rewards, ["accuracy", "format"], torch.ones(2), ("accuracy",), 2)

        assert list(gated) == ["accuracy"]
        np.testing.assert_array_equal(gated["accuracy"], [[1.0, 0.0], [1.0, 1.0]])

    def test_a_gated_function_absent_from_a_whole_group_contributes_zero(self) -> None:
        nan = float("nan")
        rewards = torch.tensor([[1.0, nan], [0.0, nan], [nan, 1.0], [nan, 1.0]])

        gated = session_rewards(rewards, ["math", "code"], torch.ones(2), ("math", "code"), 2)

        np.testing.assert_array_equal(gated["math"], [[1.0, 0.0], [0.0, 0.0]])
        np.testing.assert_array_equal(gated["code"], [[0.0, 0.0], [1.0, 1.0]])

    def test_without_gate_on_the_weighted_trained_reward_is_judged(self) -> None:
        rewards = torch.tensor([[1.0, 2.0], [0.0, 4.0]])

        total = session_rewards(rewards, ["a", "b"], torch.tensor([1.0, 0.5]), None, 2)

        np.testing.assert_array_equal(total, [[2.0, 2.0]])


class TestConstruction:
    def test_gate_on_must_name_a_reward_function(self, tiny_model: str, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match=r"'gate_on' must name entries of reward_func_names"):
            make(tiny_model, tmp_path, admission={"gate_on": ["correctness"]})

    def test_supported_versions_are_data(self) -> None:
        assert {"trl": ">=1.16,<1.17"} == SUPPORTED_VERSIONS

    def test_import_without_trl_names_the_pip_line(self) -> None:
        code = (
            "import sys; sys.modules['trl'] = None\n"
            "import group_admission\n"
            "try:\n    import group_admission.adapters.trl\n"
            "except ImportError as e:\n    print(e)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

        assert "pip install 'group-admission[trl]'" in out.stdout


@pytest.mark.slow
class TestTraining:
    def test_masking_only_counts_dead_groups_and_masks_them(self, tiny_model: str, tmp_path: Path) -> None:
        trainer = make(tiny_model, tmp_path, admission=GATE)
        trainer.train()

        logs = admission_logs(trainer)
        assert [row["generated_groups"] for row in logs] == [2.0, 2.0]
        assert all(row["sampling_rounds"] == 1.0 for row in logs)
        stats = trainer.admission_session.stats
        assert (stats.candidates, stats.admitted, stats.exact_dead) == (4, 2, 2)
        assert sum(row["short_groups"] for row in logs) == 2.0
        # The layout every adapter logs a step with: the step's counts under step/, the run's under total/.
        assert [row["step/candidate_group_count"] for row in logs] == [2.0, 2.0]
        assert [row["total/candidate_group_count"] for row in logs] == [2.0, 4.0]

    def test_none_from_an_ungated_function_does_not_reject(self, tiny_model: str, tmp_path: Path) -> None:
        def partial(completions: list[Any], kind: list[str], **_: Any) -> list[float | None]:
            return [None if k == "live" else 0.5 for k in kind]

        trainer = make(tiny_model, tmp_path, funcs=[accuracy, partial], admission=GATE)
        trainer.train()

        assert trainer.admission_session.stats.external == 0
        assert trainer.admission_session.stats.admitted == 2

    def test_resampling_fills_rejected_slots(self, tiny_model: str, tmp_path: Path) -> None:
        budget = {"max_extra_groups": 8, "max_resample_rounds": 3}
        trainer = make(tiny_model, tmp_path, admission=GATE, budget=budget)
        trainer.train()

        logs = admission_logs(trainer)
        assert all(row["trained_group_rate"] == 1.0 for row in logs)
        assert all(row["short_groups"] == 0.0 for row in logs)
        assert logs[0]["sampling_rounds"] > 1.0
        assert trainer.last_report is not None
        # One step vocabulary: admitted counts every admitted group (surplus included), trained the slots.
        assert all(row["trained_groups"] == row["target_groups"] for row in logs)
        assert all(row["admitted_groups"] == row["trained_groups"] + row["surplus_groups"] for row in logs)
        assert logs[-1]["effective_rate"] == trainer.admission_session.last_plan.effective_rate
        report = trainer.last_report.metrics()
        assert {k: float(v) for k, v in report.items()} == {k: logs[-1][k] for k in report}
        with pytest.warns(
            DeprecationWarning, match=r"last_step_report is deprecated .* 0\.3\.0: use last_report"
        ):
            assert trainer.last_step_report is trainer.last_report

    def test_an_all_dead_stream_exhausts_the_budget_explicitly(self, tiny_model: str, tmp_path: Path) -> None:
        budget = {"max_extra_groups": 4, "max_resample_rounds": 2}
        trainer = make(
            tiny_model, tmp_path, dataset=prompt_dataset(dead_every=1), admission=GATE, budget=budget
        )
        trainer.train()

        logs = admission_logs(trainer)
        assert all(row["exhausted"] == 1.0 for row in logs)
        assert all(row["short_groups"] == 2.0 for row in logs)
        assert all(row["generated_groups"] == 6.0 for row in logs)  # target 2 + 4 extra, never more

    def test_a_failed_round_closes_the_step(self, tiny_model: str, tmp_path: Path) -> None:
        calls: list[int] = []

        def flaky_accuracy(completions: list[Any], kind: list[str], **rest: Any) -> list[float]:
            calls.append(len(completions))
            if len(calls) == 2:  # the resampling round's rewards fail
                raise RuntimeError("reward server down")
            return accuracy(completions, kind, **rest)

        flaky_accuracy.__name__ = "accuracy"  # what gate_on names
        budget = {"max_extra_groups": 8, "max_resample_rounds": 3}
        trainer = make(tiny_model, tmp_path, funcs=[flaky_accuracy, brevity], admission=GATE, budget=budget)
        with pytest.raises(RuntimeError, match="reward server down"):
            trainer.train()

        session = trainer.admission_session
        assert not session.step_open  # ended in a finally: the next batch can begin its step
        assert session.stats.candidates == 2  # round 0's groups stay counted
        session.begin_step(2)

    def test_zero_std_fraction_is_per_group_with_batch_scale(self, tiny_model: str, tmp_path: Path) -> None:
        config = {"scale_rewards": "batch", "per_device_train_batch_size": 16}
        trainer = make(tiny_model, tmp_path, funcs=[accuracy], admission=GATE, config=config)
        trainer.train()

        # With accuracy alone, the zero-spread groups are exactly the dead ones.
        rows = [row for row in trainer.state.log_history if "frac_reward_zero_std" in row]
        expected = [row["group_admission/short_groups"] / 4 for row in rows]
        assert expected == [row["frac_reward_zero_std"] for row in rows]

    def test_zero_std_fraction_counts_groups(self) -> None:
        rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.5, 0.5, float("nan"), 0.5])

        assert zero_std_fraction(rewards, 2) == 0.75

    def test_evaluation_bypasses_admission(self, tiny_model: str, tmp_path: Path) -> None:
        trainer = make(tiny_model, tmp_path, admission=GATE, eval_dataset=prompt_dataset(8))
        trainer.evaluate()

        assert trainer.admission_session.stats.candidates == 0


@pytest.mark.slow
class TestSessionConfigBlock:
    BLOCK: ClassVar[dict[str, Any]] = {"preset": "recommended", "policy": {"gate_on": ["accuracy"]}}

    def test_the_recommended_block_builds_the_session_and_the_prompt_history(
        self, tiny_model: str, tmp_path: Path
    ) -> None:
        config = SessionConfig.from_mapping(self.BLOCK)

        trainer = make(tiny_model, tmp_path, admission=self.BLOCK)

        assert trainer.admission_session.policy.config == config.policy
        assert trainer.admission_session.loss_scale == config.loss_scale
        assert trainer.prompt_history is not None
        assert trainer.prompt_history.config == config.prompt_history(trainer.num_generations).config
        trainer.train()
        assert trainer.last_report is not None
        assert trainer.admission_session.stats.candidates == 4

    def test_a_given_prompt_history_wins_over_the_blocks(self, tiny_model: str, tmp_path: Path) -> None:
        trainer = make(
            tiny_model,
            tmp_path,
            admission=SessionConfig.from_mapping(self.BLOCK),
            prompt_history={"half_life": 7},
        )

        assert trainer.prompt_history.config.half_life == 7
