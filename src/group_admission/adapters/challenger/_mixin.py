"""
``GroupAdmissionChallengerMixin``: wires :class:`ChallengerAdmission` into a twinkle Challenger class.

It works with twinkle#288's base (whose ``_complete`` calls the ``_admitted_groups`` hook
once per side) and with a base without the hook (the mixin judges both sides in
``_complete``); either way each ``_complete`` is one hand-off, one round of the budget.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ..._validation import describe
from ._hook import ChallengerAdmission, Group, Trajectory

__all__ = ["GroupAdmissionChallengerMixin", "with_group_admission"]


def _accepts_keyword(function: Callable[..., Any], name: str) -> bool:
    """Whether ``function`` names ``name`` as a parameter (``**kwargs`` does not count)."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    parameter = parameters.get(name)
    return parameter is not None and parameter.kind in (
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )


class GroupAdmissionChallengerMixin:
    """
    Makes a twinkle Challenger accept ``group_admission_policy=`` (and a sampling budget).

    Put it first in the bases: ``class MyChallenger(GroupAdmissionChallengerMixin,
    AgenticChallenger)``, or use :func:`with_group_admission`. The keyword arguments are
    taken out before the base ``__init__`` runs, so they never fall into
    ``AgenticChallenger``'s ``**rollout_kwargs``. The policy is forwarded to the next
    ``__init__`` in the MRO only when that ``__init__`` names the parameter (twinkle#288's
    ``Challenger`` does; a ``**kwargs`` catch-all does not count, since it may not pass it
    on); either way it ends up as ``self.group_admission_policy``.

    The group hand-off then goes through :class:`ChallengerAdmission`: through the
    ``_admitted_groups`` hook when the base has it, otherwise in ``_complete`` before the
    base hands the groups over; each ``_complete`` is one :meth:`ChallengerAdmission.hand_off`.
    When the budget is exhausted, ``_launch`` reports the source as exhausted, so the
    Challenger drains running work and hands over what it has (or ends the iteration when
    it has nothing); after each batch ``self.group_admission.stopped_by_budget`` tells the
    caller to stop, and ``.plan`` says which cap bound. Without a policy and a budget the
    Challenger behaves exactly as before.

    Keyword Args:
        group_admission_policy: A policy, config or mapping (see :class:`ChallengerAdmission`).
        sampling_budget: A budget controller, config or mapping.
        tokens_of: Counts a trajectory's generated tokens (needed for a token cap).

    .. versionadded:: 0.1.0
    """

    group_admission: ChallengerAdmission | None

    def __init__(
        self,
        *args: Any,
        group_admission_policy: Any = None,
        sampling_budget: Any = None,
        tokens_of: Callable[[Trajectory], int] | None = None,
        **kwargs: Any,
    ) -> None:
        enabled = group_admission_policy is not None or sampling_budget is not None
        admission = (
            ChallengerAdmission(group_admission_policy, budget=sampling_budget, tokens_of=tokens_of)
            if enabled
            else None
        )
        self.group_admission = admission
        base_init = super().__init__
        if group_admission_policy is not None and _accepts_keyword(base_init, "group_admission_policy"):
            kwargs["group_admission_policy"] = admission.policy if admission else None
        base_init(*args, **kwargs)
        if admission is not None:
            self.group_admission_policy = admission.policy

    def _spread_check(self) -> Callable[[Group], bool] | None:
        check = getattr(self, "_has_spread", None)
        return check if callable(check) else None

    def _admitted_groups(
        self, groups: Sequence[Group], rejection_reasons: Counter[str]
    ) -> list[list[Trajectory]]:
        if self.group_admission is None:
            base: Any = super()
            return list(base._admitted_groups(groups, rejection_reasons))
        return self.group_admission.admitted_groups(
            groups, rejection_reasons, spread_check=self._spread_check()
        )

    def _complete(self, challenger: Sequence[Group], solver: Sequence[Group]) -> None:
        base: Any = super()
        if self.group_admission is None:
            base._complete(challenger, solver)
            return
        with self.group_admission.hand_off():  # both sides: one round of the budget
            if callable(getattr(base, "_admitted_groups", None)):
                # twinkle#288's base calls self._admitted_groups itself, once per side.
                base._complete(challenger, solver)
                return
            reasons: Counter[str] = Counter()
            proposing = self._admitted_groups(challenger, reasons)
            solving = self._admitted_groups(solver, reasons)
            base._complete(proposing, solving)

    def _launch(self) -> bool:
        base: Any = super()
        if self.group_admission is not None and self.group_admission.exhausted:
            return False
        return bool(base._launch())

    def _fill(self, want_challenger: int, want_solver: int) -> Any:
        base: Any = super()
        admission = self.group_admission
        if admission is None:
            return base._fill(want_challenger, want_solver)
        admission.begin_batch(want_challenger + want_solver)
        batch = base._fill(want_challenger, want_solver)
        complete = (
            batch is not None
            and len(batch.challenger) >= want_challenger
            and len(batch.solver) >= want_solver
        )
        admission.end_batch(complete=complete)
        return batch


def with_group_admission(challenger_cls: type) -> type:
    """
    Return a subclass of ``challenger_cls`` that accepts ``group_admission_policy=``.

    Equivalent to ``class X(GroupAdmissionChallengerMixin, challenger_cls)``; the name is
    ``<challenger_cls.__name__>WithGroupAdmission``.

    Raises:
        TypeError: ``challenger_cls`` is not a class.

    .. versionadded:: 0.1.0
    """
    if not isinstance(challenger_cls, type):
        msg = f"'challenger_cls' must be a Challenger class (got {describe(challenger_cls)})"
        raise TypeError(msg)
    name = f"{challenger_cls.__name__}WithGroupAdmission"
    return type(
        name, (GroupAdmissionChallengerMixin, challenger_cls), {"__module__": challenger_cls.__module__}
    )
