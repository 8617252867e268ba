"""A table of bad inputs for every public entry point: exception type and message."""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from group_admission import (
    AdmissionSession,
    AdmissionStats,
    CheckpointError,
    ConfigurationError,
    DropLimits,
    GroupAdmissionConfig,
    GroupAdmissionDecision,
    GroupAdmissionPolicy,
    PromptHistory,
    PromptHistoryConfig,
    RejectionReason,
    SamplingBudgetConfig,
    SamplingBudgetController,
    SamplingBudgetState,
    StepLifecycleError,
    binomial_groups_needed,
    group_admission_metrics,
    informative_probability,
    ngram_jaccard,
    parse_yaml,
    plan_prompts,
    prompts_needed,
)

P = GroupAdmissionPolicy
C = GroupAdmissionConfig
similar = C(max_mean_pairwise_similarity=0.5)


def _state_with_round() -> SamplingBudgetState:
    state = SamplingBudgetState()
    SamplingBudgetController().observe_round(state, groups=1, admitted=1, num_generations=2)
    return state


def _yaml(text: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="ga-bad-")) / "config.yaml"
    path.write_text(text)
    return path


def _stepping() -> AdmissionSession:
    session = AdmissionSession(C(min_reward_std=1e-6))
    session.begin_step(4)
    return session


def _history_state_with_id(prompt_id: object) -> dict[str, Any]:
    """A history state whose one pending observation names ``prompt_id`` (written as JSON would)."""
    history = PromptHistory({"group_size": 2})
    history.observe("p", ADMITTED, step=0)
    state = json.loads(json.dumps(history.to_dict()))
    state["pending"]["ids"] = [prompt_id]
    return state


def _torch() -> Any:
    return pytest.importorskip("torch")


REJECTED = P(C(min_reward_std=1e-6)).evaluate([1, 1])
ADMITTED = P().evaluate([0, 1])
_COUNT_KEYS = (
    "candidates",
    "admitted",
    "external",
    "exact_dead",
    "near_tie",
    "redundant",
    "reward_rejected",
    "near_duplicate_rejected",
    "fallback_admitted",
)


def _stats_dict(**counts: int) -> dict[str, Any]:
    return {"counts": {**dict.fromkeys(_COUNT_KEYS, 0), **counts}, "external_details": {}}


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
        "empty gate_on name",
        lambda: C(gate_on=["accuracy", ""]),
        ValueError,
        "'gate_on' entries must be non-empty strings (got '')",
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
        "'completions' must describe the same complete group as the rewards: "
        "one entry per reward (2) (got 1)",
    ),
    (
        "batch completions row length",
        lambda: P().evaluate_batch([[0, 1]], [["a", "b", "c"]]),
        ValueError,
        "'completions' must describe the same complete group as the rewards: "
        "one entry per reward (2) (got 3)",
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
        "'completions' must be given (completions are required when the near-duplicate gate is on: "
        "max_mean_pairwise_similarity=0.5) (got None)",
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
        "external reason empty",
        lambda: P().evaluate([0, 1], external_reasons=["stale", ""]),
        ValueError,
        "'external_reasons' entries must be non-empty strings (got '')",
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
        "'mode' must be one of 'expected', 'confidence' (got 'greedy')",
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
        lambda: SamplingBudgetController().observe_round({}, groups=0, admitted=0, num_generations=1),
        TypeError,
        "'state' must be a SamplingBudgetState (got {} of type dict)",
    ),
    (
        "observe zero generations",
        lambda: SamplingBudgetController().observe_round(
            SamplingBudgetState(), groups=0, admitted=0, num_generations=0
        ),
        ValueError,
        "'num_generations' must be >= 1 (got 0)",
    ),
    (
        "observe negative tokens",
        lambda: SamplingBudgetController().observe_round(
            SamplingBudgetState(), groups=0, admitted=0, num_generations=1, generated_tokens=-5
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
        "unknown key(s) ['rounds']",
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
        "'effective_rate_ema' must be in [0, 1] (got 2.0)",
    ),
    (
        "state truncated",
        lambda: SamplingBudgetState.from_dict({"sampling_rounds": 1}),
        CheckpointError,
        "cannot restore the SamplingBudgetState: missing key(s) ['generated_groups'",
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


HUGE = 10**400  # a Python int beyond the float range
SEVERAL = "0" * 70  # the digits of HUGE that an error message shows

CASES += [
    # Configs: ints beyond the float range, YAML sections that are not mappings
    (
        "huge int threshold",
        lambda: C(min_reward_std=HUGE),
        ValueError,
        f"'min_reward_std' must be finite (got 1{SEVERAL}",
    ),
    (
        "huge int similarity",
        lambda: C(max_mean_pairwise_similarity=-HUGE),
        ValueError,
        f"'max_mean_pairwise_similarity' must be finite (got -1{SEVERAL}",
    ),
    (
        "float ngram size",
        lambda: C(similarity_ngram_size=1.5),
        TypeError,
        "'similarity_ngram_size' must be an integer (got 1.5)",
    ),
    (
        "huge int rate floor",
        lambda: SamplingBudgetConfig(min_effective_rate=HUGE),
        ValueError,
        f"'min_effective_rate' must be finite (got 1{SEVERAL}",
    ),
    (
        "huge int confidence",
        lambda: SamplingBudgetConfig(confidence=-HUGE),
        ValueError,
        f"'confidence' must be finite (got -1{SEVERAL}",
    ),
    (
        "nan confidence",
        lambda: SamplingBudgetConfig(confidence=math.nan),
        ValueError,
        "'confidence' must be finite",
    ),
    (
        "budget unknown mapping key",
        lambda: SamplingBudgetConfig.from_mapping({"rounds": 1}),
        ValueError,
        "unknown key(s) 'rounds' in SamplingBudgetConfig mapping",
    ),
    (
        "yaml section 0",
        lambda: C.from_yaml(_yaml("policy: 0\n"), key="policy"),
        ConfigurationError,
        "must be a mapping (got 0)",
    ),
    (
        "yaml section false",
        lambda: C.from_yaml(_yaml("policy: false\n"), key="policy"),
        ConfigurationError,
        "must be a mapping (got False)",
    ),
    (
        "yaml section empty list",
        lambda: SamplingBudgetConfig.from_yaml(_yaml("budget: []\n"), key="budget"),
        ConfigurationError,
        "must be a mapping (got [] of type list)",
    ),
    (
        "yaml section empty string",
        lambda: C.from_yaml(_yaml("policy: ''\n"), key="policy"),
        ConfigurationError,
        "must be a mapping (got '')",
    ),
    (
        "yaml file a list",
        lambda: C.from_yaml(_yaml("- 1\n")),
        ConfigurationError,
        "must hold a YAML mapping (got [1] of type list)",
    ),
    (
        "yaml key not a string",
        lambda: C.from_yaml(_yaml("policy: {}\n"), key=3),  # type: ignore[arg-type]
        TypeError,
        "'key' must be a string or None (got 3)",
    ),
    (
        "yaml path a file descriptor",
        lambda: C.from_yaml(0),  # type: ignore[arg-type]
        TypeError,
        "'path' must be a file path (got 0)",
    ),
    (
        "yaml bad field",
        lambda: C.from_yaml(_yaml("min_reward_std: -1\n")),
        ValueError,
        "'min_reward_std' must be >= 0 (got -1.0)",
    ),
    # YAML 1.2's floats (1e-6) are numbers, so their mistakes are the field's, as for any number
    (
        "yaml 1e-6 below zero",
        lambda: C.from_yaml(_yaml("min_reward_std: -1e-6\n")),
        ValueError,
        "'min_reward_std' must be >= 0 (got -1e-06)",
    ),
    (
        "yaml 1e3 where a count goes",
        lambda: SamplingBudgetConfig.from_yaml(_yaml("max_extra_groups: 1e3\n")),
        TypeError,
        "'max_extra_groups' must be an integer (got 1000.0)",
    ),
    (
        "yaml 1e999",
        lambda: C.from_yaml(_yaml("min_reward_std: 1e999\n")),
        ValueError,
        "'min_reward_std' must be finite (got inf)",
    ),
    (
        "yaml number with a unit",
        lambda: C.from_yaml(_yaml("min_reward_std: 1e-6x\n")),
        TypeError,
        "'min_reward_std' must be a real number (got '1e-6x')",
    ),
    (
        "yaml text not a string",
        lambda: parse_yaml(3),  # type: ignore[arg-type]
        TypeError,
        "'text' must be a string of YAML (got 3)",
    ),
    (
        "yaml text not yaml",
        lambda: parse_yaml("a: [", source="--admission.gate_on"),
        ConfigurationError,
        "'--admission.gate_on' is not valid YAML: while parsing a flow node",
    ),
    # evaluate / evaluate_batch: shapes, dtypes, indices
    (
        "batch depth-3 list",
        lambda: P().evaluate_batch([[[0, 1]], [[1, 1]]]),
        ValueError,
        "'rewards' must be 2-D: member (0, 0) is itself a sequence ([0, 1] of type list)",
    ),
    (
        "batch depth-3 array",
        lambda: P().evaluate_batch(np.zeros((2, 1, 2))),
        ValueError,
        "'rewards' must be 2-D (got an array of shape (2, 1, 2))",
    ),
    (
        "batch depth-3 composite",
        lambda: P().evaluate_batch({"a": [[[0, 1]]]}),
        ValueError,
        "'rewards['a']' must be 2-D: member (0, 0) is itself a sequence",
    ),
    (
        "batch object array holding a list",
        lambda: P().evaluate_batch(np.array([[0, [1]]], dtype=object)),
        ValueError,
        "'rewards' must be 2-D: member (0, 1) is itself a sequence ([1] of type list)",
    ),
    (
        "complex array",
        lambda: P().evaluate(np.array([1 + 1j, 0])),
        TypeError,
        "'rewards' must hold numbers (got an array of dtype complex128)",
    ),
    (
        "complex tensor",
        lambda: P().evaluate(_torch().tensor([1 + 1j, 0])),
        TypeError,
        "'rewards' must hold numbers (got a tensor of dtype torch.complex64)",
    ),
    (
        "complex tensor batch",
        lambda: P().evaluate_batch(_torch().tensor([[1 + 1j, 0]])),
        TypeError,
        "'rewards' must hold numbers (got a tensor of dtype torch.complex64)",
    ),
    (
        "complex tensor component",
        lambda: P().evaluate({"a": _torch().tensor([1j, 0j], dtype=_torch().complex128)}),
        TypeError,
        "'rewards['a']' must hold numbers (got a tensor of dtype torch.complex128)",
    ),
    (
        "complex array batch",
        lambda: P().evaluate_batch(np.array([[1j, 0]])),
        TypeError,
        "'rewards' must hold numbers (got an array of dtype complex128)",
    ),
    (
        "unhashable group key",
        lambda: P().evaluate([0, 1], group_key=["q", 1]),  # type: ignore[arg-type]
        TypeError,
        "'group_key' must be hashable (got ['q', 1] of type list)",
    ),
    (
        "batch unhashable group key",
        lambda: P().evaluate_batch([[0, 1], [1, 0]], group_keys=["q", {"id": 1}]),
        TypeError,
        "'group_keys' entries must be hashable (got {'id': 1} of type dict)",
    ),
    (
        "scorer beyond the float range",
        lambda: P(similar, scorer=lambda a, b: HUGE).evaluate([0, 1], ["a", "b"]),
        ValueError,
        f"'scorer' must return a finite value in [0, 1] (got 1{SEVERAL}",
    ),
    (
        "external reasons not a sequence",
        lambda: P().evaluate([0, 1], external_reasons=3),  # type: ignore[arg-type]
        TypeError,
        "'external_reasons' must be a sequence of strings (got 3)",
    ),
    (
        "tensor ids length",
        lambda: P().evaluate([0, 1], rollout_ids=_torch().tensor([1])),
        ValueError,
        "'rollout_ids' must have one id per reward (2) (got 1)",
    ),
    (
        "batch ids a string",
        lambda: P().evaluate_batch(np.zeros((1, 2)), rollout_ids="ab"),
        TypeError,
        "'rollout_ids' must be a sequence with one entry per group (got 'ab')",
    ),
    (
        "batch external entry",
        lambda: P().evaluate_batch(np.zeros((1, 2)), external_reasons=[[3]]),  # type: ignore[list-item]
        TypeError,
        "'external_reasons[0]' entries must be non-empty strings (got 3)",
    ),
    (
        "batch completions required",
        lambda: P(similar).evaluate_batch(np.zeros((1, 2))),
        ValueError,
        "'completions' must be given (completions are required when the near-duplicate gate is on: "
        "max_mean_pairwise_similarity=0.5) (got None)",
    ),
    (
        "batch decision index out of range",
        lambda: P().evaluate_batch([[0, 1]]).decision(1),
        IndexError,
        "'index' must be in [-1, 1) (got 1)",
    ),
    (
        "batch decision index not an int",
        lambda: P().evaluate_batch([[0, 1]]).decision(0.5),  # type: ignore[arg-type]
        TypeError,
        "'index' must be an integer (got 0.5)",
    ),
    # AdmissionStats
    (
        "stats add a hand-made contradiction",
        lambda: AdmissionStats().add(attrs.evolve(REJECTED, reason=RejectionReason.EXTERNAL)),
        ValueError,
        "'decisions' must hold decisions a policy could take "
        "(got reason 'external' with external_reasons [])",
    ),
    (
        "stats add junk",
        lambda: AdmissionStats().add(3),  # type: ignore[arg-type]
        TypeError,
        "'decision' must be a GroupAdmissionDecision (got 3)",
    ),
    (
        "stats add int fallback",
        lambda: AdmissionStats().add(REJECTED, fallback_admitted=2),  # type: ignore[arg-type]
        TypeError,
        "'fallback_admitted' must be a bool (got 2)",
    ),
    (
        "stats add_many not iterable",
        lambda: AdmissionStats().add_many(3),  # type: ignore[arg-type]
        TypeError,
        "'decisions' must be an iterable of GroupAdmissionDecision objects or a BatchAdmissionResult (got 3)",
    ),
    (
        "metrics not iterable",
        lambda: group_admission_metrics(None),  # type: ignore[arg-type]
        TypeError,
        "'decisions' must be an iterable of GroupAdmissionDecision objects or a BatchAdmissionResult "
        "(got None)",
    ),
    (
        "stats fallback count a float",
        lambda: AdmissionStats().record_fallback(1.5),  # type: ignore[arg-type]
        TypeError,
        "'count' must be an integer (got 1.5)",
    ),
    (
        "stats fallback count negative",
        lambda: AdmissionStats().record_fallback(-1),
        ValueError,
        "'count' must be >= 0 (got -1)",
    ),
    (
        "stats difference junk",
        lambda: AdmissionStats().difference(3),  # type: ignore[arg-type]
        TypeError,
        "'earlier' must be an AdmissionStats (got 3)",
    ),
    (
        "stats difference from a later snapshot",
        lambda: AdmissionStats().difference(AdmissionStats.from_dict(_stats_dict(candidates=1, admitted=1))),
        ValueError,
        "'earlier' is not an earlier snapshot of these counts (a count went down: candidates from 1 to 0)",
    ),
    (
        "stats dict not a mapping",
        lambda: AdmissionStats.from_dict([]),  # type: ignore[arg-type]
        CheckpointError,
        "'data' must be a mapping with a 'counts' mapping (got [] of type list)",
    ),
    (
        "stats dict unknown key",
        lambda: AdmissionStats.from_dict({**AdmissionStats().to_dict(), "extra": 1}),
        CheckpointError,
        "'data' has unknown key(s) ['extra']",
    ),
    (
        "stats details a list",
        lambda: AdmissionStats.from_dict({**AdmissionStats().to_dict(), "external_details": [1]}),
        CheckpointError,
        "'external_details' must be a mapping of reason to count (got [1] of type list)",
    ),
    (
        "stats details zero",
        lambda: AdmissionStats.from_dict(
            {"counts": _stats_dict(candidates=1, external=1)["counts"], "external_details": {"x": 0}}
        ),
        CheckpointError,
        "'external_details' must map strings to positive integers (got 'x': 0)",
    ),
    (
        "stats details without an external group",
        lambda: AdmissionStats.from_dict({**AdmissionStats().to_dict(), "external_details": {"x": 1}}),
        CheckpointError,
        "external_details (1 reasons) do not match external (0 groups)",
    ),
    (
        "stats bool count",
        lambda: AdmissionStats.from_dict(_stats_dict(candidates=True)),
        CheckpointError,
        "'counts.candidates' must be a non-negative integer (got True)",
    ),
    # binomial_groups_needed
    (
        "binomial rate zero",
        lambda: binomial_groups_needed(3, 0.0, 0.9),
        ValueError,
        "'rate' must be in (0, 1] (got 0.0)",
    ),
    (
        "binomial rate nan",
        lambda: binomial_groups_needed(3, math.nan, 0.9),
        ValueError,
        "'rate' must be in (0, 1] (got nan)",
    ),
    (
        "binomial rate a string",
        lambda: binomial_groups_needed(3, "0.5", 0.9),  # type: ignore[arg-type]
        TypeError,
        "'rate' must be a real number (got '0.5')",
    ),
    (
        "binomial confidence above one",
        lambda: binomial_groups_needed(3, 0.5, 1.5),
        ValueError,
        "'confidence' must be in (0, 1) (got 1.5)",
    ),
    (
        "binomial confidence nan",
        lambda: binomial_groups_needed(3, 0.5, math.nan),
        ValueError,
        "'confidence' must be in (0, 1) (got nan)",
    ),
    (
        "binomial negative remaining",
        lambda: binomial_groups_needed(-1, 0.5, 0.9),
        ValueError,
        "'remaining' must be >= 0 (got -1)",
    ),
    (
        "binomial float remaining",
        lambda: binomial_groups_needed(1.5, 0.5, 0.9),  # type: ignore[arg-type]
        TypeError,
        "'remaining' must be an integer (got 1.5)",
    ),
    # SamplingBudgetController and SamplingBudgetState
    (
        "can_generate zero groups",
        lambda: SamplingBudgetController().can_generate(
            SamplingBudgetState(), 0, target_groups=1, num_generations=1
        ),
        ValueError,
        "'groups' must be >= 1 (got 0)",
    ),
    (
        "can_generate wrong state",
        lambda: SamplingBudgetController().can_generate({}, target_groups=1, num_generations=1),  # type: ignore[arg-type]
        TypeError,
        "'state' must be a SamplingBudgetState (got {} of type dict)",
    ),
    (
        "plan wrong state",
        lambda: SamplingBudgetController().plan_resampling(None, target_groups=1, num_generations=1),  # type: ignore[arg-type]
        TypeError,
        "'state' must be a SamplingBudgetState (got None)",
    ),
    (
        "plan tokens a string",
        lambda: SamplingBudgetController().plan_resampling(
            SamplingBudgetState(),
            target_groups=1,
            num_generations=2,
            estimated_tokens_per_group="9",  # type: ignore[arg-type]
        ),
        TypeError,
        "'estimated_tokens_per_group' must be a real number (got '9')",
    ),
    (
        "plan tokens nan",
        lambda: SamplingBudgetController().plan_resampling(
            SamplingBudgetState(), target_groups=1, num_generations=2, estimated_tokens_per_group=math.nan
        ),
        ValueError,
        "'estimated_tokens_per_group' must be a finite number > 0 (got nan)",
    ),
    (
        "observe samples and generations",
        lambda: SamplingBudgetController().observe_round(
            SamplingBudgetState(), groups=0, admitted=0, num_generations=1, generated_samples=1
        ),
        TypeError,
        "exactly one of 'num_generations' and 'generated_samples' must be given (got 1 and 1)",
    ),
    (
        "observe fewer samples than groups",
        lambda: SamplingBudgetController().observe_round(
            SamplingBudgetState(), groups=2, admitted=0, generated_samples=1
        ),
        ValueError,
        "'generated_samples' must be >= the round's groups (2) (got 1)",
    ),
    (
        "state negative field",
        lambda: SamplingBudgetState(sampling_rounds=-1),
        ValueError,
        "'sampling_rounds' must be >= 0 (got -1)",
    ),
    (
        "state rate a string",
        lambda: SamplingBudgetState(effective_rate_ema="0.5"),  # type: ignore[arg-type]
        TypeError,
        "'effective_rate_ema' must be a real number (got '0.5')",
    ),
    (
        "state dict not a mapping",
        lambda: SamplingBudgetState.from_dict([]),  # type: ignore[arg-type]
        CheckpointError,
        "the state must be a mapping from SamplingBudgetState.to_dict() (got [] of type list)",
    ),
    (
        "state dict bool count",
        lambda: SamplingBudgetState.from_dict({**_state_with_round().to_dict(), "sampling_rounds": True}),
        CheckpointError,
        "'sampling_rounds' must be an integer (got True)",
    ),
    (
        "state dict rate lost",
        lambda: SamplingBudgetState.from_dict({**_state_with_round().to_dict(), "effective_rate_ema": None}),
        CheckpointError,
        "effective_rate_ema is None after 1 generated group(s)",
    ),
    (
        "state dict samples without a round",
        lambda: SamplingBudgetState.from_dict({**SamplingBudgetState().to_dict(), "generated_samples": 4}),
        CheckpointError,
        "samples or tokens were generated in 0 sampling_rounds",
    ),
    # AdmissionSession
    (
        "session policy junk",
        lambda: AdmissionSession(3),  # type: ignore[arg-type]
        TypeError,
        "'policy' must be a GroupAdmissionPolicy, a GroupAdmissionConfig, a mapping or None (got 3)",
    ),
    (
        "session budget junk",
        lambda: AdmissionSession(budget=3),  # type: ignore[arg-type]
        TypeError,
        "'budget' must be a SamplingBudgetController, a SamplingBudgetConfig, a mapping or None (got 3)",
    ),
    (
        "session limits junk",
        lambda: AdmissionSession(limits=3),  # type: ignore[arg-type]
        TypeError,
        "'limits' must be a DropLimits, a mapping or None (got 3)",
    ),
    (
        "session host junk",
        lambda: AdmissionSession(host=3),  # type: ignore[arg-type]
        TypeError,
        "'host' must be a string (got 3)",
    ),
    (
        "session judge no rewards",
        lambda: AdmissionSession().judge([]),
        ValueError,
        "'rewards' must hold at least one member (got 0)",
    ),
    (
        "session judge negative tokens",
        lambda: AdmissionSession().judge([0, 1], generated_tokens=-1),
        ValueError,
        "'generated_tokens' must be >= 0 (got -1)",
    ),
    (
        "session judge float step",
        lambda: AdmissionSession().judge([0, 1], step=1.5),  # type: ignore[arg-type]
        TypeError,
        "'step' must be an int, a str or None (got 1.5)",
    ),
    (
        "session judge_batch 1-D",
        lambda: AdmissionSession().judge_batch(np.zeros(3)),
        ValueError,
        "'rewards' must be 2-D (got an array of shape (3,))",
    ),
    (
        "session judge_batch float tokens",
        lambda: AdmissionSession().judge_batch(np.zeros((1, 2)), generated_tokens=1.5),  # type: ignore[arg-type]
        TypeError,
        "'generated_tokens' must be an integer (got 1.5)",
    ),
    (
        "session record junk",
        lambda: AdmissionSession().record(3),  # type: ignore[arg-type]
        TypeError,
        "'decision' must be a GroupAdmissionDecision (got 3)",
    ),
    (
        "session record zero samples",
        lambda: AdmissionSession().record(REJECTED, samples=0),
        ValueError,
        "'samples' must be >= 1 (got 0)",
    ),
    (
        "session fallback without rejections",
        lambda: AdmissionSession().record_fallback(1),
        ValueError,
        "'count' would make fallback_admitted exceed the rejected groups (0 + 1 > 0)",
    ),
    (
        "session fallback a float",
        lambda: AdmissionSession().record_fallback(1.5),  # type: ignore[arg-type]
        TypeError,
        "'count' must be an integer (got 1.5)",
    ),
    (
        "session negative target",
        lambda: AdmissionSession().begin_step(-1),
        ValueError,
        "'target_groups' must be >= 0 (got -1)",
    ),
    (
        "session string target",
        lambda: AdmissionSession().begin_step("4"),  # type: ignore[arg-type]
        TypeError,
        "'target_groups' must be an integer (got '4')",
    ),
    (
        "session plan before a step",
        lambda: AdmissionSession().plan(),
        StepLifecycleError,
        "call begin_step(target_groups) before plan()",
    ),
    (
        "session plan zero generations",
        lambda: _stepping().plan(num_generations=0),
        ValueError,
        "'num_generations' must be >= 1 (got 0)",
    ),
    (
        "session can_launch before a step",
        lambda: AdmissionSession().can_launch(),
        StepLifecycleError,
        "call begin_step(target_groups) before can_launch()",
    ),
    (
        "session can_launch zero groups",
        lambda: _stepping().can_launch(0),
        ValueError,
        "'groups' must be >= 1 (got 0)",
    ),
    (
        "session can_launch negative in flight",
        lambda: _stepping().can_launch(in_flight=-1),
        ValueError,
        "'in_flight' must be >= 0 (got -1)",
    ),
    (
        "session end_step before a step",
        lambda: AdmissionSession().end_step(),
        StepLifecycleError,
        "call begin_step(target_groups) before end_step()",
    ),
    (
        "session begin_step on an open step",
        lambda: _stepping().begin_step(4),
        StepLifecycleError,
        "begin_step() while step 0 is open: call end_step() first",
    ),
    (
        "observe more admitted than groups",
        lambda: SamplingBudgetController().observe_round(
            SamplingBudgetState(), groups=2, admitted=3, num_generations=1
        ),
        ValueError,
        "'admitted' must be <= the round's groups (2) (got 3)",
    ),
    (
        "observe without counts",
        lambda: SamplingBudgetController().observe_round(SamplingBudgetState(), num_generations=1),
        TypeError,
        "'groups' and 'admitted' must be given (got None and None)",
    ),
    (
        "observe a bool count",
        lambda: SamplingBudgetController().observe_round(
            SamplingBudgetState(), groups=True, admitted=0, num_generations=1
        ),
        TypeError,
        "'groups' must be an integer (got True)",
    ),
    (
        "observe counts and decisions",
        lambda: SamplingBudgetController().observe_round(
            SamplingBudgetState(), [ADMITTED], groups=1, admitted=1, num_generations=1
        ),
        TypeError,
        "give 'groups' and 'admitted', or the deprecated 'decisions_or_stats', not both",
    ),
    (
        "prompts needed negative probability",
        lambda: prompts_needed([0.5, -0.1], 1),
        ValueError,
        "'probabilities' entries must be in [0, 1] (got -0.1)",
    ),
    (
        "prompts needed nan probability",
        lambda: prompts_needed([math.nan], 1, 0.9),
        ValueError,
        "'probabilities' entries must be in [0, 1] (got nan)",
    ),
    (
        "prompts needed string probability",
        lambda: prompts_needed(["0.5"], 1),  # type: ignore[list-item]
        TypeError,
        "'probabilities' entries must be real numbers (got '0.5')",
    ),
    (
        "prompts needed not a sequence",
        lambda: prompts_needed(0.5, 1),  # type: ignore[arg-type]
        TypeError,
        "'probabilities' must be a sequence of probabilities (got 0.5)",
    ),
    (
        "prompts needed negative remaining",
        lambda: prompts_needed([0.5], -1),
        ValueError,
        "'remaining' must be >= 0 (got -1)",
    ),
    (
        "prompts needed confidence one",
        lambda: prompts_needed([0.5], 1, 1.0),
        ValueError,
        "'confidence' must be in (0, 1) (got 1.0)",
    ),
    (
        "informative probability negative alpha",
        lambda: informative_probability(-1, 0.5, 8),
        ValueError,
        "'alpha' must be a finite number > 0 (got -1)",
    ),
    (
        "informative probability nan beta",
        lambda: informative_probability(0.5, math.nan, 8),
        ValueError,
        "'beta' must be a finite number > 0 (got nan)",
    ),
    (
        "history reward range too wide",
        lambda: PromptHistoryConfig(group_size=8, reward_range=(-1e308, 1e308)),
        ValueError,
        "'reward_range' must have a finite width high - low (got (-1e+308, 1e+308))",
    ),
    # prompt ids: one check at every door (str of valid Unicode, or an int in the int64 range)
    (
        "history observe a lone surrogate",
        lambda: PromptHistory({"group_size": 2}).observe("a\ud800", ADMITTED, step=0),
        ValueError,
        "'prompt_id' must be a str of valid Unicode, encodable as UTF-8 "
        "(no lone surrogates) (got 'a\\ud800')",
    ),
    (
        "history pick a lone surrogate",
        lambda: PromptHistory({"group_size": 2}).pick(["a", "\udfff"], step=0),
        ValueError,
        "'prompt_ids[1]' must be a str of valid Unicode",
    ),
    (
        "history pick a float id",
        lambda: PromptHistory({"group_size": 2}).pick(iter([1, 2.0]), step=0),
        TypeError,
        "'prompt_ids[1]' must be a str or an int (got 2.0)",
    ),
    (
        "history pick an id beyond int64",
        lambda: PromptHistory({"group_size": 2}).pick([2**63], step=0),
        ValueError,
        "'prompt_ids[0]' must be an int in [-2**63, 2**63 - 1] (got 9223372036854775808)",
    ),
    (
        "history pick a numpy uint64 beyond int64",
        lambda: PromptHistory({"group_size": 2}).pick(np.array([2**64 - 1], dtype=np.uint64), step=0),
        ValueError,
        "'prompt_ids[0]' must be an int in [-2**63, 2**63 - 1]",
    ),
    (
        "history pick a set",
        lambda: PromptHistory({"group_size": 2}).pick({1, 2}, step=0),
        TypeError,
        "'prompt_ids' must be a sequence of prompt ids (got {1, 2} of type set)",
    ),
    (
        "history estimate a bool",
        lambda: PromptHistory({"group_size": 2}).estimate(True, step=0),
        TypeError,
        "'prompt_id' must be a str or an int (got True)",
    ),
    (
        "history observe_batch a numpy bool id",
        lambda: PromptHistory({"group_size": 2}).observe_batch([np.bool_(True)], [ADMITTED], step=0),
        TypeError,
        "'prompt_ids[0]' must be a str or an int (got np.True_ of type bool)",
    ),
    (
        "history step beyond int64",
        lambda: PromptHistory({"group_size": 2}).pick([1], step=2**63),
        ValueError,
        "'step' must be <= 2**63 - 1 (got 9223372036854775808)",
    ),
    (
        "history merge a state with a lone surrogate",
        lambda: PromptHistory({"group_size": 2}).merge(_history_state_with_id("\ud800")),
        CheckpointError,
        "cannot restore the PromptHistory: 'pending.ids[]' must be a str of valid Unicode",
    ),
    (
        "session pick_prompts a float id",
        lambda: _stepping().pick_prompts(PromptHistory({"group_size": 2}), [0.5]),
        TypeError,
        "'prompt_ids[0]' must be a str or an int (got 0.5)",
    ),
    (
        "plan_prompts a mapping",
        lambda: plan_prompts(
            SamplingBudgetController(),
            SamplingBudgetState(),
            PromptHistory({"group_size": 2}),
            {"a": 1},
            step=0,
            target_groups=1,
            num_generations=2,
        ),
        TypeError,
        "'prompt_ids' must be a sequence of prompt ids (got {'a': 1} of type dict)",
    ),
    (
        "session state empty",
        lambda: AdmissionSession().load_state_dict({}),
        CheckpointError,
        "cannot restore the session: missing key(s) ['format'",
    ),
    (
        "session state not a mapping",
        lambda: AdmissionSession().load_state_dict(3),  # type: ignore[arg-type]
        CheckpointError,
        "cannot restore the session: the state must be a mapping from state_dict() (got 3)",
    ),
    (
        "session state of another config",
        lambda: AdmissionSession().load_state_dict(_stepping().state_dict()),
        CheckpointError,
        "it was saved under a different policy configuration",
    ),
    # DropLimits
    (
        "limits ratio above one",
        lambda: DropLimits(max_rejection_ratio=1.5),
        ValueError,
        "'max_rejection_ratio' must be in [0, 1] (got 1.5)",
    ),
    (
        "limits huge int ratio",
        lambda: DropLimits(max_rejection_ratio=HUGE),
        ValueError,
        f"'max_rejection_ratio' must be finite (got 1{SEVERAL}",
    ),
    (
        "limits ratio a string",
        lambda: DropLimits(max_rejection_ratio="0.5"),  # type: ignore[arg-type]
        TypeError,
        "'max_rejection_ratio' must be a real number (got '0.5')",
    ),
    (
        "limits negative count",
        lambda: DropLimits(max_rejected_groups=-1),
        ValueError,
        "'max_rejected_groups' must be >= 0 (got -1)",
    ),
    (
        "limits unknown scope",
        lambda: DropLimits(scope="epoch"),  # type: ignore[arg-type]
        ValueError,
        "'scope' must be one of 'step', 'run' (got 'epoch')",
    ),
    (
        "limits forceable not names",
        lambda: DropLimits(forceable_external=[1]),  # type: ignore[list-item]
        TypeError,
        "'forceable_external' entries must be non-empty strings (got 1)",
    ),
    (
        "limits zero streak",
        lambda: DropLimits(max_consecutive_failed_groups=0),
        ValueError,
        "'max_consecutive_failed_groups' must be >= 1 (got 0)",
    ),
    (
        "limits unknown mapping key",
        lambda: DropLimits.from_mapping({"ratio": 0.5}),
        ValueError,
        "unknown key(s) 'ratio' in DropLimits mapping",
    ),
    # ngram_jaccard
    ("ngram n zero", lambda: ngram_jaccard("a b", "c d", n=0), ValueError, "'n' must be >= 1 (got 0)"),
    (
        "ngram n a float",
        lambda: ngram_jaccard("a b", "c d", n=1.5),  # type: ignore[arg-type]
        TypeError,
        "'n' must be an integer (got 1.5)",
    ),
    (
        "ngram n a bool",
        lambda: ngram_jaccard("a b", "c d", n=True),
        TypeError,
        "'n' must be an integer (got True)",
    ),
    (
        "ngram first text None",
        lambda: ngram_jaccard(None, "a"),  # type: ignore[arg-type]
        TypeError,
        "'a' must be a string (got None)",
    ),
    (
        "ngram second text a number",
        lambda: ngram_jaccard("a", 3),  # type: ignore[arg-type]
        TypeError,
        "'b' must be a string (got 3)",
    ),
]


@pytest.mark.parametrize(("name", "call", "error", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(
    name: str, call: Callable[[], Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        call()


COUNTS_GIVEN_A_BOOL: list[tuple[str, Callable[[], Any]]] = [
    ("begin_step", lambda: AdmissionSession().begin_step(True)),  # type: ignore[arg-type]
    ("record samples", lambda: AdmissionSession().record(ADMITTED, samples=True)),  # type: ignore[arg-type]
    ("judge tokens", lambda: AdmissionSession().judge([0, 1], generated_tokens=True)),  # type: ignore[arg-type]
    ("plan size", lambda: _stepping().plan(num_generations=True)),  # type: ignore[arg-type]
    ("stream in flight", lambda: _stepping().stream_plan(True)),  # type: ignore[arg-type]
    ("can_launch groups", lambda: _stepping().can_launch(True)),  # type: ignore[arg-type]
    (
        "observe groups",
        lambda: SamplingBudgetController().observe_round(
            SamplingBudgetState(),
            groups=True,
            admitted=0,
            num_generations=1,  # type: ignore[arg-type]
        ),
    ),
    ("binomial remaining", lambda: binomial_groups_needed(True, 0.5, 0.9)),  # type: ignore[arg-type]
    ("prompts needed remaining", lambda: prompts_needed([0.5], True)),  # type: ignore[arg-type]
    ("informative group size", lambda: informative_probability(1, 1, True)),  # type: ignore[arg-type]
    ("history config group size", lambda: PromptHistoryConfig(group_size=True)),  # type: ignore[arg-type]
    ("budget config cap", lambda: SamplingBudgetConfig(max_extra_groups=True)),  # type: ignore[arg-type]
    ("drop limit count", lambda: DropLimits(max_rejected_groups=True)),  # type: ignore[arg-type]
    ("stats fallback count", lambda: AdmissionStats().record_fallback(True)),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("call", [c[1] for c in COUNTS_GIVEN_A_BOOL], ids=[c[0] for c in COUNTS_GIVEN_A_BOOL])
def test_a_bool_where_a_count_is_expected_is_a_type_error_everywhere(call: Callable[[], Any]) -> None:
    with pytest.raises(TypeError, match=r"must be an integer \(got True\)"):
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


STD = P(C(min_reward_std=1e-6))
BY_ACCURACY = P(C(min_reward_std=1e-6, gate_on=["accuracy"]))

# Data that arrives during training: never an exception, either admitted or rejected as
# ``external`` with the named details (``()`` means admitted).
DATA_PROBLEMS: list[tuple[str, Callable[[], GroupAdmissionDecision], tuple[str, ...]]] = [
    ("huge int member", lambda: STD.evaluate([HUGE, 0]), ("non_finite_reward",)),
    ("huge negative int in a tuple", lambda: STD.evaluate((0, -HUGE)), ("non_finite_reward",)),
    (
        "huge int in an object array",
        lambda: STD.evaluate(np.array([HUGE, 0], dtype=object)),
        ("non_finite_reward",),
    ),
    ("huge int component", lambda: STD.evaluate({"a": [HUGE, 0]}), ("non_finite_reward",)),
    ("fraction beyond the float range", lambda: STD.evaluate([Fraction(HUGE, 3), 0]), ("non_finite_reward",)),
    ("huge int batch", lambda: STD.evaluate_batch([[HUGE, 0], [0, 1]]).decision(0), ("non_finite_reward",)),
    (
        "huge int beside None in a batch",
        lambda: STD.evaluate_batch([[HUGE, None]]).decision(0),
        ("missing_reward", "non_finite_reward"),
    ),
    (
        "masked member",
        lambda: STD.evaluate(np.ma.masked_array([1.0, 0.0, 5.0], mask=[False, False, True])),
        ("missing_reward",),
    ),
    (
        "masked int member",
        lambda: STD.evaluate(np.ma.masked_array([1, 0], mask=[False, True])),
        ("missing_reward",),
    ),
    (
        "masked batch member",
        lambda: STD.evaluate_batch(
            np.ma.masked_array([[1.0, 0.0], [0.0, 1.0]], mask=[[0, 1], [0, 0]])
        ).decision(0),
        ("missing_reward",),
    ),
    (
        "unmasked row of a masked batch",
        lambda: STD.evaluate_batch(
            np.ma.masked_array([[1.0, 0.0], [0.0, 1.0]], mask=[[0, 1], [0, 0]])
        ).decision(1),
        (),
    ),
    ("std overflows", lambda: STD.evaluate([1e308, -1e308]), ("reward_overflow",)),
    (
        "std overflows in a batch",
        lambda: STD.evaluate_batch([[1e308, -1e308]]).decision(0),
        ("reward_overflow",),
    ),
    ("mean overflows", lambda: P().evaluate([1.7e308, 1.7e308, 1.0]), ("reward_overflow",)),
    (
        "gated sum overflows",
        lambda: P().evaluate({"a": [1.7e308, 1.7e308], "b": [1.7e308, 1.7e308]}),
        ("reward_overflow",),
    ),
    (
        "gated sum overflows in a batch",
        lambda: P().evaluate_batch({"a": [[1.7e308, 1.7e308]], "b": [[1.7e308, 1.7e308]]}).decision(0),
        ("reward_overflow",),
    ),
    ("largest finite rewards", lambda: STD.evaluate([1e308, 1e308]), None),  # exact_dead, no overflow
    (
        "None in an ungated component",
        lambda: BY_ACCURACY.evaluate({"accuracy": [0, 1], "length": [None, 0.5]}),
        (),
    ),
    (
        "None in an ungated component of a batch",
        lambda: BY_ACCURACY.evaluate_batch({"accuracy": [[0, 1]], "length": [[None, 0.5]]}).decision(0),
        (),
    ),
    (
        "None in the gated component",
        lambda: BY_ACCURACY.evaluate({"accuracy": [None, 1], "length": [0.1, 0.5]}),
        ("missing_reward",),
    ),
    (
        "NaN then None across components",
        lambda: P().evaluate({"a": [math.nan, 1.0], "b": [None, 1.0]}),
        ("missing_reward", "non_finite_reward"),
    ),
    (
        "NaN then None across components of a batch",
        lambda: P().evaluate_batch({"a": [[math.nan, 1.0]], "b": [[None, 1.0]]}).decision(-1),
        ("missing_reward", "non_finite_reward"),
    ),
    (
        "one member without its completion",
        lambda: P(similar).evaluate([1.0], [None]),
        ("missing_completion",),
    ),
    (
        "one member without its completion in a batch",
        lambda: P(similar).evaluate_batch([[1.0]], [[None]]).decision(-1),
        ("missing_completion",),
    ),
]


@pytest.mark.parametrize(("name", "call", "details"), DATA_PROBLEMS, ids=[c[0] for c in DATA_PROBLEMS])
def test_bad_data_is_admitted_or_rejected_as_external_never_raised(
    name: str, call: Callable[[], GroupAdmissionDecision], details: tuple[str, ...] | None
) -> None:
    decision = call()

    if details is None:  # a gate decides, not a data problem
        assert () == decision.external_reasons
        assert not decision.admitted
        return
    assert details == decision.external_reasons
    assert decision.admitted == (details == ())
    if details:
        assert "external" == decision.reason
    if "reward_overflow" in details:
        assert math.isnan(decision.reward_mean)
        assert math.isnan(decision.reward_std)
