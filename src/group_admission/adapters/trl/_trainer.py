"""``AdmissionGRPOTrainer``: TRL's ``GRPOTrainer`` with group admission and bounded resampling."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import (
    AdmissionSession,
    BatchAdmissionVerdict,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    PromptHistory,
    PromptHistoryConfig,
    SamplingBudgetConfig,
    SessionConfig,
    StepReport,
    parse_state,
)
from .._kit import (
    DEFAULT_LOSS_SCALE,
    UNSUMMABLE_REWARD,
    AdapterSession,
    HoldsAdmission,
    LossScale,
    PromptId,
    admission_step,
    chunk,
    deprecated,
    history_metrics,
    restored_history,
    session_config_of,
    step_metrics,
    unpack_block,
)
from ._masking import mask_rejected_rows, row_keep, zero_std_fraction
from ._prompt_ids import PromptIds, as_prompt_history
from ._rounds import PromptStream, merge_rounds
from ._sampler import Names, PickingSampler
from ._trl_imports import GRPOTrainer, gather, gather_object, torch

__all__ = ["STATE_FILE", "AdmissionGRPOTrainer", "AdmissionMixin"]

#: The file, in each checkpoint folder, that holds the admission statistics and budget state.
STATE_FILE = "group_admission_state.json"
_PREFIX = "group_admission/"

#: What ``admission=`` takes besides a mapping: a policy, its config, or a whole setup.
GroupAdmission = GroupAdmissionPolicy | GroupAdmissionConfig | SessionConfig

# The mixin is typed against GRPOTrainer but inherits from object, so users can put it in
# front of their own GRPOTrainer subclass.
_Base: Any = GRPOTrainer if TYPE_CHECKING else object


def _completion_text(completion: Any) -> str:
    """The text of a completion: a string, or the content of a conversational turn list."""
    if isinstance(completion, str):
        return completion
    return "".join(str(turn.get("content", "")) for turn in completion)


class AdmissionMixin(HoldsAdmission, _Base):  # type: ignore[misc]  # TRL is not followed by mypy
    """
    Group admission and bounded resampling for any ``GRPOTrainer`` subclass.

    Put it first in the bases (``class MyTrainer(AdmissionMixin, MyGRPOTrainer)``) and
    pass ``admission=`` and ``budget=`` to the constructor; everything else goes to the
    trainer unchanged. ``admission`` may also be a whole :class:`SessionConfig` block
    (``{"preset": "recommended", "policy": {"gate_on": ["accuracy"]}}``): its policy, loss
    scale, budget (when it resamples) and history (unless ``budget=`` or
    ``prompt_history=`` are given). See :class:`AdmissionGRPOTrainer`.

    .. versionadded:: 0.2.0
    """

    def __init__(
        self,
        *args: Any,
        admission: GroupAdmissionPolicy
        | GroupAdmissionConfig
        | SessionConfig
        | Mapping[str, Any]
        | None = None,
        budget: SamplingBudgetConfig | Mapping[str, Any] | None = None,
        prompt_history: PromptHistory | PromptHistoryConfig | Mapping[str, Any] | str | None = None,
        prompt_id: str | Callable[[Mapping[str, Any]], PromptId] | None = None,
        loss_scale: LossScale = DEFAULT_LOSS_SCALE,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        block = session_config_of(admission)
        if block is not None and prompt_history is None:
            prompt_history = block.history
        admission, budget, _, loss_scale = unpack_block(admission, budget=budget, loss_scale=loss_scale)
        session = AdmissionSession(admission, budget=budget, host="trl", loss_scale=loss_scale)
        self.admission = AdapterSession(block, host="trl", session=session)
        self._check_gate_on(session.policy.config.gate_on)
        self._admission_prompts: PromptStream | None = None
        self.prompt_history: PromptHistory | None = None
        self._prompt_ids: PromptIds | None = None
        self._main_sampler: PickingSampler | None = None
        if prompt_history is not None:
            self.prompt_history = as_prompt_history(prompt_history, self.num_generations)
            self._prompt_ids = PromptIds(prompt_id)
            dataset: Any = self.train_dataset  # type: ignore[has-type]  # set by TRL, not followed
            self.train_dataset = self._prompt_ids.prepare(dataset)
        if budget is not None:
            if self.accelerator.num_processes > 1:
                msg = (
                    "'budget' (resampling) runs on one process in this version "
                    f"(got num_processes={self.accelerator.num_processes}); use budget=None "
                    "to keep admission masking, which works with any number of processes"
                )
                raise ValueError(msg)
            self._admission_prompts = PromptStream(self.train_dataset, self.args.seed + 1)
        self._captured: tuple[torch.Tensor, list[Any]] | None = None

    @property
    def admission_session(self) -> AdmissionSession:
        """The :class:`AdmissionSession` that judges, counts and plans (also :attr:`session`)."""
        return self.admission.session

    @property
    def last_step_report(self) -> StepReport | None:
        """Deprecated: :attr:`last_report`, the name every adapter uses."""
        deprecated("AdmissionGRPOTrainer.last_step_report", "use last_report")
        return self.last_report

    def _check_gate_on(self, gate_on: tuple[str, ...] | None) -> None:
        names = list(self.reward_func_names)
        if gate_on is None:
            return
        unknown = [name for name in gate_on if name not in names]
        if unknown:
            msg = f"'gate_on' must name entries of reward_func_names {names!r} (got unknown {unknown!r})"
            raise ValueError(msg)
        ambiguous = sorted({name for name in gate_on if names.count(name) > 1})
        if ambiguous:
            msg = (
                f"'gate_on' names {ambiguous!r}, which several reward functions share in "
                f"reward_func_names {names!r}; give them distinct __name__s"
            )
            raise ValueError(msg)

    # -- TRL hooks ---------------------------------------------------------------------
    def _calculate_rewards(
        self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any
    ) -> torch.Tensor:
        rewards: torch.Tensor = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        # Gathered (B_global, n_funcs): every rank sees the same rewards, hence the same verdicts.
        self._captured = (rewards, completions)
        return rewards

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model.training:  # evaluation measures the policy; nothing is trained
            evaluated: dict[str, Any] = super()._generate_and_score_completions(inputs)
            return evaluated
        session, size = self.admission.session, self.num_generations
        first, ids, tokens = self._generate_round(inputs)
        groups = first["advantages"].size(0) * self.accelerator.num_processes // size
        # A failed round (generation, a reward function) ends the step too: it must not stay open.
        with admission_step(session, groups) as step:
            verdict = self._judge_round(first, ids, tokens)
            rounds, filled = [first], verdict.keep.copy()
            slots = [(0, group) for group in range(groups)]
            plan = session.plan(num_generations=size)
            rate = plan.effective_rate
            skipped, forced = (
                (0, 0) if self._main_sampler is None else self._main_sampler.counts(session.step)
            )
            if self.prompt_history is not None:
                skipped_now, rate = self._resample_picked(rounds, slots, filled, rate)
                skipped += skipped_now
            while (
                plan.extra_groups > 0 and self._admission_prompts is not None and self.prompt_history is None
            ):
                extra, ids, tokens = self._generate_round(
                    self._admission_prompts.draw(plan.extra_groups, size)
                )
                _fill_slots(slots, filled, self._judge_round(extra, ids, tokens).keep, len(rounds))
                rounds.append(extra)
                plan = session.plan(num_generations=size)
                rate = plan.effective_rate
        report = step.report
        output = first if len(rounds) == 1 else self._merge(rounds, slots)
        self._log_step(report, rate, float(verdict.keep.mean()), (skipped, forced))
        self.admission.last_report = report
        return self._mask(output, filled, report)

    def _resample_picked(
        self,
        rounds: list[dict[str, Any]],
        slots: list[tuple[int, int]],
        filled: np.ndarray[Any, Any],
        rate: float,
    ) -> tuple[int, float]:
        """
        Resampling rounds of the prompts the history picks.

        Returns the prompts it skipped, and the admission rate of the plan it followed: the
        last round's pick (its prompts' mean informative probability), else ``rate``.
        """
        stream, names, history = self._admission_prompts, self._prompt_ids, self.prompt_history
        if stream is None or names is None or history is None:
            return 0, rate  # without a budget there are no extra rounds
        skipped = 0
        while True:
            chosen, count, picked_rate = self._pick_round(stream, names, history)
            skipped += count
            if not chosen:
                return skipped, rate
            rate = picked_rate
            extra, ids, tokens = self._generate_round(stream.rows(chosen, self.num_generations))
            _fill_slots(slots, filled, self._judge_round(extra, ids, tokens).keep, len(rounds))
            rounds.append(extra)

    def _pick_round(
        self, stream: PromptStream, names: PromptIds, history: PromptHistory
    ) -> tuple[list[int], int, float]:
        """
        The next round's prompts as ``session.pick_prompts`` picks them, the prompts skipped, their rate.

        The session's plan sizes the offer: nothing when it plans no more groups (the
        target is met or a cap is spent), else its planned groups, and twice as many while
        the pick takes every picked prompt and no cap or target stops it, up to one pass.
        Picked prompts the round does not need go back to the front of the stream; skipped
        ones are used up. The rate is the chosen prompts' mean informative probability.
        """
        session, limit = self.admission.session, len(self.train_dataset)
        offer, skipped = min(session.plan(num_generations=self.num_generations).extra_groups, limit), 0
        while offer:
            indices = stream.take(offer)
            ids = names.of_indices(self.train_dataset, indices)
            plan = session.pick_prompts(history, ids, num_generations=self.num_generations)
            dropped, chosen = set(plan.skipped), len(plan.generate)
            picked = [index for index, prompt in zip(indices, ids, strict=True) if prompt not in dropped]
            skipped += len(plan.skipped)
            if plan.requested_groups < len(picked) or plan.limited_by or offer >= limit:
                stream.defer(picked[chosen:])
                return picked[:chosen], skipped, plan.effective_rate
            stream.defer(picked)
            offer = min(2 * offer, limit)
        return [], skipped, 0.0

    def _generate_round(
        self, inputs: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], list[PromptId] | None, int]:
        """
        TRL's generation and scoring of ``inputs``, the prompt id of each (global) group, the tokens decoded.

        The tokens are TRL's own count of what the model generated on every rank: the growth
        of ``state.num_input_tokens_seen`` less the prompts' tokens. ``num_items_in_batch``
        would miss truncated completions under ``mask_truncated_completions``.
        """
        ids = None
        if self._prompt_ids is not None:
            rows: list[PromptId] = gather_object([self._prompt_ids.of_row(row) for row in inputs])
            ids = rows[:: self.num_generations]
            inputs = self._prompt_ids.strip(inputs)
        seen = self.state.num_input_tokens_seen
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        prompts = int(gather(output["prompt_mask"].sum()).sum().item())
        tokens = int(self.state.num_input_tokens_seen - seen) - prompts
        rewards, _ = self._captured_round()
        trained = (rewards * self.reward_weights.to(rewards.device)).nansum(dim=1)
        trained[torch.isnan(rewards).all(dim=1)] = torch.nan
        # TRL's value reads 0 or 1 for the whole batch under scale_rewards="batch".
        self._metrics["train"]["frac_reward_zero_std"][-1] = zero_std_fraction(trained, self.num_generations)
        return output, ids, tokens

    def _history_names(self) -> Names | None:
        """The prompt history and the prompt ids of train-dataset indices (``None`` without a history)."""
        names = self._prompt_ids
        if self.prompt_history is None or names is None:
            return None

        def of(indices: list[int]) -> tuple[PromptHistory, list[PromptId]]:
            history = self.prompt_history  # read at each call: a checkpoint restore replaces it
            assert history is not None
            return history, names.of_indices(self.train_dataset, indices)

        return of

    def _get_train_sampler(self, dataset: Any = None) -> Any:
        """TRL's sampler; with a prompt history, its chunks skip the prompts the history skips."""
        base = super()._get_train_sampler(dataset)
        names = self._history_names()
        if names is None:
            return base
        self._main_sampler = PickingSampler(base, names)
        return self._main_sampler

    def _captured_round(self) -> tuple[torch.Tensor, list[Any]]:
        if self._captured is None:
            msg = "GRPOTrainer did not call _calculate_rewards; this trl version is not supported"
            raise RuntimeError(msg)
        return self._captured

    def _judge(self, tokens: int) -> BatchAdmissionVerdict:
        rewards, completions = self._captured_round()
        self._captured = None
        config = self.admission.session.policy.config
        texts = None
        if config.similarity_gate_enabled:
            flat = [_completion_text(c) for c in gather_object(list(completions))]
            texts = chunk(flat, self.num_generations)
        return self.admission.session.judge_batch(
            session_rewards(
                rewards,
                list(self.reward_func_names),
                self.reward_weights,
                config.gate_on,
                self.num_generations,
            ),
            texts,
            external_reasons=None if config.gate_on is None else self._unsummable(rewards, config.gate_on),
            generated_tokens=tokens,
        )

    def _unsummable(self, rewards: torch.Tensor, gate_on: tuple[str, ...]) -> list[list[str]]:
        names = list(self.reward_func_names)
        gated = [names.index(name) for name in gate_on]
        return unsummable(rewards, self.reward_weights, gated, self.num_generations)

    def _judge_round(
        self, output: dict[str, Any], ids: list[PromptId] | None, tokens: int
    ) -> BatchAdmissionVerdict:
        """Judge a round (``tokens``: decoded), and record its groups into the prompt history (if any)."""
        verdict = self._judge(tokens)
        if self.prompt_history is not None and ids is not None:
            self.prompt_history.observe_batch(ids, verdict.result, step=self.admission.session.step)
        return verdict

    def _merge(self, rounds: Sequence[dict[str, Any]], slots: Sequence[tuple[int, int]]) -> dict[str, Any]:
        size = self.num_generations
        rows = [(r, group * size + member) for r, group in slots for member in range(size)]
        return merge_rounds(rounds, rows, int(self._tokenizer.pad_token_id))

    def _mask(
        self, output: dict[str, Any], filled: np.ndarray[Any, Any], report: StepReport
    ) -> dict[str, Any]:
        device = output["advantages"].device
        keep = row_keep(filled, self.num_generations, device)
        local = keep.size(0) // self.accelerator.num_processes
        index = self.accelerator.process_index
        return mask_rejected_rows(
            output,
            keep[index * local : (index + 1) * local],
            loss_type=self.loss_type,
            mode=self.admission.session.loss_scale,
            scale=report.loss_scale,
            rows=(int(keep.sum().item()), keep.size(0)),
            gather_sum=lambda value: gather(value).sum(),
        )

    def _log_step(
        self, report: StepReport, effective_rate: float, rate_before: float, prompts: tuple[int, int]
    ) -> None:
        values = step_metrics(self.admission.session, report, prefix="", effective_rate=effective_rate)
        values["informative_rate_before"] = rate_before
        if self.prompt_history is not None:
            skipped, forced = prompts
            step = self.admission.session.step
            values.update(
                history_metrics(self.prompt_history, step=step, prefix="", skipped=skipped, forced=forced)
            )
        for name, value in values.items():
            self._metrics["train"][_PREFIX + name].append(float(value))

    # -- checkpoints -------------------------------------------------------------------
    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        if not self.args.should_save:
            return
        folder = os.path.join(self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}")
        state = {"session": self.admission.session.state_dict()}
        if self._admission_prompts is not None:
            state["prompts"] = self._admission_prompts.state_dict()
        if self.prompt_history is not None:
            state["prompt_history"] = self.prompt_history.to_dict()
        if self._main_sampler is not None:
            state["sampler"] = self._main_sampler.state_dict()
        with open(os.path.join(folder, STATE_FILE), "w", encoding="utf-8") as handle:
            json.dump(state, handle)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        path = None if checkpoint is None else os.path.join(checkpoint, STATE_FILE)
        if path is None or not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as handle:
            state = parse_state(handle.read())  # a key written twice is refused, not dropped
        self.admission.session.load_state_dict(state["session"])
        if self._admission_prompts is not None and "prompts" in state:
            self._admission_prompts.load_state_dict(state["prompts"])
        if self.prompt_history is not None and "prompt_history" in state:
            self.prompt_history = restored_history(
                state["prompt_history"], self.prompt_history.config, settings="the trainer's"
            )
        if self._main_sampler is not None and "sampler" in state:
            self._main_sampler.load_state_dict(state["sampler"], skip_trained=not self.args.ignore_data_skip)


class AdmissionGRPOTrainer(AdmissionMixin, GRPOTrainer):  # type: ignore[misc]  # TRL is not followed by mypy
    """
    TRL's ``GRPOTrainer`` that trains only on admitted prompt groups.

    Built exactly like ``GRPOTrainer``, plus:

    Args:
        admission: A :class:`GroupAdmissionPolicy`, a :class:`GroupAdmissionConfig` or a
            mapping of its fields. ``gate_on`` names entries of ``reward_func_names``
            (e.g. ``reward_funcs=[accuracy, brevity], gate_on=["accuracy"]``).
        budget: A :class:`SamplingBudgetConfig` or a mapping of its fields. When given,
            a generation batch short of admitted groups is topped up with groups of fresh
            prompts, generated with the same weights, within the budget's hard caps
            (one process only). ``None``: admission masks rejected groups only.
        prompt_history: A :class:`PromptHistory`, a :class:`PromptHistoryConfig`, a
            mapping of its fields (``group_size`` defaults to ``num_generations``), or a
            preset's name (``"recommended"``: its ``history`` section). Every
            judged group is observed into it (``trainer.prompt_history``), and the fresh
            prompts of resampling rounds skip the prompts it marks likely-dead, with its
            exploration floor. ``None`` (default): off.
        prompt_id: How a train row names its prompt for the history: a column name, a
            callable ``row -> str | int``, or ``None`` for the row's index in the train
            dataset (needs a ``datasets.Dataset``).
        loss_scale: The step's loss after admission (:func:`group_admission.loss_scale`):
            ``"target"`` (default) takes the update of the full batch with the rejected
            groups at zero advantage; ``"kept"`` averages over the kept groups alone;
            ``"linear"`` / ``"sqrt"`` scale that by RAGEN's kept fraction (or its root).

    A rejected group trains on nothing: zero advantage, masked out of the policy loss, KL
    and entropy terms; the loss normaliser follows ``loss_scale``. Metrics appear in TRL's logs under
    ``group_admission/``; the statistics, budget state and prompt history are saved with each
    checkpoint.

    .. versionadded:: 0.2.0
    """


def _fill_slots(
    slots: list[tuple[int, int]], filled: np.ndarray[Any, Any], keep: np.ndarray[Any, Any], round_index: int
) -> None:
    """Put the admitted groups of a new round into the empty slots, in order (in place)."""
    empty = iter(np.flatnonzero(~filled).tolist())
    for group in np.flatnonzero(keep).tolist():
        slot = next(empty, None)
        if slot is None:
            return  # surplus: more admitted groups than empty slots
        slots[slot] = (round_index, group)
        filled[slot] = True


def unsummable(
    rewards: torch.Tensor, weights: torch.Tensor, gated: list[int], num_generations: int
) -> list[list[str]]:
    """
    Per group, ``[UNSUMMABLE_REWARD]`` when a row's trained reward is not finite, else ``[]``.

    With ``gate_on`` the session judges the ``gated`` columns alone, so an infinite value of
    another function (or two that overflow float32 together) would pass it; an infinite
    gated value the session rejects itself (``non_finite_reward``).
    """
    total = (rewards * weights.to(rewards.device)).nansum(dim=1)
    broken = ~torch.isfinite(total) & ~torch.isinf(rewards[:, gated]).any(dim=1)
    groups = broken.view(-1, num_generations).any(dim=1)
    return [[UNSUMMABLE_REWARD] if flag else [] for flag in groups.tolist()]


def session_rewards(
    rewards: torch.Tensor,
    names: list[str],
    weights: torch.Tensor,
    gate_on: tuple[str, ...] | None,
    num_generations: int,
) -> Any:
    """
    The session's input from TRL's gathered ``(B, n_funcs)`` rewards (NaN where ``None``).

    Without ``gate_on``: the reward TRL trains on (the weighted sum). With it: the gated
    columns, unweighted, as ``{name: (G, N)}``. A gated function that returns ``None`` for a
    whole group does not apply to it and contributes 0, as in TRL's ``nansum``; a group where
    no gated function applies, or with ``None`` for only some members, keeps its NaN.
    """
    if gate_on is None:
        total = (rewards * weights.to(rewards.device)).nansum(dim=1)
        total[torch.isnan(rewards).all(dim=1)] = torch.nan
        return total.view(-1, num_generations).detach().cpu().double().numpy()
    columns = torch.stack([rewards[:, names.index(name)] for name in gate_on])
    grouped = columns.view(len(gate_on), -1, num_generations).detach().cpu().double()
    absent = torch.isnan(grouped).all(dim=2, keepdim=True)
    fill = absent & ~absent.all(dim=0, keepdim=True)
    grouped = torch.where(fill, torch.zeros_like(grouped), grouped)
    return {name: grouped[i].numpy() for i, name in enumerate(gate_on)}
