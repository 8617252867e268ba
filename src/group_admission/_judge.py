"""
The one judge of a group, shared by ``evaluate`` and ``evaluate_batch``.

``evaluate`` runs it on every group; ``evaluate_batch`` vectorises the reward gate and runs
it only on the few groups whose rollout ids repeat. Precedence and check order come from
``_reasons``, so the two paths cannot drift apart.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Hashable
from typing import Any

from ._config import GroupAdmissionConfig
from ._decision import GroupAdmissionDecision
from ._gates import reward_failures, reward_statistics
from ._reasons import CHECK_MISSING_COMPLETION, CHECK_REWARD_OVERFLOW, CHECK_SIMILARITY, primary_reason
from ._similarity import pairwise_similarities

__all__ = ["Scorer", "judge_group", "log_rejection"]

Scorer = Callable[[str, str], float]


def log_rejection(logger: Any, decision: GroupAdmissionDecision) -> None:
    """Report one rejection as a ``group_rejected`` event (structlog fields, or stdlib ``extra``)."""
    fields = decision.to_dict()
    if isinstance(logger, (logging.Logger, logging.LoggerAdapter)):
        # The stdlib takes no keyword fields: the message carries them, and so does ``extra``.
        logger.info("group_rejected %s", fields, extra={"group_admission": fields})
    else:
        logger.info("group_rejected", **fields)


def _similarity(
    config: GroupAdmissionConfig, scorer: Scorer | None, texts: list[str | None], problems: list[str]
) -> tuple[float | None, float | None, bool]:
    """Mean and max pairwise similarity (``None`` when not measured), and whether the gate fails."""
    if any(text is None for text in texts):
        # A missing completion is a data problem even in a one-member group.
        if CHECK_MISSING_COMPLETION not in problems:
            problems.append(CHECK_MISSING_COMPLETION)
        return None, None, False
    if len(texts) < 2:
        return None, None, False
    scores = pairwise_similarities(texts, config.similarity_ngram_size, scorer)  # type: ignore[arg-type]
    mean, high = float(scores.mean()), float(scores.max())
    threshold = config.max_mean_pairwise_similarity
    return mean, high, threshold is not None and mean > threshold


def judge_group(
    config: GroupAdmissionConfig,
    scorer: Scorer | None,
    values: list[float],
    texts: list[str | None] | None,
    external: list[str],
    problems: list[str],
    size: int,
    group_key: Hashable | None,
) -> GroupAdmissionDecision:
    """
    Judge one group whose input is validated and merged by rollout.

    ``external`` holds the caller's reasons and ``problems`` the data problems found so
    far; both lists may be extended in place.
    """
    failed: list[str] = []
    # Without a data problem every value is finite (a composite's sum may still overflow).
    measurable = not problems or all(math.isfinite(v) for v in values)
    stats = reward_statistics(values, config.advantage_tolerance) if measurable else None
    if stats is None:
        mean = std = spread = math.nan
        nontrivial = 0
        if measurable:
            problems.append(CHECK_REWARD_OVERFLOW)
    else:
        mean, std, spread, nontrivial, scale = stats
        failed = reward_failures(config, std, spread, nontrivial, scale)
    mean_similarity = max_similarity = None
    if texts is not None and config.max_mean_pairwise_similarity is not None:
        mean_similarity, max_similarity, redundant = _similarity(config, scorer, texts, problems)
        if redundant:
            failed.append(CHECK_SIMILARITY)
    if problems:
        external.extend(p for p in problems if p not in external)
    # The common admitted case builds no tuples (this is the hot path).
    return GroupAdmissionDecision(
        reason=primary_reason(external, failed, spread),
        failed_checks=(*external, *failed) if external or failed else (),
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
