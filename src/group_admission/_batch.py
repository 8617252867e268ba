"""``evaluate_batch``: the reward gate vectorised over many groups of equal size."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from . import _checks
from ._config import GroupAdmissionConfig
from ._decision import BatchAdmissionResult, GroupAdmissionDecision
from ._inputs import (
    check_completions,
    check_group_keys,
    check_rollout_ids,
    completions_required_message,
    external_reason_tuple,
    merge_rollouts,
)
from ._judge import (
    BatchStatistics,
    Scorer,
    add_problem,
    batch_reward_failures,
    batch_reward_statistics,
    judge_group,
    measure_similarity,
)
from ._reasons import (
    CHECK_INCONSISTENT_ROLLOUT,
    CHECK_MISSING_COMPLETION,
    CHECK_MISSING_REWARD,
    CHECK_NON_FINITE_REWARD,
)
from ._rewards import coerce_batch, is_torch_tensor
from ._validation import describe

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

__all__ = ["evaluate_batch"]


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


def _caller_reasons(caller: list[Any] | None, row: int) -> list[str]:
    reasons = caller[row] if caller else None
    return list(external_reason_tuple(reasons, f"external_reasons[{row}]")) if reasons else []


_STATISTICS = (
    "unique_rollouts",
    "reward_mean",
    "reward_std",
    "reward_range",
    "nontrivial_advantage_count",
    "mean_pairwise_similarity",
    "max_pairwise_similarity",
)


@attrs.define
class _Columns:
    """The fields of a batch result while they are being filled in (external reasons as lists, by row)."""

    reason_codes: npt.NDArray[np.int8]
    check_flags: npt.NDArray[np.uint8]
    external_reasons: dict[int, list[str]]
    unique_rollouts: IntArray
    reward_mean: FloatArray
    reward_std: FloatArray
    reward_range: FloatArray
    nontrivial_advantage_count: IntArray
    mean_pairwise_similarity: FloatArray
    max_pairwise_similarity: FloatArray

    def write(self, row: int, decision: GroupAdmissionDecision) -> None:
        """Store one group's decision, judged one by one, in the arrays."""
        self.reason_codes[row] = 0 if decision.reason is None else decision.reason.code
        bits = _checks.TABLE.bits
        self.check_flags[row] = sum(bits.get(check, 0) for check in decision.gate_checks)
        if decision.external_reasons:
            self.external_reasons[row] = list(decision.external_reasons)
        else:
            self.external_reasons.pop(row, None)
        for name in _STATISTICS:  # named as the decision names them; NaN where it says None
            value = getattr(decision, name)
            getattr(self, name)[row] = math.nan if value is None else value


def _reward_columns(
    config: GroupAdmissionConfig, stats: BatchStatistics, invalid: BoolArray, size: int
) -> tuple[_Columns, set[int]]:
    """
    The columns of a batch with the reward gate's statistics and flags, NaN where not measured.

    Rows with a missing or non-finite value (``invalid``) are not measured. Returns the
    columns and the other rows whose statistics overflow: they are judged one by one, as
    ``evaluate`` judges them (the scalar gate overflows exactly where this one does).
    """
    mean, std, spread, nontrivial, _, overflow = stats
    groups = len(mean)
    overflow &= ~invalid
    measured = ~(invalid | overflow)
    whole = bool(measured.all())
    if not whole:  # the statistics of a row that is not measured are NaN, as in evaluate()
        hidden = ~measured
        mean[hidden], std[hidden], spread[hidden], nontrivial[hidden] = np.nan, np.nan, np.nan, 0
    columns = _Columns(
        reason_codes=np.zeros(groups, dtype=np.int8),
        check_flags=np.zeros(groups, dtype=np.uint8),
        external_reasons={},
        unique_rollouts=np.full(groups, size, dtype=np.int64),
        reward_mean=mean,
        reward_std=std,
        reward_range=spread,
        nontrivial_advantage_count=nontrivial,
        mean_pairwise_similarity=np.full(groups, np.nan),
        max_pairwise_similarity=np.full(groups, np.nan),
    )
    bits = _checks.TABLE.bits
    for check, failing in batch_reward_failures(config, stats).items():
        flagged = failing if whole else failing & measured
        columns.check_flags |= flagged.view(np.uint8) * np.uint8(bits[check])
    return columns, set(np.flatnonzero(overflow).tolist())


def _similarity_gate(
    config: GroupAdmissionConfig,
    scorer: Scorer | None,
    texts: list[list[str | None]],
    skip: set[int],
    columns: _Columns,
) -> None:
    """Mean and max pairwise similarity per group, by the judge's own gate (rows in ``skip`` aside)."""
    if not config.similarity_gate_enabled:
        return
    for row, row_texts in enumerate(texts):
        if row in skip:
            continue
        mean, high, check = measure_similarity(config, scorer, row_texts)
        if check == CHECK_MISSING_COMPLETION:
            add_problem(columns.external_reasons.setdefault(row, []), check)
        elif check is not None:
            columns.check_flags[row] |= _checks.TABLE.bits[check]
        if mean is not None:
            columns.mean_pairwise_similarity[row], columns.max_pairwise_similarity[row] = mean, high


def _repeated_id_rows(rollout_ids: Any, groups: int, size: int) -> dict[int, list[Hashable]]:
    """The rows whose rollout ids repeat (segments of one rollout), with their ids."""
    if is_torch_tensor(rollout_ids):
        # ``tolist`` keeps integer ids exact; float64 would merge ids above 2**53.
        rollout_ids = rollout_ids.tolist()
    rows: dict[int, list[Hashable]] = {}
    for row, ids_row in enumerate(_per_group(rollout_ids, groups, "rollout_ids")):
        ids = check_rollout_ids(ids_row, size)
        if len({rid for rid in ids if rid is not None}) + ids.count(None) != size:
            rows[row] = ids
    return rows


def evaluate_batch(
    config: GroupAdmissionConfig,
    scorer: Scorer | None,
    rewards: Any,
    completions: Sequence[Sequence[str | None]] | None,
    *,
    external_reasons: Sequence[Sequence[str] | str] | None,
    rollout_ids: Any,
    group_keys: Sequence[Hashable] | None,
) -> BatchAdmissionResult:
    """Vectorised ``GroupAdmissionPolicy.evaluate``; see there."""
    batch = coerce_batch(rewards, config.gate_on)
    gated, missing = batch.gated, batch.missing
    groups, size = gated.shape
    keys = None if group_keys is None else tuple(_per_group(group_keys, groups, "group_keys"))
    if keys is not None:
        check_group_keys(keys, "group_keys")
    caller = None if external_reasons is None else _per_group(external_reasons, groups, "external_reasons")
    texts: list[list[str | None]] | None = None
    if completions is not None:
        texts = [check_completions(row, size) for row in _per_group(completions, groups, "completions")]
    elif config.similarity_gate_enabled:
        raise ValueError(completions_required_message(config))
    merged = {} if rollout_ids is None else _repeated_id_rows(rollout_ids, groups, size)

    stats = batch_reward_statistics(gated, config.advantage_tolerance)
    # A non-finite gated value makes its row's statistics non-finite: only those rows are read again.
    non_finite = np.zeros(groups, dtype=bool)
    suspects = np.flatnonzero(stats.overflow)
    if len(suspects):
        non_finite[suspects] = batch.non_finite(suspects)
    failed = missing | non_finite
    columns, overflowing = _reward_columns(config, stats, failed, size)
    for row in sorted(set(range(len(caller or ()))) | set(np.flatnonzero(failed).tolist())):
        found = _caller_reasons(caller, row)
        found.extend(p for p in _row_problems(bool(missing[row]), bool(non_finite[row])) if p not in found)
        if found:
            columns.external_reasons[row] = found
    single = set(merged) | overflowing
    if texts is not None:
        _similarity_gate(config, scorer, texts, single, columns)
    _assign_codes(columns)
    # Rows whose rollout ids repeat (merged) or whose statistics overflow are judged one by
    # one, exactly as evaluate() judges them.
    for row in sorted(single):
        values, row_texts = gated[row].tolist(), None if texts is None else texts[row]
        problems = _row_problems(bool(missing[row]), bool(non_finite[row]))
        if row in merged:
            values, row_texts, inconsistent = merge_rollouts(values, row_texts, merged[row])
            if inconsistent:
                problems.append(CHECK_INCONSISTENT_ROLLOUT)
        key = None if keys is None else keys[row]
        external = _caller_reasons(caller, row)
        columns.write(row, judge_group(config, scorer, values, row_texts, external, problems, size, key))
    return _result(columns, size, keys)


def _assign_codes(columns: _Columns) -> None:
    """
    Each row's primary reason, looked up in the table's precedence (what :func:`primary_reason` assigns).

    A row's case is its check flags in the low bits, then whether it is dead, then whether
    it has external reasons (``CheckTable.precedence``).
    """
    table = _checks.TABLE
    dtype = table.case_dtype
    case = (columns.reward_range == 0.0).view(np.uint8).astype(dtype, copy=False) * dtype.type(table.dead_bit)
    case |= columns.check_flags
    if columns.external_reasons:
        case[list(columns.external_reasons)] |= dtype.type(table.external_bit)
    columns.reason_codes = np.take(table.precedence, case)  # take: twice as fast as indexing with bytes


def _result(columns: _Columns, size: int, keys: tuple[Hashable, ...] | None) -> BatchAdmissionResult:
    fields = attrs.asdict(columns, recurse=False)
    fields["external_reasons"] = {
        row: tuple(found) for row, found in sorted(columns.external_reasons.items())
    }
    return BatchAdmissionResult(**fields, group_size=size, group_keys=keys)
