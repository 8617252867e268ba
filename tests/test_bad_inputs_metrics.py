"""
Bad inputs to ``AdmissionStats`` and ``group_admission_metrics``.

Each raises one type, with a message naming the field, the requirement and the value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from bad_inputs_common import (
    REJECTED,
    Case,
    P,
    check_case,
    stats_dict,
)
from group_admission import (
    AdmissionStats,
    CheckpointError,
    RejectionReason,
    group_admission_metrics,
)

CASES: list[Case] = [
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
        lambda: AdmissionStats().difference(AdmissionStats.from_dict(stats_dict(candidates=1, admitted=1))),
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
            {"counts": stats_dict(candidates=1, external=1)["counts"], "external_details": {"x": 0}}
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
        lambda: AdmissionStats.from_dict(stats_dict(candidates=True)),
        CheckpointError,
        "'counts.candidates' must be a non-negative integer (got True)",
    ),
]


@pytest.mark.parametrize(("name", "call", "error", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(
    name: str, call: Callable[[], Any], error: type[Exception], message: str
) -> None:
    check_case(call, error, message)
