"""The vocabulary of admission: primary rejection reasons and the names of individual checks."""

from __future__ import annotations

import enum

__all__ = [
    "CHECK_INCONSISTENT_ROLLOUT",
    "CHECK_MISSING_COMPLETION",
    "CHECK_MISSING_REWARD",
    "CHECK_NONTRIVIAL",
    "CHECK_NON_FINITE_REWARD",
    "CHECK_RANGE",
    "CHECK_SIMILARITY",
    "CHECK_STD",
    "REWARD_CHECKS",
    "RejectionReason",
]


class RejectionReason(str, enum.Enum):
    """
    The single primary reason a group was rejected.

    The reasons are mutually exclusive and assigned in this order of precedence:
    ``external``, ``exact_dead``, ``near_tie``, ``redundant``. Members compare equal to
    their string values, so ``decision.reason == "near_tie"`` works.
    """

    #: A caller-supplied reason, or a data problem: a non-finite or missing reward, a
    #: missing completion, or members of one rollout that disagree on the reward.
    EXTERNAL = "external"
    #: Every gated reward is identical (including a single-member group): the centred
    #: GRPO advantage is exactly zero for every member.
    EXACT_DEAD = "exact_dead"
    #: The gated rewards differ, but by less than the configured std, range or
    #: non-trivial-advantage threshold: normalisation would amplify noise.
    NEAR_TIE = "near_tie"
    #: The completions are near-duplicates of each other (mean pairwise similarity
    #: above the threshold).
    REDUNDANT = "redundant"

    def __str__(self) -> str:
        return self.value


# Names of individual checks, as listed in ``GroupAdmissionDecision.failed_checks``.
CHECK_STD = "reward_std_below_threshold"
CHECK_RANGE = "reward_range_below_threshold"
CHECK_NONTRIVIAL = "insufficient_nontrivial_advantages"
CHECK_SIMILARITY = "mean_pairwise_similarity_above_threshold"
REWARD_CHECKS = (CHECK_STD, CHECK_RANGE, CHECK_NONTRIVIAL)

# Data problems detected by the policy itself; they make a group ``external``.
CHECK_NON_FINITE_REWARD = "non_finite_reward"
CHECK_MISSING_REWARD = "missing_reward"
CHECK_INCONSISTENT_ROLLOUT = "inconsistent_rollout_rewards"
CHECK_MISSING_COMPLETION = "missing_completion"
