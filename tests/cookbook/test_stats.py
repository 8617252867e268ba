"""cookbook/stats.py: the one t quantile and the one paired interval both GRPO harnesses report with."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cookbook.stats import paired, spread, t95

# Two-sided 95% quantiles of Student's t to 4 decimals (any statistics table).
EXACT = {1: 12.7062, 4: 2.7764, 9: 2.2622, 10: 2.2281, 14: 2.1448, 15: 2.1314, 16: 2.1199, 20: 2.0860}
EXACT |= {30: 2.0423, 60: 2.0003, 120: 1.9799, 1000: 1.9623}


@pytest.mark.parametrize(("df", "exact"), EXACT.items())
def test_the_quantile_is_within_a_thousandth_of_the_exact_value(df: int, exact: float) -> None:
    assert abs(t95(df) - exact) < 0.001


def test_the_quantile_falls_with_the_degrees_of_freedom_towards_the_normal_s() -> None:
    values = [t95(df) for df in range(1, 400)]

    assert all(a > b for a, b in itertools.pairwise(values))
    assert values[-1] > 1.959964
    assert math.isnan(t95(0))
    assert math.isnan(t95(-3))


def test_the_paired_interval_is_the_mean_plus_or_minus_t_times_the_standard_error() -> None:
    stats = paired([0.1, 0.2, 0.3])

    assert stats["mean"] == pytest.approx(0.2)
    assert stats["std"] == pytest.approx(0.1)
    assert stats["ci95_low"] == pytest.approx(0.2 - 4.303 * 0.1 / 3**0.5)
    assert stats["ci95_high"] == pytest.approx(0.2 + 4.303 * 0.1 / 3**0.5)


def test_one_value_has_no_interval_and_no_spread() -> None:
    assert paired([0.5]) == {"mean": 0.5, "std": 0.0, "ci95_low": None, "ci95_high": None}
    assert spread([0.5]) == {"mean": 0.5, "std": 0.0, "min": 0.5, "max": 0.5}


@given(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=40))
def test_the_interval_holds_the_mean_and_its_half_width_follows_the_rule(values: list[float]) -> None:
    stats = paired(values)
    spread_ = spread(values)
    low, high, mean = stats["ci95_low"], stats["ci95_high"], stats["mean"]
    assert low is not None
    assert high is not None
    assert mean is not None

    assert low <= mean <= high
    assert (mean, stats["std"]) == (spread_["mean"], spread_["std"])
    half = t95(len(values) - 1) * float(np.std(values, ddof=1)) / math.sqrt(len(values))
    assert high - mean == pytest.approx(half, rel=1e-9, abs=1e-9)
    rounding = 1e-12 * (1 + abs(mean))  # a float mean of equal values can land an ulp outside them
    assert spread_["min"] - rounding <= mean <= spread_["max"] + rounding
