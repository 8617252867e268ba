"""
The sampling budget: its caps, a step's counts, the cap arithmetic, and the round planner.

``SamplingBudgetConfig``, ``SamplingBudgetState``, ``budget_caps`` (the one copy of the cap
arithmetic), ``check_planner`` (the one set of planner checks) and the deterministic,
hard-capped ``SamplingBudgetController``. It is fed counts, never decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, get_args

import attrs
import numpy as np

from ._exceptions import warn_half_configured
from ._loading import MappingConfig, coerce_config
from ._planning import binomial_groups_needed, check_tokens_per_group, groups_expected, groups_within
from ._plans import BudgetLimit, PlanBase, size_plan
from ._state_checks import StateFormat, check_written_back
from ._validation import (
    check_count,
    check_ge,
    check_one_of,
    check_range,
    deprecated,
    describe,
    int_field,
    probability_field,
    real_field,
)

__all__ = [
    "PLANNING_MODES",
    "ResamplePlan",
    "SamplingBudgetConfig",
    "SamplingBudgetController",
    "SamplingBudgetState",
    "budget_caps",
    "check_budget_objects",
    "check_planner",
    "rounds_spent",
]

PlanningMode = Literal["expected", "confidence"]
#: The planning modes of :class:`SamplingBudgetConfig` (``mode``).
PLANNING_MODES: tuple[PlanningMode, ...] = get_args(PlanningMode)


@attrs.frozen(kw_only=True)
class SamplingBudgetConfig(MappingConfig):
    """
    Hard caps on resampling, and how extra groups are estimated. The defaults disable it.

    Args:
        max_extra_groups: Groups that may be generated beyond the target, over all rounds
            of one step (the step generates at most ``target + max_extra_groups`` groups).
        max_extra_groups_per_round: Cap on the groups of one round (``None``: no cap).
        max_resample_rounds: Rounds after the first.
        max_total_samples: Cap on generated samples (groups x ``num_generations``).
        max_total_tokens: Cap on generated tokens.
        effective_rate_ema_alpha: Weight of the newest round in the moving average of the
            effective group rate (the first round sets it).
        min_effective_rate: Floor of the rate used for planning, so a bad round cannot ask
            for an unbounded number of groups.
        mode: ``"expected"`` requests ``ceil(remaining / rate)`` groups;
            ``"confidence"`` requests the smallest ``n`` with
            ``P[Binomial(n, rate) >= remaining] >= confidence`` (never fewer than
            ``"expected"``), trading some over-generation for fewer extra rounds.
        confidence: Probability target of ``"confidence"`` mode.

    .. versionadded:: 0.1.0
    """

    max_extra_groups: int = int_field(0, check_ge(0))
    max_extra_groups_per_round: int | None = int_field(None, check_ge(0), optional=True)
    max_resample_rounds: int = int_field(0, check_ge(0))
    max_total_samples: int | None = int_field(None, check_ge(0), optional=True)
    max_total_tokens: int | None = int_field(None, check_ge(0), optional=True)
    effective_rate_ema_alpha: float = real_field(0.2, check_range(0, 1, low_open=True))
    min_effective_rate: float = real_field(0.05, check_range(0, 1, low_open=True))
    mode: PlanningMode = attrs.field(default="expected", validator=check_one_of(PLANNING_MODES))
    confidence: float = probability_field(0.9)
    #: Extra groups per target group of :meth:`for_target`: 2, the most slime's default
    #: over-sampling waves generate.
    EXTRA_GROUPS_PER_TARGET: ClassVar[int] = 2

    @classmethod
    def for_target(
        cls, target_groups: int, *, extra_per_target: int | None = None, **fields: Any
    ) -> SamplingBudgetConfig:
        """
        Caps that scale with a step's target: ``extra_per_target x target_groups`` extra groups.

        The one home of the budgets derived from a target (the simulator's strategies,
        slime's streaming rollout): ``extra_per_target`` (``None``:
        :attr:`EXTRA_GROUPS_PER_TARGET`) extra groups per target group; ``fields`` set the
        other caps.
        ``SamplingBudgetConfig.for_target(8, max_resample_rounds=3)`` allows 16 extra groups.

        Raises:
            TypeError: ``target_groups`` or ``extra_per_target`` is not an integer, or a field
                has the wrong type.
            ValueError: either is negative, ``fields`` holds ``max_extra_groups`` (it is
                what ``extra_per_target`` sets) or an unknown key, or a field is out of range.

        .. versionadded:: 0.2.0
        """
        target = check_count(target_groups, "target_groups")
        if extra_per_target is None:  # read at call time: one value for every caller
            extra_per_target = cls.EXTRA_GROUPS_PER_TARGET
        per_target = check_count(extra_per_target, "extra_per_target")
        if "max_extra_groups" in fields:
            msg = (
                "'max_extra_groups' is extra_per_target x target_groups here: give extra_per_target "
                f"(got max_extra_groups={fields['max_extra_groups']!r})"
            )
            raise ValueError(msg)
        return cls.from_mapping({**fields, "max_extra_groups": per_target * target})

    def __attrs_post_init__(self) -> None:
        warn_half_configured(self._half_configured())

    def _half_configured(self) -> list[str]:
        """
        What this config sets that its other fields leave without effect, one sentence each.

        Resample rounds need extra groups to fill them. Extra groups without rounds are not
        a mistake: a streaming plan (:func:`plan_stream`) launches them in the first round.
        """
        rounds = self.max_resample_rounds
        if not rounds:
            return []
        if not self.max_extra_groups:
            problem = f"'max_resample_rounds' is {rounds} but 'max_extra_groups' is 0"
        elif self.max_extra_groups_per_round == 0:
            problem = f"'max_resample_rounds' is {rounds} but 'max_extra_groups_per_round' is 0"
        else:
            return []
        # The recommended preset resamples nothing (the bench's choice), so the advice for a
        # budget is the caps that follow a step's target, not the preset.
        advice = f"SamplingBudgetConfig.for_target(target_groups, max_resample_rounds={rounds})"
        return [
            f"{problem}, so no group is ever resampled: set it, or size the caps from the target, {advice}"
        ]

    def to_dict(self) -> dict[str, Any]:
        """Return the config as a plain, YAML- and JSON-safe dict."""
        return attrs.asdict(self)


@attrs.define(kw_only=True)
class SamplingBudgetState:
    """
    What one step (one sampling batch) has generated and admitted so far.

    Mutable: :meth:`SamplingBudgetController.observe_round` updates it in place. It
    converts to and from a JSON-safe dict, so it can be checkpointed with the trainer.

    .. versionadded:: 0.1.0
    """

    sampling_rounds: int = int_field(0, check_ge(0))
    generated_groups: int = int_field(0, check_ge(0))
    generated_samples: int = int_field(0, check_ge(0))
    generated_tokens: int = int_field(0, check_ge(0))
    admitted_groups: int = int_field(0, check_ge(0))
    rejected_groups: int = int_field(0, check_ge(0))
    effective_rate_ema: float | None = real_field(None, check_range(0, 1), optional=True)

    @property
    def resample_rounds(self) -> int:
        """Rounds after the first."""
        return max(0, self.sampling_rounds - 1)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot."""
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SamplingBudgetState:
        """
        Restore a state from :meth:`to_dict` output: every key, consistent counters.

        Raises:
            CheckpointError: a key is missing or unknown, a value is invalid, or the
                counters contradict each other (admitted + rejected != generated groups,
                fewer samples than groups, samples or tokens without a round, groups
                without a rate estimate).
        """
        names = tuple(field.name for field in attrs.fields(cls))
        format_ = StateFormat("the SamplingBudgetState", "SamplingBudgetState.to_dict()", names)
        data = format_.read(data)
        try:
            state = cls(**data)
        except (TypeError, ValueError) as exc:
            format_.fail(str(exc))
        check_written_back(data, state.to_dict(), "", format_.fail)
        problem = state._contradiction()
        if problem:
            format_.fail(f"it is contradictory: {problem}")
        return state

    def _contradiction(self) -> str | None:
        if self.admitted_groups + self.rejected_groups != self.generated_groups:
            return (
                f"admitted_groups ({self.admitted_groups}) + rejected_groups ({self.rejected_groups}) "
                f"!= generated_groups ({self.generated_groups})"
            )
        if self.generated_samples < self.generated_groups:
            return (
                f"generated_samples ({self.generated_samples}) < generated_groups ({self.generated_groups})"
            )
        if self.sampling_rounds == 0 and (self.generated_samples or self.generated_tokens):
            return "samples or tokens were generated in 0 sampling_rounds"
        if self.effective_rate_ema is None and self.generated_groups:
            # Every round with a group sets the rate; losing it would plan at a rate of 1.
            return f"effective_rate_ema is None after {self.generated_groups} generated group(s)"
        return None


@attrs.frozen(kw_only=True)
class ResamplePlan(PlanBase):
    """
    How many more groups to generate, and why not more.

    Attributes:
        extra_groups: Groups to generate next (0 when done or exhausted).
        effective_rate: The rate the plan assumed (floored at ``min_effective_rate``).
        remaining_target_groups, exhausted, out_of_candidates, limited_by,
            requested_groups, done: As in every plan (``requested_groups``: what the
            estimate asked for before the caps; never out of candidates).

    .. versionadded:: 0.1.0
    """

    extra_groups: int
    effective_rate: float


def check_budget_objects(controller: object, state: object) -> None:
    """
    The one guard of the planners' controller and state arguments.

    Raises:
        TypeError: ``controller`` is not a :class:`SamplingBudgetController`, or ``state``
            not a :class:`SamplingBudgetState`.
    """
    if not isinstance(controller, SamplingBudgetController):
        msg = f"'controller' must be a SamplingBudgetController (got {describe(controller)})"
        raise TypeError(msg)
    if not isinstance(state, SamplingBudgetState):
        msg = f"'state' must be a SamplingBudgetState (got {describe(state)})"
        raise TypeError(msg)


def check_planner(
    controller: object,
    state: object,
    target_groups: object,
    num_generations: object,
    estimated_tokens_per_group: object,
    in_flight: object = 0,
) -> tuple[int, int, int]:
    """
    The checks every planner makes: ``(target_groups, num_generations, in_flight)`` as ints.

    Raises:
        TypeError: a controller or state of the wrong type, or an argument of the wrong
            type (a bool is no count, and no token estimate).
        ValueError: a negative target or in-flight count, ``num_generations < 1``, or a
            token estimate that is not a finite number > 0.
    """
    check_budget_objects(controller, state)
    target = check_count(target_groups, "target_groups")
    size = check_count(num_generations, "num_generations", 1)
    flying = check_count(in_flight, "in_flight")
    check_tokens_per_group(estimated_tokens_per_group)
    return target, size, flying


def _legacy_counts(observation: object) -> tuple[int, int]:
    """``(groups, admitted)`` of a 0.1 observation: decisions, a batch result or an ``AdmissionStats``."""
    candidates = getattr(observation, "candidates", None)
    if isinstance(candidates, int):  # AdmissionStats
        return candidates, int(observation.admitted)  # type: ignore[attr-defined]
    mask = getattr(observation, "admitted", None)
    if isinstance(mask, np.ndarray) and mask.dtype == np.bool_:  # a batch result: count its mask
        return len(mask), int(np.count_nonzero(mask))
    if isinstance(observation, (str, bytes, Mapping)) or not isinstance(observation, Iterable):
        kinds = "decisions, a BatchAdmissionResult or an AdmissionStats"
        msg = f"'decisions_or_stats' must be {kinds} (got {describe(observation)})"
        raise TypeError(msg)
    flags = []
    for decision in observation:  # a batch result yields its decisions
        flag = getattr(decision, "admitted", None)
        if not isinstance(flag, bool):
            msg = f"'decisions_or_stats' must hold GroupAdmissionDecision objects (got {describe(decision)})"
            raise TypeError(msg)
        flags.append(flag)
    return len(flags), sum(flags)


def _round_counts(observation: object, groups: object, admitted: object) -> tuple[int, int]:
    if observation is None:
        if groups is None or admitted is None:
            msg = f"'groups' and 'admitted' must be given (got {describe(groups)} and {describe(admitted)})"
            raise TypeError(msg)
        groups, admitted = check_count(groups, "groups"), check_count(admitted, "admitted")
        if admitted > groups:
            msg = f"'admitted' must be <= the round's groups ({describe(groups)}) (got {describe(admitted)})"
            raise ValueError(msg)
        return groups, admitted
    if groups is not None or admitted is not None:
        msg = "give 'groups' and 'admitted', or the deprecated 'decisions_or_stats', not both"
        raise TypeError(msg)
    return _legacy_counts(observation)


class SamplingBudgetController:
    """
    Plan how many more groups to sample to reach a target of admitted groups, under hard caps.

    The layer below :class:`AdmissionSession`, whose :meth:`~AdmissionSession.plan`,
    :meth:`~AdmissionSession.can_launch`, :meth:`~AdmissionSession.stream_plan` and
    :meth:`~AdmissionSession.pick_prompts` keep the step's state and call it: use the
    controller directly only to build a loop of your own.

    The controller only plans: it never calls a sampler, so it fits synchronous loops,
    asynchronous workers and offline rollouts alike. It is deterministic (no randomness,
    no clock); planning reads the state and never changes it, so a controller restored
    from a checkpointed state plans exactly what the original would have.

    Typical step (``judge`` returns a round's groups and admitted groups)::

        state, groups = controller.new_state(), target
        while True:
            counted, admitted = judge(sample(groups))
            controller.observe_round(state, groups=counted, admitted=admitted, num_generations=G)
            plan = controller.plan_resampling(state, target_groups=target, num_generations=G)
            if plan.done: break  # the target is met, or plan.exhausted: train short or stop
            groups = plan.extra_groups

    Args:
        config: The caps (a :class:`SamplingBudgetConfig` or a mapping of its fields).

    .. versionadded:: 0.1.0
    """

    def __init__(self, config: SamplingBudgetConfig | Mapping[str, Any] | None = None) -> None:
        self._config = coerce_config(SamplingBudgetConfig, config)

    @property
    def config(self) -> SamplingBudgetConfig:
        """The caps."""
        return self._config

    def __repr__(self) -> str:
        return f"SamplingBudgetController({self._config!r})"

    def new_state(self, *, carry_rate_from: SamplingBudgetState | None = None) -> SamplingBudgetState:
        """A fresh state for a new step; optionally keep the rate estimate of the previous step."""
        if carry_rate_from is not None and not isinstance(carry_rate_from, SamplingBudgetState):
            msg = f"'carry_rate_from' must be a SamplingBudgetState or None (got {describe(carry_rate_from)})"
            raise TypeError(msg)
        rate = None if carry_rate_from is None else carry_rate_from.effective_rate_ema
        return SamplingBudgetState(effective_rate_ema=rate)

    def observe_round(
        self,
        state: SamplingBudgetState,
        decisions_or_stats: object = None,
        *,
        groups: int | None = None,
        admitted: int | None = None,
        num_generations: int | None = None,
        generated_samples: int | None = None,
        generated_tokens: int = 0,
    ) -> None:
        """
        Fold one generated round into ``state`` (in place): its groups, its admissions, its cost.

        Args:
            state: The step's state.
            groups: The round's groups (every one judged).
            admitted: How many of them were admitted.
            num_generations: Samples per group, when every group of the round has that size.
            generated_samples: The round's samples, when its groups differ in size (give
                exactly one of the two).
            generated_tokens: Tokens generated in this round.
            decisions_or_stats: Deprecated (give ``groups`` and ``admitted``): the round's
                decisions, a ``BatchAdmissionResult``, or an ``AdmissionStats`` holding just
                this round.

        .. versionchanged:: 0.2.0
            Takes counts (``groups``, ``admitted``).

        .. deprecated:: 0.2.0
            Passing ``decisions_or_stats``; removed in 0.3.0.
        """
        check_budget_objects(self, state)
        if (num_generations is None) == (generated_samples is None):
            msg = (
                "exactly one of 'num_generations' and 'generated_samples' must be given "
                f"(got {describe(num_generations)} and {describe(generated_samples)})"
            )
            raise TypeError(msg)
        generated_tokens = check_count(generated_tokens, "generated_tokens")
        candidates, admitted = _round_counts(decisions_or_stats, groups, admitted)
        if generated_samples is None:
            generated_samples = candidates * check_count(num_generations, "num_generations", 1)
        elif (generated_samples := check_count(generated_samples, "generated_samples")) < candidates:
            msg = (
                f"'generated_samples' must be >= the round's groups ({describe(candidates)}) "
                f"(got {describe(generated_samples)})"
            )
            raise ValueError(msg)
        if decisions_or_stats is not None:
            deprecated("observe_round(state, decisions_or_stats)", "pass groups= and admitted= instead")
        self._fold(state, candidates, admitted, generated_samples, generated_tokens)

    def _fold(
        self, state: SamplingBudgetState, groups: int, admitted: int, samples: int, tokens: int
    ) -> None:
        state.sampling_rounds += 1
        state.generated_groups += groups
        state.generated_samples += samples
        state.generated_tokens += tokens
        state.admitted_groups += admitted
        state.rejected_groups += groups - admitted
        if groups:
            rate = admitted / groups
            alpha = self._config.effective_rate_ema_alpha
            previous = state.effective_rate_ema
            state.effective_rate_ema = rate if previous is None else alpha * rate + (1 - alpha) * previous

    def plan_resampling(
        self,
        state: SamplingBudgetState,
        *,
        target_groups: int,
        num_generations: int,
        estimated_tokens_per_group: float | None = None,
    ) -> ResamplePlan:
        """
        Plan the next round: how many groups to generate to reach ``target_groups`` admitted.

        Tokens per group come from ``estimated_tokens_per_group`` or, when omitted, from
        what the state has observed; without either the token cap is not applied.
        """
        target, size, _ = check_planner(
            self, state, target_groups, num_generations, estimated_tokens_per_group
        )
        config = self._config
        remaining = max(0, target - state.admitted_groups)
        ema = state.effective_rate_ema
        rate = max(config.min_effective_rate, 1.0 if ema is None else ema)
        requested = groups_expected(remaining, rate)
        if config.mode == "confidence":
            requested = max(requested, binomial_groups_needed(remaining, rate, config.confidence))
        caps = budget_caps(config, state, target, size, estimated_tokens_per_group)
        sizing = size_plan(remaining, requested, requested, caps, rounds_spent=rounds_spent(config, state))
        return ResamplePlan(extra_groups=sizing.granted, effective_rate=rate, **sizing.plan_fields())

    def can_generate(
        self,
        state: SamplingBudgetState,
        groups: int = 1,
        *,
        target_groups: int,
        num_generations: int,
        estimated_tokens_per_group: float | None = None,
        new_round: bool = True,
    ) -> bool:
        """
        Whether ``groups`` more groups fit under every cap, whatever the target.

        Hosts that launch groups one at a time ask this instead of planning. With
        ``new_round`` the groups open another round (the round cap applies); without it
        they join the round in progress.
        """
        target, size, _ = check_planner(
            self, state, target_groups, num_generations, estimated_tokens_per_group
        )
        groups = check_count(groups, "groups", 1)
        if new_round and rounds_spent(self._config, state):
            return False
        caps = budget_caps(self._config, state, target, size, estimated_tokens_per_group)
        return all(
            cap >= groups for name, cap in caps.items() if name != "per_round_group_budget" or new_round
        )


def rounds_spent(config: SamplingBudgetConfig, state: SamplingBudgetState) -> bool:
    """Whether the step has used its last round: the first round plus ``max_resample_rounds``."""
    return state.sampling_rounds > 0 and state.resample_rounds >= config.max_resample_rounds


def budget_caps(
    config: SamplingBudgetConfig,
    state: SamplingBudgetState,
    target_groups: int,
    num_generations: int,
    estimated_tokens_per_group: float | None,
) -> dict[BudgetLimit, int]:
    """
    How many more groups each cap of ``config`` allows after ``state``, by limit name.

    The one copy of the cap arithmetic: the round planner, the streaming planner and the
    per-prompt planner all size their groups with it, so they cannot drift apart.
    """
    caps: dict[BudgetLimit, int] = {
        "extra_group_budget": max(0, target_groups + config.max_extra_groups - state.generated_groups),
    }
    if config.max_extra_groups_per_round is not None:
        caps["per_round_group_budget"] = config.max_extra_groups_per_round
    if config.max_total_samples is not None:
        caps["sample_budget"] = max(0, config.max_total_samples - state.generated_samples) // num_generations
    if config.max_total_tokens is not None:
        left = max(0, config.max_total_tokens - state.generated_tokens)
        if estimated_tokens_per_group is not None:
            caps["token_budget"] = groups_within(left, estimated_tokens_per_group)
        elif state.generated_groups and state.generated_tokens:
            # The observed mean tokens per group, as a fraction: left * groups // tokens.
            caps["token_budget"] = left * state.generated_groups // state.generated_tokens
    return caps
