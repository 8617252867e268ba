"""
Doubles of twinkle's env-lease ``Challenger`` (``twinkle_agentic/challenger/base.py``).

- ``Challenger``: the published base (modelscope/twinkle, stored version without the
  admission hook): ``_complete`` drops groups without reward spread (``_has_spread``, which
  reads a missing reward as 0.0) and queues the rest; ``_fill`` launches units until the
  quotas are met, absorbs them, stops after ``max_empty_rounds`` units that added nothing,
  and drains. Jobs run synchronously here (the real base runs them on a thread pool, one
  worker per env); the order of events a single worker sees is the same.
- ``PRChallenger``: the base as twinkle#288 (commit ``28a4fc57``) changes it, reconstructed
  from the research note (the commit itself is not in the stored mirror):
  ``group_admission_policy=`` in ``__init__`` and ``_complete`` calling
  ``_admitted_groups(groups, rejection_reasons)`` once per side.
- ``AgenticChallenger``: the published subclass's constructor shape: ``backend`` first,
  everything it does not know falls into ``**rollout_kwargs``, and it calls the base without
  ``group_admission_policy``.
- ``scripted(base)``: a subclass whose units are given in advance.
"""

from __future__ import annotations

import queue
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Trajectory = dict[str, Any]
Unit = tuple[list[list[Trajectory]], list[list[Trajectory]]]


def trajectory(reward: Any, text: str = "answer", *, with_reward: bool = True) -> Trajectory:
    """A trajectory dict as the Challenger's ``_groups`` builds it (rewards set on the dict)."""
    item: Trajectory = {
        "messages": [{"role": "user", "content": "task"}, {"role": "assistant", "content": text}],
        "user_data": [],
    }
    if with_reward:
        item["rewards"] = reward
    return item


@dataclass
class ChallengeBatch:
    """One batch, grouped by side."""

    challenger: list[list[Trajectory]] = field(default_factory=list)
    solver: list[list[Trajectory]] = field(default_factory=list)

    def __len__(self) -> int:
        return sum(map(len, self.challenger)) + sum(map(len, self.solver))


class Challenger:
    """The published env-lease base, run synchronously."""

    def __init__(
        self,
        *,
        envs: Sequence[Any],
        num_challenger_rollouts: int = 8,
        num_solver_rollouts: int = 8,
        pass_band: tuple[float, float] = (1.0, 7.0),
        max_empty_rounds: int = 0,
    ) -> None:
        if not envs:
            msg = "envs is empty: a challenger needs a workspace to act in and grade"
            raise ValueError(msg)
        if max_empty_rounds < 0:
            msg = f"max_empty_rounds must be >= 0, got {max_empty_rounds}"
            raise ValueError(msg)
        self.envs = list(envs)
        self.num_challenger_rollouts = num_challenger_rollouts
        self.num_solver_rollouts = num_solver_rollouts
        self.pass_band = pass_band
        self.max_empty_rounds = max_empty_rounds
        self._finished: queue.Queue[Unit] = queue.Queue()
        self._jobs = 0
        self.log: list[str] = []

    def _launch(self) -> bool:
        raise NotImplementedError

    def _submit(self, job: Any) -> None:
        self._jobs += 1
        try:
            job(self.envs[0])
        finally:
            self._jobs -= 1

    def _complete(self, challenger: list[list[Trajectory]], solver: list[list[Trajectory]]) -> None:
        proposing = [group for group in challenger if self._has_spread(group)]
        solving = [group for group in solver if self._has_spread(group)]
        flat = len(challenger) - len(proposing) + len(solver) - len(solving)
        if flat:
            self.log.append(f"dropped {flat} groups whose rewards were all equal")
        self._finished.put((proposing, solving))

    @staticmethod
    def _has_spread(group: Sequence[Trajectory]) -> bool:
        if len(group) < 2:
            return False
        first = float(group[0].get("rewards") or 0.0)
        return any(abs(float(member.get("rewards") or 0.0) - first) > 1e-9 for member in group[1:])

    def _quotas(self, batch_size: int, solver_ratio: float) -> tuple[int, int]:
        solver_groups = 0
        if solver_ratio > 0.0 and self.num_solver_rollouts:
            solver_groups = max(1, round(batch_size * solver_ratio / self.num_solver_rollouts))
        challenger_groups = 0
        if solver_ratio < 1.0:
            rest = batch_size - solver_groups * self.num_solver_rollouts
            challenger_groups = max(1, round(rest / self.num_challenger_rollouts))
        return challenger_groups, solver_groups

    def __call__(self, batch_size: int, total: int | None = None, solver_ratio: float = 0.5) -> Any:
        want_challenger, want_solver = self._quotas(batch_size, solver_ratio)
        produced = 0
        while total is None or produced < total:
            batch = self._fill(want_challenger, want_solver)
            if batch is None:
                return
            produced += len(batch)
            yield batch

    def _fill(self, want_challenger: int, want_solver: int) -> ChallengeBatch | None:
        pending = ChallengeBatch()
        empty = 0
        exhausted = False
        while len(pending.challenger) < want_challenger or len(pending.solver) < want_solver:
            # Synchronous jobs: one launch per turn stands in for "refill to capacity".
            if not exhausted and self._jobs < len(self.envs) and not self._launch():
                exhausted = True
            unit = self._next()
            if unit is not None:
                added = self._absorb(pending, unit, want_challenger, want_solver)
                empty = 0 if added else empty + 1
            elif exhausted:
                break
            else:
                empty += 1
            if self.max_empty_rounds and empty >= self.max_empty_rounds:
                self.log.append(f"stopped after {empty} consecutive units of work that added nothing")
                break
        while (unit := self._next()) is not None:
            self._absorb(pending, unit, want_challenger, want_solver)
        return pending if len(pending) else None

    def _next(self) -> Unit | None:
        try:
            return self._finished.get_nowait()
        except queue.Empty:
            return None

    @staticmethod
    def _absorb(pending: ChallengeBatch, unit: Unit, want_challenger: int, want_solver: int) -> int:
        added = 0
        for into, groups, want in (
            (pending.challenger, unit[0], want_challenger),
            (pending.solver, unit[1], want_solver),
        ):
            for group in groups:
                if len(into) < want:
                    into.append(group)
                    added += 1
        return added


class PRChallenger(Challenger):
    """The base as twinkle#288 changes it: an optional policy and the ``_admitted_groups`` hook."""

    def __init__(self, *, group_admission_policy: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group_admission_policy = group_admission_policy

    def _complete(self, challenger: list[list[Trajectory]], solver: list[list[Trajectory]]) -> None:
        reasons: Counter[str] = Counter()
        proposing = self._admitted_groups(challenger, reasons)
        solving = self._admitted_groups(solver, reasons)
        if reasons:
            total = sum(reasons.values())
            detail = ", ".join(f"{reason}={count}" for reason, count in sorted(reasons.items()))
            self.log.append(f"dropped {total} groups: {detail}")
        self._finished.put((proposing, solving))

    def _admitted_groups(
        self, groups: list[list[Trajectory]], rejection_reasons: Counter[str]
    ) -> list[list[Trajectory]]:
        admitted = []
        for group in groups:
            if not self._has_spread(group):
                rejection_reasons["exact_dead"] += 1
                continue
            policy = self.group_admission_policy
            if policy is None:
                admitted.append(group)
                continue
            rewards = [float(member.get("rewards") or 0.0) for member in group]
            decision = policy.evaluate(rewards)
            if decision.admitted:
                admitted.append(group)
            else:
                rejection_reasons[decision.primary_rejection_reason or "policy"] += 1
        return admitted


class AgenticChallenger(Challenger):
    """The published AgenticChallenger's constructor: unknown keywords go to the rollout."""

    def __init__(
        self,
        backend: Any,
        *,
        envs: Sequence[Any] = (),
        num_challenger_rollouts: int = 8,
        num_solver_rollouts: int = 8,
        pass_band: tuple[float, float] = (1.0, 7.0),
        max_empty_rounds: int = 0,
        **rollout_kwargs: Any,
    ) -> None:
        super().__init__(
            envs=envs,
            num_challenger_rollouts=num_challenger_rollouts,
            num_solver_rollouts=num_solver_rollouts,
            pass_band=pass_band,
            max_empty_rounds=max_empty_rounds,
        )
        self.backend = backend
        # The real class hands these to MultiTurnRollout, which would choke on a policy.
        self.rollout_kwargs = rollout_kwargs


def scripted(base: type) -> type:
    """
    A subclass of ``base`` whose ``_launch`` completes the next unit of ``self.units``.

    It defines no ``__init__``, so the class after a mixin in the MRO is ``base``'s own
    constructor; set ``units`` on the instance.
    """

    class Scripted(base):  # type: ignore[misc,valid-type]
        units: list[Unit]
        launched = 0

        def _launch(self) -> bool:
            units = getattr(self, "units", [])
            if not units:
                return False
            unit = units.pop(0)
            self.launched += 1
            self._submit(lambda _env: self._complete(*unit))
            return True

    Scripted.__name__ = f"Scripted{base.__name__}"
    return Scripted
