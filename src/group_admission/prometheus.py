"""
Prometheus export of admission counts and budget outcomes.

Needs the ``prometheus`` extra: ``pip install 'group-admission[prometheus]'``.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._budget import ResamplePlan
from ._decision import BatchAdmissionResult, GroupAdmissionDecision
from ._loading import require_extra
from ._metrics import AdmissionStats
from ._reasons import RejectionReason
from ._validation import describe

__all__ = ["PrometheusExporter"]

_prometheus = require_extra("prometheus_client", "prometheus", "group_admission.prometheus")

#: The ``outcome`` label values: ``admitted``, then every primary reason in precedence order.
_OUTCOMES = ("admitted", *(reason.value for reason in RejectionReason))


class PrometheusExporter:
    """
    Counters of groups by outcome, external reasons and budget exhaustion, plus the latest rate.

    Metrics (``group_admission`` is the default ``namespace``):

    - ``group_admission_groups_total{outcome}``: groups judged, by outcome (``admitted``
      or the primary rejection reason). Counters are raw, so rates across workers are
      ``sum(rate(...{outcome="admitted"})) / sum(rate(...))``.
    - ``group_admission_fallback_admitted_groups_total``: rejected groups trained on anyway.
    - ``group_admission_external_reasons_total{detail}``: external reasons by name.
    - ``group_admission_effective_group_rate``: admitted / candidates of the most recent
      observation (one round or step).
    - ``group_admission_resample_plans_total{exhausted}`` and
      ``group_admission_planned_extra_groups_total``: what the budget controller planned.

    Args:
        registry: The ``CollectorRegistry`` to register with (default: the global one).
        namespace: Metric name prefix.
    """

    def __init__(self, registry: Any = None, *, namespace: str = "group_admission") -> None:
        if registry is None:
            registry = _prometheus.REGISTRY
        if not isinstance(namespace, str) or not namespace.isidentifier():
            msg = f"'namespace' must be a valid metric name prefix (got {describe(namespace)})"
            raise ValueError(msg)

        def metric(kind: Any, name: str, documentation: str, *labels: str) -> Any:
            return kind(name, documentation, labels, namespace=namespace, registry=registry)

        counter, gauge = _prometheus.Counter, _prometheus.Gauge
        self._groups = metric(counter, "groups", "Prompt groups judged, by outcome.", "outcome")
        for outcome in _OUTCOMES:
            self._groups.labels(outcome=outcome)  # export zeros from the start
        self._fallback = metric(
            counter, "fallback_admitted_groups", "Rejected groups trained on anyway by a framework fallback."
        )
        self._external = metric(
            counter, "external_reasons", "External rejection reasons, by detail.", "detail"
        )
        self._rate = metric(
            gauge, "effective_group_rate", "Admitted / candidate groups of the most recent observation."
        )
        self._plans = metric(
            counter,
            "resample_plans",
            "Resample plans issued, by whether the budget was exhausted.",
            "exhausted",
        )
        self._planned = metric(counter, "planned_extra_groups", "Extra groups the budget controller planned.")

    def observe(
        self,
        decisions_or_stats: Iterable[GroupAdmissionDecision] | BatchAdmissionResult | AdmissionStats,
    ) -> None:
        """Add one round's (or step's) decisions, or an ``AdmissionStats`` holding just them."""
        if isinstance(decisions_or_stats, AdmissionStats):
            stats = decisions_or_stats
        else:
            stats = AdmissionStats()
            stats.add_many(decisions_or_stats)
        counts = stats.metrics()
        self._groups.labels(outcome="admitted").inc(counts["admitted_group_count"])
        for reason in RejectionReason:
            self._groups.labels(outcome=reason.value).inc(counts[reason.metric_name])
        self._fallback.inc(counts["fallback_admitted_group_count"])
        for detail, count in stats.external_details.items():
            self._external.labels(detail=detail).inc(count)
        if stats.candidates:
            self._rate.set(stats.effective_group_rate)

    def observe_plan(self, plan: ResamplePlan) -> None:
        """Count one plan of the ``SamplingBudgetController``."""
        if not isinstance(plan, ResamplePlan):
            msg = f"'plan' must be a ResamplePlan (got {describe(plan)})"
            raise TypeError(msg)
        self._plans.labels(exhausted=str(plan.exhausted).lower()).inc()
        self._planned.inc(plan.extra_groups)
