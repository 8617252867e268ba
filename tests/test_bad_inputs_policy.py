"""
Bad inputs to configs, the policy, ``evaluate``, ``evaluate_batch`` and ``ngram_jaccard``.

Each raises one type, with a message naming the field, the requirement and the value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bad_inputs_common import (
    HUGE,
    SEVERAL,
    C,
    Case,
    P,
    check_case,
    similar,
    torch_or_skip,
    yaml_file,
)
from group_admission import (
    ConfigurationError,
    GroupAdmissionDecision,
    SamplingBudgetConfig,
    ngram_jaccard,
    parse_yaml,
)

CASES: list[Case] = [
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
        "yaml section 0",
        lambda: C.from_yaml(yaml_file("policy: 0\n"), key="policy"),
        ConfigurationError,
        "must be a mapping (got 0)",
    ),
    (
        "yaml section false",
        lambda: C.from_yaml(yaml_file("policy: false\n"), key="policy"),
        ConfigurationError,
        "must be a mapping (got False)",
    ),
    (
        "yaml section empty string",
        lambda: C.from_yaml(yaml_file("policy: ''\n"), key="policy"),
        ConfigurationError,
        "must be a mapping (got '')",
    ),
    (
        "yaml file a list",
        lambda: C.from_yaml(yaml_file("- 1\n")),
        ConfigurationError,
        "must hold a YAML mapping (got [1] of type list)",
    ),
    (
        "yaml key not a string",
        lambda: C.from_yaml(yaml_file("policy: {}\n"), key=3),  # type: ignore[arg-type]
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
        lambda: C.from_yaml(yaml_file("min_reward_std: -1\n")),
        ValueError,
        "'min_reward_std' must be >= 0 (got -1.0)",
    ),
    # YAML 1.2's floats (1e-6) are numbers, so their mistakes are the field's, as for any number
    (
        "yaml 1e-6 below zero",
        lambda: C.from_yaml(yaml_file("min_reward_std: -1e-6\n")),
        ValueError,
        "'min_reward_std' must be >= 0 (got -1e-06)",
    ),
    (
        "yaml 1e3 where a count goes",
        lambda: SamplingBudgetConfig.from_yaml(yaml_file("max_extra_groups: 1e3\n")),
        TypeError,
        "'max_extra_groups' must be an integer (got 1000.0)",
    ),
    (
        "yaml 1e999",
        lambda: C.from_yaml(yaml_file("min_reward_std: 1e999\n")),
        ValueError,
        "'min_reward_std' must be finite (got inf)",
    ),
    (
        "yaml number with a unit",
        lambda: C.from_yaml(yaml_file("min_reward_std: 1e-6x\n")),
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
        lambda: P().evaluate(torch_or_skip().tensor([1 + 1j, 0])),
        TypeError,
        "'rewards' must hold numbers (got a tensor of dtype torch.complex64)",
    ),
    (
        "complex tensor batch",
        lambda: P().evaluate_batch(torch_or_skip().tensor([[1 + 1j, 0]])),
        TypeError,
        "'rewards' must hold numbers (got a tensor of dtype torch.complex64)",
    ),
    (
        "complex tensor component",
        lambda: P().evaluate({"a": torch_or_skip().tensor([1j, 0j], dtype=torch_or_skip().complex128)}),
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
        lambda: P().evaluate([0, 1], rollout_ids=torch_or_skip().tensor([1])),
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
    check_case(call, error, message)


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
