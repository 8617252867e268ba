"""
The vocabulary of admission, defined once: reasons, codes, metric names, data problems, step names.

Everything that names a rejection (decisions, batch results, counts, metrics, Prometheus,
the simulator, the CLI, the cookbook) derives it from :class:`RejectionReason`, so a new
reason is one member here, appended (a member's position is its precedence and its code,
which existing codes keep), plus the checks that give it (``_checks``, where the gate
checks, their bits and :func:`primary_reason` live) and the docs that list the reasons.
"""

from __future__ import annotations

import enum

__all__ = [
    "ADMITTED_CODE",
    "CHECK_INCONSISTENT_ROLLOUT",
    "CHECK_MISSING_COMPLETION",
    "CHECK_MISSING_REWARD",
    "CHECK_NON_FINITE_REWARD",
    "CHECK_REWARD_OVERFLOW",
    "CUMULATIVE_EFFECTIVE_GROUP_RATE",
    "REASONS_BY_CODE",
    "STEP_COST_MULTIPLIER",
    "STEP_COUNTS",
    "STEP_DECODED_TOKENS",
    "STEP_EXHAUSTED",
    "STEP_LIMITED_BY",
    "STEP_LOSS_SCALE",
    "STEP_MASKED_SAMPLES",
    "STEP_MASKED_SHARE",
    "STEP_PLAN_RATE",
    "STEP_TRAINED_RATE",
    "RejectionReason",
]


class RejectionReason(str, enum.Enum):
    """
    The single primary reason a group was rejected.

    The reasons are mutually exclusive and assigned in this order of precedence (the
    order of the members): ``external``, ``exact_dead``, ``near_tie``, ``redundant``.
    Members compare equal to their string values, so ``decision.reason == "near_tie"``
    works.

    .. versionadded:: 0.1.0
    """

    #: A caller-supplied reason, or a data problem: a non-finite or missing reward,
    #: rewards whose statistics overflow float64, a missing completion, or members of one
    #: rollout that disagree on the reward.
    EXTERNAL = "external"
    #: Every gated reward is identical (including a group of one rollout, under any reward
    #: gate): the centred GRPO advantage is exactly zero for every member.
    EXACT_DEAD = "exact_dead"
    #: The gated rewards differ, but by less than the configured std, range or
    #: non-trivial-advantage threshold: normalisation would amplify noise.
    NEAR_TIE = "near_tie"
    #: The completions are near-duplicates of each other (mean pairwise similarity
    #: above the threshold).
    REDUNDANT = "redundant"

    def __str__(self) -> str:
        return self.value

    @property
    def code(self) -> int:
        """The reason's integer code in batch results (``0`` means admitted)."""
        return _CODES[self]

    @property
    def metric_name(self) -> str:
        """The name of this reason's count in :func:`group_admission_metrics`."""
        return _METRIC_NAMES[self]


#: ``reason_codes`` value of an admitted group in a batch result.
ADMITTED_CODE = 0
#: ``REASONS_BY_CODE[code]`` is the primary reason of a group with that code.
REASONS_BY_CODE: tuple[RejectionReason | None, ...] = (None, *RejectionReason)
_CODES = {reason: code for code, reason in enumerate(REASONS_BY_CODE) if reason is not None}
# The pull request's metric names; "external" is the one irregular name.
_METRIC_NAMES = {
    reason: ("externally_rejected" if reason is RejectionReason.EXTERNAL else reason.value) + "_group_count"
    for reason in RejectionReason
}

# Data problems detected by the policy itself; they make a group ``external``.
CHECK_NON_FINITE_REWARD = "non_finite_reward"
CHECK_MISSING_REWARD = "missing_reward"
CHECK_INCONSISTENT_ROLLOUT = "inconsistent_rollout_rewards"
CHECK_MISSING_COMPLETION = "missing_completion"
#: Finite rewards whose mean, standard deviation or range overflows float64.
CHECK_REWARD_OVERFLOW = "reward_overflow"


# The step vocabulary: the names of StepReport.metrics(), which every host logs a step under.
#: A step's counts, named as the :class:`StepReport` fields they come from.
#: ``admitted_groups`` counts the groups the policy admitted (surplus included);
#: ``trained_groups`` the ones the step trains on (at most the target).
STEP_COUNTS = (
    "target_groups",
    "admitted_groups",
    "kept_groups",
    "trained_groups",
    "surplus_groups",
    "short_groups",
    "generated_groups",
    "generated_samples",
    "generated_tokens",
    "sampling_rounds",
    "aborted_tokens",
    "carried_tokens",
    "pilot_tokens",
)
#: Every token the step decoded: ``generated_tokens`` plus the charged kinds.
STEP_DECODED_TOKENS = "decoded_tokens"
#: The factor the step's loss, averaged over its trained groups, is multiplied by.
STEP_LOSS_SCALE = "loss_scale"
#: Samples handed to the trainer whose loss mask is all zero (counted where a host reports masks).
STEP_MASKED_SAMPLES = "masked_samples"
#: ``masked_samples`` over the samples handed to the trainer.
STEP_MASKED_SHARE = "masked_sample_share"
#: 1 when the caps stopped the step short of its target, else 0 (loggers drop bools).
STEP_EXHAUSTED = "exhausted"
#: ``trained_groups / target_groups``: the share of the target the step trains on.
STEP_TRAINED_RATE = "trained_group_rate"
#: ``generated_groups / target_groups``: what the step cost, in target batches.
STEP_COST_MULTIPLIER = "sampling_cost_multiplier"
#: Prefix of one key per cap that bound the step's last plan (``limited_by/extra_group_budget``), set to 1.
STEP_LIMITED_BY = "limited_by/"
#: The admission rate assumed by the plan the host followed.
STEP_PLAN_RATE = "effective_rate"
#: Admitted / judged groups over a session's life, logged beside a window of counts.
CUMULATIVE_EFFECTIVE_GROUP_RATE = "cumulative_effective_group_rate"
