"""
Bad inputs to the OpenRLHF adapter's public entry points: its settings, the environment variable, the hooks.

A mistake in the settings raises, naming the field, the requirement and the value. A data
problem inside a group (a missing or non-numeric score, a missing ``gate_on`` key, an
empty group) rejects the group as ``external`` and is counted, never raised.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from group_admission import ConfigurationError, GroupAdmissionPolicy, SessionConfig
from group_admission.adapters.openrlhf import (
    SETTINGS_ENV,
    OpenRLHFAdmissionSettings,
    admission_generator_class,
    runtime_env_hook,
)
from group_admission.adapters.openrlhf._groups import MISSING_INFO_KEY, read_group

CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    (
        "settings not a mapping",
        lambda: OpenRLHFAdmissionSettings.from_mapping([1]),
        TypeError,
        "the GROUP_ADMISSION_OPENRLHF settings must be a mapping (got [1] of type list)",
    ),
    (
        "unknown key",
        lambda: OpenRLHFAdmissionSettings.from_mapping({"budgets": {}}),
        ValueError,
        "unknown key(s) 'budgets'",
    ),
    (
        "negative gate",
        lambda: OpenRLHFAdmissionSettings.from_mapping({"policy": {"min_reward_std": -0.1}}),
        ValueError,
        "'min_reward_std' must be >= 0 (got -0.1)",
    ),
    (
        "redundancy gate",
        lambda: OpenRLHFAdmissionSettings.from_mapping({"policy": {"max_mean_pairwise_similarity": 0.9}}),
        ValueError,
        "'policy.max_mean_pairwise_similarity' is not supported by the OpenRLHF adapter",
    ),
    (
        "budget not a mapping",
        lambda: OpenRLHFAdmissionSettings.from_mapping({"budget": 8}),
        TypeError,
        "'budget' must be a SamplingBudgetConfig, a mapping or None (got 8)",
    ),
    (
        "negative extra groups",
        lambda: OpenRLHFAdmissionSettings.from_mapping({"budget": {"max_extra_groups": -1}}),
        ValueError,
        "'max_extra_groups' must be >= 0 (got -1)",
    ),
    (
        "limits not a mapping",
        lambda: OpenRLHFAdmissionSettings.from_mapping({"limits": "none"}),
        TypeError,
        "'limits' must be a DropLimits, a mapping or None (got 'none')",
    ),
    (
        "range flag a string",
        lambda: OpenRLHFAdmissionSettings.from_mapping({"apply_dynamic_filtering_range": "yes"}),
        TypeError,
        "'apply_dynamic_filtering_range' must be a bool (got 'yes')",
    ),
    (
        "an unknown loss scale",
        lambda: OpenRLHFAdmissionSettings.from_mapping({"loss_scale": "token-mean"}),
        ValueError,
        "'loss_scale' must be one of 'kept', 'target', 'linear', 'sqrt' (got 'token-mean')",
    ),
    (
        "unknown exhaustion action",
        lambda: OpenRLHFAdmissionSettings.from_mapping({"on_exhausted": "stop"}),
        ValueError,
        "'on_exhausted' must be one of 'train', 'raise' (got 'stop')",
    ),
    (
        "metrics flag a number",
        lambda: OpenRLHFAdmissionSettings.from_mapping({"metrics_in_info": 1}),
        TypeError,
        "'metrics_in_info' must be a bool (got 1)",
    ),
    (
        "inline text neither JSON nor YAML",
        lambda: OpenRLHFAdmissionSettings.from_env("{policy: [1"),
        ConfigurationError,
        "'GROUP_ADMISSION_OPENRLHF' must hold valid inline JSON or YAML, or a file path (got neither",
    ),
    (
        "JSON that is not a mapping",
        lambda: OpenRLHFAdmissionSettings.from_env("[1, 2]"),
        ConfigurationError,
        "'GROUP_ADMISSION_OPENRLHF' must hold a mapping of settings, inline or in a file "
        "(got [1, 2] of type list)",
    ),
    (
        "a missing settings file",
        lambda: OpenRLHFAdmissionSettings.from_env("/nonexistent/admission.yaml"),
        FileNotFoundError,
        "/nonexistent/admission.yaml",
    ),
    (
        "base not a class",
        lambda: admission_generator_class("SamplesGenerator"),  # type: ignore[arg-type]
        TypeError,
        "'base' must be OpenRLHF's SamplesGenerator class (got 'SamplesGenerator')",
    ),
    (
        "another setup hook",
        lambda: runtime_env_hook({"worker_process_setup_hook": "mine.setup"}),
        ValueError,
        "already sets 'worker_process_setup_hook' to 'mine.setup'",
    ),
]


@pytest.mark.parametrize(("case", "call", "error", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(
    case: str, call: Callable[[], Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        call()

    assert message in str(caught.value), case


def test_invalid_settings_in_a_file_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "admission.json"
    path.write_text("{not json")

    expected = f"'GROUP_ADMISSION_OPENRLHF' must name a file of valid JSON (got invalid '{path}'"
    with pytest.raises(ConfigurationError, match=re.escape(expected)):
        OpenRLHFAdmissionSettings.from_env(str(path))


def test_the_hook_checks_the_settings_in_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mistake in the settings fails where the user launched, not in a remote worker."""
    monkeypatch.setenv(SETTINGS_ENV, json.dumps({"on_exhausted": "stop"}))

    with pytest.raises(ValueError, match="'on_exhausted' must be one of"):
        runtime_env_hook(None)


class _Row:
    def __init__(self, scores: Any = None, info: Any = None, response_length: Any = None) -> None:
        self.scores, self.info, self.response_length = scores, info, response_length


@pytest.mark.parametrize(
    ("rows", "names", "external"),
    [
        ([_Row([0.0]), _Row(None)], ("scores",), ("missing_reward",)),
        ([_Row(["high"]), _Row([1.0])], ("scores",), ("non_numeric_reward", "missing_reward")),
        ([_Row([[0.0, 1.0]]), _Row([1.0])], ("scores",), ("non_scalar_reward", "missing_reward")),
        ([_Row([float("nan")]), _Row([1.0])], ("scores",), ("non_finite_reward",)),
        ([_Row(info={"acc": [1.0]}), _Row(info={})], ("acc",), (MISSING_INFO_KEY, "missing_reward")),
        ([_Row(info=None), _Row(info={"acc": [0.0]})], ("acc",), (MISSING_INFO_KEY, "missing_reward")),
        ([], ("scores",), ("empty_group", "missing_reward")),
    ],
)
def test_data_problems_reject_the_group_as_external(rows: list[Any], names: tuple, external: tuple) -> None:
    group = read_group(rows, names)
    decision = GroupAdmissionPolicy({"min_reward_std": 1e-6}).evaluate(
        group.components, external_reasons=group.external
    )

    assert decision.primary_rejection_reason == "external"
    assert decision.external_reasons == external


@pytest.mark.parametrize("length", [None, [-3], [float("inf")], ["long"], [2.0]])
def test_odd_response_lengths_count_no_tokens_or_their_value(length: Any) -> None:
    group = read_group([_Row([0.0], response_length=length), _Row([1.0], response_length=[4])], ("scores",))

    assert group.generated_tokens == (6 if length == [2.0] else 4)


def test_the_recommended_block_fills_the_settings() -> None:
    settings = OpenRLHFAdmissionSettings.from_env('{"preset": "recommended", "metrics_in_info": false}')
    config = SessionConfig.preset("recommended")

    assert settings.policy == config.policy
    assert settings.loss_scale == config.loss_scale
    assert settings.budget == config.budget
    assert settings.metrics_in_info is False
