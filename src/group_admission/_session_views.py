"""
What an ``AdmissionSession`` holds, read-only: the base class of its properties.

The session's attributes are set by :class:`AdmissionSession` itself (its constructor
and its one restore hook); this class only reads them (the properties, the repr, the
configuration a checkpoint records, the counts over every rank), so that the session's
module holds what the session does.
"""

from __future__ import annotations

import threading
from typing import Any

import attrs

from ._budget import ResamplePlan, SamplingBudgetController, SamplingBudgetState
from ._drop_tracker import DropTracker
from ._limits import DropLimits
from ._loss_scale import LossScale
from ._metrics import AdmissionStats
from ._policy import GroupAdmissionPolicy
from ._step_book import StepBook
from ._tokens import TokenTally

__all__ = ["SessionViews"]


class SessionViews:
    """The read-only properties of :class:`AdmissionSession`."""

    _policy: GroupAdmissionPolicy
    _controller: SamplingBudgetController
    _limits: DropLimits
    _host: str
    _loss_scale: LossScale
    _lock: threading.RLock
    _stats: AdmissionStats
    _drops: DropTracker
    _book: StepBook
    _tokens: TokenTally

    @property
    def policy(self) -> GroupAdmissionPolicy:
        """The admission policy."""
        return self._policy

    @property
    def controller(self) -> SamplingBudgetController:
        """The budget controller (its default config allows no resampling)."""
        return self._controller

    @property
    def limits(self) -> DropLimits:
        """The drop limits."""
        return self._limits

    @property
    def host(self) -> str:
        """The host's name, as used in error messages."""
        return self._host

    @property
    def loss_scale(self) -> LossScale:
        """The loss-scale mode of :attr:`StepReport.loss_scale`."""
        return self._loss_scale

    @property
    def tokens(self) -> TokenTally:
        """Every token decoded over the session's life, by kind (judged groups' and charged)."""
        return self._tokens

    @property
    def stats(self) -> AdmissionStats:
        """A copy of the counts over the session's lifetime."""
        return AdmissionStats().merge(self._stats)

    @property
    def step_stats(self) -> AdmissionStats:
        """A copy of the counts of the current (or last) step: only groups judged while it was open."""
        return AdmissionStats().merge(self._book.stats)

    @property
    def step(self) -> int:
        """The index of the current (or last) step; -1 before the first."""
        return self._book.index

    @property
    def step_open(self) -> bool:
        """Whether a step has begun and not ended."""
        return self._book.open

    @property
    def target_groups(self) -> int:
        """The current step's target."""
        return self._book.target

    @property
    def budget_state(self) -> SamplingBudgetState | None:
        """A copy of the current step's budget state, without the round in progress."""
        with self._lock:
            state = self._book.state
            return None if state is None else attrs.evolve(state)

    @property
    def last_plan(self) -> ResamplePlan | None:
        """The latest plan of the current step (``None`` before one)."""
        return self._book.plan

    @property
    def consecutive_failures(self) -> int:
        """The current streak of dropped external rejections."""
        return sum(self._drops.streak.values())

    def __repr__(self) -> str:
        config, budget = self._policy.config, self._controller.config
        return (
            f"AdmissionSession({config!r}, budget={budget!r}, limits={self._limits!r}, "
            f"loss_scale={self._loss_scale!r})"
        )

    def _config(self) -> dict[str, Any]:
        """The configuration a checkpoint records, so that a state saved under another is refused."""
        return {
            "policy": self._policy.config.to_dict(),
            "budget": self._controller.config.to_dict(),
            "limits": self._limits.to_dict(),
            "loss_scale": self._loss_scale,
        }

    def all_reduce(self, group: Any = None) -> AdmissionStats:
        """The lifetime counts summed over every ``torch.distributed`` rank (needs torch)."""
        return self.stats.all_reduce(group)
