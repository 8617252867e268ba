"""
The adapter in real OpenRLHF 0.11.2 code on a real local Ray cluster, with scripted vLLM engines.

The cluster is started the way OpenRLHF's driver starts it (``ray.init(runtime_env={"env_vars":
...})``) with the two lines the docs tell users to add (``RAY_RUNTIME_ENV_HOOK`` and the
settings variable). The engines are Ray actors with ``RolloutRayActor``'s remote methods.
Skipped without OpenRLHF (run ``.ci/openrlhf``).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from adapters.openrlhf.conftest import OPENRLHF_INSTALLED, SKIP_REASON
from adapters.openrlhf.scripted_engine import args, loader
from group_admission.adapters.openrlhf import METRIC_PREFIX, SETTINGS_ENV, admission_generator_class

pytestmark = [
    pytest.mark.skipif(not OPENRLHF_INSTALLED, reason=SKIP_REASON),
    # Ray's node start-up leaves /dev/null handles for the garbage collector to close.
    pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"),
]

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: What the workers read from the settings variable the runtime-env hook passes on.
WORKER_SETTINGS = {"budget": {"max_extra_groups": 6}}


@pytest.fixture(scope="module")
def ray() -> Iterator[Any]:
    """A local cluster started as OpenRLHF's ``train()`` starts it, with the adapter's launch lines."""
    import ray as ray_module

    launch = {
        # Ray 2.55 warns about a coming default; keep today's and its warning quiet.
        "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
        "RAY_RUNTIME_ENV_HOOK": "group_admission.adapters.openrlhf.runtime_env_hook",
        SETTINGS_ENV: json.dumps(WORKER_SETTINGS),
        # the workers import the scripted engine from tests/ (and the CPU stand-ins of conftest)
        "PYTHONPATH": os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")])),
    }
    saved = {key: os.environ.get(key) for key in launch}
    os.environ.update(launch)
    try:
        ray_module.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            runtime_env={"env_vars": {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN"}},
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    yield ray_module
    ray_module.shutdown()


def _engines(ray: Any, script: dict[str, Any], count: int = 2) -> list[Any]:
    from adapters.openrlhf.ray_actors import AsyncScriptedEngine

    engine = ray.remote(num_cpus=0)(AsyncScriptedEngine)
    return [engine.remote(script) for _ in range(count)]


def _script(groups: list[list[float]], *, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    return {
        f"p{i:02d}": {"scores": scores, "delay": rng.uniform(0.0, 0.05)} for i, scores in enumerate(groups)
    }


def test_both_trainers_build_the_admission_generator_in_their_worker(ray: Any) -> None:
    """The setup hook reached a fresh worker, swapped the class both trainers import, passed the settings."""
    from adapters.openrlhf.ray_actors import TrainerProcess

    worker = ray.remote(num_cpus=0)(TrainerProcess).remote()
    seen = ray.get(worker.trainer_classes.remote())

    assert seen == {
        "sync": "AdmissionSamplesGenerator",
        "async": "AdmissionSamplesGenerator",
        "both_admission": True,
        "same_class": True,
        "max_extra_groups": 6,
    }


def test_a_training_batch_from_the_worker_generator(ray: Any) -> None:
    """generate_samples in the worker: whole target groups, the pass rate as OpenRLHF defines it."""
    from adapters.openrlhf.ray_actors import TrainerProcess

    groups = [[1.0, 1.0], [0.0, 1.0], [0.5, 0.5], [1.0, 0.0], [0.0, 0.0]] + [[0.0, 1.0]] * 10
    script = _script(groups)
    worker = ray.remote(num_cpus=0)(TrainerProcess).remote()

    out = ray.get(worker.generate.remote(_engines(ray, script), list(script), 2, 4))

    rows = out["rows"]
    assert len(rows) == 4 * 2
    assert all(rows[i] == rows[i + 1] for i in range(0, len(rows), 2))
    assert not {"p00", "p02", "p04"} & set(rows)  # all-1, tied 0.5, all-0
    metrics = out["metrics"]
    assert metrics[f"{METRIC_PREFIX}admitted_groups"] >= 4
    assert out["consumed"] == metrics[f"{METRIC_PREFIX}generated_groups"] <= 4 + 6
    # OpenRLHF's own metric, unchanged: samples over prompts, in percent.
    kept_samples = 2 * metrics[f"{METRIC_PREFIX}trained_groups"]
    assert out["pass_rate"] == pytest.approx(kept_samples / out["consumed"] * 100)
    assert f"{METRIC_PREFIX}step/effective_group_rate" in out["info_keys"]


def test_on_real_refs_the_kept_groups_equal_openrlhfs(ray: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Driver-side, real ObjectRefs with random delays: the same groups kept as OpenRLHF's own rule."""
    import openrlhf.trainer.ppo_utils.samples_generator as real

    monkeypatch.setenv(
        SETTINGS_ENV,
        json.dumps({"policy": {"min_reward_std": 0}, "apply_dynamic_filtering_range": True}),
    )
    rng = random.Random(1)
    groups = [[rng.choice([0.0, 0.25, 0.5, 1.0]) for _ in range(3)] for _ in range(12)]
    script = _script(groups, seed=2)
    kept = {}
    for name, cls in (
        ("ours", admission_generator_class(real.SamplesGenerator)),
        ("theirs", real.SamplesGenerator),
    ):
        strategy = SimpleNamespace(args=args(n=3, batch_size=12, low=0.2, high=0.8))
        gen = cls(strategy, None, None, None, _engines(ray, script))
        experiences, consumed, _ = gen._generate_vllm(iter(loader(list(script))), 12, True)
        kept[name] = sorted((e.prompts[0], float(e.scores[0])) for e in experiences), consumed

    assert kept["ours"] == kept["theirs"]
    assert 0 < len(kept["ours"][0]) < 36


def test_real_experiences_with_metrics_concatenate_and_split(ray: Any) -> None:
    """The metrics ride in every experience's info, so OpenRLHF's batching (and its logging) accepts them."""
    import openrlhf.trainer.ppo_utils.samples_generator as real
    from openrlhf.trainer.ppo_utils.experience import Experience, split_experience_batch

    script = _script([[0.0, 1.0], [1.0, 1.0], [1.0, 0.0], [0.5, 1.0]])
    gen = admission_generator_class(real.SamplesGenerator)(
        SimpleNamespace(args=args(n=2, batch_size=3)), None, None, None, _engines(ray, script, count=1)
    )
    experiences, _, _ = gen._generate_vllm(iter(loader(list(script))), 3, True)

    batch = Experience.concat_experiences(experiences, pad_token_id=0)
    rate = batch.info[f"{METRIC_PREFIX}step/effective_group_rate"]
    assert rate.shape == (len(experiences),)
    assert rate.tolist() == [pytest.approx(2 / 3)] * len(experiences)  # 2 of the 3 groups judged
    assert len(split_experience_batch(batch)) == len(experiences)


def test_a_failing_engine_is_counted_where_openrlhf_crashes(
    ray: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openrlhf.trainer.ppo_utils.samples_generator as real

    monkeypatch.setenv(SETTINGS_ENV, json.dumps({"budget": {"max_extra_groups": 2}}))
    script = {"bad": {"fail": True}, "p1": {"scores": [0.0, 1.0]}, "p2": {"scores": [1.0, 0.0]}}
    strategy = SimpleNamespace(args=args(n=2, batch_size=2))
    theirs = real.SamplesGenerator(strategy, None, None, None, _engines(ray, script, count=1))
    ours = admission_generator_class(real.SamplesGenerator)(
        strategy, None, None, None, _engines(ray, script, 1)
    )

    with pytest.raises(ray.exceptions.RayTaskError, match="scripted failure"):
        theirs._generate_vllm(iter(loader(list(script))), 2, True)
    experiences, consumed, _ = ours._generate_vllm(iter(loader(list(script))), 2, True)

    assert sorted({e.prompts[0] for e in experiences}) == ["p1", "p2"]
    assert consumed == 3
    assert ours.last_admission_metrics[f"{METRIC_PREFIX}step/externally_rejected_group_count"] == 1
