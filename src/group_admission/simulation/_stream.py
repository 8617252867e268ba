"""
Simulated groups: the per-step stream every strategy draws from, and the step context.

Every strategy sees the same groups in the same order (common random numbers): the
``k``-th group a strategy draws in step ``s`` is the same for every strategy, whatever
batch sizes it draws them in. The stream is generated in fixed-size blocks, each from its
own seed, so that the draws do not depend on how the requests are split.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from .._budget import SamplingBudgetConfig
from .._decision import BatchAdmissionResult
from .._policy import GroupAdmissionPolicy
from .._session import AdmissionSession, BatchAdmissionVerdict
from ._models import SimulationConfig

__all__ = ["GroupBatch", "GroupStream", "StepContext", "draw_groups"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Groups per block of the shared stream.
_BLOCK = 64
#: The external reason given to a group whose rollout failed.
ROLLOUT_FAILED = "rollout_failed"


@attrs.frozen(kw_only=True, eq=False)
class GroupBatch:
    """
    Simulated groups: their tasks, rewards, response lengths, failures.

    Attributes:
        tasks: The task of each group, shape ``(G, d)``: column 0 is the true pass rate,
            further columns are task traits of the task model (the shaping spread).
        rewards: Reward components, each of shape ``(G, N)``.
        tokens: Response length of every member, shape ``(G, N)``.
        failed: Whether each group's rollout failed, shape ``(G,)``.

    .. versionadded:: 0.1.0
    """

    tasks: FloatArray
    rewards: dict[str, FloatArray]
    tokens: IntArray
    failed: BoolArray

    def __len__(self) -> int:
        return len(self.tasks)

    @property
    def rates(self) -> FloatArray:
        """The true pass rate of each group's task, shape ``(G,)``."""
        rates: FloatArray = self.tasks[:, 0]
        return rates

    def select(self, index: Any) -> GroupBatch:
        """The groups at ``index`` (a slice, an index array or a boolean mask)."""
        return GroupBatch(
            tasks=self.tasks[index],
            rewards={name: values[index] for name, values in self.rewards.items()},
            tokens=self.tokens[index],
            failed=self.failed[index],
        )

    @staticmethod
    def concat(batches: list[GroupBatch]) -> GroupBatch:
        """Join batches of the same group size, in order."""
        if len(batches) == 1:
            return batches[0]
        return GroupBatch(
            tasks=np.concatenate([b.tasks for b in batches]),
            rewards={name: np.concatenate([b.rewards[name] for b in batches]) for name in batches[0].rewards},
            tokens=np.concatenate([b.tokens for b in batches]),
            failed=np.concatenate([b.failed for b in batches]),
        )

    def total_rewards(self) -> FloatArray:
        """The sum of all reward components, shape ``(G, N)``: what a trainer would see."""
        values = list(self.rewards.values())
        total: FloatArray = values[0].copy()
        for extra in values[1:]:
            total += extra
        return total

    def durations(self) -> IntArray:
        """How long each group takes to generate: its longest member, in tokens."""
        longest: IntArray = self.tokens.max(axis=1)
        return longest


def draw_groups(config: SimulationConfig, rng: np.random.Generator, tasks: FloatArray) -> GroupBatch:
    """Draw one group per task: rewards, lengths and failures, in a fixed order."""
    rewards = config.tasks.draw_rewards(rng, tasks, config.group_size)
    tokens = config.lengths.draw(rng, (len(tasks), config.group_size))
    if config.failure_rate > 0:
        failed = rng.random(len(tasks)) < config.failure_rate
    else:
        failed = np.zeros(len(tasks), dtype=bool)
    return GroupBatch(tasks=tasks, rewards=rewards, tokens=tokens, failed=failed)


class GroupStream:
    """
    The groups of fresh tasks of one step, drawn lazily in blocks and shared by strategies.

    Args:
        config: What to simulate.
        step: The step index (part of every block's seed).

    .. versionadded:: 0.1.0
    """

    def __init__(self, config: SimulationConfig, step: int) -> None:
        self._config = config
        self._step = step
        self._blocks: list[GroupBatch] = []

    def _block(self, index: int) -> GroupBatch:
        while len(self._blocks) <= index:
            seed = np.random.SeedSequence([self._config.seed, self._step, 0, len(self._blocks)])
            rng = np.random.default_rng(seed)
            tasks = self._config.tasks.draw_tasks(rng, _BLOCK)
            self._blocks.append(draw_groups(self._config, rng, tasks))
        return self._blocks[index]

    def groups(self, start: int, count: int) -> GroupBatch:
        """The groups at positions ``start .. start + count - 1`` of the stream."""
        parts = []
        position, end = start, start + count
        while position < end:
            block, offset = divmod(position, _BLOCK)
            take = min(_BLOCK - offset, end - position)
            parts.append(self._block(block).select(slice(offset, offset + take)))
            position += take
        return GroupBatch.concat(parts)


class StepContext:
    """
    What a strategy sees during one step: the stream of fresh tasks, the policy, the target.

    Strategies draw groups with :meth:`take` (fresh tasks, in stream order) or
    :meth:`retry` (new groups of tasks they already have), and judge them with
    :meth:`judge`, which calls the real :meth:`GroupAdmissionPolicy.evaluate_batch`, or
    with :meth:`judge_in`, which runs them through an :class:`AdmissionSession`.

    Attributes:
        step: The step index.
        target_groups: Groups the step wants to train on.
        group_size: Completions per group.
        policy: The admission policy.
        safety_max_rounds: The safety limit on rounds for uncapped strategies.
        memory: A dict a strategy may use to carry state to its next step.
        drawn: Groups drawn from the stream so far in this step.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        config: SimulationConfig,
        policy: GroupAdmissionPolicy,
        stream: GroupStream,
        step: int,
        memory: dict[str, Any],
    ) -> None:
        self._config = config
        self._stream = stream
        self.step = step
        self.target_groups = config.target_groups
        self.group_size = config.group_size
        self.policy = policy
        self.safety_max_rounds = config.safety_max_rounds
        self.memory = memory
        self.drawn = 0
        self._retry_rng: np.random.Generator | None = None

    def take(self, count: int) -> GroupBatch:
        """The next ``count`` groups of fresh tasks from the step's stream."""
        batch = self._stream.groups(self.drawn, count)
        self.drawn += count
        return batch

    def retry(self, tasks: FloatArray) -> GroupBatch:
        """New groups of the given tasks (rows of ``GroupBatch.tasks``; one group per row)."""
        if self._retry_rng is None:
            seed = np.random.SeedSequence([self._config.seed, self.step, 1])
            self._retry_rng = np.random.default_rng(seed)
        return draw_groups(self._config, self._retry_rng, np.asarray(tasks, dtype=np.float64))

    def judge(self, batch: GroupBatch) -> BatchAdmissionResult:
        """Judge ``batch`` with the policy; failed rollouts are rejected as ``external``."""
        return self.policy.evaluate_batch(batch.rewards, external_reasons=_failures(batch))

    def session(self, budget: SamplingBudgetConfig | None) -> AdmissionSession:
        """A new :class:`AdmissionSession` of the step's policy with ``budget``."""
        return AdmissionSession(self.policy, budget=budget, host="simulation")

    def judge_in(self, session: AdmissionSession, batch: GroupBatch) -> BatchAdmissionVerdict:
        """Judge ``batch`` in ``session``: counted in its round, with the batch's tokens."""
        return session.judge_batch(
            batch.rewards, external_reasons=_failures(batch), generated_tokens=int(batch.tokens.sum())
        )


def _failures(batch: GroupBatch) -> list[tuple[str, ...]] | None:
    """The external reasons of a batch: ``rollout_failed`` for each failed group."""
    if not batch.failed.any():
        return None
    return [(ROLLOUT_FAILED,) if failed else () for failed in batch.failed.tolist()]
