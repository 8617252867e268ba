"""
The one judge of a group, shared by ``evaluate`` and ``evaluate_batch``.

``evaluate`` runs it on every group; ``evaluate_batch`` vectorises the reward gate (the one
deliberate twin, bit for bit the same, in ``_gates``) and runs this judge itself on the
few groups whose rollout ids repeat or whose statistics overflow. The batch path takes its
precedence from :func:`primary_reason` and its similarity gate from
:func:`measure_similarity`, so the two paths cannot drift apart.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Hashable
from typing import Any

from . import _checks
from ._checks import primary_reason
from ._config import GroupAdmissionConfig
from ._decision import GroupAdmissionDecision
from ._gates import reward_failures, reward_statistics
from ._reasons import CHECK_MISSING_COMPLETION, CHECK_REWARD_OVERFLOW
from ._similarity import pairwise_similarities

__all__ = ["Scorer", "add_problem", "judge_group", "log_rejection", "measure_similarity"]

Scorer = Callable[[str, str], float]


def log_rejection(logger: Any, decision: GroupAdmissionDecision) -> None:
    """Report one rejection as a ``group_rejected`` event (structlog fields, or stdlib ``extra``)."""
    fields = decision.to_dict()
    if isinstance(logger, (logging.Logger, logging.LoggerAdapter)):
        # The stdlib takes no keyword fields: the message carries them, and so does ``extra``.
        logger.info("group_rejected %s", fields, extra={"group_admission": fields})
    else:
        logger.info("group_rejected", **fields)


def add_problem(problems: list[str], check: str) -> None:
    """Note a data problem once, in the order problems are found."""
    if check not in problems:
        problems.append(check)


def measure_similarity(
    config: GroupAdmissionConfig, scorer: Scorer | None, texts: list[str | None]
) -> tuple[float | None, float | None, str | None]:
    """
    The similarity gate on one group: mean and max pairwise similarity, and what fails.

    The statistics are ``None`` when not measured. What fails is ``missing_completion``
    (a data problem, even in a one-member group), the similarity check, or ``None``.
    """
    if any(text is None for text in texts):
        return None, None, CHECK_MISSING_COMPLETION
    if len(texts) < 2:
        return None, None, None
    scores = pairwise_similarities(texts, config.similarity_ngram_size, scorer)  # type: ignore[arg-type]
    mean, high = float(scores.mean()), float(scores.max())
    check = _checks.TABLE.similarity
    fails = check.bound.fails(mean, getattr(config, check.field), 0.0, dead=False)
    return mean, high, check.name if fails else None


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
        mean, std, spread, nontrivial, _ = stats
        failed = reward_failures(config, stats)
    mean_similarity = max_similarity = None
    if texts is not None and config.similarity_gate_enabled:
        mean_similarity, max_similarity, check = measure_similarity(config, scorer, texts)
        if check == CHECK_MISSING_COMPLETION:
            add_problem(problems, check)
        elif check is not None:
            failed.append(check)
    if problems:
        external.extend(p for p in problems if p not in external)
    # The common admitted case builds no tuples (this is the hot path).
    return GroupAdmissionDecision(
        reason=primary_reason(external, failed, dead=spread == 0.0),
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
