"""One vocabulary: every module names the rejection reasons as ``group_admission._reasons`` does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import group_admission
from group_admission import RejectionReason
from group_admission.simulation import simulate
from group_admission.simulation._results import REJECTION_KEYS

SRC = Path(group_admission.__file__).parent
REASONS = [reason.value for reason in RejectionReason]


def test_the_simulator_derives_its_reason_keys() -> None:
    result = simulate({"steps": 1, "target_groups": 4, "group_size": 2}, strategies=["no_filtering"])
    row = result.rows()[0]

    assert REASONS == list(REJECTION_KEYS)
    assert REASONS == list(result.results[0].rejected)
    assert REASONS == list(result.results[0].outcomes[0].rejected)
    assert [f"rejected_{reason}" for reason in REASONS] == [key for key in row if key.startswith("rejected_")]


def test_the_prometheus_outcomes_derive_from_the_reasons() -> None:
    pytest.importorskip("prometheus_client")
    from group_admission import prometheus

    assert ["admitted", *REASONS] == list(prometheus._OUTCOMES)


@pytest.mark.parametrize("name", ["exact_dead", "near_tie"])
def test_no_module_but_the_vocabulary_spells_a_reason_out(name: str) -> None:
    # A quoted reason name in code is a hand-written copy of the vocabulary; prose in
    # docstrings and messages is written ``near_tie``, without quotes.
    quoted = re.compile(rf"[\"']{name}[\"']")
    offenders = [
        str(path.relative_to(SRC))
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "_reasons.py" and quoted.search(path.read_text(encoding="utf-8"))
    ]
    assert [] == offenders
