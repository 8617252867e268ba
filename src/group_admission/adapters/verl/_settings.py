"""
The verl adapter's settings: ``trainer.v1.sampler.sampler_kwargs``, validated once.

verl hands a custom sampler only its ``sampler_kwargs`` (not ``algorithm.filter_groups``,
``data.train_batch_size`` or ``data.gen_batch_size``), so everything the adapter needs
travels there. This module does not import verl.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ... import DropLimits, GroupAdmissionConfig, SamplingBudgetConfig
from .._kit import (
    LossScale,
    OnExhausted,
    as_budget,
    as_limits,
    as_policy_config,
    check_ge,
    check_gt,
    check_optional,
    history_field,
    int_field,
    loss_scale_field,
    on_exhausted_field,
    real_field,
    settings_from,
    token_ids_only,
)

__all__ = ["CANONICAL_REWARD", "VerlAdmissionSettings"]

#: verl's name for the canonical pre-KL reward (the sum of a trajectory's ``rm_scores``).
CANONICAL_REWARD = "reward"


@attrs.frozen(kw_only=True)
class VerlAdmissionSettings:
    """
    The ``trainer.v1.sampler.sampler_kwargs`` of :class:`AdmissionReplayBuffer`.

    Args:
        policy: :class:`GroupAdmissionConfig` fields. ``gate_on`` names the
            ``reward_extra_info`` components the gate measures (their sum), e.g. ``[acc]``
            with DAPO's reward manager; ``reward`` names verl's canonical reward (the sum
            of ``rm_scores``), which is what the gate measures when ``gate_on`` is unset.
            The redundancy gate is not supported (the buffer holds no texts).
        budget: :class:`SamplingBudgetConfig` fields: the hard caps on refills. The
            defaults allow none, so a step trains on what its first round admitted.
        limits: :class:`DropLimits` fields (``None``: none). A rejected group a limit
            forces through is trained on and counted as ``fallback_admitted``.
        num_generations: Samples per prompt (``actor_rollout_ref.rollout.n``), for the
            sample cap; ``None`` lets the session use the mean group size it has seen.
        gen_batch_size: verl's ``data.gen_batch_size``: refills are whole multiples of
            it, rounded down so that no cap is exceeded. Use 1 for exact refills.
        on_exhausted: What a step does when the caps stop refills before the target is
            met: ``"train"`` trains on the admitted groups (verl pads the batch);
            ``"raise"`` stops the run with :class:`group_admission.BudgetExhaustedError`. A step that
            kept nothing always raises: there is nothing to train on.
        checkpoint_dir: verl's ``trainer.default_local_dir``. On resume, the session state
            saved by :class:`AdmissionCheckpointCallback` is read from its
            ``global_step_<N>`` folder. ``None`` turns resuming off.
        poll_interval: Seconds between polls of the TransferQueue (verl's default is 2).
        loss_scale: The loss scale the step metrics report (``group_admission/loss_scale``,
            :func:`group_admission.loss_scale`): verl applies it through its actor's
            ``loss_agg_mode``, which the sampler cannot set; docs/adapters/verl.md says what
            to set for each mode (``"target"``, the default: ``seq-mean-token-sum-norm``).
        history: Skip likely-dead prompts before they are generated: a
            :class:`PromptHistory` picks the prompts verl's train dataloader yields (each
            step's batch and every refill), fed every judged group. A preset's name
            (``recommended``: its ``history`` section) or :class:`PromptHistoryConfig`
            fields without ``group_size`` (which is ``actor_rollout_ref.rollout.n``;
            ``seed`` defaults to ``data.seed``). Needs ``data.dataloader_num_workers: 0``.
            ``None``: verl's own sampler.

    .. versionadded:: 0.2.0
    """

    policy: GroupAdmissionConfig = attrs.field(
        factory=GroupAdmissionConfig,
        converter=as_policy_config,
        validator=token_ids_only("verl", "verl's replay buffer holds"),
    )
    budget: SamplingBudgetConfig = attrs.field(factory=SamplingBudgetConfig, converter=as_budget)
    limits: DropLimits = attrs.field(factory=DropLimits, converter=as_limits)
    num_generations: int | None = int_field(None, check_ge(1), optional=True)
    gen_batch_size: int = int_field(1, check_ge(1))
    on_exhausted: OnExhausted = on_exhausted_field()
    checkpoint_dir: str | None = attrs.field(
        default=None, validator=check_optional(attrs.validators.instance_of(str))
    )
    poll_interval: float = real_field(2.0, check_gt(0))
    loss_scale: LossScale = loss_scale_field()
    history: dict[str, Any] | None = history_field()

    @property
    def components(self) -> tuple[str, ...]:
        """The reward components read per trajectory: ``gate_on``, else the canonical reward."""
        return self.policy.gate_on or (CANONICAL_REWARD,)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None) -> VerlAdmissionSettings:
        """
        Build the settings from ``sampler_kwargs`` (``None`` or empty: all defaults).

        ``sampler_kwargs`` may carry a :class:`~group_admission.SessionConfig` block
        (``preset: recommended`` plus overrides) beside the sampler's own keys.

        Raises:
            TypeError: the value is not a mapping, or a setting has the wrong type.
            ValueError: a key is unknown or a value is out of range.
        """
        return settings_from(cls, mapping, "'trainer.v1.sampler.sampler_kwargs'")
