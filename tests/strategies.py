"""Shared Hypothesis strategies."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from group_admission import GroupAdmissionConfig

# Dyadic rewards (multiples of 1/64 below 64) add and subtract exactly in float64, so
# permuting or shifting them cannot move a statistic by a rounding error.
dyadic = st.integers(min_value=-64 * 64, max_value=64 * 64).map(lambda k: k / 64)
dyadic_groups = st.lists(dyadic, min_size=1, max_size=16)
# General rewards: finite floats of a realistic magnitude, with a few exact repeats.
floats = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
float_groups = st.lists(st.one_of(floats, st.sampled_from([0.0, 1.0, 0.5, 0.1])), min_size=1, max_size=16)


@st.composite
def configs(draw: st.DrawFn, *, similarity: bool = False) -> GroupAdmissionConfig:
    """Reward-gate configs, thresholds drawn from a coarse grid."""
    return GroupAdmissionConfig(
        min_reward_std=draw(st.sampled_from([0.0, 1e-6, 0.05, 0.2, 0.5])),
        min_reward_range=draw(st.sampled_from([0.0, 0.02, 0.25, 1.0])),
        min_nontrivial_advantages=draw(st.integers(0, 4)),
        advantage_tolerance=draw(st.sampled_from([1e-8, 0.01, 0.1])),
        max_mean_pairwise_similarity=draw(st.sampled_from([None, 0.3, 0.8])) if similarity else None,
    )


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
