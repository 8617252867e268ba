"""
One run: an arm trains the warm-started policy on a task with a seed until the token budget.

Every arm runs an ``AdmissionSession`` from the public API, as a user would:

- round arms begin a step, generate the target's groups, judge them, and generate what
  ``session.plan`` asks for until it asks for nothing (no budget: one round);
- history arms pick each round's prompts with ``session.pick_prompts(history, ...)`` and
  observe every judged group into the ``PromptHistory``;
- the streaming arm launches what ``session.stream_plan`` says on an engine of limited
  slots, judges each group as it finishes, and when the target is met carries the groups
  still running into the next step, where the updated policy finishes them.

A step trains on its kept groups (at most the target, in the order judged; the rest are
surplus) with one optimizer update. Tokens are charged in the step that decoded them,
whether their group is trained on, rejected, surplus, or still running at the end.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

import attrs
import numpy as np
import torch

from cookbook.learning_bench.arms import Arm, Profile
from cookbook.learning_bench.limits import pass_rates, spread_chance, stop_points
from cookbook.learning_bench.model import Policy, advantages, greedy_accuracy, group_std, policy_loss
from cookbook.learning_bench.rollout import Group, decode, group_scores, new_group, tick
from cookbook.learning_bench.task import Split, Task, prompt_tokens
from group_admission import AdmissionSession, PromptHistory, PromptHistoryConfig, StepReport

__all__ = ["MAX_STEPS", "PromptStream", "Run", "run_arm"]

#: Steps after which a run ends even short of its token budget.
MAX_STEPS = 20_000


class PromptStream:
    """The pool in an order reshuffled every epoch (seeded); prompts put back come out first."""

    def __init__(self, pool: np.ndarray, seed: int) -> None:
        self._pool = np.asarray(pool)
        self._rng = np.random.default_rng([seed, 7])
        self._epoch = -1
        self._queue: list[tuple[int, int]] = []

    def take(self, count: int) -> list[tuple[int, int]]:
        """The next ``count`` ``(prompt id, epoch)`` pairs."""
        while len(self._queue) < count:
            self._epoch += 1
            self._queue += [(int(p), self._epoch) for p in self._rng.permutation(self._pool)]
        taken, self._queue = self._queue[:count], self._queue[count:]
        return taken

    def put_back(self, items: list[tuple[int, int]]) -> None:
        """Offer ``items`` again, first."""
        self._queue = items + self._queue


@attrs.define
class Counts:
    """What a run did, summed over its steps."""

    tokens: int = 0
    steps: int = 0
    updates: int = 0
    judged: int = 0
    trained: int = 0
    trained_dead: int = 0
    trained_phantom: int = 0
    trained_tokens: int = 0
    surplus: int = 0
    rejected: int = 0
    skipped: int = 0
    skipped_informative: int = 0
    trained_resumed: int = 0
    resumed_age_steps: int = 0
    resumed_updates_spanned: int = 0
    oldest_resumed: int = 0
    stale_trained_tokens: int = 0
    resumed_prior_tokens: int = 0
    carried: int = 0
    carried_at_end: int = 0
    tokens_carried_at_end: int = 0
    session_generated_groups: int = 0
    session_generated_tokens: int = 0
    session_trained_groups: int = 0
    session_surplus_groups: int = 0
    session_decoded_tokens: int = 0
    decode_ticks: int = 0
    oracle_skipped: int = 0
    stopped: int = 0
    stopped_informative: int = 0
    stopped_tokens: int = 0
    loss_scale_sum: float = 0.0


def _with_epochs(prompts: Sequence[str | int], epochs: Mapping[int, int]) -> list[tuple[int, int]]:
    """The ``(prompt, epoch)`` items of ``prompts`` (the bench's prompt ids are ints)."""
    return [(cast("int", p), epochs[cast("int", p)]) for p in prompts]


@attrs.define
class Run:
    """The state of one run."""

    arm: Arm
    task: Task
    seed: int
    profile: Profile
    split: Split
    policy: Policy
    session: AdmissionSession
    stream: PromptStream
    history: PromptHistory | None = None
    #: When a list, every judged group's ``(step, prompt id, successes, members, tokens)``
    #: (for the offline study of predictors, ``predictors.py``).
    visits: list[tuple[int, int, int, int, int]] | None = None
    #: The rate oracle's latest pass rate of each prompt it was offered.
    rates: dict[int, float] = attrs.field(factory=dict)
    carried: list[Group] = attrs.field(factory=list)
    rejected: list[Group] = attrs.field(factory=list)  # this step's, for an arm with a padded loss
    counts: Counts = attrs.field(factory=Counts)
    curve: list[dict[str, float]] = attrs.field(factory=list)

    # -- groups ---------------------------------------------------------------------
    def launch(self, items: list[tuple[int, int]]) -> list[Group]:
        """New groups for ``(prompt, epoch)`` items; the uniforms are keyed by them, not by the arm."""
        prompts = prompt_tokens(self.task, np.array([p for p, _ in items], dtype=np.int64))
        return [
            new_group(
                self.task,
                prompt,
                prompts[i],
                members=self.profile.members,
                seed=self.seed,
                key=(int(self.task.shows_step), epoch, prompt),
            )
            for i, (prompt, epoch) in enumerate(items)
        ]

    def rewards(self, groups: list[Group]) -> dict[str, np.ndarray]:
        """The reward components the session judges (``{"outcome"}`` or ``{"outcome", "shaping"}``)."""
        scores = [group_scores(self.task, g) for g in groups]
        rewards = {"outcome": np.stack([s.outcome for s in scores])}
        if self.arm.reward == "composite":
            rewards["shaping"] = np.stack([s.shaping for s in scores])
        return rewards

    def judge_round(self, groups: list[Group], decoded: int) -> list[Group]:
        """Judge a decoded round; return the kept groups, in order."""
        rewards = self.rewards(groups)
        verdicts = self.session.judge_batch(rewards, generated_tokens=decoded)
        self.counts.judged += len(groups)
        if self.visits is not None:
            successes = rewards["outcome"].sum(axis=1).astype(int).tolist()
            self.visits += [
                (self.session.step, g.prompt_id, k, len(g.done), g.decoded_tokens)
                for g, k in zip(groups, successes, strict=True)
            ]
        if self.history is not None:
            ids = [g.prompt_id for g in groups]
            self.history.observe_batch(ids, verdicts.result, step=self.session.step)
        keep = verdicts.keep.tolist()
        self.note_rejected([g for g, k in zip(groups, keep, strict=True) if not k])
        return [g for g, k in zip(groups, keep, strict=True) if k]

    def note_rejected(self, groups: list[Group]) -> None:
        """Count rejected groups (and keep them for an arm whose loss is padded with them)."""
        self.counts.rejected += len(groups)
        if self.arm.padded_loss:
            self.rejected += groups

    def counterfactual(self, items: list[tuple[int, int]], step: int) -> None:
        """
        Generate, judge and discard the groups skipped prompts would have got.

        Common random numbers: the same uniforms, the same policy; never charged, never
        trained on.
        """
        if not items:
            return
        groups = self.launch(items)
        decode(self.policy, groups, step)
        result = self.session.policy.evaluate_batch(self.rewards(groups))
        self.counts.skipped += len(items)
        self.counts.skipped_informative += int(result.admitted.sum())

    # -- steps ----------------------------------------------------------------------
    def round_step(self, step: int) -> list[Group]:
        """A step of rounds: the target's groups, then what ``session.plan`` asks for."""
        kept: list[Group] = []
        wanted = self.profile.target_groups
        while wanted:
            rated = self.arm.rate_bound is not None
            items = self.rate_pick(wanted, step) if rated else self.stream.take(wanted)
            groups = self.launch(items)
            decoded = decode(self.policy, groups, step)
            if self.arm.oracle:
                groups, decoded = self.oracle_filter(groups)
            elif self.arm.rate_stop:
                groups, decoded = self.rate_stop(groups)
            self.counts.tokens += decoded
            kept += self.judge_round(groups, decoded) if groups else []
            wanted = self.session.plan(num_generations=self.profile.members).extra_groups
        return kept

    def oracle_filter(self, groups: list[Group]) -> tuple[list[Group], int]:
        """The groups with outcome spread and their tokens: the rest are never paid for (the limit)."""
        spread = group_std(self.rewards(groups)["outcome"]) > 0
        kept = [g for g, s in zip(groups, spread.tolist(), strict=True) if s]
        self.counts.oracle_skipped += len(groups) - len(kept)
        return kept, sum(g.decoded_tokens for g in kept)

    def rate_pick(self, wanted: int, step: int) -> list[tuple[int, int]]:
        """
        ``wanted`` prompts whose groups' chance of spread, from their pass rates, is at least the bound.

        The others are skipped (their groups measured by common random numbers, never charged);
        after a whole pool's worth of offers the step ends short.
        """
        picked: list[tuple[int, int]] = []
        offered = 0
        while len(picked) < wanted and offered <= len(self.split.pool):
            items = self.stream.take(wanted - len(picked))
            offered += len(items)
            keys = [(int(self.task.shows_step), epoch, prompt) for prompt, epoch in items]
            rates = pass_rates(
                self.policy,
                self.task,
                [p for p, _ in items],
                samples=self.profile.rate_samples,
                seed=self.seed,
                keys=keys,
            )
            chance = spread_chance(rates, self.profile.members)
            keep = (chance >= cast("float", self.arm.rate_bound)).tolist()
            self.rates.update({p: float(r) for (p, _), r in zip(items, rates.tolist(), strict=True)})
            picked += [item for item, k in zip(items, keep, strict=True) if k]
            self.counterfactual([item for item, k in zip(items, keep, strict=True) if not k], step)
        return picked

    def rate_stop(self, groups: list[Group]) -> tuple[list[Group], int]:
        """
        The groups decoded whole, and their tokens.

        A group stopped member by member (its tie unlikely to break) is charged for the
        members decoded before the stop, as a pilot, and neither judged nor trained on.
        """
        outcomes = self.rewards(groups)["outcome"]
        stops = stop_points(
            outcomes, np.array([self.rates[g.prompt_id] for g in groups]), cast("float", self.arm.rate_bound)
        )
        whole = [g for g, k in zip(groups, stops.tolist(), strict=True) if k == self.profile.members]
        pilot = 0
        for group, k, spread in zip(groups, stops.tolist(), (group_std(outcomes) > 0).tolist(), strict=True):
            if k < self.profile.members:
                pilot += int(group.progress[:k].sum())
                self.counts.stopped += 1
                self.counts.stopped_informative += int(spread)
        self.counts.stopped_tokens += pilot
        self.counts.tokens += pilot
        self.session.charge(pilot, kind="pilot")
        return whole, sum(g.decoded_tokens for g in whole)

    def history_step(self, step: int) -> list[Group]:
        """A step of rounds whose prompts ``session.pick_prompts`` chooses with the history."""
        assert self.history is not None
        kept: list[Group] = []
        offered_total = 0
        while offered_total <= len(self.split.pool):  # a whole pool skipped: end the step short
            offered = self.stream.take(self.profile.pick_window)
            offered_total += len(offered)
            epochs = dict(offered)
            plan = self.session.pick_prompts(
                self.history, [p for p, _ in offered], num_generations=self.profile.members
            )
            if not plan.generate and (plan.remaining_target_groups == 0 or plan.exhausted):
                # Nothing more this step: no skip was acted on, so every prompt goes back.
                self.stream.put_back(offered)
                break
            self.stream.put_back(_with_epochs(plan.deferred, epochs))
            self.counterfactual(_with_epochs(plan.skipped, epochs), step)
            if plan.generate:
                groups = self.launch(_with_epochs(plan.generate, epochs))
                decoded = decode(self.policy, groups, step)
                self.counts.tokens += decoded
                kept += self.judge_round(groups, decoded)
        return kept

    def stream_step(self, step: int) -> list[Group]:
        """A streaming step with partial rollout: launch, tick, judge as groups finish, carry the rest."""
        kept: list[Group] = []
        running, self.carried = self.carried, []
        members = self.profile.members
        while True:
            plan = self.session.stream_plan(
                len(running), num_generations=members, confidence=self.profile.confidence
            )
            # Stop on the target (abort names what is still running) or when nothing can run.
            if plan.abort or plan.exhausted or plan.remaining_target_groups == 0:
                break
            running += self.launch(self.stream.take(plan.launch))
            self.counts.tokens += tick(self.policy, running, step, slots=self.profile.slots)
            self.counts.decode_ticks += 1
            for group in [g for g in running if g.finished]:
                group.finished_step = step
                now = group.tokens_by_step.get(step, 0)
                self.counts.resumed_prior_tokens += group.decoded_tokens - now  # charged in earlier steps
                rewards = {k: v[0] for k, v in self.rewards([group]).items()}
                verdict = self.session.judge(rewards, generated_tokens=now)
                self.counts.judged += 1
                if verdict.keep:
                    kept.append(group)
                else:
                    self.note_rejected([group])
            running = [g for g in running if not g.finished]
        self.carried = running  # stopped, not aborted: resumed at the next step's start
        self.counts.carried += len(running)
        # Their tokens decoded in this step are charged here; they are judged (with only the
        # tokens of the step they finish in) when a later step finishes them.
        self.session.charge(sum(g.tokens_by_step.get(step, 0) for g in running), kind="carried")
        return kept

    # -- training -------------------------------------------------------------------
    def train(self, groups: list[Group], scale: float, padding: list[Group] | None = None) -> None:
        """
        One clipped policy-gradient update on ``groups`` (none when there are none).

        The loss, a token mean over the trained groups, is multiplied by ``scale``
        (``StepReport.loss_scale``). ``padding`` groups join the loss at zero advantage:
        they change only its token-mean denominator (a diagnostic of the loss scale).
        """
        if not groups:
            return
        rewards = self.rewards(groups)
        total = cast("np.ndarray", sum(rewards.values()))  # outcome (+ shaping)
        self.count_trained(groups, rewards["outcome"], total)
        batch = groups + list(padding or [])
        adv = np.concatenate([advantages(total), np.zeros((len(batch) - len(groups), total.shape[1]))])
        loss = policy_loss(
            self.policy,
            np.repeat(np.stack([g.prompt for g in batch]), self.profile.members, axis=0),
            np.concatenate([g.tokens for g in batch]),
            np.concatenate([g.logp for g in batch]),
            np.concatenate([g.progress for g in batch]),
            adv.reshape(-1),
        )
        self.policy.update(loss * scale)
        self.counts.updates += 1

    def count_trained(self, groups: list[Group], outcome: np.ndarray, total: np.ndarray) -> None:
        """What the trained groups were: dead, phantom, resumed (and how stale)."""
        counts = self.counts
        dead = group_std(total) == 0
        counts.trained += len(groups)
        counts.trained_dead += int(dead.sum())
        counts.trained_phantom += int(((group_std(outcome) == 0) & ~dead).sum())
        for group in groups:
            counts.trained_tokens += group.decoded_tokens
            old = (group.version >= 0) & (group.version < self.policy.version)
            counts.stale_trained_tokens += int(old.sum())
            if group.resumed:
                age = int(group.finished_step or 0) - int(group.started_step or 0)
                counts.trained_resumed += 1
                counts.resumed_age_steps += age
                counts.oldest_resumed = max(counts.oldest_resumed, age)
                counts.resumed_updates_spanned += max(group.versions) - min(group.versions)

    def step(self, step: int) -> None:
        """Begin a step, gather its groups, end it, train."""
        self.session.begin_step(target_groups=self.profile.target_groups)
        if self.arm.streaming:
            kept = self.stream_step(step)
        elif self.history is not None:
            kept = self.history_step(step)
        else:
            kept = self.round_step(step)
        report = self.session.end_step()
        self.count_report(report)
        self.counts.surplus += max(0, len(kept) - self.profile.target_groups)
        self.train(kept[: self.profile.target_groups], report.loss_scale, self.rejected)
        self.rejected = []
        self.counts.steps += 1

    def count_report(self, report: StepReport) -> None:
        """What the session reported for the step (checked against the bench's own counts in the tests)."""
        counts = self.counts
        counts.session_generated_groups += report.generated_groups
        counts.session_generated_tokens += report.generated_tokens
        counts.session_decoded_tokens += report.decoded_tokens
        counts.session_trained_groups += report.trained_groups
        counts.session_surplus_groups += report.surplus_groups
        if report.trained_groups:
            counts.loss_scale_sum += report.loss_scale

    def evaluate(self) -> None:
        """Held-out greedy accuracy now, at the tokens generated so far."""
        result = greedy_accuracy(self.policy, self.task, self.split.held_out)
        self.curve.append({"tokens": self.counts.tokens, "steps": self.counts.steps, **result})


def make_run(
    arm: Arm, task: Task, seed: int, profile: Profile, split: Split, weights: Mapping[str, torch.Tensor]
) -> Run:
    """A run of ``arm`` from the warm start's ``weights``, with a fresh optimizer."""
    from cookbook.learning_bench.model import build_policy

    arm = arm.resolved()
    policy = build_policy(profile.size, lr=profile.lr, device=profile.device, seed=seed)
    policy.model.load_state_dict(weights)
    history = None
    if arm.history is not None:
        config = PromptHistoryConfig(group_size=profile.members, seed=seed, **dict(arm.history))
        history = PromptHistory(config)
    session = AdmissionSession(
        None if arm.admission is None else dict(arm.admission),
        budget=None if arm.budget is None else dict(arm.budget),
        host="learning_bench",
        loss_scale=arm.loss_scale,  # type: ignore[arg-type]
    )
    return Run(arm, task, seed, profile, split, policy, session, PromptStream(split.pool, seed), history)


def run_arm(
    arm: Arm, task: Task, seed: int, profile: Profile, split: Split, weights: Mapping[str, torch.Tensor]
) -> dict[str, Any]:
    """Train until the token budget, evaluating at every budget share; return the run's record."""
    wall, cpu = time.perf_counter(), time.process_time()
    run = make_run(arm, task, seed, profile, split, weights)
    budget = round(profile.token_budget * arm.budget_share)
    marks = [budget * (k + 1) // profile.evaluations for k in range(profile.evaluations)]
    run.evaluate()
    step = 0
    # The budget ends every run; the step cap ends one that stops paying for tokens (an oracle
    # on a solved pool), so the loop ends whatever the policy does.
    while run.counts.tokens < budget and step < MAX_STEPS:
        run.step(step)
        step += 1
        while marks and run.counts.tokens >= marks[0]:
            marks.pop(0)
            run.evaluate()
    counts = run.counts
    counts.carried_at_end = len(run.carried)
    counts.tokens_carried_at_end = sum(g.decoded_tokens for g in run.carried)
    return {
        "arm": arm.name,
        "task": task.name,
        "seed": seed,
        "start_accuracy": run.curve[0]["accuracy"],
        "final_accuracy": run.curve[-1]["accuracy"],
        "final_step_share": run.curve[-1]["step_share"],
        "generated_tokens": counts.tokens,
        "curve": run.curve,
        "counts": attrs.asdict(counts),
        "session": run.session.stats.to_dict()["counts"],
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
    }
