"""
Resampling rounds with twinkle's own ``Sampler``: sample, score, admit, plan, until the plan stops.

twinkle's ``sample()`` blocks until every request of a call is done and has no abort, so a
step is a sequence of whole rounds (the round planner), not a stream. Every round of one
call samples with the weights the caller synced before it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import structlog

from ... import BudgetExhaustedError, ResamplePlan, StepReport
from .._kit import (
    ON_EXHAUSTED,
    OnExhausted,
    admission_step,
    check_choice,
    check_count,
    chunk,
    exhausted_message,
)
from ._rows import WRONG_GROUP_SIZE, RowRewards
from ._step import METRIC_PREFIX, TwinkleGroupAdmission

if TYPE_CHECKING:
    import torch

__all__ = ["AdmittedBatch", "sample_admitted_groups"]

_log = structlog.get_logger("group_admission.adapters.twinkle")
#: ``SampledSequence.stop_reason`` values that mean the sample failed, not that it ended.
_FAILED_STOPS = ("abort", "error")


@attrs.frozen(kw_only=True, eq=False)
class AdmittedBatch:
    """
    What one step trains on: the kept groups of every round, at most the batch's target.

    Attributes:
        prompts: One prompt per kept group, in the order the groups were kept.
        sequences: The kept groups' ``SampledSequence`` objects, G consecutive per group
            (``new_input_feature``, ``logprobs`` and ``tokens`` are the rows to train on).
        rewards: ``{component: per-row rewards}`` of those rows (a plain list of rewards
            reads as the component ``reward``), e.g. for ``CompletionRewardMetric``.
        advantages: ``(rows,)`` tensor: twinkle's advantages on exactly these rows, times
            the step's ``loss_scale`` (1 for a full step, and always with ``"kept"``).
        report: The session's step report (cost, rounds, surplus, short, exhausted).
        plan: The step's last plan (``limited_by`` says which cap stopped it).
        out_of_prompts: ``extra_prompts`` ran out before the plan was met.
        metrics: :meth:`TwinkleGroupAdmission.metrics` of the step, with
            ``group_admission/out_of_prompts``, and ``exhausted`` as :attr:`exhausted` says.

    .. versionadded:: 0.2.0
    """

    prompts: list[Any]
    sequences: list[Any]
    rewards: dict[str, list[Any]]
    advantages: torch.Tensor
    report: StepReport
    plan: ResamplePlan | None
    out_of_prompts: bool
    metrics: dict[str, int | float]

    @property
    def exhausted(self) -> bool:
        """The step is short of its target: the budget allowed no more groups, or prompts ran out."""
        return _exhausted(self.report, self.out_of_prompts)


def _exhausted(report: StepReport, out_of_prompts: bool) -> bool:
    # report.exhausted is the last round plan's verdict, with the max_tokens bound it was given.
    return report.exhausted or (report.short_groups > 0 and out_of_prompts)


def _stop(sequence: Any) -> Any:
    return getattr(sequence, "stop_reason", None)


def _param(sampling_params: Any, name: str) -> Any:
    """A field of twinkle's ``SamplingParams``, or of the dict ``sample()`` also accepts."""
    if isinstance(sampling_params, Mapping):
        return sampling_params.get(name)
    return getattr(sampling_params, name, None)


def _num_samples(sampling_params: Any) -> int:
    value = _param(sampling_params, "num_samples")
    # SamplingParams' default is 1; the caller checks the value against num_generations.
    return check_count(1 if value is None else value, "sampling_params.num_samples", 1)


def _max_tokens(sampling_params: Any) -> int | None:
    value = _param(sampling_params, "max_tokens") or _param(sampling_params, "max_new_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@attrs.define
class _Rounds:
    """One step's sampling: the sampler call's layout, and the kept groups so far."""

    admission: TwinkleGroupAdmission
    sampler: Any
    score: Callable[[list[Any]], Any]
    sampling_params: Any
    sample_kwargs: Mapping[str, Any]
    prompts: list[Any] = attrs.Factory(list)
    sequences: list[list[Any]] = attrs.Factory(list)
    rewards: RowRewards | None = None

    def inputs(self, prompts: Sequence[Any]) -> list[Any]:
        size = self.admission.num_generations
        samples = _num_samples(self.sampling_params)
        if samples == size:
            return list(prompts)  # one request per prompt, G samples each
        if samples == 1:
            return [prompt for prompt in prompts for _ in range(size)]  # twinkle's cookbook layout
        msg = (
            "'sampling_params.num_samples' must be 1 (each prompt repeated num_generations times) "
            f"or num_generations={size} (got {samples})"
        )
        raise ValueError(msg)

    def run_all(self, batch: list[Any], extra_prompts: Iterator[Any] | None) -> tuple[ResamplePlan, bool]:
        """
        Round 0 on ``batch``, then rounds of fresh prompts while the plan asks for more groups.

        Returns the last plan, and whether ``extra_prompts`` ran out before it was met.
        """
        max_tokens = _max_tokens(self.sampling_params)
        size = self.admission.num_generations
        tokens_per_group = None if max_tokens is None else float(max_tokens * size)
        round_prompts = batch
        while True:
            self.run(round_prompts)
            plan = self.admission.plan(estimated_tokens_per_group=tokens_per_group)
            wanted = plan.extra_groups
            round_prompts = list(itertools.islice(extra_prompts, wanted)) if extra_prompts and wanted else []
            if not round_prompts:
                return plan, len(round_prompts) < wanted

    def groups(self, prompts: Sequence[Any], responses: Sequence[Any]) -> list[list[Any]]:
        """
        The sequences of each prompt's group, read from the responses to its request(s).

        A request answered with another number of sequences than asked gives a group of the
        wrong size, judged ``external``; a sampler that answers another number of requests
        than it was given cannot be read at all.
        """
        size, requests = self.admission.num_generations, len(self.inputs(prompts))
        if len(responses) != requests:
            msg = (
                f"the sampler must return one SampleResponse per request, {requests} for {len(prompts)} "
                f"prompts and num_generations={size} (got {len(responses)})"
            )
            raise ValueError(msg)
        per_prompt = chunk(list(responses), requests // len(prompts))
        return [[sequence for response in group for sequence in response.sequences] for group in per_prompt]

    def run(self, prompts: Sequence[Any]) -> None:
        """Sample, score and judge one round; keep its kept groups."""
        size = self.admission.num_generations
        responses = self.sampler.sample(self.inputs(prompts), self.sampling_params, **self.sample_kwargs)
        groups = self.groups(prompts, responses)
        whole = [index for index, group in enumerate(groups) if len(group) == size]
        for index in sorted(set(range(len(groups))) - set(whole)):
            self.admission.reject_group(len(groups[index]), WRONG_GROUP_SIZE, _tokens(groups[index]))
        if whole:
            self.judge([prompts[index] for index in whole], [groups[index] for index in whole])

    def judge(self, prompts: list[Any], groups: list[list[Any]]) -> None:
        """Score and judge whole groups; keep the kept ones."""
        sequences = [sequence for group in groups for sequence in group]
        failed = [
            sorted({f"sampler_{stop}" for stop in map(_stop, group) if stop in _FAILED_STOPS})
            for group in groups
        ]
        rows = RowRewards.read(self.score(sequences), self.admission.num_generations)
        admitted = self.admission.admit(
            rows,
            completions=[getattr(s, "decoded", None) for s in sequences],
            external_reasons=failed,
            generated_tokens=_tokens(sequences),
        )
        kept = [index for index, keep in enumerate(admitted.keep.tolist()) if keep]
        self.prompts += [prompts[index] for index in kept]
        self.sequences += [groups[index] for index in kept]
        picked = rows.take(admitted.select(range(rows.rows)))
        self.rewards = picked if self.rewards is None else self.rewards.extend(picked)


def _tokens(sequences: Sequence[Any]) -> int:
    return sum(len(getattr(s, "tokens", None) or ()) for s in sequences)


def sample_admitted_groups(
    admission: TwinkleGroupAdmission,
    sampler: Any,
    prompts: Sequence[Any],
    score: Callable[[list[Any]], Any],
    *,
    sampling_params: Any = None,
    extra_prompts: Iterator[Any] | None = None,
    on_exhausted: OnExhausted = "train",
    sample_kwargs: Mapping[str, Any] | None = None,
) -> AdmittedBatch:
    """
    One step of a twinkle-kit 0.5.1 loop: sample ``prompts``, then resample rounds while the plan asks.

    Round 0 samples every prompt of the batch (the step's target is ``len(prompts)`` kept
    groups); each later round samples ``plan.extra_groups`` fresh prompts from
    ``extra_prompts``, as the round planner (:meth:`AdmissionSession.plan`) sizes it under
    the budget's caps. Sync the sampler's weights once before the call: every round samples
    the same policy.

    Args:
        admission: The admission step (its ``budget`` bounds the rounds).
        sampler: A twinkle ``Sampler`` (``vLLMSampler`` or your own subclass); called as
            ``sampler.sample(inputs, sampling_params, **sample_kwargs)``.
        prompts: The batch's prompts (``Trajectory`` or encoded ``InputFeature`` rows).
        score: ``score(sequences)`` for one round's flat ``SampledSequence`` list returns
            ``{component: per-row rewards}`` (before any sum) or one per-row list.
        sampling_params: twinkle ``SamplingParams`` (or a dict): ``num_samples`` is 1 (each
            prompt repeated G times, as twinkle's cookbook does) or G; ``max_tokens`` makes
            a token cap hard.
        extra_prompts: Fresh prompts for resampling rounds (e.g. a second iterator over the
            dataset); ``None`` allows no resampling.
        on_exhausted: When the step ends short of its target: ``"train"`` returns the kept
            groups (maybe none) with ``exhausted`` set and a warning; ``"raise"`` raises.
        sample_kwargs: Extra keyword arguments of ``sample`` (``adapter_name``, ...).

    Raises:
        BudgetExhaustedError: the step is short and ``on_exhausted`` is ``"raise"``.
        ValueError: the sampler answered another number of requests than it was given
            (a request answered with another number of sequences than asked is a group of
            the wrong size: ``external``, ``wrong_group_size``).

    .. versionadded:: 0.2.0
    """
    check_choice(on_exhausted, "on_exhausted", ON_EXHAUSTED)
    batch = list(prompts)
    if not batch:
        msg = (
            "'prompts' must hold at least one prompt, the step's target being one kept group per "
            "prompt (got 0)"
        )
        raise ValueError(msg)
    rounds = _Rounds(admission, sampler, score, sampling_params, dict(sample_kwargs or {}))
    with admission_step(admission.session, len(batch)) as step:
        plan, out_of_prompts = rounds.run_all(batch, extra_prompts)
    return _finish(admission, rounds, step.report, plan, out_of_prompts, on_exhausted)


def _finish(
    admission: TwinkleGroupAdmission,
    rounds: _Rounds,
    report: StepReport,
    plan: ResamplePlan | None,
    out_of_prompts: bool,
    on_exhausted: str,
) -> AdmittedBatch:
    trained = report.trained_groups  # surplus groups beyond the target are discarded
    size = admission.num_generations
    # No whole group in any round (every request answered with the wrong size): nothing scored.
    scored = rounds.rewards if rounds.rewards is not None else RowRewards({"reward": []}, named=False)
    rewards = scored.take(range(trained * size))
    metrics = admission.metrics(report)
    metrics[f"{METRIC_PREFIX}out_of_prompts"] = int(out_of_prompts)
    metrics[f"{METRIC_PREFIX}exhausted"] = int(_exhausted(report, out_of_prompts))
    batch = AdmittedBatch(
        prompts=rounds.prompts[:trained],
        sequences=[sequence for group in rounds.sequences[:trained] for sequence in group],
        rewards=rewards.as_dict(),
        # The loss scale rides on the advantages: twinkle's losses are linear in them.
        advantages=admission.advantages_of(rewards) * report.loss_scale,
        report=report,
        plan=plan,
        out_of_prompts=out_of_prompts,
        metrics=metrics,
    )
    if report.short_groups:
        message = _short_message(admission, report, out_of_prompts)
        if on_exhausted == "raise":
            raise BudgetExhaustedError(message)
        _log.warning("group_admission_short_step", message=message, **report.to_dict())
    return batch


def _short_message(admission: TwinkleGroupAdmission, report: StepReport, out_of_prompts: bool) -> str:
    cause = "'extra_prompts' ran out" if out_of_prompts else "the budget allows no more groups"
    advice = (
        f"Cause: {cause}. Train on fewer groups, skip the step, or raise the budget's "
        "max_extra_groups / max_resample_rounds."
    )
    return exhausted_message("twinkle", report, admission.session, advice)
