"""``evaluate_batch``: the reward gate vectorised over many groups of equal size."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt

from ._config import GroupAdmissionConfig
from ._decision import GroupAdmissionDecision
from ._gates import Statistics as _Statistics
from ._gates import batch_reward_failures, batch_reward_statistics
from ._inputs import (
    check_completions,
    check_group_keys,
    check_rollout_ids,
    completions_required_message,
    external_reason_tuple,
    merge_rollouts,
)
from ._judge import Scorer, add_problem, judge_group, measure_similarity
from ._reasons import (
    ADMITTED_CODE,
    CHECK_BITS,
    CHECK_INCONSISTENT_ROLLOUT,
    CHECK_MISSING_COMPLETION,
    CHECK_MISSING_REWARD,
    CHECK_NON_FINITE_REWARD,
    REASONS_BY_CODE,
    RejectionReason,
    primary_reason,
)
from ._rewards import coerce_batch, is_torch_tensor
from ._validation import deprecated, describe

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

__all__ = ["BatchAdmissionResult", "evaluate_batch"]


def _nan_to_none(value: float) -> float | None:
    return None if math.isnan(value) else value


@attrs.frozen(kw_only=True, eq=False)
class BatchAdmissionResult:
    """
    The decisions of :meth:`GroupAdmissionPolicy.evaluate_batch`, as arrays over groups.

    ``reason_codes[i]`` indexes :attr:`REASONS` (0 = admitted; see
    :attr:`RejectionReason.code`). Statistics are NaN where they do not apply, exactly as
    in :class:`GroupAdmissionDecision`. ``check_flags`` is a bit mask of failed gate checks
    (see :attr:`CHECK_BITS`); ``external_reasons`` maps the index of each group that has
    external reasons to them (other groups are absent). Use :meth:`decision` or
    :meth:`decisions` for ordinary decision objects.

    .. versionadded:: 0.1.0
    """

    #: ``REASONS[code]`` is the primary reason of a group with that code.
    REASONS: ClassVar[tuple[RejectionReason | None, ...]] = REASONS_BY_CODE
    #: The bit of each gate check in ``check_flags``.
    CHECK_BITS: ClassVar[dict[str, int]] = CHECK_BITS

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
        mask: npt.NDArray[np.bool_] = self.reason_codes == ADMITTED_CODE
        return mask

    def primary_reasons(self) -> list[str | None]:
        """The primary reason of every group as a string (``None`` when admitted)."""
        return [
            None if reason is None else reason.value
            for reason in map(self.REASONS.__getitem__, self.reason_codes.tolist())
        ]

    def reasons(self) -> list[str | None]:
        """
        Deprecated alias of :meth:`primary_reasons` (a decision's ``reasons`` were its failed checks).

        .. deprecated:: 0.2.0
            Use :meth:`primary_reasons`; the alias goes in 0.3.0.
        """
        deprecated("BatchAdmissionResult.reasons()", "use primary_reasons() (failed checks are check_flags)")
        return self.primary_reasons()

    def decision(self, index: int) -> GroupAdmissionDecision:
        """
        The decision on group ``index`` (negative indices count from the end).

        Raises:
            TypeError: ``index`` is not an integer.
            IndexError: ``index`` is out of range.
        """
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            msg = f"'index' must be an integer (got {describe(index)})"
            raise TypeError(msg)
        groups = len(self)
        if not -groups <= index < groups:
            msg = f"'index' must be in [-{groups}, {groups}) (got {describe(index)})"
            raise IndexError(msg)
        index = int(index) % groups  # the external reasons are keyed by the non-negative index
        flags = int(self.check_flags[index])
        external = self.external_reasons.get(index, ())
        return GroupAdmissionDecision(
            reason=self.REASONS[int(self.reason_codes[index])],
            failed_checks=(*external, *(c for c, bit in CHECK_BITS.items() if flags & bit)),
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


def _caller_reasons(caller: list[Any] | None, row: int) -> list[str]:
    reasons = caller[row] if caller else None
    return list(external_reason_tuple(reasons, f"external_reasons[{row}]")) if reasons else []


@attrs.define
class _Columns:
    """The per-group arrays of a batch result while they are being filled in."""

    codes: npt.NDArray[np.int8]
    flags: npt.NDArray[np.uint8]
    external: dict[int, list[str]]
    unique: IntArray
    mean: FloatArray
    std: FloatArray
    spread: FloatArray
    nontrivial: IntArray
    mean_similarity: FloatArray
    max_similarity: FloatArray

    def write(self, row: int, decision: GroupAdmissionDecision) -> None:
        """Store one group's decision, judged one by one, in the arrays."""
        self.codes[row] = 0 if decision.reason is None else decision.reason.code
        self.flags[row] = sum(CHECK_BITS.get(check, 0) for check in decision.gate_checks)
        if decision.external_reasons:
            self.external[row] = list(decision.external_reasons)
        else:
            self.external.pop(row, None)
        self.unique[row] = decision.unique_rollouts
        self.mean[row], self.std[row] = decision.reward_mean, decision.reward_std
        self.spread[row] = decision.reward_range
        self.nontrivial[row] = decision.nontrivial_advantage_count
        for array, value in (
            (self.mean_similarity, decision.mean_pairwise_similarity),
            (self.max_similarity, decision.max_pairwise_similarity),
        ):
            array[row] = math.nan if value is None else value


def _reward_columns(
    config: GroupAdmissionConfig, stats: _Statistics, invalid: BoolArray, size: int
) -> tuple[_Columns, set[int]]:
    """
    The columns of a batch with the reward gate's statistics and flags, NaN where not measured.

    Rows with a missing or non-finite value (``invalid``) are not measured. Returns the
    columns and the other rows whose statistics overflow: they are judged one by one, as
    ``evaluate`` judges them (the scalar gate overflows exactly where this one does).
    """
    mean, std, spread, nontrivial, scale, overflow = stats
    groups = len(mean)
    overflow &= ~invalid
    measured = ~(invalid | overflow)
    whole = bool(measured.all())
    if not whole:  # the statistics of a row that is not measured are NaN, as in evaluate()
        hidden = ~measured
        mean[hidden], std[hidden], spread[hidden], nontrivial[hidden] = np.nan, np.nan, np.nan, 0
    columns = _Columns(
        codes=np.zeros(groups, dtype=np.int8),
        flags=np.zeros(groups, dtype=np.uint8),
        external={},
        unique=np.full(groups, size, dtype=np.int64),
        mean=mean,
        std=std,
        spread=spread,
        nontrivial=nontrivial,
        mean_similarity=np.full(groups, np.nan),
        max_similarity=np.full(groups, np.nan),
    )
    for check, failing in batch_reward_failures(config, std, spread, nontrivial, scale).items():
        flagged = failing if whole else failing & measured
        columns.flags |= flagged.view(np.uint8) * np.uint8(CHECK_BITS[check])
    return columns, set(np.flatnonzero(overflow).tolist())


def _similarity_gate(
    config: GroupAdmissionConfig,
    scorer: Scorer | None,
    texts: list[list[str | None]],
    skip: set[int],
    columns: _Columns,
) -> None:
    """Mean and max pairwise similarity per group, by the judge's own gate (rows in ``skip`` aside)."""
    if config.max_mean_pairwise_similarity is None:
        return
    for row, row_texts in enumerate(texts):
        if row in skip:
            continue
        mean, high, check = measure_similarity(config, scorer, row_texts)
        if check == CHECK_MISSING_COMPLETION:
            add_problem(columns.external.setdefault(row, []), check)
        elif check is not None:
            columns.flags[row] |= CHECK_BITS[check]
        if mean is not None:
            columns.mean_similarity[row], columns.max_similarity[row] = mean, high


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
    elif config.max_mean_pairwise_similarity is not None:
        raise ValueError(completions_required_message(config))
    merged = {} if rollout_ids is None else _repeated_id_rows(rollout_ids, groups, size)

    stats = batch_reward_statistics(gated, config.advantage_tolerance)
    # A non-finite gated value makes its row's statistics non-finite: only those rows are read again.
    non_finite = np.zeros(groups, dtype=bool)
    suspects = np.flatnonzero(stats[-1])
    if len(suspects):
        non_finite[suspects] = batch.non_finite(suspects)
    failed = missing | non_finite
    columns, overflowing = _reward_columns(config, stats, failed, size)
    for row in sorted(set(range(len(caller or ()))) | set(np.flatnonzero(failed).tolist())):
        found = _caller_reasons(caller, row)
        found.extend(p for p in _row_problems(bool(missing[row]), bool(non_finite[row])) if p not in found)
        if found:
            columns.external[row] = found
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


# A row's case: its check flags in the low bits, then whether it is dead, then external.
_DEAD_BIT = 1 << max(CHECK_BITS.values()).bit_length()
_EXTERNAL_BIT = _DEAD_BIT << 1


def _precedence() -> npt.NDArray[np.int8]:
    """
    The primary reason's code of every case, as :func:`primary_reason` assigns it.

    A case is a row's ``check_flags``, plus ``_DEAD_BIT`` when its gated reward range is
    exactly 0 and ``_EXTERNAL_BIT`` when it has external reasons.
    """
    table = np.zeros(2 * _EXTERNAL_BIT, dtype=np.int8)
    for case in range(len(table)):
        failed = [check for check, bit in CHECK_BITS.items() if case & bit]
        external = ["external"] if case & _EXTERNAL_BIT else []
        reason = primary_reason(external, failed, 0.0 if case & _DEAD_BIT else 1.0)
        table[case] = ADMITTED_CODE if reason is None else reason.code
    return table


_PRECEDENCE = _precedence()


def _assign_codes(columns: _Columns) -> None:
    """Each row's primary reason, looked up in the table :func:`primary_reason` defines."""
    case = (columns.spread == 0.0).view(np.uint8) * np.uint8(_DEAD_BIT)
    case |= columns.flags
    if columns.external:
        case[list(columns.external)] |= np.uint8(_EXTERNAL_BIT)
    columns.codes = np.take(_PRECEDENCE, case)  # take: twice as fast as indexing with bytes


def _result(columns: _Columns, size: int, keys: tuple[Hashable, ...] | None) -> BatchAdmissionResult:
    return BatchAdmissionResult(
        reason_codes=columns.codes,
        check_flags=columns.flags,
        external_reasons={row: tuple(reasons) for row, reasons in sorted(columns.external.items())},
        group_size=size,
        unique_rollouts=columns.unique,
        reward_mean=columns.mean,
        reward_std=columns.std,
        reward_range=columns.spread,
        nontrivial_advantage_count=columns.nontrivial,
        mean_pairwise_similarity=columns.mean_similarity,
        max_pairwise_similarity=columns.max_similarity,
        group_keys=keys,
    )
