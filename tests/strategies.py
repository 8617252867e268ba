"""Shared Hypothesis strategies."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from group_admission import GroupAdmissionConfig, _checks

# Dyadic rewards (multiples of 1/64 below 64) add and subtract exactly in float64, so
# permuting or shifting them cannot move a statistic by a rounding error.
dyadic = st.integers(min_value=-64 * 64, max_value=64 * 64).map(lambda k: k / 64)
dyadic_groups = st.lists(dyadic, min_size=1, max_size=16)
# General rewards: finite floats of a realistic magnitude, with a few exact repeats.
floats = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
float_groups = st.lists(st.one_of(floats, st.sampled_from([0.0, 1.0, 0.5, 0.1])), min_size=1, max_size=16)


def thresholds(bound: _checks.Bound) -> st.SearchStrategy[Any]:
    """A coarse grid of thresholds for a check's bound: a real minimum, a count, or an optional maximum."""
    if not bound.minimum:
        return st.sampled_from([None, 0.3, 0.8])
    if bound.tolerant:
        return st.sampled_from([0.0, 1e-6, 0.02, 0.05, 0.2, 0.25, 0.5, 1.0])
    return st.integers(0, 4)


@st.composite
def configs(
    draw: st.DrawFn,
    *,
    similarity: bool = False,
    config_class: type[GroupAdmissionConfig] = GroupAdmissionConfig,
) -> GroupAdmissionConfig:
    """
    Gate configs: a threshold per reward check of the table (and the similarity check with ``similarity``).

    The table is read when a config is drawn, so a check added to it is drawn too
    (``config_class`` then holds its field).
    """
    table = _checks.TABLE
    checks = (*table.reward, table.similarity) if similarity else table.reward
    fields = {check.field: draw(thresholds(check.bound)) for check in checks}
    return config_class(**fields, advantage_tolerance=draw(st.sampled_from([1e-8, 0.01, 0.1])))


def reward_matrices(groups: int = 30, members: int = 16) -> st.SearchStrategy[np.ndarray]:
    """(groups, members) float64 arrays mixing binary, grid, float and non-finite rows."""
    element = st.one_of(
        st.sampled_from([0.0, 1.0]),
        st.sampled_from([0.25, 0.5, 0.51, 0.1, 0.12]),
        floats,
        st.sampled_from([math.nan, math.inf]),
    )
    return hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, groups), st.integers(1, members)),
        elements=element,
    )
