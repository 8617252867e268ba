"""
``AdmissionReplayBuffer``: verl's v1 sync replay buffer with admission and a capped refill.

verl builds it from ``trainer.v1.sampler.custom_sampler.{path,name}`` and passes
``trainer.v1.sampler.sampler_kwargs`` (see :class:`VerlAdmissionSettings`). It keeps
verl's TransferQueue bookkeeping (metadata sync, eviction, materialisation) and replaces
two things: which finished groups are kept (the session's policy, over several
``reward_extra_info`` components) and how many prompts are refilled (the session's budget
plan, with explicit exhaustion instead of an unbounded loop).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from ..._budget import ResamplePlan
from ._checkpoint_state import load_session_state
from ._groups import GroupRewards, build_group, keys_by_uid
from ._interim_session import AdmissionSession, StepReport
from ._metrics import step_metrics
from ._settings import CANONICAL_REWARD, VerlAdmissionSettings
from ._verl_imports import ReplayBuffer, SkipManager, plain_container, tq

__all__ = ["AdmissionExhaustedError", "AdmissionReplayBuffer"]

_TRAIN_ONLY = "val"


class AdmissionExhaustedError(RuntimeError):
    """
    The sampling budget ran out before a step admitted enough groups to train on.

    Raised when nothing was admitted, or when ``on_exhausted: raise`` asks for a hard stop.
    The message names the step's counts and the caps that bound it.

    .. versionadded:: 0.1.0
    """


class AdmissionReplayBuffer(ReplayBuffer):  # type: ignore[misc]
    """
    verl's sync ``ReplayBuffer`` whose group filter and refill come from an admission session.

    Each training step is one budget step of ``batch_size`` target groups. The step's
    first round is the batch verl dispatched; once every launched group is terminal
    (finished or failed), the round is folded into the budget and the plan decides the
    refill. The step stops when enough groups are admitted, or when the plan is exhausted
    (then it trains on what it has, or raises, see ``on_exhausted``). At most
    ``target + max_extra_groups`` groups and ``max_resample_rounds`` refills per step.

    Validation batches go through verl's own ``sample`` unchanged.

    Args:
        trainer_mode: verl's ``trainer.v1.trainer_mode``; only ``sync`` is supported.
        trainer_config, max_off_policy_threshold, max_off_policy_strategy, poll_interval:
            Passed to verl's ``ReplayBuffer``.
        sampler_kwargs: The adapter's settings (:class:`VerlAdmissionSettings`).
        refill_fn: verl's ``_add_prompts_to_generate``: submits an exact number of prompts.

    Attributes:
        session: The admission session (statistics, budget state, checkpointable).
        last_report: The :class:`StepReport` of the latest training step, or ``None``.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        trainer_mode: str,
        trainer_config: Any,
        max_off_policy_threshold: int | None,
        max_off_policy_strategy: str,
        sampler_kwargs: Any,
        poll_interval: float | None = None,
        refill_fn: Any = None,
    ) -> None:
        settings = VerlAdmissionSettings.from_mapping(plain_container(sampler_kwargs))
        if trainer_mode != "sync":
            msg = (
                f"AdmissionReplayBuffer supports trainer.v1.trainer_mode=sync only (got {trainer_mode!r}); "
                "the async trainers refill one prompt per eviction and have no step to budget"
            )
            raise ValueError(msg)
        if refill_fn is None:
            msg = "AdmissionReplayBuffer needs verl's refill_fn to submit replacement prompts"
            raise ValueError(msg)
        super().__init__(
            trainer_mode=trainer_mode,
            trainer_config=trainer_config,
            max_off_policy_threshold=max_off_policy_threshold,
            max_off_policy_strategy=max_off_policy_strategy,
            sampler_kwargs=sampler_kwargs,
            poll_interval=settings.poll_interval if poll_interval is None else poll_interval,
            refill_fn=refill_fn,
        )
        self.settings = settings
        self.session = AdmissionSession(
            policy=settings.policy, budget=settings.budget, limits=settings.limits
        )
        self.last_report: StepReport | None = None
        self._resume_checked = False
        self._num_generations = settings.num_generations or 1

    # -- verl's entry point ----------------------------------------------------------

    @SkipManager.annotate_tq(role="rollout_tq", phase="sample")  # type: ignore[untyped-decorator]
    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[Any, dict[str, Any]]:
        """Return ``batch_size`` admitted groups (fewer when the budget ran out) and step metrics."""
        if partition_id == _TRAIN_ONLY:
            return self._sample_validation(global_steps, partition_id, batch_size)
        self._resume_once(global_steps)
        self.session.begin_step(batch_size)
        admitted: list[str] = []
        judged: set[str] = set()
        rejections: Counter[str] = Counter()
        last_debug_time = time.time()
        while True:
            self._sync_metadata_from_transfer_queue()
            admitted.extend(self._judge_new_groups(partition_id, judged, rejections))
            if self.pending_keys[partition_id] or self.running_keys[partition_id] or not judged:
                last_debug_time = self._wait_for_next_poll(partition_id, last_debug_time)
                continue
            # Every launched group is terminal: this round is complete, so plan the next.
            plan = self.session.plan(num_generations=self._num_generations)
            if len(admitted) >= batch_size or not self._refill(plan):
                break
        report = self.session.end_step()
        self.last_report = report
        return self._finish_step(partition_id, admitted, batch_size, report, plan, rejections)

    def _sample_validation(
        self, global_steps: int, partition_id: str, batch_size: int
    ) -> tuple[Any, dict[str, Any]]:
        # The undecorated built-in: this method already runs inside SkipManager's wrapper.
        builtin = getattr(ReplayBuffer.sample, "__wrapped__", ReplayBuffer.sample)
        batch, metrics = builtin(self, global_steps, partition_id, batch_size)
        return batch, metrics

    # -- judging ---------------------------------------------------------------------

    def judge_terminal_groups(self, partition_id: str, uids: set[str]) -> dict[str, Any]:
        """
        Judge the terminal groups ``uids`` with the session; return each uid's verdict.

        Reads the TransferQueue metadata snapshot of the last sync and changes nothing in
        the queue (the session counts the verdicts). Groups without any trajectory (every
        session failed) are rejected as ``external`` with the reason ``no_trajectories``.
        """
        names = self.settings.components
        keys = keys_by_uid(self.partitions[partition_id], uids)
        groups = self._read_groups(partition_id, keys, names)
        verdicts: dict[str, Any] = {}
        for uid in sorted(uids):
            group = groups.get(uid)
            if group is None:
                verdicts[uid] = self.session.judge(
                    [None], external_reasons=("no_trajectories",), group_key=uid
                )
                continue
            if self.settings.num_generations is None:
                self._num_generations = max(self._num_generations, group.sessions)
            verdicts[uid] = self._judge_group(group)
        return verdicts

    def _judge_group(self, group: GroupRewards) -> Any:
        if group.external:
            return self.session.judge(
                group.components,
                external_reasons=group.external,
                rollout_ids=group.rollout_ids,
                group_key=group.uid,
            )
        return self.session.judge_batch(
            {name: [values] for name, values in group.components.items()},
            rollout_ids=[group.rollout_ids],
            group_keys=[group.uid],
            generated_tokens=group.generated_tokens,
        )

    def _read_groups(
        self, partition_id: str, keys: dict[str, list[str]], names: tuple[str, ...]
    ) -> dict[str, GroupRewards]:
        ordered = [key for uid in sorted(keys) for key in keys[uid]]
        if not ordered:
            return {}
        fields = ["extra_fields"] * any(n != CANONICAL_REWARD for n in names)
        fields += ["rm_scores"] * (CANONICAL_REWARD in names)
        data = tq.kv_batch_get(keys=ordered, partition_id=partition_id, select_fields=fields)
        extra = list(data["extra_fields"]) if "extra_fields" in fields else [None] * len(ordered)
        scores = list(data["rm_scores"]) if "rm_scores" in fields else [None] * len(ordered)
        rows = dict(zip(ordered, zip(extra, scores, strict=True), strict=True))
        tags = self.partitions[partition_id]
        return {
            uid: build_group(uid, uid_keys, [rows[key] for key in uid_keys], names, tags)
            for uid, uid_keys in keys.items()
        }

    def _judge_new_groups(self, partition_id: str, judged: set[str], rejections: Counter[str]) -> list[str]:
        terminal = self.finished_keys[partition_id] | self.failure_keys[partition_id]
        new = terminal - judged
        if not new:
            return []
        judged |= new
        admitted, rejected = [], set()
        for uid, verdict in self.judge_terminal_groups(partition_id, new).items():
            keep = bool(verdict.keep[0]) if hasattr(verdict, "result") else bool(verdict.keep)
            if keep:
                admitted.append(uid)
            else:
                rejected.add(uid)
                rejections[_reason_name(verdict)] += 1
        self._clear_groups(partition_id, rejected)
        return admitted

    # -- refill and hand-over --------------------------------------------------------

    def _refill(self, plan: ResamplePlan) -> bool:
        # verl submits prompts in whole dataloader fetches; never round up past a cap.
        launch = plan.extra_groups - plan.extra_groups % self.settings.gen_batch_size
        if launch <= 0:
            return False
        self.refill_fn(launch)
        return True

    def _finish_step(
        self,
        partition_id: str,
        admitted: list[str],
        batch_size: int,
        report: StepReport,
        plan: ResamplePlan,
        rejections: Counter[str],
    ) -> tuple[Any, dict[str, Any]]:
        short = len(admitted) < batch_size
        if short and (not admitted or self.settings.on_exhausted == "raise"):
            self._clear_groups(partition_id, set(admitted))
            raise AdmissionExhaustedError(_exhausted_message(report, plan, rejections, self.settings))
        selected = admitted[:batch_size]
        surplus = set(admitted[batch_size:])
        # Sync stays bufferless, as in verl: surplus groups are discarded, not carried over.
        snapshot = dict(self.partitions[partition_id])
        self._clear_groups(partition_id, surplus)
        metrics = step_metrics(report, plan, self.session.stats, rejections, len(selected), len(surplus))
        return self._materialize_batch(partition_id, selected, snapshot), metrics

    def _resume_once(self, global_steps: int) -> None:
        if self._resume_checked:
            return
        self._resume_checked = True
        state = load_session_state(self.settings.checkpoint_dir, global_steps - 1)
        if state is not None:
            self.session.load_state_dict(state)


def _reason_name(verdict: Any) -> str:
    if hasattr(verdict, "result"):
        reason = verdict.result.reasons()[0]
        return str(reason)
    return str(verdict.decision.primary_rejection_reason)


def _exhausted_message(
    report: StepReport, plan: ResamplePlan, rejections: Counter[str], settings: VerlAdmissionSettings
) -> str:
    reasons = ", ".join(f"{name} x{count}" for name, count in rejections.most_common()) or "none"
    caps = ", ".join(plan.limited_by) or "none"
    return (
        f"group admission: the step admitted {report.admitted_groups} of {report.target_groups} target "
        f"groups after {report.generated_groups} generated groups in {report.rounds} round(s) "
        f"(rejections: {reasons}; binding caps: {caps}). "
        + (
            "Nothing was admitted, so there is nothing to train on. "
            if not report.admitted_groups
            else "on_exhausted is 'raise'. "
        )
        + f"Check that the data is not all too easy or too hard for the model, that "
        f"policy.gate_on ({list(settings.components)}) names the outcome component, or raise "
        f"budget.max_extra_groups (now {settings.budget.max_extra_groups}) / "
        f"budget.max_resample_rounds (now {settings.budget.max_resample_rounds})."
    )
