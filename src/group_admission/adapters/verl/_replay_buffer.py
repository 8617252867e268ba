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
from typing import Any

from ... import AdmissionSession, AdmissionVerdict, BudgetExhaustedError, ResamplePlan, StepReport
from .._kit import admission_step, exhausted_message, history_metrics
from ._checkpoint_state import load_session_state
from ._groups import GroupRewards, build_group, keys_by_uid, launched_sessions, no_trajectories
from ._metrics import METRIC_PREFIX, step_metrics
from ._prompt_install import install_prompt_sampler
from ._prompt_sampler import PROMPT_ID_FIELD, AdmissionPromptSampler
from ._settings import CANONICAL_REWARD, VerlAdmissionSettings
from ._verl_imports import ReplayBuffer, SkipManager, plain_container, tq

__all__ = ["AdmissionReplayBuffer"]

_VALIDATION = "val"


class AdmissionReplayBuffer(ReplayBuffer):  # type: ignore[misc]
    """
    verl's sync ``ReplayBuffer`` whose group filter and refill come from an admission session.

    Each training step is one session step of ``batch_size`` target groups. The step's
    first round is the batch verl dispatched; once every launched group is terminal
    (finished or failed), the round is folded into the budget and the plan decides the
    refill. The step stops when enough groups are kept, or when the plan is exhausted
    (then it trains on what it has, or raises, see ``on_exhausted``): at most
    ``target + max_extra_groups`` groups and ``max_resample_rounds`` refills per step.

    Validation batches go through verl's own ``sample`` unchanged.

    Args:
        trainer_mode: verl's ``trainer.v1.trainer_mode``; only ``sync`` is supported.
        trainer_config, max_off_policy_threshold, max_off_policy_strategy, poll_interval:
            Passed to verl's ``ReplayBuffer``.
        sampler_kwargs: The adapter's settings (:class:`VerlAdmissionSettings`).
        refill_fn: verl's ``_add_prompts_to_generate``: submits an exact number of prompts.

    Attributes:
        session: The :class:`AdmissionSession` (statistics, budget state, checkpointable).
        last_report: The :class:`StepReport` of the latest training step, or ``None``.
        prompt_sampler: With a ``history`` setting, the :class:`AdmissionPromptSampler` of
            the trainer's train dataloader (once verl built it), whose history is fed every
            judged group; else ``None``.

    Raises:
        BudgetExhaustedError: from ``sample``, when a step kept nothing, or kept too few
            with ``on_exhausted: raise``.

    .. versionadded:: 0.2.0
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
            settings.policy,
            budget=settings.budget,
            limits=settings.limits,
            host="verl",
            loss_scale=settings.loss_scale,
        )
        self.last_report: StepReport | None = None
        self._resume_checked = False
        self._largest_group = 0
        self.prompt_sampler: AdmissionPromptSampler | None = None
        self._step, self._unnamed = 0, 0
        if settings.history is not None:
            install_prompt_sampler(refill_fn, settings.history, settings.num_generations, self._use_sampler)

    def _use_sampler(self, sampler: AdmissionPromptSampler) -> None:
        self.prompt_sampler = sampler

    # -- verl's entry point ----------------------------------------------------------

    @SkipManager.annotate_tq(role="rollout_tq", phase="sample")  # type: ignore[untyped-decorator]
    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[Any, dict[str, Any]]:
        """Return ``batch_size`` admitted groups (fewer when the budget ran out) and step metrics."""
        if partition_id == _VALIDATION:
            return self._sample_validation(global_steps, partition_id, batch_size)
        self._resume_once(global_steps)
        self._step, sampler = global_steps, self.prompt_sampler
        if sampler is not None:
            sampler.step = global_steps  # the refills' picks; the step's batch was picked at it too
        # A failed sync, read or refill ends the step too, not to leave it open for the next sample.
        with admission_step(self.session, batch_size) as step:
            kept, plan = self._sample_rounds(partition_id, batch_size)
        self.last_report = step.report
        batch, metrics = self._finish_step(partition_id, kept, step.report, plan)
        if sampler is not None:
            sampler.step = global_steps + 1  # the next step's batch is picked before its sample()
            metrics.update(self._history_metrics(sampler))
        return batch, metrics

    def _history_metrics(self, sampler: AdmissionPromptSampler) -> dict[str, int | float]:
        (skipped, forced), unnamed, self._unnamed = sampler.take_counts(), self._unnamed, 0
        return history_metrics(
            sampler.history,
            step=self._step,
            prefix=METRIC_PREFIX,
            skipped=skipped,
            forced=forced,
            unnamed=unnamed,
        )

    def _sample_rounds(self, partition_id: str, batch_size: int) -> tuple[list[str], ResamplePlan]:
        """Judge groups as they finish; plan and refill each complete round until the target or a cap."""
        kept: list[str] = []
        judged: set[str] = set()
        last_debug_time = time.time()
        while True:
            self._sync_metadata_from_transfer_queue()
            kept.extend(self._judge_new_groups(partition_id, judged))
            if self.pending_keys[partition_id] or self.running_keys[partition_id] or not judged:
                last_debug_time = self._wait_for_next_poll(partition_id, last_debug_time)
                continue
            # Every launched group is terminal: this round is complete, so plan the next.
            plan = self.session.plan(self.settings.num_generations)
            if len(kept) >= batch_size or not self._refill(plan):
                return kept, plan

    def _sample_validation(
        self, global_steps: int, partition_id: str, batch_size: int
    ) -> tuple[Any, dict[str, Any]]:
        # The undecorated built-in: this method already runs inside SkipManager's wrapper.
        builtin = getattr(ReplayBuffer.sample, "__wrapped__", ReplayBuffer.sample)
        batch, metrics = builtin(self, global_steps, partition_id, batch_size)
        return batch, metrics

    # -- judging ---------------------------------------------------------------------

    def judge_terminal_groups(self, partition_id: str, uids: set[str]) -> dict[str, AdmissionVerdict]:
        """
        Judge the terminal groups ``uids`` with the session; return each uid's verdict.

        Reads the TransferQueue metadata snapshot of the last sync and changes nothing in
        the queue (the session counts the verdicts). Groups of any size are judged one by
        one, on the sessions that wrote a trajectory. A group without any trajectory
        (every session failed) is rejected as ``external`` with the reason
        ``no_trajectories``. Every group is charged the sessions verl ran for it, which
        for a ``failure`` group is ``num_generations`` (else the largest group seen).
        """
        keys = keys_by_uid(self.partitions[partition_id], uids)
        groups, prompts = self._read_groups(partition_id, keys, self.settings.components)
        failed = self.failure_keys[partition_id]
        # Finished groups wrote every session verl ran: the size a failed one was launched with.
        finished = [group.sessions for uid, group in groups.items() if uid not in failed]
        self._largest_group = max([self._largest_group, *finished])
        expected = self.settings.num_generations or self._largest_group
        verdicts: dict[str, AdmissionVerdict] = {}
        for uid in sorted(uids):
            group = groups[uid] if uid in groups else no_trajectories(uid, self.settings.components)
            samples = launched_sessions(group.sessions, failed=uid in failed, expected=expected)
            verdicts[uid] = self._judge_group(group, samples)
        self._observe({uid: verdicts[uid] for uid in groups}, prompts)
        return verdicts

    def _observe(self, verdicts: dict[str, AdmissionVerdict], prompts: dict[str, Any]) -> None:
        """
        Feed the judged groups that wrote rows to the prompt history, in prompt order.

        verl's uids are random: observed in uid order, the history's sequence numbers (and
        so its state) would differ between two runs that judged the same groups.
        """
        sampler = self.prompt_sampler
        if sampler is None:
            return
        named = []
        for uid, verdict in verdicts.items():
            prompt = prompts.get(uid)
            if isinstance(prompt, int) and not isinstance(prompt, bool):
                named.append((prompt, verdict))
            else:
                self._unnamed += 1  # an agent loop that dropped the row's prompt id: never observed
        for prompt, verdict in sorted(named, key=lambda pair: pair[0]):
            sampler.history.observe(prompt, verdict.decision, step=self._step)

    def _judge_group(self, group: GroupRewards, samples: int) -> AdmissionVerdict:
        decision = self.session.policy.evaluate(
            group.components,
            external_reasons=group.external,
            rollout_ids=group.rollout_ids or None,
            group_key=group.uid,
        )
        return self.session.record(decision, samples=samples, generated_tokens=group.generated_tokens)

    def _read_groups(
        self, partition_id: str, keys: dict[str, list[str]], names: tuple[str, ...]
    ) -> tuple[dict[str, GroupRewards], dict[str, Any]]:
        """Each uid's group, and (with a prompt sampler) the prompt id its first trajectory carries."""
        ordered = [key for uid in sorted(keys) for key in keys[uid]]
        if not ordered:
            return {}, {}
        # rm_scores always: it is the reward verl trains on, which must be finite (build_group).
        fields = ["extra_fields"] * any(n != CANONICAL_REWARD for n in names) + ["rm_scores"]
        fields += [PROMPT_ID_FIELD] * (self.prompt_sampler is not None)
        data = tq.kv_batch_get(keys=ordered, partition_id=partition_id, select_fields=fields)
        extra = list(data["extra_fields"]) if "extra_fields" in fields else [None] * len(ordered)
        scores = list(data["rm_scores"])
        rows = dict(zip(ordered, zip(extra, scores, strict=True), strict=True))
        tags = self.partitions[partition_id]
        groups = {
            uid: build_group(uid, uid_keys, [rows[key] for key in uid_keys], names, tags)
            for uid, uid_keys in keys.items()
        }
        if PROMPT_ID_FIELD not in fields:
            return groups, {}
        found = dict(zip(ordered, list(data[PROMPT_ID_FIELD]), strict=True))
        return groups, {uid: found[uid_keys[0]] for uid, uid_keys in keys.items()}

    def _judge_new_groups(self, partition_id: str, judged: set[str]) -> list[str]:
        terminal = self.finished_keys[partition_id] | self.failure_keys[partition_id]
        new = terminal - judged
        if not new:
            return []
        judged |= new
        verdicts = self.judge_terminal_groups(partition_id, new)
        # Rejected groups leave the queue at once, as verl evicts DAPO-filtered ones.
        self._clear_groups(partition_id, {uid for uid, verdict in verdicts.items() if not verdict.keep})
        return [uid for uid, verdict in verdicts.items() if verdict.keep]

    # -- refill and hand-over --------------------------------------------------------

    def _refill(self, plan: ResamplePlan) -> bool:
        # verl submits prompts in whole dataloader fetches; never round up past a cap.
        launch = plan.extra_groups - plan.extra_groups % self.settings.gen_batch_size
        if launch <= 0:
            return False
        self.refill_fn(launch)
        return True

    def _finish_step(
        self, partition_id: str, kept: list[str], report: StepReport, plan: ResamplePlan
    ) -> tuple[Any, dict[str, Any]]:
        if report.short_groups and (not kept or self.settings.on_exhausted == "raise"):
            self._clear_groups(partition_id, set(kept))
            raise BudgetExhaustedError(_exhausted_message(report, self.session, self.settings))
        selected, surplus = kept[: report.trained_groups], set(kept[report.trained_groups :])
        # Sync stays bufferless, as in verl: surplus groups are discarded, not carried over.
        snapshot = dict(self.partitions[partition_id])
        self._clear_groups(partition_id, surplus)
        metrics = step_metrics(report, plan, self.session)
        return self._materialize_batch(partition_id, selected, snapshot), metrics

    def _resume_once(self, global_steps: int) -> None:
        if self._resume_checked:
            return
        self._resume_checked = True
        state = load_session_state(self.settings.checkpoint_dir, global_steps - 1)
        if state is not None:
            self.session.load_state_dict(state)


def _exhausted_message(report: StepReport, session: AdmissionSession, settings: VerlAdmissionSettings) -> str:
    verdict = (
        "Nothing was kept, so there is nothing to train on. "
        if not report.kept_groups
        else "on_exhausted is 'raise'. "
    )
    advice = (
        f"{verdict}Check that the data is not all too easy or too hard for the model, that "
        f"policy.gate_on ({list(settings.components)}) names the outcome component, or raise "
        f"budget.max_extra_groups (now {settings.budget.max_extra_groups}) / "
        f"budget.max_resample_rounds (now {settings.budget.max_resample_rounds})."
    )
    return exhausted_message("verl", report, session, advice)
