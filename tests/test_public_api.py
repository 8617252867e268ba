"""The public surface: exports, import cost, metadata."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types

import pytest

import group_admission

PUBLIC = {
    "prompts_needed",
    "plan_stream",
    "plan_prompts",
    "informative_probability",
    "StreamPlan",
    "PromptPlan",
    "PromptPicks",
    "PromptHistoryConfig",
    "PromptHistory",
    "PromptEstimate",
    "AdmissionSession",
    "AdmissionStats",
    "AdmissionStream",
    "AdmissionVerdict",
    "BatchAdmissionResult",
    "BatchAdmissionVerdict",
    "BudgetExhaustedError",
    "CheckpointError",
    "ConfigurationError",
    "ConsecutiveFailedGroupsError",
    "DropLimits",
    "GroupAdmissionConfig",
    "GroupAdmissionDecision",
    "GroupAdmissionError",
    "GroupAdmissionPolicy",
    "HalfConfiguredWarning",
    "RejectionReason",
    "ResamplePlan",
    "SamplingBudgetConfig",
    "SamplingBudgetController",
    "SamplingBudgetState",
    "StepLifecycleError",
    "StepReport",
    "__version__",
    "binomial_groups_needed",
    "group_admission_metrics",
    "ngram_jaccard",
    "parse_state",
    "parse_yaml",
    "SessionConfig",
    "SkipReport",
    "StreamLedger",
    "StreamSettings",
    "StreamVerdict",
    "TokenTally",
    "loss_scale",
}


def test_all_is_exactly_the_public_api() -> None:
    assert PUBLIC == set(group_admission.__all__)
    assert sorted(group_admission.__all__) == list(group_admission.__all__)
    # Submodules (adapters, prometheus, simulation) appear as attributes once imported.
    public_names = {
        name
        for name, value in vars(group_admission).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public_names - {"annotations"} == PUBLIC - {"__version__"}


def test_every_export_resolves_and_says_group_admission() -> None:
    for name in group_admission.__all__:
        value = getattr(group_admission, name)
        if name != "__version__":
            assert "group_admission" == value.__module__, name


def test_version_comes_from_the_installed_metadata() -> None:
    from importlib.metadata import version

    assert version("group-admission") == group_admission.__version__


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        group_admission.nope


def test_importing_the_package_loads_no_heavy_or_framework_module() -> None:
    code = textwrap.dedent(
        """
        import sys
        import group_admission
        import group_admission.adapters
        policy = group_admission.GroupAdmissionPolicy({"min_reward_std": 1e-6})
        policy.evaluate([0.0, 1.0])
        heavy = ["torch", "prometheus_client", "transformers", "slime", "roll", "ragen", "verl",
                 "twinkle", "yaml", "matplotlib", "tensordict"]
        print(sorted(m for m in heavy if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert "[]" == out.stdout.strip()
