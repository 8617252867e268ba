"""cookbook/twinkle_grpo runs on CPU with the installed twinkle-kit 0.5.1 (``.ci/twinkle``)."""

from __future__ import annotations

import runpy

import pytest

pytest.importorskip("twinkle.sampler", reason="needs twinkle-kit==0.5.1 (run .ci/twinkle)")

STEPS, BATCH, EXTRA, G = 6, 4, 4, 8


@pytest.fixture(scope="module")
def cookbook():
    return runpy.run_module("cookbook.twinkle_grpo.short_math_admission", run_name="cookbook")


def run(cookbook, gate_on):
    return cookbook["main"](["--steps", str(STEPS), "--gate-on", gate_on])


def test_gated_on_accuracy_it_learns_and_never_trains_on_all_wrong_groups(cookbook):
    summary = run(cookbook, "accuracy")

    assert summary["all_wrong_rows_trained"] == 0
    assert summary["trained_rows"] > 0
    assert summary["after"]["medium"] > summary["before"]["medium"] + 0.2  # the medium problems are learnt
    assert summary["generated_samples"] <= STEPS * (BATCH + EXTRA) * G  # the budget's sample cap, every step
    assert summary["stats"]["exact_dead_group_count"] > 0


def test_gated_on_the_sum_the_phantom_groups_are_trained(cookbook):
    """The control: twinkle's summed reward lets brevity alone admit all-wrong groups."""
    summary = run(cookbook, "total")

    assert summary["all_wrong_rows_trained"] > 0
