"""The Prometheus exporter, against a private registry."""

from __future__ import annotations

import math

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

from group_admission import (  # noqa: E402
    AdmissionStats,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    ResamplePlan,
)
from group_admission.prometheus import PrometheusExporter  # noqa: E402


def test_counters_by_outcome_rate_and_plans() -> None:
    registry = prometheus_client.CollectorRegistry()
    exporter = PrometheusExporter(registry)
    policy = GroupAdmissionPolicy(GroupAdmissionConfig(min_reward_std=1e-6))
    decisions = [policy.evaluate(r) for r in ([0, 1], [1, 1], [0, 0], [math.nan, 0])]

    exporter.observe(decisions)
    stats = AdmissionStats()
    stats.add(policy.evaluate([1, 1]), fallback_admitted=True)
    exporter.observe(stats)
    exporter.observe_plan(
        ResamplePlan(extra_groups=3, remaining_target_groups=2, effective_rate=0.5, exhausted=False)
    )
    exporter.observe_plan(
        ResamplePlan(extra_groups=0, remaining_target_groups=2, effective_rate=0.5, exhausted=True)
    )

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(f"group_admission_{name}", labels)

    assert 1 == value("groups_total", outcome="admitted")
    assert 3 == value("groups_total", outcome="exact_dead")
    assert 1 == value("groups_total", outcome="external")
    assert 0 == value("groups_total", outcome="redundant")
    assert 1 == value("fallback_admitted_groups_total")
    assert 1 == value("external_reasons_total", detail="non_finite_reward")
    assert 0.0 == value("effective_group_rate")  # the latest observation: one rejected group
    assert 1 == value("resample_plans_total", exhausted="true")
    assert 3 == value("planned_extra_groups_total")


def test_namespace_must_be_a_metric_prefix() -> None:
    with pytest.raises(ValueError, match="'namespace' must be a valid metric name prefix"):
        PrometheusExporter(prometheus_client.CollectorRegistry(), namespace="bad-name")


def test_observe_plan_rejects_junk() -> None:
    exporter = PrometheusExporter(prometheus_client.CollectorRegistry(), namespace="x")

    with pytest.raises(TypeError, match="'plan' must be a ResamplePlan"):
        exporter.observe_plan({"extra_groups": 1})  # type: ignore[arg-type]


def test_missing_prometheus_client_names_the_extra() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "try:\n    import group_admission.prometheus\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout

    assert "pip install 'group-admission[prometheus]'" in out
