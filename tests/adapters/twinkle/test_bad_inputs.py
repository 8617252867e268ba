"""
Bad inputs to the twinkle-kit adapter: each raises naming the argument, the requirement and the value.

Data problems inside well-formed rewards (``None``, NaN, a failed sample) are not here:
they reject their group as ``external`` and are counted (``test_admission.py``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

import pytest

from group_admission.adapters.twinkle import TwinkleGroupAdmission, sample_admitted_groups

from .twinkle_doubles import grpo_advantage, prompt, score, scripted_sampler

G = 4
Sampler = scripted_sampler()


def _step(**kwargs: Any) -> TwinkleGroupAdmission:
    kwargs.setdefault("num_generations", G)
    kwargs.setdefault("advantage_fn", grpo_advantage)
    return TwinkleGroupAdmission({"min_reward_std": 1e-6}, **kwargs)


def _rounds(sampler: Any = None, **kwargs: Any) -> Any:
    return sample_admitted_groups(_step(), sampler or Sampler(), [prompt("live-0")], score, **kwargs)


class _ShortSampler:
    def sample(self, inputs: Any, sampling_params: Any = None, **_: Any) -> list[Any]:
        return Sampler().sample(inputs[:-1], sampling_params)


CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    (
        "G a float",
        lambda: _step(num_generations=4.0),
        TypeError,
        "'num_generations' must be an integer (got 4.0",
    ),
    ("G of one", lambda: _step(num_generations=1), ValueError, "'num_generations' must be >= 2 (got 1)"),
    (
        "unknown scale",
        lambda: _step(scale="mean"),
        ValueError,
        "'scale' must be one of 'group', 'batch', 'none' (got 'mean')",
    ),
    (
        "advantage_fn not callable",
        lambda: _step(advantage_fn=3),
        TypeError,
        "'advantage_fn' must be callable",
    ),
    ("bad policy", lambda: TwinkleGroupAdmission(3, num_generations=G), TypeError, "'policy' must be a"),
    (
        "rewards a string",
        lambda: _step().admit("0101"),
        TypeError,
        "'rewards' must be a list of per-completion",
    ),
    (
        "empty mapping",
        lambda: _step().admit({}),
        ValueError,
        "'rewards' must hold at least one reward component",
    ),
    (
        "no rows",
        lambda: _step().admit([]),
        ValueError,
        "whole number of groups of num_generations=4 consecutive",
    ),
    ("partial group", lambda: _step().admit([0, 1, 0]), ValueError, "(got 3 rows)"),
    (
        "ragged components",
        lambda: _step().admit({"accuracy": [0, 1, 0, 1], "brevity": [0.5] * 3}),
        ValueError,
        "one entry per completion (got lengths {'accuracy': 4, 'brevity': 3})",
    ),
    (
        "gate_on without components",
        lambda: TwinkleGroupAdmission({"gate_on": ["accuracy"]}, num_generations=G).admit([0, 1, 0, 1]),
        TypeError,
        "'rewards' must be a mapping of reward component names to values when 'gate_on' is set",
    ),
    (
        "gate_on names a missing component",
        lambda: TwinkleGroupAdmission({"gate_on": ["acc"]}, num_generations=G).admit(
            {"accuracy": [0, 1, 0, 1]}
        ),
        ValueError,
        "'gate_on' names unknown reward component(s) ['acc']",
    ),
    (
        "external_reasons per row",
        lambda: _step().admit([0, 1, 0, 1], external_reasons=[[], [], [], []]),
        ValueError,
        "'external_reasons' must have one entry per group (1) (got 4)",
    ),
    (
        "completions per group",
        lambda: TwinkleGroupAdmission({"max_mean_pairwise_similarity": 0.9}, num_generations=G).admit(
            [0, 1, 0, 1], completions=["a"]
        ),
        ValueError,
        "'completions' must have one entry per row (4) (got 1)",
    ),
    (
        "an advantage_fn that drops rows",
        lambda: _step(advantage_fn=lambda r, **_: r[:2]).admit([0.0, 1.0, 0.0, 1.0]),
        ValueError,
        "'advantage_fn' must return one advantage per row (4,) (got (2,))",
    ),
    (
        "select per group",
        lambda: _step().admit([0, 1, 0, 1]).select([1]),
        ValueError,
        "one entry per completion (4)",
    ),
    ("plan before a step", lambda: _step().plan(), Exception, "call begin_step(target_groups) before plan()"),
    (
        "no prompts",
        lambda: sample_admitted_groups(_step(), Sampler(), [], score),
        ValueError,
        "'prompts' must hold at least one prompt, the step's target being one kept group per prompt (got 0)",
    ),
    (
        "on_exhausted unknown",
        lambda: _rounds(on_exhausted="skip"),
        ValueError,
        "'on_exhausted' must be one of 'train', 'raise' (got 'skip')",
    ),
    (
        "num_samples neither 1 nor G",
        lambda: _rounds(sampling_params={"num_samples": 3}),
        ValueError,
        "'sampling_params.num_samples' must be 1 (each prompt repeated num_generations times) or "
        "num_generations=4 (got 3)",
    ),
    (
        "num_samples text",
        lambda: _rounds(sampling_params={"num_samples": "4"}),
        TypeError,
        "must be an integer",
    ),
    (
        "a sampler that loses a request",
        lambda: _rounds(_ShortSampler()),
        ValueError,
        "the sampler must return one SampleResponse per request, 4 for 1 prompts and num_generations=4 "
        "(got 3)",
    ),
]


@pytest.mark.parametrize(("case", "call", "error", "message"), CASES, ids=[case[0] for case in CASES])
def test_bad_input_raises_by_name(
    case: str, call: Callable[[], Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_without_twinkle_the_default_advantage_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "twinkle.advantage", None)  # as if twinkle-kit were not installed
    step = TwinkleGroupAdmission({"min_reward_std": 1e-6}, num_generations=G)
    with pytest.raises(ImportError, match=re.escape("pip install twinkle-kit==0.5.1 torch==2.13.0")):
        step.admit([0, 1, 0, 1])
