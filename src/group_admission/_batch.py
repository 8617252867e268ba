"""``evaluate_batch``: the reward gate vectorised over many groups of equal size."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt

from ._decision import GroupAdmissionDecision
from ._gates import batch_reward_failures, batch_reward_statistics
from ._inputs import (
    check_completions,
    check_rollout_ids,
    completions_required_message,
    external_reason_tuple,
    merge_rollouts,
)
from ._reasons import (
    CHECK_INCONSISTENT_ROLLOUT,
    CHECK_MISSING_COMPLETION,
    CHECK_MISSING_REWARD,
    CHECK_NON_FINITE_REWARD,
    CHECK_NONTRIVIAL,
    CHECK_RANGE,
    CHECK_SIMILARITY,
    CHECK_STD,
    RejectionReason,
)
from ._rewards import coerce_batch, is_torch_tensor, to_numpy
from ._similarity import pairwise_similarities
from ._validation import describe

if TYPE_CHECKING:
    from ._config import GroupAdmissionConfig
    from ._policy import GroupAdmissionPolicy

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

__all__ = ["BatchAdmissionResult", "evaluate_batch"]

_CHECK_BITS = {CHECK_STD: 1, CHECK_RANGE: 2, CHECK_NONTRIVIAL: 4, CHECK_SIMILARITY: 8}
_REWARD_BITS = 1 | 2 | 4


def _nan_to_none(value: float) -> float | None:
    return None if math.isnan(value) else value


@attrs.frozen(kw_only=True, eq=False)
class BatchAdmissionResult:
    """
    The decisions of :meth:`GroupAdmissionPolicy.evaluate_batch`, as arrays over groups.

    ``reason_codes[i]`` indexes :attr:`REASONS` (0 = admitted). Statistics are NaN where
    they do not apply, exactly as in :class:`GroupAdmissionDecision`. ``check_flags`` is a
    bit mask of failed internal checks (see :attr:`CHECK_BITS`); ``external_reasons`` maps
    the index of each group that has external reasons to them (other groups are absent).
    Use :meth:`decision` or :meth:`decisions` for ordinary decision objects.

    .. versionadded:: 0.1.0
    """

    #: ``REASONS[code]`` is the primary reason of a group with that code.
    REASONS: ClassVar[tuple[RejectionReason | None, ...]] = (
        None,
        RejectionReason.EXTERNAL,
        RejectionReason.EXACT_DEAD,
        RejectionReason.NEAR_TIE,
        RejectionReason.REDUNDANT,
    )
    #: The bit of each internal check in ``check_flags``.
    CHECK_BITS: ClassVar[dict[str, int]] = _CHECK_BITS

    reason_codes: npt.NDArray[np.int8]
    check_flags: npt.NDArray[np.uint8]
    external_reasons: dict[int, tuple[str, ...]]
    group_size: int
    unique_rollouts: npt.NDArray[np.int64]
    reward_mean: npt.NDArray[np.float64]
    reward_std: npt.NDArray[np.float64]
    reward_range: npt.NDArray[np.float64]
    nontrivial_advantage_count: npt.NDArray[np.int64]
    mean_pairwise_similarity: npt.NDArray[np.float64]
    max_pairwise_similarity: npt.NDArray[np.float64]
    group_keys: tuple[Hashable, ...] | None = None

    def __len__(self) -> int:
        return len(self.reason_codes)

    @property
    def admitted(self) -> npt.NDArray[np.bool_]:
        """Boolean mask of admitted groups."""
        mask: npt.NDArray[np.bool_] = self.reason_codes == 0
        return mask

    def reasons(self) -> list[str | None]:
        """The primary reason of every group as a string (``None`` when admitted)."""
        return [
            None if reason is None else reason.value
            for reason in map(self.REASONS.__getitem__, self.reason_codes.tolist())
        ]

    def decision(self, index: int) -> GroupAdmissionDecision:
        """The decision on group ``index``, equal to what ``evaluate`` returns for it."""
        flags = int(self.check_flags[index])
        external = self.external_reasons.get(index, ())
        return GroupAdmissionDecision(
            reason=self.REASONS[int(self.reason_codes[index])],
            failed_checks=(*external, *(c for c, bit in _CHECK_BITS.items() if flags & bit)),
            external_reasons=external,
            group_size=self.group_size,
            unique_rollouts=int(self.unique_rollouts[index]),
            reward_mean=float(self.reward_mean[index]),
            reward_std=float(self.reward_std[index]),
            reward_range=float(self.reward_range[index]),
            nontrivial_advantage_count=int(self.nontrivial_advantage_count[index]),
            mean_pairwise_similarity=_nan_to_none(float(self.mean_pairwise_similarity[index])),
            max_pairwise_similarity=_nan_to_none(float(self.max_pairwise_similarity[index])),
            group_key=None if self.group_keys is None else self.group_keys[index],
        )

    def decisions(self) -> list[GroupAdmissionDecision]:
        """Every group's decision, in order."""
        return [self.decision(index) for index in range(len(self))]

    def __iter__(self) -> Iterator[GroupAdmissionDecision]:
        return iter(self.decisions())


def _per_group(values: Any, groups: int, name: str) -> list[Any]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        msg = f"'{name}' must be a sequence with one entry per group (got {describe(values)})"
        raise TypeError(msg)
    if len(values) != groups:
        msg = f"'{name}' must have one entry per group ({groups}) (got {len(values)})"
        raise ValueError(msg)
    return list(values)


def _row_problems(missing: bool, non_finite: bool) -> list[str]:
    problems = [CHECK_MISSING_REWARD] if missing else []
    if non_finite:
        problems.append(CHECK_NON_FINITE_REWARD)
    return problems


def _external_reasons(
    caller: list[Any] | None, missing: BoolArray, non_finite: BoolArray
) -> dict[int, list[str]]:
    """Caller reasons, then the data problems, for the (few) groups that have any."""
    external: dict[int, list[str]] = {}
    for row, reasons in enumerate(caller or ()):
        if reasons:
            external[row] = list(external_reason_tuple(reasons, f"external_reasons[{row}]"))
    for row in np.flatnonzero(missing | non_finite).tolist():
        found = external.setdefault(row, [])
        found.extend(p for p in _row_problems(missing[row], non_finite[row]) if p not in found)
    return external


def _merged_groups(
    policy: GroupAdmissionPolicy,
    gated: FloatArray,
    rollout_ids: Any,
    caller: list[Any] | None,
    texts: list[list[str | None]] | None,
    missing: BoolArray,
    non_finite: BoolArray,
    keys: tuple[Hashable, ...] | None,
) -> dict[int, GroupAdmissionDecision]:
    """Judge, one by one with evaluate()'s code, the groups whose rollout ids repeat."""
    groups, size = gated.shape
    if is_torch_tensor(rollout_ids):
        rollout_ids = to_numpy(rollout_ids)
    special: dict[int, GroupAdmissionDecision] = {}
    for row, ids_row in enumerate(_per_group(rollout_ids, groups, "rollout_ids")):
        ids = check_rollout_ids(ids_row, size)
        if len({rid for rid in ids if rid is not None}) + ids.count(None) == size:
            continue
        reasons = caller[row] if caller else ()
        found = _row_problems(bool(missing[row]), bool(non_finite[row]))
        merged, merged_texts, inconsistent = merge_rollouts(
            gated[row].tolist(), None if texts is None else texts[row], ids
        )
        if inconsistent:
            found.append(CHECK_INCONSISTENT_ROLLOUT)
        special[row] = policy._decide(
            merged,
            merged_texts,
            list(external_reason_tuple(reasons, f"external_reasons[{row}]")) if reasons else [],
            found,
            size,
            None if keys is None else keys[row],
        )
    return special


def _reward_gate(
    config: GroupAdmissionConfig, gated: FloatArray, invalid: BoolArray
) -> tuple[FloatArray, FloatArray, FloatArray, IntArray, npt.NDArray[np.uint8]]:
    """Statistics and failed-check flags of every group with finite rewards (NaN elsewhere)."""
    groups = gated.shape[0]
    flags = np.zeros(groups, dtype=np.uint8)
    if not invalid.any():
        mean, std, spread, nontrivial, scale = batch_reward_statistics(gated, config.advantage_tolerance)
        for check, mask in batch_reward_failures(config, std, spread, nontrivial, scale).items():
            flags[mask] |= _CHECK_BITS[check]
        return mean, std, spread, nontrivial, flags
    mean, std, spread = (np.full(groups, np.nan) for _ in range(3))
    nontrivial = np.zeros(groups, dtype=np.int64)
    valid = np.flatnonzero(~invalid)
    if len(valid):
        stats = batch_reward_statistics(gated[valid], config.advantage_tolerance)
        mean[valid], std[valid], spread[valid], nontrivial[valid], scale = stats
        failures = batch_reward_failures(config, std[valid], spread[valid], nontrivial[valid], scale)
        for check, mask in failures.items():
            flags[valid[mask]] |= _CHECK_BITS[check]
    return mean, std, spread, nontrivial, flags


def _similarity_gate(
    policy: GroupAdmissionPolicy,
    texts: list[list[str | None]],
    skip: Mapping[int, object],
    flags: npt.NDArray[np.uint8],
    external: dict[int, list[str]],
) -> tuple[FloatArray, FloatArray]:
    """Mean and max pairwise similarity per group; flags redundant groups in place."""
    config = policy.config
    threshold = config.max_mean_pairwise_similarity
    mean_similarity = np.full(len(texts), np.nan)
    max_similarity = mean_similarity.copy()
    if threshold is None or len(texts[0]) < 2:
        return mean_similarity, max_similarity
    for row, row_texts in enumerate(texts):
        if row in skip:
            continue
        if any(text is None for text in row_texts):
            found = external.setdefault(row, [])
            if CHECK_MISSING_COMPLETION not in found:
                found.append(CHECK_MISSING_COMPLETION)
            continue
        scores = pairwise_similarities(
            row_texts,  # type: ignore[arg-type]
            config.similarity_ngram_size,
            policy.scorer,
        )
        mean_similarity[row], max_similarity[row] = float(scores.mean()), float(scores.max())
        if mean_similarity[row] > threshold:
            flags[row] |= _CHECK_BITS[CHECK_SIMILARITY]
    return mean_similarity, max_similarity


def evaluate_batch(
    policy: GroupAdmissionPolicy,
    rewards: Any,
    completions: Sequence[Sequence[str | None]] | None,
    *,
    external_reasons: Sequence[Sequence[str] | str] | None,
    rollout_ids: Any,
    group_keys: Sequence[Hashable] | None,
) -> BatchAdmissionResult:
    """Vectorised :meth:`GroupAdmissionPolicy.evaluate`; see there."""
    config = policy.config
    gated, missing, non_finite = coerce_batch(rewards, config.gate_on)
    groups, size = gated.shape
    keys = None if group_keys is None else tuple(_per_group(group_keys, groups, "group_keys"))
    caller = None if external_reasons is None else _per_group(external_reasons, groups, "external_reasons")
    external = _external_reasons(caller, missing, non_finite)
    texts: list[list[str | None]] | None = None
    if completions is not None:
        texts = [check_completions(row, size) for row in _per_group(completions, groups, "completions")]
    elif config.max_mean_pairwise_similarity is not None:
        raise ValueError(completions_required_message(config))
    special: dict[int, GroupAdmissionDecision] = {}
    if rollout_ids is not None:
        special = _merged_groups(policy, gated, rollout_ids, caller, texts, missing, non_finite, keys)

    mean, std, spread, nontrivial, flags = _reward_gate(config, gated, missing | non_finite)
    mean_similarity = max_similarity = np.full(groups, np.nan)
    if texts is not None:
        mean_similarity, max_similarity = _similarity_gate(policy, texts, special, flags, external)

    codes = np.zeros(groups, dtype=np.int8)
    codes[(flags & _CHECK_BITS[CHECK_SIMILARITY]) > 0] = 4
    reward_failed = (flags & _REWARD_BITS) > 0
    codes[reward_failed] = np.where(spread[reward_failed] == 0.0, 2, 3)
    codes[list(external)] = 1
    result = BatchAdmissionResult(
        reason_codes=codes,
        check_flags=flags,
        external_reasons={row: tuple(reasons) for row, reasons in sorted(external.items())},
        group_size=size,
        unique_rollouts=np.full(groups, size, dtype=np.int64),
        reward_mean=mean,
        reward_std=std,
        reward_range=spread,
        nontrivial_advantage_count=nontrivial,
        mean_pairwise_similarity=mean_similarity,
        max_pairwise_similarity=max_similarity,
        group_keys=keys,
    )
    for row, decision in special.items():
        _overwrite(result, row, decision)
    if policy.logger is not None:
        for row in np.flatnonzero(codes != 0).tolist():
            if row not in special:  # merged groups were logged by evaluate()'s code
                policy.logger.info("group_rejected", **result.decision(row).to_dict())
    return result


def _overwrite(result: BatchAdmissionResult, row: int, decision: GroupAdmissionDecision) -> None:
    """Write the one-by-one decision of a merged group into the result arrays."""
    result.reason_codes[row] = BatchAdmissionResult.REASONS.index(decision.reason)
    result.check_flags[row] = sum(_CHECK_BITS.get(check, 0) for check in decision.failed_checks)
    if decision.external_reasons:
        result.external_reasons[row] = decision.external_reasons
    else:
        result.external_reasons.pop(row, None)
    result.unique_rollouts[row] = decision.unique_rollouts
    result.reward_mean[row] = decision.reward_mean
    result.reward_std[row] = decision.reward_std
    result.reward_range[row] = decision.reward_range
    result.nontrivial_advantage_count[row] = decision.nontrivial_advantage_count
    for array, value in (
        (result.mean_pairwise_similarity, decision.mean_pairwise_similarity),
        (result.max_pairwise_similarity, decision.max_pairwise_similarity),
    ):
        array[row] = math.nan if value is None else value
