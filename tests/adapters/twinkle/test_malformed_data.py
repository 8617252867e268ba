"""
Malformed host data through twinkle's own classes: each malformed group is ``external`` and counted.

Two tables. Rewards as twinkle's reward functions may return them, for one group of a round
of three: values missing, not numbers, not finite, beyond the float range, or finite in
float64 but not in float32, the dtype ``GRPOAdvantage`` sums the components in. Sampler
answers: a request answered with another number of sequences than asked, in either of
twinkle's layouts, or a failed sequence. Each row must reject exactly that group as
``external`` with its reason, count it, and leave every advantage twinkle computes on the
kept rows finite. In ``.ci/twinkle`` the sampler is a subclass of twinkle-kit 0.5.1's
``Sampler`` answering with its ``SampledSequence``/``SampleResponse`` and the advantages are
its ``GRPOAdvantage``; in the main suite, the doubles of ``twinkle_doubles``.
"""

from __future__ import annotations

import importlib.util
import math
from typing import Any

import pytest
import torch

from group_admission.adapters.twinkle import (
    UNSUMMABLE_REWARD,
    WRONG_GROUP_SIZE,
    TwinkleGroupAdmission,
    sample_admitted_groups,
)

from .twinkle_doubles import grpo_advantage, pid_of, prompt, score, scripted_sampler

G = 3
GATED = {"min_reward_std": 1e-6, "gate_on": ["accuracy"]}
TWINKLE = importlib.util.find_spec("twinkle") is not None


@pytest.fixture(params=["doubles", "twinkle"])
def host(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The sampler base, data types and advantage function: the doubles, or twinkle-kit 0.5.1's own."""
    if request.param == "doubles":
        return {"sampler": scripted_sampler(), "advantage": grpo_advantage, "params": dict}
    if not TWINKLE:
        pytest.skip("needs twinkle-kit==0.5.1 (run .ci/twinkle)")
    from twinkle.advantage import GRPOAdvantage
    from twinkle.data_format import SampledSequence, SampleResponse, SamplingParams
    from twinkle.sampler import Sampler

    sampler = scripted_sampler(Sampler, SampledSequence, SampleResponse)
    return {"sampler": sampler, "advantage": GRPOAdvantage(), "params": SamplingParams}


def _admission(host: dict[str, Any], policy: dict[str, Any] = GATED, **kwargs: Any) -> TwinkleGroupAdmission:
    return TwinkleGroupAdmission(policy, num_generations=G, advantage_fn=host["advantage"], **kwargs)


def _assert_counted(admission: TwinkleGroupAdmission, reasons: set[str], kept: int) -> None:
    stats = admission.stats
    assert (1, kept) == (stats.external, stats.admitted), reasons
    assert stats.external_details
    assert set(stats.external_details) <= reasons | {"missing_reward"}  # a member with no usable reward


# -- rewards: one malformed group (the middle one) of three ------------------------------------------------
LIVE = [0.0, 1.0, 1.0]
HUGE = 10**400
#: name, the middle group's accuracy (gated) and brevity (not gated), the reasons it may count.
REWARD_ROWS: list[tuple[str, list[Any], list[Any], set[str]]] = [
    ("None outside gate_on", LIVE, [0.1, None, 0.3], {UNSUMMABLE_REWARD}),
    ("NaN outside gate_on", LIVE, [0.1, math.nan, 0.3], {UNSUMMABLE_REWARD}),
    ("text outside gate_on", LIVE, [0.1, "0.2", 0.3], {UNSUMMABLE_REWARD, "non_numeric_reward"}),
    ("a list outside gate_on", LIVE, [0.1, [0.2], 0.3], {UNSUMMABLE_REWARD, "non_scalar_reward"}),
    ("an int beyond the float range outside gate_on", LIVE, [0.1, HUGE, 0.3], {UNSUMMABLE_REWARD}),
    ("float64 but not float32 outside gate_on", LIVE, [0.1, 1e39, 0.3], {UNSUMMABLE_REWARD}),
    ("float64 but not float32 in gate_on", [0.0, 1e39, 1.0], [0.1, 0.2, 0.3], {UNSUMMABLE_REWARD}),
    ("a float32 sum that overflows", [0.0, 3e38, 1.0], [0.1, 3e38, 0.3], {UNSUMMABLE_REWARD}),
    ("None in gate_on", [0.0, None, 1.0], [0.1, 0.2, 0.3], {"missing_reward"}),
    ("NaN in gate_on", [0.0, math.nan, 1.0], [0.1, 0.2, 0.3], {"non_finite_reward"}),
    ("an int beyond the float range in gate_on", [0.0, HUGE, 1.0], [0.1, 0.2, 0.3], {"non_finite_reward"}),
    ("text in gate_on", [0.0, "1", 1.0], [0.1, 0.2, 0.3], {"non_numeric_reward"}),
    ("a mapping in gate_on", [0.0, {"a": 1}, 1.0], [0.1, 0.2, 0.3], {"dict_reward_without_key"}),
]


@pytest.mark.parametrize(
    ("name", "accuracy", "brevity", "reasons"), REWARD_ROWS, ids=[row[0] for row in REWARD_ROWS]
)
def test_a_malformed_reward_rejects_its_group_as_external(
    host: dict[str, Any], name: str, accuracy: list[Any], brevity: list[Any], reasons: set[str]
) -> None:
    admission = _admission(host)
    rows = admission.admit(
        {"accuracy": [*LIVE, *accuracy, *LIVE], "brevity": [0.5] * G + brevity + [0.5] * G}
    )

    assert [True, False, True] == rows.keep.tolist(), name
    assert "external" == rows.verdicts.result.decision(1).reason
    _assert_counted(admission, reasons, kept=2)
    assert bool(torch.isfinite(rows.advantages).all())  # twinkle's advantages of the kept rows


def test_a_bool_is_a_number_in_gate_on_and_outside_it(host: dict[str, Any]) -> None:
    admission = _admission(host)
    rows = admission.admit({"accuracy": [False, True, True], "brevity": [True, False, True]})

    assert rows.keep.tolist() == [True]
    assert {} == admission.stats.external_details


# -- sampler answers: a request answered with the wrong number of sequences --------------------------
def _malformed(host: dict[str, Any], change: str) -> Any:
    """A sampler (on twinkle's base where installed) that answers the first request of ``bad-1`` malformed."""

    class Malformed(host["sampler"]):  # type: ignore[misc, valid-type]
        def sample(self, inputs: Any, sampling_params: Any = None, adapter_name: str = "", **_: Any) -> Any:
            responses = super().sample(inputs, sampling_params, adapter_name)
            requests = [inputs] if isinstance(inputs, dict) else list(inputs)
            spare = responses[0].sequences[0]
            bad = next(i for i, request in enumerate(requests) if pid_of(request) == "bad-1")
            sequences = list(responses[bad].sequences)
            responses[bad].sequences = (
                sequences[:-1] if change == "one sequence fewer" else [*sequences, spare]
            )
            return responses

    return Malformed()


#: name, the middle prompt, whether its first request is answered malformed, the reasons it may count.
SAMPLER_ROWS = [
    ("one sequence fewer", "bad-1", True, {WRONG_GROUP_SIZE}),
    ("one sequence more", "bad-1", True, {WRONG_GROUP_SIZE}),
    ("a failed sequence", "error-1", False, {"sampler_error"}),
]


@pytest.mark.parametrize("num_samples", [1, G], ids=["a request per sample", "a request per prompt"])
@pytest.mark.parametrize(
    ("change", "middle", "malformed", "reasons"), SAMPLER_ROWS, ids=[r[0] for r in SAMPLER_ROWS]
)
def test_a_request_answered_malformed_rejects_its_group_as_external(
    host: dict[str, Any], change: str, middle: str, malformed: bool, reasons: set[str], num_samples: int
) -> None:
    admission = _admission(host, {"min_reward_std": 1e-6})
    prompts = [prompt("live-0"), prompt(middle), prompt("live-2")]
    params = host["params"](num_samples=num_samples, max_tokens=16)
    sampler = _malformed(host, change) if malformed else host["sampler"]()

    result = sample_admitted_groups(admission, sampler, prompts, score, sampling_params=params)

    assert ["live-0", "live-2"] == [pid_of(p) for p in result.prompts], change
    assert 2 * G == len(result.sequences) == result.advantages.numel()
    assert bool(torch.isfinite(result.advantages).all())
    assert (3, 1) == (result.report.generated_groups, result.report.short_groups)
    _assert_counted(admission, reasons, kept=2)
