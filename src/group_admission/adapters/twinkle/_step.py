"""
The admission step of a twinkle-kit 0.5.1 GRPO loop: between the rewards and ``GRPOAdvantage``.

:class:`TwinkleGroupAdmission` is the adapter's only user of :class:`AdmissionSession`: it
judges G consecutive completions as one group, and hands the kept groups' rewards to
twinkle's own ``GRPOAdvantage``. It translates; the session judges, counts and plans.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs
import numpy as np
import numpy.typing as npt

from ... import (
    AdmissionSession,
    AdmissionVerdict,
    BatchAdmissionVerdict,
    DropLimits,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    ResamplePlan,
    SamplingBudgetConfig,
    SamplingBudgetController,
    SessionConfig,
    StepReport,
)
from .._kit import (
    DEFAULT_LOSS_SCALE,
    AdapterSession,
    HoldsAdmission,
    LossScale,
    check_choice,
    check_count,
    chunk,
    describe,
    step_metrics,
    unpack_block,
)
from ._rows import UNSUMMABLE_REWARD, RowRewards
from ._versions import import_twinkle

if TYPE_CHECKING:
    import torch

__all__ = ["METRIC_PREFIX", "AdmittedRows", "TwinkleGroupAdmission"]

T = TypeVar("T")
Scale = Literal["group", "batch", "none"]
_SCALES = ("group", "batch", "none")

#: The prefix of every metric :meth:`TwinkleGroupAdmission.metrics` returns.
METRIC_PREFIX = "group_admission/"


@attrs.frozen(kw_only=True, eq=False)
class AdmittedRows:
    """
    One round's verdicts, row by row, in twinkle's flat order (G rows per group).

    Attributes:
        advantages: ``(rows,)`` float tensor: twinkle's advantages of the kept groups,
            computed on those groups alone, and 0.0 on the rows of rejected groups.
        mask: ``(rows,)`` bool tensor: the rows of kept groups. Train on these rows only
            (:meth:`select`): then every twinkle loss normalises over kept rows alone.
        keep: ``(groups,)`` bool array: the kept groups.
        verdicts: The session's verdicts (reasons, statistics) per group.

    .. versionadded:: 0.2.0
    """

    advantages: torch.Tensor
    mask: torch.Tensor
    keep: npt.NDArray[np.bool_]
    verdicts: BatchAdmissionVerdict

    @property
    def kept_groups(self) -> int:
        """The number of kept groups."""
        return int(self.keep.sum())

    def select(self, values: Sequence[T]) -> list[T]:
        """
        The entries of a per-row list (inputs, old logps, lengths) that belong to kept groups.

        Raises:
            ValueError: ``values`` does not have one entry per row.
        """
        rows = self.mask.tolist()
        if len(values) != len(rows):
            msg = f"'values' must have one entry per completion ({len(rows)}) (got {len(values)})"
            raise ValueError(msg)
        return [value for value, kept in zip(values, rows, strict=True) if kept]


class TwinkleGroupAdmission(HoldsAdmission):
    """
    Group admission for a twinkle-kit 0.5.1 loop: sampler -> rewards -> *admission* -> ``GRPOAdvantage``.

    :meth:`admit` takes the per-component rewards of one round before twinkle sums them
    (so ``gate_on`` can gate on the outcome alone), judges each run of ``num_generations``
    consecutive completions as one group, and returns the advantages with rejected groups
    zeroed and a row mask. With a ``budget``, :func:`sample_admitted_groups` runs the
    resampling rounds.

    Args:
        policy: The admission policy (or a config / mapping for one; ``None`` admits every
            group with finite rewards), or a whole :class:`SessionConfig` block
            (``{"preset": "recommended"}``) whose sections fill the arguments not given.
        num_generations: G, the completions per prompt (>= 2).
        budget: The sampling budget for resampling rounds (a controller, config or mapping),
            or ``None``: no resampling.
        limits: Drop limits (:class:`DropLimits` or a mapping), or ``None``.
        scale: ``GRPOAdvantage``'s ``scale``: ``"group"``, ``"batch"`` or ``"none"``.
        advantage_fn: Called as ``advantage_fn(rewards, num_generations=G, scale=scale)``
            on the kept rows; default twinkle's ``GRPOAdvantage()`` (imported on first use).
        loss_scale: The step's loss after admission (:func:`group_admission.loss_scale`):
            :func:`sample_admitted_groups` multiplies the kept rows' advantages by the step's
            ``loss_scale``, so that twinkle's row-mean losses take the update of the full
            target with the missing groups at zero advantage (``"target"``, the default);
            ``"kept"`` leaves twinkle's advantages as they are.

    Raises:
        TypeError, ValueError: an argument is invalid; the message names it.

    .. versionadded:: 0.2.0
    """

    def __init__(
        self,
        policy: GroupAdmissionPolicy | GroupAdmissionConfig | SessionConfig | Mapping[str, Any] | None = None,
        *,
        num_generations: int,
        budget: SamplingBudgetController | SamplingBudgetConfig | Mapping[str, Any] | None = None,
        limits: DropLimits | Mapping[str, Any] | None = None,
        scale: Scale = "group",
        advantage_fn: Callable[..., Any] | None = None,
        loss_scale: LossScale = DEFAULT_LOSS_SCALE,
    ) -> None:
        policy, budget, limits, loss_scale = unpack_block(
            policy, budget=budget, limits=limits, loss_scale=loss_scale
        )
        self._num_generations = check_count(num_generations, "num_generations", 2)
        check_choice(scale, "scale", _SCALES)
        if advantage_fn is not None and not callable(advantage_fn):
            msg = f"'advantage_fn' must be callable like GRPOAdvantage() (got {describe(advantage_fn)})"
            raise TypeError(msg)
        self._scale: Scale = scale
        self._advantage_fn = advantage_fn
        session = AdmissionSession(
            policy, budget=budget, limits=limits, host="twinkle", loss_scale=loss_scale
        )
        self.admission = AdapterSession(None, host="twinkle", session=session)

    @property
    def num_generations(self) -> int:
        """G: completions per group."""
        return self._num_generations

    # -- one round -----------------------------------------------------------------
    def admit(
        self,
        rewards: Mapping[str, Any] | Sequence[Any] | RowRewards,
        *,
        completions: Sequence[str | None] | None = None,
        external_reasons: Sequence[Sequence[str]] | None = None,
        generated_tokens: int = 0,
    ) -> AdmittedRows:
        """
        Judge one round of flat rows and compute the kept groups' advantages.

        Args:
            rewards: ``{component: per-row rewards}`` before twinkle sums them (lists,
                tensors or arrays), or one per-row list. Rows are grouped as
                ``GRPOAdvantage`` groups them: G consecutive rows per prompt.
            completions: The per-row completion texts (``SampledSequence.decoded``), for
                the redundancy gate; ignored when it is off.
            external_reasons: Per group, the host's reasons to reject it (e.g. a failed
                sample).
            generated_tokens: The round's generated tokens, for a token cap.

        Raises:
            TypeError, ValueError: ``rewards`` is not per-row rewards for whole groups, or
                the other arguments do not have one entry per row / group.
        """
        size = self._num_generations
        rows = rewards if isinstance(rewards, RowRewards) else RowRewards.read(rewards, size)
        groups = rows.rows // size
        reasons = [list(found) for found in external_reasons or [()] * groups]
        if len(reasons) != groups:
            msg = f"'external_reasons' must have one entry per group ({groups}) (got {len(reasons)})"
            raise ValueError(msg)
        values, problems = rows.grouped(size)
        for group, found in problems.items():
            reasons[group].extend(found)
        for group in rows.unsummable_groups(self.session.policy.config.gate_on, size):
            reasons[group].append(UNSUMMABLE_REWARD)
        texts = None
        if completions is not None and self.session.policy.config.similarity_gate_enabled:
            if len(completions) != rows.rows:
                msg = f"'completions' must have one entry per row ({rows.rows}) (got {len(completions)})"
                raise ValueError(msg)
            texts = chunk(completions, size)
        verdicts = self.session.judge_batch(
            values,
            texts,
            external_reasons=reasons,
            generated_tokens=generated_tokens,
        )
        keep = np.asarray(verdicts.keep, dtype=bool)
        row_keep = np.repeat(keep, size)
        advantages, mask = self._scatter(rows, row_keep)
        return AdmittedRows(advantages=advantages, mask=mask, keep=keep, verdicts=verdicts)

    def reject_group(self, members: int, reason: str, generated_tokens: int = 0) -> AdmissionVerdict:
        """
        Count a group that cannot be judged on its rewards (``members`` of them) as ``external``.

        For a group twinkle's layout cannot hold, such as a request answered with another
        number of sequences than asked; ``reason`` names the problem.
        """
        return self.session.judge(
            [None] * max(1, members), external_reasons=[reason], generated_tokens=generated_tokens
        )

    def advantages_of(self, rewards: Mapping[str, Any] | Sequence[Any] | RowRewards) -> torch.Tensor:
        """
        The advantages twinkle computes for these rows (whole groups, e.g. the kept ones).

        ``rewards`` is what :meth:`admit` takes; the components are passed to the advantage
        function as one ``(rows, components)`` float32 tensor, which ``GRPOAdvantage`` sums.
        """
        import torch  # noqa: PLC0415

        if not isinstance(rewards, RowRewards):
            rewards = RowRewards.read(rewards, self._num_generations)
        function = self._advantage_fn
        if function is None:
            function = self._advantage_fn = import_twinkle("twinkle.advantage", "GRPOAdvantage")()
        if not rewards.rows:
            return torch.zeros(0, dtype=torch.float32)
        size, rows = self._num_generations, rewards.rows
        values = torch.as_tensor(function(rewards.tensor(), num_generations=size, scale=self._scale))
        if values.shape != (rows,):
            msg = f"'advantage_fn' must return one advantage per row ({rows},) (got {tuple(values.shape)})"
            raise ValueError(msg)
        return values

    def _scatter(
        self, rows: RowRewards, row_keep: npt.NDArray[np.bool_]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        import torch  # noqa: PLC0415

        kept = self.advantages_of(rows.take(np.flatnonzero(row_keep).tolist()))
        mask = torch.from_numpy(row_keep.copy())
        advantages = torch.zeros(rows.rows, dtype=kept.dtype)
        advantages[mask] = kept
        return advantages, mask

    # -- the step (resampling rounds) ----------------------------------------------------
    def begin_step(self, target_groups: int) -> None:
        """Start a step that needs ``target_groups`` kept groups (the batch's prompts)."""
        self.session.begin_step(target_groups)

    def plan(self, *, estimated_tokens_per_group: float | None = None) -> ResamplePlan:
        """Close the round: the round planner's next round of G-completion groups."""
        return self.session.plan(
            num_generations=self._num_generations, estimated_tokens_per_group=estimated_tokens_per_group
        )

    def end_step(self) -> StepReport:
        """Close the step and report what it kept and cost."""
        self.admission.last_report = self.session.end_step()
        return self.admission.last_report

    def metrics(self, report: StepReport | None = None) -> dict[str, int | float]:
        """
        Flat numeric metrics under ``group_admission/``, for twinkle's logger or metric dicts.

        The step vocabulary of :meth:`StepReport.metrics` (with ``report``) with the last
        plan's ``effective_rate``, then the step's counts under ``step/`` and the run's
        under ``total/``.
        """
        plan = self.session.last_plan
        rate = None if plan is None else plan.effective_rate
        return step_metrics(self.session, report, prefix=METRIC_PREFIX, effective_rate=rate)
