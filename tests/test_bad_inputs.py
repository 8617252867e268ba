"""A table of bad inputs for every public entry point: exception type and message."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from group_admission import (
    AdmissionStats,
    CheckpointError,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    SamplingBudgetConfig,
    SamplingBudgetController,
    SamplingBudgetState,
    group_admission_metrics,
)

P = GroupAdmissionPolicy
C = GroupAdmissionConfig
similar = C(max_mean_pairwise_similarity=0.5)


def _state_with_round() -> SamplingBudgetState:
    state = SamplingBudgetState()
    SamplingBudgetController().observe_round(state, [P().evaluate([0, 1])], num_generations=2)
    return state


CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    # GroupAdmissionConfig
    ("negative std", lambda: C(min_reward_std=-0.1), ValueError, "'min_reward_std' must be >= 0 (got -0.1)"),
    (
        "nan range",
        lambda: C(min_reward_range=math.nan),
        ValueError,
        "'min_reward_range' must be finite (got nan)",
    ),
    (
        "string threshold",
        lambda: C(min_reward_std="0.1"),
        TypeError,
        "'min_reward_std' must be a real number (got '0.1')",
    ),
    (
        "bool threshold",
        lambda: C(min_reward_range=True),
        TypeError,
        "'min_reward_range' must be a real number (got True)",
    ),
    (
        "float count",
        lambda: C(min_nontrivial_advantages=1.5),
        TypeError,
        "'min_nontrivial_advantages' must be an integer (got 1.5)",
    ),
    (
        "negative count",
        lambda: C(min_nontrivial_advantages=-1),
        ValueError,
        "'min_nontrivial_advantages' must be >= 0 (got -1)",
    ),
    (
        "similarity above 1",
        lambda: C(max_mean_pairwise_similarity=1.5),
        ValueError,
        "'max_mean_pairwise_similarity' must be in [0, 1] (got 1.5)",
    ),
    (
        "ngram zero",
        lambda: C(similarity_ngram_size=0),
        ValueError,
        "'similarity_ngram_size' must be > 0 (got 0)",
    ),
    (
        "empty gate_on",
        lambda: C(gate_on=[]),
        ValueError,
        "'gate_on' must name at least one reward component (got [])",
    ),
    (
        "repeated gate_on",
        lambda: C(gate_on=["a", "a"]),
        ValueError,
        "'gate_on' must not repeat a component (got ['a', 'a'])",
    ),
    (
        "non-string gate_on",
        lambda: C(gate_on=[1]),
        TypeError,
        "'gate_on' entries must be non-empty strings (got 1)",
    ),
    (
        "unknown mapping key",
        lambda: C.from_mapping({"min_std": 1}),
        ValueError,
        "unknown key(s) 'min_std' in GroupAdmissionConfig mapping",
    ),
    (
        "mapping not a mapping",
        lambda: C.from_mapping([1]),
        TypeError,
        "'GroupAdmissionConfig mapping' must be a mapping",
    ),
    # GroupAdmissionPolicy construction
    (
        "config wrong type",
        lambda: P(3),
        TypeError,
        "'config' must be a GroupAdmissionConfig, a mapping or None (got 3)",
    ),
    (
        "scorer not callable",
        lambda: P(scorer=1),
        TypeError,
        "'scorer' must be a callable scorer(a, b) -> float (got 1)",
    ),
    (
        "logger without info",
        lambda: P(logger=object()),
        TypeError,
        "'logger' must have an info(event, **fields) method",
    ),
    # evaluate
    ("no rewards", lambda: P().evaluate([]), ValueError, "'rewards' must hold at least one member (got 0)"),
    (
        "2-D rewards",
        lambda: P().evaluate(np.zeros((2, 2))),
        ValueError,
        "'rewards' must be 1-D (got an array of shape (2, 2))",
    ),
    (
        "nested list",
        lambda: P().evaluate([[1, 2], [3, 4]]),
        ValueError,
        "'rewards' must be 1-D: member 0 is itself a sequence",
    ),
    (
        "string member",
        lambda: P().evaluate([1, "x"]),
        TypeError,
        "'rewards' must hold numbers: member 1 is 'x'",
    ),
    (
        "string rewards",
        lambda: P().evaluate("101"),
        TypeError,
        "'rewards' must be a 1-D sequence of numbers (got '101')",
    ),
    (
        "scalar rewards",
        lambda: P().evaluate(1.0),
        TypeError,
        "'rewards' must be a 1-D sequence of numbers (got 1.0)",
    ),
    (
        "string array",
        lambda: P().evaluate(np.array(["1", "2"])),
        TypeError,
        "'rewards' must hold numbers (got an array of dtype <U1)",
    ),
    (
        "empty composite",
        lambda: P().evaluate({}),
        ValueError,
        "'rewards' must hold at least one reward component (got an empty mapping)",
    ),
    (
        "ragged composite",
        lambda: P().evaluate({"a": [1, 2], "b": [1]}),
        ValueError,
        "'rewards' components must all have the same length",
    ),
    (
        "unknown gate_on",
        lambda: P(C(gate_on=["acc"])).evaluate({"accuracy": [0, 1]}),
        ValueError,
        "'gate_on' names unknown reward component(s) ['acc'] (the rewards have ['accuracy'])",
    ),
    (
        "gate_on on a list",
        lambda: P(C(gate_on=["acc"])).evaluate([0, 1]),
        TypeError,
        "'rewards' must be a mapping of reward component names to values when 'gate_on' is set",
    ),
    (
        "completions length",
        lambda: P().evaluate([0, 1], completions=["a"]),
        ValueError,
        "'completions' must have one entry per reward (2) (got 1)",
    ),
    (
        "completions a string",
        lambda: P().evaluate([0, 1], completions="ab"),
        TypeError,
        "'completions' must be a sequence of strings (got 'ab')",
    ),
    (
        "completion not a string",
        lambda: P().evaluate([0, 1], completions=["a", 2]),
        TypeError,
        "'completions' must hold strings: entry 1 is 2",
    ),
    (
        "completions required",
        lambda: P(similar).evaluate([0, 1]),
        ValueError,
        "'completions' are required when the redundancy gate is on (max_mean_pairwise_similarity=0.5)",
    ),
    (
        "ids length",
        lambda: P().evaluate([0, 1], rollout_ids=[1]),
        ValueError,
        "'rollout_ids' must have one id per reward (2) (got 1)",
    ),
    (
        "unhashable id",
        lambda: P().evaluate([0, 1], rollout_ids=[[1], [2]]),
        TypeError,
        "'rollout_ids' entries must be hashable (got [1] of type list)",
    ),
    (
        "external not strings",
        lambda: P().evaluate([0, 1], external_reasons=[3]),
        TypeError,
        "'external_reasons' entries must be non-empty strings (got 3)",
    ),
    (
        "scorer out of range",
        lambda: P(similar, scorer=lambda a, b: 1.5).evaluate([0, 1], ["a", "b"]),
        ValueError,
        "'scorer' must return a finite value in [0, 1] (got 1.5 for completions 0 and 1)",
    ),
    (
        "scorer nan",
        lambda: P(similar, scorer=lambda a, b: math.nan).evaluate([0, 1], ["a", "b"]),
        ValueError,
        "'scorer' must return a finite value in [0, 1] (got nan",
    ),
    (
        "scorer not a number",
        lambda: P(similar, scorer=lambda a, b: "0.5").evaluate([0, 1], ["a", "b"]),
        TypeError,
        "'scorer' must return a real number in [0, 1] (got '0.5' of type str",
    ),
    # evaluate_batch
    (
        "batch 1-D",
        lambda: P().evaluate_batch(np.zeros(3)),
        ValueError,
        "'rewards' must be 2-D (got an array of shape (3,))",
    ),
    (
        "batch ragged",
        lambda: P().evaluate_batch([[0, 1], [1]]),
        ValueError,
        "'rewards' groups must all have the same number of members (got lengths [1, 2])",
    ),
    (
        "batch empty",
        lambda: P().evaluate_batch(np.zeros((0, 4))),
        ValueError,
        "'rewards' must hold at least one group of at least one member (got shape (0, 4))",
    ),
    (
        "batch keys length",
        lambda: P().evaluate_batch(np.zeros((2, 2)), group_keys=["a"]),
        ValueError,
        "'group_keys' must have one entry per group (2) (got 1)",
    ),
    (
        "batch external length",
        lambda: P().evaluate_batch(np.zeros((2, 2)), external_reasons=[()]),
        ValueError,
        "'external_reasons' must have one entry per group (2) (got 1)",
    ),
    (
        "batch ids row length",
        lambda: P().evaluate_batch(np.zeros((1, 2)), rollout_ids=[[1]]),
        ValueError,
        "'rollout_ids' must have one id per reward (2) (got 1)",
    ),
    # metrics and stats
    (
        "metrics of junk",
        lambda: group_admission_metrics([1]),
        TypeError,
        "'decisions' must hold GroupAdmissionDecision objects (got 1)",
    ),
    (
        "stats not conserving",
        lambda: AdmissionStats.from_dict(
            {
                "counts": {
                    **dict.fromkeys(
                        [
                            "candidates",
                            "admitted",
                            "external",
                            "exact_dead",
                            "near_tie",
                            "redundant",
                            "reward_rejected",
                            "near_duplicate_rejected",
                            "fallback_admitted",
                        ],
                        0,
                    ),
                    "candidates": 2,
                }
            }
        ),
        ValueError,
        "counts do not conserve: candidates (2) != admitted (0) + rejections (0)",
    ),
    (
        "stats negative",
        lambda: AdmissionStats.from_dict({"counts": {"candidates": -1}}),
        ValueError,
        "'counts.candidates' must be a non-negative integer (got -1)",
    ),
    (
        "stats too many fallbacks",
        lambda: AdmissionStats().record_fallback(1),
        ValueError,
        "'count' would make fallback_admitted exceed the rejected groups (0 + 1 > 0)",
    ),
    (
        "fallback on admitted",
        lambda: AdmissionStats().add(P().evaluate([0, 1]), fallback_admitted=True),
        ValueError,
        "'fallback_admitted' applies only to rejected groups (got an admitted decision)",
    ),
    ("merge junk", lambda: AdmissionStats().merge(3), TypeError, "'other' must be an AdmissionStats (got 3)"),
    # budget
    (
        "negative extra groups",
        lambda: SamplingBudgetConfig(max_extra_groups=-1),
        ValueError,
        "'max_extra_groups' must be >= 0 (got -1)",
    ),
    (
        "float rounds",
        lambda: SamplingBudgetConfig(max_resample_rounds=1.5),
        TypeError,
        "'max_resample_rounds' must be an integer (got 1.5)",
    ),
    (
        "alpha zero",
        lambda: SamplingBudgetConfig(effective_rate_ema_alpha=0),
        ValueError,
        "'effective_rate_ema_alpha' must be in (0, 1] (got 0.0)",
    ),
    (
        "rate above one",
        lambda: SamplingBudgetConfig(min_effective_rate=1.5),
        ValueError,
        "'min_effective_rate' must be in (0, 1] (got 1.5)",
    ),
    (
        "unknown mode",
        lambda: SamplingBudgetConfig(mode="greedy"),
        ValueError,
        "'mode' must be 'expected' or 'confidence' (got 'greedy')",
    ),
    (
        "confidence one",
        lambda: SamplingBudgetConfig(confidence=1.0),
        ValueError,
        "'confidence' must be in (0, 1) (got 1.0)",
    ),
    (
        "controller config",
        lambda: SamplingBudgetController(3),
        TypeError,
        "'config' must be a SamplingBudgetConfig, a mapping or None (got 3)",
    ),
    (
        "observe wrong state",
        lambda: SamplingBudgetController().observe_round({}, [], num_generations=1),
        TypeError,
        "'state' must be a SamplingBudgetState (got {} of type dict)",
    ),
    (
        "observe zero generations",
        lambda: SamplingBudgetController().observe_round(SamplingBudgetState(), [], num_generations=0),
        ValueError,
        "'num_generations' must be >= 1 (got 0)",
    ),
    (
        "observe negative tokens",
        lambda: SamplingBudgetController().observe_round(
            SamplingBudgetState(), [], num_generations=1, generated_tokens=-5
        ),
        ValueError,
        "'generated_tokens' must be >= 0 (got -5)",
    ),
    (
        "observe junk",
        lambda: SamplingBudgetController().observe_round(SamplingBudgetState(), 5, num_generations=1),
        TypeError,
        "'decisions_or_stats' must be decisions, a BatchAdmissionResult or an AdmissionStats (got 5)",
    ),
    (
        "plan negative target",
        lambda: SamplingBudgetController().plan_resampling(
            _state_with_round(), target_groups=-1, num_generations=2
        ),
        ValueError,
        "'target_groups' must be >= 0 (got -1)",
    ),
    (
        "plan float generations",
        lambda: SamplingBudgetController().plan_resampling(
            SamplingBudgetState(), target_groups=1, num_generations=2.0
        ),
        TypeError,
        "'num_generations' must be an integer (got 2.0)",
    ),
    (
        "plan zero tokens",
        lambda: SamplingBudgetController().plan_resampling(
            SamplingBudgetState(), target_groups=1, num_generations=2, estimated_tokens_per_group=0
        ),
        ValueError,
        "'estimated_tokens_per_group' must be a finite number > 0 (got 0)",
    ),
    (
        "state unknown key",
        lambda: SamplingBudgetState.from_dict({"rounds": 1}),
        ValueError,
        "unknown key(s) 'rounds' in SamplingBudgetState dict",
    ),
    (
        "state negative",
        lambda: SamplingBudgetState.from_dict({**SamplingBudgetState().to_dict(), "generated_groups": -1}),
        ValueError,
        "'generated_groups' must be >= 0 (got -1)",
    ),
    (
        "state bad ema",
        lambda: SamplingBudgetState.from_dict({**SamplingBudgetState().to_dict(), "effective_rate_ema": 2.0}),
        ValueError,
        "'effective_rate_ema' must be None or a number in [0, 1] (got 2.0)",
    ),
    (
        "state truncated",
        lambda: SamplingBudgetState.from_dict({"sampling_rounds": 1}),
        CheckpointError,
        "SamplingBudgetState dict is missing key(s) ['generated_groups'",
    ),
    (
        "state contradictory",
        lambda: SamplingBudgetState.from_dict(
            {
                **SamplingBudgetState().to_dict(),
                "sampling_rounds": 1,
                "generated_groups": 3,
                "admitted_groups": 1,
            }
        ),
        CheckpointError,
        "admitted_groups (1) + rejected_groups (0) != generated_groups (3)",
    ),
    (
        "carry rate from non-state",
        lambda: SamplingBudgetController().new_state(carry_rate_from={"effective_rate_ema": 0.5}),  # type: ignore[arg-type]
        TypeError,
        "'carry_rate_from' must be a SamplingBudgetState or None (got {'effective_rate_ema': 0.5} of type",
    ),
]


@pytest.mark.parametrize(("name", "call", "error", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(
    name: str, call: Callable[[], Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_the_table_covers_at_least_twenty_kinds_of_bad_input() -> None:
    assert len(CASES) >= 20


def test_yaml_errors_name_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("policy: [unclosed\n")
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    nested = tmp_path / "nested.yaml"
    nested.write_text("policy: 3\n")

    with pytest.raises(ValueError, match=re.escape(f"'{broken}' is not valid YAML")):
        C.from_yaml(broken)
    with pytest.raises(
        ValueError, match=re.escape(f"'{listed}' must hold a YAML mapping (got [1, 2] of type list)")
    ):
        C.from_yaml(listed)
    with pytest.raises(ValueError, match=re.escape(f"'policy' in '{nested}' must be a mapping (got 3)")):
        C.from_yaml(nested, key="policy")
    with pytest.raises(FileNotFoundError):
        C.from_yaml(tmp_path / "absent.yaml")
