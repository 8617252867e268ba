"""
Malformed engine answers through OpenRLHF's own ``_generate_vllm`` and advantage code: each ``external``.

One prompt of a batch of three gets a malformed answer from the (scripted) engine: a group of
``n - 1`` or ``n + 1`` samples, no sample, scores that are not finite, overflow a float, or are
not numbers at all, a failed generation. The adapter must reject exactly that group as
``external`` with the named reason, count it, and hand OpenRLHF only whole groups of ``n``:
on the real 0.11.2 module the returned experiences then go through OpenRLHF's own
``RemoteExperienceMaker.compute_advantages_and_returns``, which views the rewards as groups
of ``n`` (a group of the wrong size made it raise ``shape '[-1, 4]' is invalid``).
"""

from __future__ import annotations

import json
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from adapters.openrlhf.scripted_engine import LocalEngine, args, loader
from group_admission.adapters.openrlhf import METRIC_PREFIX, SETTINGS_ENV, admission_generator_class

N = 4
LIVE = [0.0, 1.0, 1.0, 0.0]
#: name, the malformed prompt's script entry, the external reasons its group may be counted with
#: (OpenRLHF's own response conversion raises on a score that is not a number, the double reads it).
ROWS: list[tuple[str, dict[str, Any], set[str]]] = [
    ("n - 1 samples", {"scores": [0.0, 1.0, 1.0], "any_size": True}, {"wrong_group_size"}),
    ("n + 1 samples", {"scores": [0.0, 1.0, 1.0, 0.0, 1.0], "any_size": True}, {"wrong_group_size"}),
    ("one sample", {"scores": [1.0], "any_size": True}, {"wrong_group_size"}),
    ("no sample", {"scores": [], "any_size": True}, {"empty_group", "missing_reward"}),
    ("a NaN score", {"scores": [0.0, float("nan"), 1.0, 0.0]}, {"non_finite_reward"}),
    ("an infinite score", {"scores": [0.0, float("-inf"), 1.0, 0.0]}, {"non_finite_reward"}),
    (
        "a score beyond the float range",
        {"scores": [0.0, 10**400, 1.0, 0.0]},
        {"generation_failed", "non_finite_reward"},
    ),
    (
        "a score that is text",
        {"scores": [0.0, "1.0", 1.0, 0.0]},
        {"generation_failed", "non_numeric_reward", "missing_reward"},
    ),
    ("a score that is None", {"scores": [0.0, None, 1.0, 0.0]}, {"generation_failed", "missing_reward"}),
    ("a failed generation", {"scores": LIVE, "fail": True}, {"generation_failed"}),
    (
        "wrong size and a NaN",
        {"scores": [float("nan"), 1.0, 0.0], "any_size": True},
        {"wrong_group_size", "non_finite_reward"},
    ),
]


def _generator(host: ModuleType, script: dict[str, Any]) -> Any:
    cls = admission_generator_class(host.SamplesGenerator)
    return cls(
        SimpleNamespace(args=args(n=N, batch_size=len(script))), None, None, None, [LocalEngine(script)]
    )


def openrlhf_advantages(experiences: list[Any]) -> list[Any]:
    """OpenRLHF 0.11.2's own split into micro-batches and advantage computation (group_norm)."""
    import torch
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

    settings = SimpleNamespace(
        rollout=SimpleNamespace(n_samples_per_prompt=N, micro_batch_size=1),
        train=SimpleNamespace(dynamic_batch_enable=False),
        algo=SimpleNamespace(
            advantage=SimpleNamespace(estimator="group_norm", gamma=1.0, lambd=1.0, no_std_norm=False)
        ),
        reward=SimpleNamespace(
            clip_range=(-10.0, 10.0), overlong_buffer_len=None, stop_properly_penalty_coef=None
        ),
    )
    kl = SimpleNamespace(value=0.0)
    maker = RemoteExperienceMaker(
        None, None, None, None, kl, SimpleNamespace(args=settings), SimpleNamespace(pad_token_id=0)
    )
    batch = maker.split_rollout_samples(experiences)
    for experience in batch:  # what make_experience sets without a reference model
        experience.kl = torch.zeros_like(experience.action_mask, dtype=torch.float32)
    return maker.compute_advantages_and_returns(batch)


@pytest.mark.parametrize(("name", "entry", "external"), ROWS, ids=[row[0] for row in ROWS])
def test_a_malformed_group_is_external_counted_and_never_reaches_openrlhf(
    host: ModuleType, monkeypatch: pytest.MonkeyPatch, name: str, entry: dict[str, Any], external: set[str]
) -> None:
    monkeypatch.setenv(SETTINGS_ENV, json.dumps({"budget": {"max_extra_groups": 0}}))
    script = {"p0": {"scores": LIVE}, "bad": entry, "p2": {"scores": [1.0, 0.0, 0.0, 1.0]}}
    generator = _generator(host, script)

    experiences, consumed, _ = generator._generate_vllm(iter(loader(list(script))), 3, True)
    metrics, report = generator.last_admission_metrics, generator.last_admission_report

    assert {e.prompts[0] for e in experiences} == {"p0", "p2"}, name
    assert 2 * N == len(experiences)
    assert (3, 1, 2) == (
        consumed,
        metrics[f"{METRIC_PREFIX}step/externally_rejected_group_count"],
        report.kept_groups,
    )
    reasons = report_reasons(generator)
    assert reasons
    assert reasons <= external | {"missing_reward"}  # the policy's note on a member without a score
    if "wrong_group_size" in external:  # the adapter knows n: the size is named whatever else is wrong
        assert "wrong_group_size" in reasons
    if host.__name__ != "adapters.openrlhf.samples_generator_double":  # OpenRLHF's own advantage code
        trained = openrlhf_advantages(experiences)
        assert 2 * N == sum(len(e.index) for e in trained)


def report_reasons(generator: Any) -> set[str]:
    """The external reasons the generator's session counted."""
    from group_admission.adapters.openrlhf._generator import _SESSIONS

    (runtime,) = _SESSIONS.sessions()
    return set(runtime.session.stats.external_details)
