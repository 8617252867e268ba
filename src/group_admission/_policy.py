"""``GroupAdmissionPolicy``: decides, for each prompt group, whether it carries training signal."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._config import GroupAdmissionConfig
from ._decision import GroupAdmissionDecision
from ._gates import reward_failures, reward_statistics
from ._inputs import (
    check_completions,
    check_rollout_ids,
    completions_required_message,
    external_reason_tuple,
    merge_rollouts,
)
from ._loading import coerce_config
from ._reasons import (
    CHECK_INCONSISTENT_ROLLOUT,
    CHECK_MISSING_COMPLETION,
    CHECK_SIMILARITY,
    RejectionReason,
)
from ._rewards import coerce_group
from ._similarity import pairwise_similarities
from ._validation import describe

if TYPE_CHECKING:
    from ._batch import BatchAdmissionResult

__all__ = ["GroupAdmissionPolicy"]

Scorer = Callable[[str, str], float]


def primary_reason(external: Sequence[str], failed: Sequence[str], spread: float) -> RejectionReason | None:
    """Pick the one primary reason: external, then exact_dead/near_tie, then redundant."""
    if external:
        return RejectionReason.EXTERNAL
    if not failed:
        return None
    # Reward checks are listed before the similarity check.
    if failed[0] != CHECK_SIMILARITY:
        return RejectionReason.EXACT_DEAD if spread == 0.0 else RejectionReason.NEAR_TIE
    return RejectionReason.REDUNDANT


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
        logger: A structlog-style logger. When given, every rejection is logged as a
            ``group_rejected`` event with the reason, group key and statistics. The
            default is silent.

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
                rewards, non-numbers, lengths that disagree, unknown ``gate_on`` names,
                missing completions with the redundancy gate on). Data problems (``None``
                or non-finite rewards, missing completions) are not errors: they reject
                the group as ``external``.
        """
        config = self._config
        values, problems = coerce_group(rewards, config.gate_on)
        size = len(values)
        external = (
            list(external_reason_tuple(external_reasons, "external_reasons")) if external_reasons else []
        )
        texts: list[str | None] | None = None
        if completions is not None:
            texts = check_completions(completions, size)
        elif config.max_mean_pairwise_similarity is not None:
            raise ValueError(completions_required_message(config))
        if rollout_ids is not None:
            ids = check_rollout_ids(rollout_ids, size)
            values, texts, inconsistent = merge_rollouts(values, texts, ids)
            if inconsistent:
                problems.append(CHECK_INCONSISTENT_ROLLOUT)
        return self._decide(values, texts, external, problems, size, group_key)

    def _decide(
        self,
        values: list[float],
        texts: list[str | None] | None,
        external: list[str],
        problems: list[str],
        size: int,
        group_key: Hashable | None,
    ) -> GroupAdmissionDecision:
        """Judge a group whose input is already validated and merged by rollout."""
        config = self._config
        failed: list[str] = []
        if problems and not all(math.isfinite(v) for v in values):
            mean = std = spread = math.nan
            nontrivial = 0
        else:
            mean, std, spread, nontrivial, scale = reward_statistics(values, config.advantage_tolerance)
            failed = reward_failures(config, std, spread, nontrivial, scale)
        mean_similarity = max_similarity = None
        if texts is not None and config.max_mean_pairwise_similarity is not None:
            if any(text is None for text in texts):
                problems.append(CHECK_MISSING_COMPLETION)
            elif len(texts) >= 2:
                scores = pairwise_similarities(
                    texts,  # type: ignore[arg-type]
                    config.similarity_ngram_size,
                    self._scorer,
                )
                mean_similarity, max_similarity = float(scores.mean()), float(scores.max())
                if mean_similarity > config.max_mean_pairwise_similarity:
                    failed.append(CHECK_SIMILARITY)
        if problems:
            external.extend(p for p in problems if p not in external)
        # The common admitted case builds no tuples (this is the hot path).
        failed_checks = (*external, *failed) if external or failed else ()
        decision = GroupAdmissionDecision(
            reason=primary_reason(external, failed, spread),
            failed_checks=failed_checks,
            external_reasons=tuple(external) if external else (),
            group_size=size,
            unique_rollouts=len(values),
            reward_mean=mean,
            reward_std=std,
            reward_range=spread,
            nontrivial_advantage_count=nontrivial,
            mean_pairwise_similarity=mean_similarity,
            max_pairwise_similarity=max_similarity,
            group_key=group_key,
        )
        if self._logger is not None and decision.reason is not None:
            self._logger.info("group_rejected", **decision.to_dict())
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
        mapping of component name to such arrays. The other arguments hold one entry per
        group, with the meaning they have in :meth:`evaluate`. The reward gate is
        vectorised; the result agrees exactly with calling :meth:`evaluate` row by row.
        """
        from ._batch import evaluate_batch  # noqa: PLC0415  (_batch imports this module)

        return evaluate_batch(
            self,
            rewards,
            completions,
            external_reasons=external_reasons,
            rollout_ids=rollout_ids,
            group_keys=group_keys,
        )
