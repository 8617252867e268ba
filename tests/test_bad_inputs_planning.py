"""
Bad inputs to the sampling budget (config, state, controller) and the planners.

Each raises one type, with a message naming the field, the requirement and the value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from bad_inputs_common import (
    ADMITTED,
    HUGE,
    SEVERAL,
    Case,
    check_case,
    state_with_round,
    yaml_file,
)
from group_admission import (
    CheckpointError,
    ConfigurationError,
    PromptHistory,
    SamplingBudgetConfig,
    SamplingBudgetController,
    SamplingBudgetState,
    binomial_groups_needed,
    plan_prompts,
    prompts_needed,
)

CASES: list[Case] = [
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
            state_with_round(), target_groups=-1, num_generations=2
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
    # Configs: ints beyond the float range, YAML sections that are not mappings
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
        "yaml section empty list",
        lambda: SamplingBudgetConfig.from_yaml(yaml_file("budget: []\n"), key="budget"),
        ConfigurationError,
        "must be a mapping (got [] of type list)",
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
        lambda: SamplingBudgetState.from_dict({**state_with_round().to_dict(), "sampling_rounds": True}),
        CheckpointError,
        "'sampling_rounds' must be an integer (got True)",
    ),
    (
        "state dict rate lost",
        lambda: SamplingBudgetState.from_dict({**state_with_round().to_dict(), "effective_rate_ema": None}),
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
    # prompt ids: one check at every door (str of valid Unicode, or an int in the int64 range)
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
]


@pytest.mark.parametrize(("name", "call", "error", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(
    name: str, call: Callable[[], Any], error: type[Exception], message: str
) -> None:
    check_case(call, error, message)
