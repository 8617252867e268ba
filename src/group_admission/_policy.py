"""``GroupAdmissionPolicy``: decides, for each prompt group, whether it carries training signal."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from ._batch import evaluate_batch
from ._config import GroupAdmissionConfig
from ._decision import BatchAdmissionResult, GroupAdmissionDecision
from ._inputs import group_inputs
from ._judge import Scorer, judge_group, log_rejection
from ._loading import coerce_config
from ._validation import describe

__all__ = ["GroupAdmissionPolicy"]


class GroupAdmissionPolicy:
    """
    Decide whether each prompt group carries training signal.

    A group is judged as a whole: a rejected group is dropped entirely, never trimmed, so
    the survivors keep GRPO's within-group semantics. With the default config every
    well-formed group is admitted.

    Args:
        config: The gate thresholds (a :class:`GroupAdmissionConfig` or a mapping of its
            fields). ``None`` uses the defaults, which admit everything.
        scorer: Replaces the default n-gram Jaccard of the redundancy gate. Called as
            ``scorer(a, b)`` for every pair of completions; must return a finite float in
            ``[0, 1]``.
        logger: A structlog-style logger or a standard ``logging.Logger``. When given,
            every rejection is logged as a ``group_rejected`` event with the reason, group
            key and statistics (a stdlib logger gets them in the message and in
            ``extra={"group_admission": ...}``). The default is silent.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        config: GroupAdmissionConfig | Mapping[str, Any] | None = None,
        *,
        scorer: Scorer | None = None,
        logger: Any | None = None,
    ) -> None:
        config = coerce_config(GroupAdmissionConfig, config)
        if scorer is not None and not callable(scorer):
            msg = f"'scorer' must be a callable scorer(a, b) -> float (got {describe(scorer)})"
            raise TypeError(msg)
        if logger is not None and not callable(getattr(logger, "info", None)):
            msg = f"'logger' must have an info(event, **fields) method (got {describe(logger)})"
            raise TypeError(msg)
        self._config = config
        self._scorer = scorer
        self._logger = logger

    @property
    def config(self) -> GroupAdmissionConfig:
        """The gate thresholds."""
        return self._config

    @property
    def logger(self) -> Any | None:
        """The logger rejections are reported to, or ``None`` (silent)."""
        return self._logger

    @property
    def scorer(self) -> Scorer | None:
        """The custom redundancy scorer, or ``None`` for the default n-gram Jaccard."""
        return self._scorer

    def __repr__(self) -> str:
        return f"GroupAdmissionPolicy({self._config!r}, scorer={self._scorer!r})"

    def evaluate(
        self,
        rewards: Any,
        completions: Sequence[str | None] | None = None,
        *,
        external_reasons: Sequence[str] | str = (),
        rollout_ids: Sequence[Hashable] | None = None,
        group_key: Hashable | None = None,
    ) -> GroupAdmissionDecision:
        """
        Judge one group.

        Args:
            rewards: One reward per member: a 1-D sequence, numpy array or torch tensor, or
                a mapping of reward component name to such a sequence (a composite reward;
                the gate measures the sum of the ``gate_on`` components).
            completions: The members' texts; needed only by the redundancy gate. ``None``
                entries mark missing completions.
            external_reasons: Reasons from the caller to reject the group (a failed
                rollout, a stale policy version...). Any reason makes it ``external``.
            rollout_ids: One id per member; members that share an id are segments of one
                rollout and count once. They must agree on the reward.
            group_key: An identifier carried into the decision and the log event.

        Returns:
            The decision, with exactly one primary reason when rejected.

        Raises:
            TypeError, ValueError: the input is structurally invalid (no rewards, 2-D
                rewards, non-numbers or complex numbers, lengths that disagree, unknown
                ``gate_on`` names, no completions with the redundancy gate on, an
                unhashable ``group_key``). Data problems are not errors: ``None``, masked
                or non-finite rewards in a gated component, rewards whose statistics
                overflow, and missing completions reject the group as ``external``.
        """
        values, texts, external, problems, size = group_inputs(
            self._config, rewards, completions, external_reasons, rollout_ids, group_key
        )
        decision = judge_group(self._config, self._scorer, values, texts, external, problems, size, group_key)
        if self._logger is not None and decision.reason is not None:
            log_rejection(self._logger, decision)
        return decision

    def evaluate_batch(
        self,
        rewards: Any,
        completions: Sequence[Sequence[str | None]] | None = None,
        *,
        external_reasons: Sequence[Sequence[str] | str] | None = None,
        rollout_ids: Any = None,
        group_keys: Sequence[Hashable] | None = None,
    ) -> BatchAdmissionResult:
        """
        Judge G groups of N members at once.

        ``rewards`` is a ``(G, N)`` numpy array, torch tensor or nested sequence, or a
        mapping of component name to such arrays; a nested list of depth three is refused
        like a 3-D array. The other arguments hold one entry per group, with the meaning
        they have in :meth:`evaluate`. The reward gate is vectorised; the result agrees
        exactly with calling :meth:`evaluate` row by row (decisions, statistics, failed
        checks, and the order of external reasons).
        """
        result = evaluate_batch(
            self._config,
            self._scorer,
            rewards,
            completions,
            external_reasons=external_reasons,
            rollout_ids=rollout_ids,
            group_keys=group_keys,
        )
        if self._logger is not None:
            for row in np.flatnonzero(~result.admitted).tolist():
                log_rejection(self._logger, result.decision(row))
        return result
