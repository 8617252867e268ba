"""
The admission generator against OpenRLHF's ``_generate_vllm`` on the same scripted groups.

Every test here runs on the double of OpenRLHF's module, and on the real 0.11.2 module
where it is installed (the ``host`` fixture; the real module's ``ray`` is the in-process
``FakeRay``, which resolves refs first in, first out, so both generators see the groups in
the same order).
"""

from __future__ import annotations

import json
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.openrlhf.scripted_engine import EngineFailureError, LocalEngine, args, loader
from group_admission import BudgetExhaustedError, ConsecutiveFailedGroupsError
from group_admission.adapters.openrlhf import (
    METRIC_PREFIX,
    SETTINGS_ENV,
    AdmissionGeneratorMixin,
    admission_generator_class,
    reset,
)

#: The adapter set to OpenRLHF's own rule: no gate of ours, the mean strictly inside the range.
OPENRLHF_RULE = {
    "policy": {"min_reward_std": 0.0},
    "apply_dynamic_filtering_range": True,
    "budget": {"max_extra_groups": 1000},
}


def generator(cls: type, script: dict[str, Any], *, n: int, low: float = 0.0, high: float = 1.0) -> Any:
    strategy = SimpleNamespace(args=args(n=n, batch_size=len(script), low=low, high=high))
    return cls(strategy, None, None, None, [LocalEngine(script)])


def run(
    gen: Any, prompts: list[str], num_prompts: int, *, filtering: bool = True
) -> tuple[list[Any], int, bool]:
    return gen._generate_vllm(iter(loader(prompts)), num_prompts, filtering)


def members(experiences: list[Any]) -> list[tuple[str, float]]:
    """Each experience as (prompt, score), comparable across the double and the real Experience."""
    return [(e.prompts[0], float(e.scores[0])) for e in experiences]


def both(
    host: ModuleType, script: dict[str, Any], prompts: list[str], num: int, **kw: Any
) -> tuple[Any, Any]:
    ours = generator(admission_generator_class(host.SamplesGenerator), script, **kw)
    theirs = generator(host.SamplesGenerator, script, **kw)
    return (ours, run(ours, prompts, num)), (theirs, run(theirs, prompts, num))


def use(monkeypatch: pytest.MonkeyPatch, settings_mapping: dict[str, Any]) -> None:
    monkeypatch.setenv(SETTINGS_ENV, json.dumps(settings_mapping))


SCORE = st.sampled_from([0.0, 1.0, 0.5, 0.25, 0.1, 0.9, 0.7])


@st.composite
def scripts(draw: Any) -> tuple[dict[str, Any], int, tuple[float, float]]:
    n = draw(st.sampled_from([2, 3, 4]))
    groups = draw(st.lists(st.lists(SCORE, min_size=n, max_size=n), min_size=1, max_size=8))
    low, high = draw(st.sampled_from([(0.0, 1.0), (0.2, 0.8), (-1.0, 0.5), (0.1, 0.9)]))
    return {f"p{i}": {"scores": scores} for i, scores in enumerate(groups)}, n, (low, high)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=scripts())
def test_with_openrlhfs_rule_the_kept_groups_equal_openrlhfs(
    host: ModuleType, monkeypatch: pytest.MonkeyPatch, case: Any
) -> None:
    """On the same groups, the adapter set to OpenRLHF's rule keeps exactly what OpenRLHF keeps."""
    script, n, (low, high) = case
    reset()
    use(monkeypatch, OPENRLHF_RULE)
    (_, ours), (_, theirs) = both(host, script, list(script), len(script), n=n, low=low, high=high)

    assert members(ours[0]) == members(theirs[0])
    assert ours[1:] == theirs[1:]


def test_tied_graded_groups_are_rejected_by_default_where_openrlhf_keeps_them(host: ModuleType) -> None:
    """A group tied at 0.5 passes OpenRLHF's (0, 1) range; the adapter's zero-spread gate rejects it."""
    script = {"tied": {"scores": [0.5] * 4}, "spread": {"scores": [0.0, 1.0, 1.0, 0.0]}}
    (ours_gen, ours), (_, theirs) = both(host, script, list(script), 2, n=4)

    assert {p for p, _ in members(theirs[0])} == {"tied", "spread"}
    assert {p for p, _ in members(ours[0])} == {"spread"}
    assert ours_gen.last_admission_metrics[f"{METRIC_PREFIX}step/exact_dead_group_count"] == 1


def test_kept_groups_are_whole_and_contiguous(host: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each kept group comes back as its n experiences in a row, in the order OpenRLHF made them."""
    use(monkeypatch, {"budget": {"max_extra_groups": 8}})
    script = {f"p{i}": {"scores": [0.0, 1.0, 0.0] if i % 2 else [1.0] * 3} for i in range(12)}
    gen = generator(admission_generator_class(host.SamplesGenerator), script, n=3)

    experiences, consumed, _ = run(gen, list(script), 4)

    rows = [(e.prompts[0], e.info["score"][0]) for e in experiences]
    assert len(rows) == 4 * 3
    for start in range(0, len(rows), 3):
        prompts = {prompt for prompt, _ in rows[start : start + 3]}
        assert len(prompts) == 1
        assert [score for _, score in rows[start : start + 3]] == [0.0, 1.0, 0.0]
    assert consumed <= 4 + 8


def test_replacement_is_capped_where_openrlhf_drains_the_dataloader(
    host: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All dead: OpenRLHF replaces one-for-one until the data runs out; the adapter stops at the cap."""
    use(monkeypatch, {"budget": {"max_extra_groups": 6}})
    script = {f"p{i}": {"scores": [1.0, 1.0]} for i in range(40)}
    (ours_gen, ours), (_, theirs) = both(host, script, list(script), 4, n=2)

    assert theirs == ([], 40, True)
    assert ours[0] == []
    assert ours[1] <= 4 + 6
    assert ours[2] is False
    report = ours_gen.last_admission_report
    assert (report.short_groups, report.generated_groups) == (4, ours[1])
    assert ours_gen.last_admission_metrics[f"{METRIC_PREFIX}exhausted"] == 1


def test_exhaustion_raises_when_asked(host: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, {"budget": {"max_extra_groups": 2}, "on_exhausted": "raise"})
    script = {f"p{i}": {"scores": [0.0, 0.0]} for i in range(10)}
    gen = generator(admission_generator_class(host.SamplesGenerator), script, n=2)

    with pytest.raises(BudgetExhaustedError, match=r"kept 0 of 3 target groups after 5 generated groups"):
        run(gen, list(script), 3)
    # The step was closed: the next call starts a new one.
    with pytest.raises(BudgetExhaustedError):
        run(gen, [f"p{i}" for i in range(5, 10)], 3)


def test_a_dry_dataloader_gives_a_short_batch_not_an_error(
    host: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Running out of prompts is OpenRLHF's end of epoch: a short batch, exhausted=True, even with raise."""
    use(monkeypatch, {"budget": {"max_extra_groups": 50}, "on_exhausted": "raise"})
    script = {"p0": {"scores": [0.0, 1.0]}, "p1": {"scores": [1.0, 1.0]}, "p2": {"scores": [0.0, 0.0]}}
    gen = generator(admission_generator_class(host.SamplesGenerator), script, n=2)

    experiences, consumed, exhausted = run(gen, list(script), 2)

    assert (len(experiences), consumed, exhausted) == (2, 3, True)
    # the caps had room: the data ran out, so the budget is not what stopped the call
    assert gen.last_admission_metrics[f"{METRIC_PREFIX}exhausted"] == 0
    assert gen.last_admission_metrics[f"{METRIC_PREFIX}short_groups"] == 1


def test_surplus_groups_are_counted_and_not_returned(
    host: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groups launched by the plan beyond what the target needed are waited for, counted and discarded."""
    use(monkeypatch, {"budget": {"max_extra_groups": 16, "confidence": 0.99}})
    script = {f"p{i}": {"scores": [1.0, 1.0] if i == 0 else [0.0, 1.0]} for i in range(20)}
    gen = generator(admission_generator_class(host.SamplesGenerator), script, n=2)

    experiences, consumed, _ = run(gen, list(script), 2)
    report = gen.last_admission_report

    assert len(experiences) == 2 * 2
    assert report.kept_groups == consumed - 1  # every group but the dead first one was admitted
    assert report.surplus_groups == report.kept_groups - 2 > 0
    assert gen.last_admission_metrics[f"{METRIC_PREFIX}surplus_groups"] == report.surplus_groups


def test_every_judged_groups_tokens_are_reported_surplus_and_rejected_included(
    host: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, {"budget": {"max_extra_groups": 16, "confidence": 0.99}})
    script = {f"p{i}": {"scores": [1.0, 1.0] if i % 3 == 0 else [0.0, 1.0]} for i in range(20)}
    gen = generator(admission_generator_class(host.SamplesGenerator), script, n=2)

    _, consumed, _ = run(gen, list(script), 2)
    metrics = gen.last_admission_metrics

    # The scripted engine's responses of a group of two are 2 and 3 tokens long.
    assert consumed > 2
    assert (
        5 * consumed
        == metrics[f"{METRIC_PREFIX}decoded_tokens"]
        == metrics[f"{METRIC_PREFIX}generated_tokens"]
    )
    assert 0 == metrics[f"{METRIC_PREFIX}aborted_tokens"]  # OpenRLHF aborts nothing: every group is judged


def test_missing_scores_are_external_where_openrlhf_skips_its_rule(host: ModuleType) -> None:
    script = {"none": {"scores": [None, None]}, "ok": {"scores": [0.0, 1.0]}}
    (ours_gen, ours), (_, theirs) = both(host, script, list(script), 2, n=2)

    assert [e.prompts[0] for e in theirs[0]] == ["none", "none", "ok", "ok"]
    assert [e.prompts[0] for e in ours[0]] == ["ok", "ok"]
    metrics = ours_gen.last_admission_metrics
    assert metrics[f"{METRIC_PREFIX}step/externally_rejected_group_count"] == 1


def test_a_failed_generation_is_external_where_openrlhf_raises(
    host: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, {"budget": {"max_extra_groups": 4}})
    script = {"bad": {"fail": True}, "p1": {"scores": [0.0, 1.0]}, "p2": {"scores": [1.0, 0.0]}}
    ours = generator(admission_generator_class(host.SamplesGenerator), script, n=2)
    theirs = generator(host.SamplesGenerator, script, n=2)

    with pytest.raises(EngineFailureError):
        run(theirs, list(script), 2)
    experiences, consumed, _ = run(ours, list(script), 2)

    assert [e.prompts[0] for e in experiences] == ["p1", "p1", "p2", "p2"]
    assert consumed == 3
    stats = ours.last_admission_metrics
    assert stats[f"{METRIC_PREFIX}step/externally_rejected_group_count"] == 1


def test_a_failure_streak_stops_the_run(host: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    use(monkeypatch, {"budget": {"max_extra_groups": 8}, "limits": {"max_consecutive_failed_groups": 3}})
    script = {f"p{i}": {"fail": True} for i in range(8)}
    gen = generator(admission_generator_class(host.SamplesGenerator), script, n=2)

    with pytest.raises(ConsecutiveFailedGroupsError, match="generation_failed"):
        run(gen, list(script), 2)


def test_gate_on_reads_info_components(host: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """``gate_on`` gates on the reward function's extra_logs, not on the shaped score."""
    use(monkeypatch, {"policy": {"gate_on": ["acc"]}})
    script = {
        # the scores vary (a length penalty), the outcome does not: a phantom group
        "phantom": {"scores": [0.1, 0.3], "extra_logs": [{"acc": 0.0}, {"acc": 0.0}]},
        "real": {"scores": [0.1, 0.9], "extra_logs": [{"acc": 0.0}, {"acc": 1.0}]},
        "unlogged": {"scores": [0.0, 1.0]},
    }
    gen = generator(admission_generator_class(host.SamplesGenerator), script, n=2)

    experiences, _, _ = run(gen, list(script), 3)

    assert [e.prompts[0] for e in experiences] == ["real", "real"]
    metrics = gen.last_admission_metrics
    assert metrics[f"{METRIC_PREFIX}step/exact_dead_group_count"] == 1
    assert metrics[f"{METRIC_PREFIX}step/externally_rejected_group_count"] == 1


def test_metrics_count_by_reason_and_define_the_rate(
    host: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call's counts conserve, and its effective rate is admitted / judged groups, in [0, 1]."""
    use(monkeypatch, {"policy": {"min_reward_range": 0.3}, "budget": {"max_extra_groups": 3}})
    script = {
        "dead": {"scores": [1.0, 1.0, 1.0]},
        "tie": {"scores": [0.5, 0.6, 0.5]},
        "ok": {"scores": [0.0, 1.0, 1.0]},
        "ok2": {"scores": [1.0, 0.0, 1.0]},
        "none": {"scores": [None, 1.0, 0.0]},
    }
    gen = generator(admission_generator_class(host.SamplesGenerator), script, n=3)

    experiences, consumed, _ = run(gen, list(script), 3)
    m = {k.removeprefix(METRIC_PREFIX): v for k, v in gen.last_admission_metrics.items()}

    assert consumed == 5
    step = {k.removeprefix("step/"): v for k, v in m.items() if k.startswith("step/")}
    assert (step["exact_dead_group_count"], step["near_tie_group_count"]) == (1, 1)
    assert step["externally_rejected_group_count"] == 1
    assert step["candidate_group_count"] == step["admitted_group_count"] + step["rejected_group_count"] == 5
    assert m["step/effective_group_rate"] == pytest.approx(2 / 5)
    assert (m["total/candidate_group_count"], m["total/effective_group_rate"]) == (5, pytest.approx(2 / 5))
    assert m["short_groups"] == 1
    # OpenRLHF's own pass rate (generate_samples) would read 100 * 6 / 5 = 120 here.
    assert len(experiences) / consumed * 100 == pytest.approx(120.0)
    info = experiences[0].info
    assert float(info[f"{METRIC_PREFIX}step/effective_group_rate"][0]) == pytest.approx(0.4)


def test_without_dynamic_filtering_openrlhfs_method_runs(host: ModuleType) -> None:
    """Evaluation (dynamic_filtering=False) is OpenRLHF's own path, with no session step."""
    script = {"dead": {"scores": [1.0, 1.0]}, "ok": {"scores": [0.0, 1.0]}}
    ours = generator(admission_generator_class(host.SamplesGenerator), script, n=2)
    theirs = generator(host.SamplesGenerator, script, n=2)

    result = run(ours, list(script), 2, filtering=False)

    assert members(result[0]) == members(run(theirs, list(script), 2, filtering=False)[0])
    assert ours.last_admission_metrics is None


def test_an_empty_dataloader_returns_openrlhfs_empty_result(host: ModuleType) -> None:
    gen = generator(admission_generator_class(host.SamplesGenerator), {}, n=2)

    assert run(gen, [], 4) == ([], 0, True)
    assert gen.last_admission_report is None


def test_the_class_is_made_once_per_base(host: ModuleType) -> None:
    made = admission_generator_class(host.SamplesGenerator)

    assert admission_generator_class(host.SamplesGenerator) is made
    assert admission_generator_class(made) is made
    assert issubclass(made, host.SamplesGenerator)
    assert issubclass(made, AdmissionGeneratorMixin)


def test_a_base_without_openrlhfs_module_is_refused() -> None:
    class Elsewhere:
        def __init__(self, strategy: Any, *_args: Any) -> None:
            self.args = strategy.args

        def _dispatch_prompts_to_vllm(self) -> None:
            pass

    gen = generator(admission_generator_class(Elsewhere), {"p": {"scores": [0.0, 1.0]}}, n=2)

    expected = r"'AdmissionElsewhere' must derive from OpenRLHF's SamplesGenerator \(openrlhf>=0.11.2"
    with pytest.raises(TypeError, match=expected + r".*\(got bases \['Elsewhere'\]\)"):
        run(gen, ["p"], 1)


def test_the_recommended_block_in_the_environment_builds_the_session(
    host: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, {"preset": "recommended"})
    script = {"tied": {"scores": [0.5] * 4}, "spread": {"scores": [0.0, 1.0, 1.0, 0.0]}}
    gen = generator(admission_generator_class(host.SamplesGenerator), script, n=4)

    experiences, _, _ = run(gen, list(script), 2)

    assert {e.prompts[0] for e in experiences} == {"spread"}
    assert gen.last_admission_metrics[f"{METRIC_PREFIX}step/exact_dead_group_count"] == 1
    assert gen.last_admission_metrics[f"{METRIC_PREFIX}loss_scale"] == pytest.approx(0.5)
