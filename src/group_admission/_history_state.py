"""
The JSON state of a ``PromptHistory``: written in version 3, read in versions 3, 2 and 1, exactly or refused.

Version 2 is columnar, so that a history of a million prompts saves in a second and a
few tens of megabytes: each column of the evidence is its little-endian bytes, deflated
(zlib) and base64-encoded; integer prompt ids are written sorted, as their differences;
string ids as a sorted JSON list. Rows are written in that canonical order (integer ids,
then strings), so equal evidence writes an equal state. Version 1 (a list per prompt,
keyed ``"i7"``/``"sname"``) is read exactly, into the same parts.

Every state is checked whole before anything is built: the header and keys, each value,
and the relations between them (a fold count equal to the groups of the records, streaks
within groups, one row per prompt, one pending entry per ``(rank, sequence)``), so that a
state either restores exactly or raises ``CheckpointError`` naming the first problem.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import sys
import zlib
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from ._history_config import PromptHistoryConfig
from ._history_evidence import GRESO_BOUNDS, RECORD, RECORD_FIELDS, Observation, Pending, PoolStats, Records
from ._history_ids import INT64_MAX, PromptId, check_prompt_id, key_id
from ._state_checks import StateFormat, exactly_equal, state_int
from ._validation import describe

__all__ = ["FORMAT", "VERSION", "HistoryParts", "history_state", "restore_history"]

#: The ``format`` tag of a history state; the version changes whenever the layout does.
FORMAT = "group-admission/prompt-history"
VERSION = 3
_HEADER = ("format", "version", "config", "rank", "sequence", "greso", "pool", "folded")
_FORMAT = StateFormat(
    "the PromptHistory",
    "to_dict()",
    (*_HEADER, "prompts", "pending"),
    tag=FORMAT,
    version=VERSION,
    kind="prompt history",
    older=((1, (*_HEADER, "records", "pending")), (2, (*_HEADER, "prompts", "pending"))),
)
_fail = _FORMAT.fail
_PROMPT_KEYS = ("count", "int_ids", "str_ids", *RECORD_FIELDS)
_PENDING_FIELDS = ("step", "rank", "sequence", "successes", "failures", "admitted")
_PENDING = np.dtype(list(zip(_PENDING_FIELDS, ("<i8", "<i8", "<i8", "<f8", "<f8", "u1"), strict=True)))
_PENDING_KEYS = ("ids", *_PENDING_FIELDS)


@attrs.frozen(kw_only=True)
class HistoryParts:
    """
    Everything of a :class:`PromptHistory` beside its config and rank: what a checkpoint restores.

    The history takes it in one documented hook (``PromptHistory._restore``), built empty
    by ``__init__`` and from a checked state by :func:`restore_history`.
    """

    sequence: int = 0
    p_easy: float
    p_hard: float
    pool: PoolStats = attrs.field(factory=PoolStats)
    folded: int = 0
    digest: str = ""
    records: Records = attrs.field(factory=Records)
    pending: Pending = attrs.field(factory=Pending)


# -- the column codec ---------------------------------------------------------------------
def _encode(values: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(np.ascontiguousarray(values).tobytes(), 1)).decode("ascii")


def _decode(text: object, dtype: np.dtype[Any], count: int, name: str) -> np.ndarray:
    """``count`` values of ``dtype`` from :func:`_encode` output, or a ``CheckpointError``."""
    problem = f"'{name}' must be {count} values of {dtype.str}, deflated and base64-encoded"
    if not isinstance(text, str) or not text.isascii():
        _fail(f"{problem} (got {describe(text)})")
    try:
        packed = base64.b64decode(text, validate=True)
    except binascii.Error:
        _fail(f"{problem} (it is not base64)")
    if base64.b64encode(packed).decode("ascii") != text:  # no second spelling of the same bytes
        _fail(f"{problem} (its base64 is not canonical)")
    size = count * dtype.itemsize
    if size >= sys.maxsize:  # no column of this state can be that long (and zlib cannot count so far)
        _fail(f"{problem} (it claims {count} values)")
    inflate = zlib.decompressobj()
    try:
        raw = inflate.decompress(packed, size + 1)  # never inflate more than the state claims
    except zlib.error as exc:
        _fail(f"{problem} (it does not inflate: {exc})")
    if len(raw) != size or not inflate.eof or inflate.unused_data or inflate.unconsumed_tail:
        _fail(f"{problem} (it holds {len(raw)}{'' if inflate.eof else '+'} bytes, not {size})")
    return np.frombuffer(raw, dtype=dtype)


# -- writing --------------------------------------------------------------------------------
def _canonical_rows(ids: list[PromptId]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The rows in canonical order (integer ids ascending, then strings), and both sorted id lists."""
    is_int = np.fromiter((type(i) is int for i in ids), dtype=bool, count=len(ids))
    int_rows, str_rows = np.flatnonzero(is_int), np.flatnonzero(~is_int).tolist()
    numbers = np.fromiter((ids[r] for r in int_rows.tolist()), dtype=np.int64, count=len(int_rows))
    by_number = np.argsort(numbers, kind="stable")
    str_rows.sort(key=ids.__getitem__)
    order = np.concatenate((int_rows[by_number], np.array(str_rows, dtype=np.int64)))
    return order, numbers[by_number], [ids[r] for r in str_rows]


def _prompts_state(records: Records) -> dict[str, Any]:
    order, numbers, texts = _canonical_rows(records.ids)
    data = records.data
    # Differences modulo 2**64: sorted ids become small numbers that deflate to almost nothing.
    steps = np.diff(numbers.view(np.uint64), prepend=np.uint64(0))
    state: dict[str, Any] = {"count": len(order), "int_ids": _encode(steps.astype("<u8")), "str_ids": texts}
    state.update((name, _encode(data[name][order])) for name in RECORD_FIELDS)  # a column at a time
    return state


def _pending_state(pending: Pending) -> dict[str, Any]:
    observations = sorted(pending, key=lambda o: (o.rank, o.sequence))
    table = np.array(
        [(o.step, o.rank, o.sequence, o.successes, o.failures, o.admitted) for o in observations],
        dtype=_PENDING,
    )
    state: dict[str, Any] = {"ids": [o.prompt_id for o in observations]}
    state.update((name, _encode(table[name])) for name in _PENDING_FIELDS)
    return state


def history_state(config: PromptHistoryConfig, rank: int, parts: HistoryParts) -> dict[str, Any]:
    """The history's state as plain JSON types (version 3)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "config": config.to_dict(),
        "rank": rank,
        "sequence": parts.sequence,
        "greso": [parts.p_easy, parts.p_hard],
        "pool": parts.pool.to_list(),
        "folded": [parts.folded, parts.digest],
        "prompts": _prompts_state(parts.records),
        "pending": _pending_state(parts.pending),
    }


# -- reading --------------------------------------------------------------------------------
def _int(value: object, name: str) -> int:
    number = state_int(value, name, _fail)
    if number > INT64_MAX:
        _fail(f"'{name}' must be an integer <= 2**63 - 1 (got {describe(value)})")
    return number


def _float(value: object, name: str) -> float:
    # Floats only: a state writes its floats as floats, so an int (or a bool) here is damage.
    if not isinstance(value, float) or not math.isfinite(value) or value < 0:
        _fail(f"'{name}' must be a finite float >= 0 (got {describe(value)})")
    return float(value)


def _list(value: object, name: str, length: int | None = None) -> list[Any]:
    if not isinstance(value, list) or (length is not None and len(value) != length):
        size = "" if length is None else f" of {length} items"
        _fail(f"'{name}' must be a list{size} (got {describe(value)})")
    return value


def _mapping(value: object, name: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or set(value) != set(keys):
        found = sorted(map(str, value)) if isinstance(value, Mapping) else describe(value)
        _fail(f"'{name}' must be a mapping of exactly {list(keys)!r} (got {found})")
    return value


def _prompt_id(value: object, name: str) -> PromptId:
    try:
        return check_prompt_id(value, name)
    except (TypeError, ValueError) as exc:
        _fail(str(exc))


def _strictly_ascending(values: list[Any] | np.ndarray, name: str, what: str = "prompt") -> None:
    if isinstance(values, np.ndarray):
        bad = np.flatnonzero(values[1:] <= values[:-1])
        pair = None if not bad.size else (values[bad[0]].item(), values[bad[0] + 1].item())
    else:
        pair = next(((a, b) for a, b in itertools.pairwise(values) if not a < b), None)
    if pair is not None:
        _fail(f"'{name}' must be sorted, each {what} once (got {pair[0]!r} before {pair[1]!r})")


def _check_columns(table: Mapping[str, np.ndarray], names: tuple[str, ...], good: Any, needed: str) -> None:
    """Refuse the first value of the ``names`` columns that is not ``good``, naming its column."""
    for name in names:
        bad = np.flatnonzero(~good(table[name]))
        if bad.size:
            _fail(f"'pending.{name}' must hold {needed} (got {table[name][bad[0]].item()!r})")


def _records_v2(value: object) -> Records:
    prompts = _mapping(value, "prompts", _PROMPT_KEYS)
    texts = _list(prompts["str_ids"], "prompts.str_ids")
    for text in texts:
        if type(text) is not str:  # an int here would be a second spelling of an int id
            _fail(f"'prompts.str_ids' must be a list of strings (got {describe(text)})")
        _prompt_id(text, "prompts.str_ids[]")
    _strictly_ascending(texts, "prompts.str_ids")
    size = _int(prompts["count"], "prompts.count")
    if size < len(texts):
        _fail(f"'prompts.count' must be >= the string ids ({len(texts)}) (got {size})")
    gaps = _decode(prompts["int_ids"], np.dtype("<u8"), size - len(texts), "prompts.int_ids")
    numbers = np.cumsum(gaps, dtype=np.uint64).view(np.int64)
    _strictly_ascending(numbers, "prompts.int_ids")
    data = np.zeros(size, dtype=RECORD)
    for name in RECORD_FIELDS:
        data[name] = _decode(prompts[name], RECORD[name], size, f"prompts.{name}")
    return Records([*numbers.tolist(), *texts], data)


def _records_v1(value: object) -> Records:
    entries = _list(value, "records")
    ids: list[PromptId] = []
    data = np.zeros(len(entries), dtype=RECORD)
    for row, entry in enumerate(entries):
        items = _list(entry, "records[]", 9)
        if not isinstance(items[0], str) or (prompt_id := key_id(items[0])) is None:
            _fail(f"'records[].key' must be a prompt key such as 'i7' or 'sname' (got {describe(items[0])})")
        ids.append(prompt_id)
        for index, name in enumerate(RECORD_FIELDS, start=1):
            check = _float if RECORD[name].kind == "f" else _int
            data[name][row] = check(items[index], f"records[].{name}")
    if len(set(ids)) != len(ids):
        _fail("'records' must hold each prompt once (a prompt key is listed twice)")
    return Records(ids, data)


def _pending_v2(value: object) -> Pending:
    pending = _mapping(value, "pending", _PENDING_KEYS)
    ids = [_prompt_id(v, "pending.ids[]") for v in _list(pending["ids"], "pending.ids")]
    table = {
        name: _decode(pending[name], _PENDING[name], len(ids), f"pending.{name}") for name in _PENDING_FIELDS
    }
    _check_columns(table, ("admitted",), lambda c: c <= 1, "0 or 1 per observation")
    _check_columns(table, ("step", "rank", "sequence"), lambda c: c >= 0, "integers >= 0")
    _check_columns(
        table, ("successes", "failures"), lambda c: np.isfinite(c) & (c >= 0.0), "finite numbers >= 0"
    )
    identities = list(zip(table["rank"].tolist(), table["sequence"].tolist(), strict=True))
    _strictly_ascending(identities, "pending (rank, sequence)", "observation")
    return Pending(
        [
            Observation(step, prompt_id, rank, sequence, successes, failures, bool(admitted))
            for prompt_id, step, rank, sequence, successes, failures, admitted in zip(
                ids, *(table[name].tolist() for name in _PENDING_FIELDS), strict=True
            )
        ]
    )


def _pending_v1(value: object) -> Pending:
    observations = []
    for entry in _list(value, "pending"):
        items = _list(entry, "pending[]", 7)
        if not isinstance(items[1], str) or (prompt_id := key_id(items[1])) is None:
            _fail(f"'pending[].key' must be a prompt key such as 'i7' or 'sname' (got {describe(items[1])})")
        if not isinstance(items[6], bool):
            _fail(f"'pending[].admitted' must be a bool (got {describe(items[6])})")
        observations.append(
            Observation(
                _int(items[0], "pending[].step"),
                prompt_id,
                _int(items[2], "pending[].rank"),
                _int(items[3], "pending[].sequence"),
                _float(items[4], "pending[].successes"),
                _float(items[5], "pending[].failures"),
                items[6],
            )
        )
    if len({(o.rank, o.sequence) for o in observations}) != len(observations):
        _fail("'pending' must hold each (rank, sequence) once (an observation is listed twice)")
    return Pending(observations)


def _pool(value: object, version: int) -> PoolStats:
    """The pool's list: six numbers before version 3, which adds the two re-check weights."""
    items = _list(value, "pool", 6 if version < 3 else 8)
    pool = PoolStats()
    pool.weight, pool.sum_rate, pool.sum_square, pool.inverse_size, pool.admitted = (
        _float(items[i], f"pool[{i}]") for i in range(5)
    )
    pool.step = _int(items[5], "pool[5]")
    if version >= 3:
        pool.rechecks, pool.rechecks_informative = (_float(items[i], f"pool[{i}]") for i in (6, 7))
    return pool


#: Relative slack of the float relations below: sums of many rounded terms, never a real gap.
_SLACK = 1e-9


def _check_records(records: Records, pool: PoolStats, folded: int, forgets: bool) -> None:
    data = records.data
    floats = np.stack([data[name] for name in RECORD_FIELDS if RECORD[name].kind == "f"])
    if not bool(np.all(np.isfinite(floats) & (floats >= 0.0))):
        _fail("every record's successes, failures, admitted and rejected must be finite numbers >= 0")
    groups, easy, hard = data["groups"], data["easy"], data["hard"]
    if not bool(np.all((groups >= 1) & (easy >= 0) & (hard >= 0) & (easy <= groups) & (hard <= groups))):
        _fail("a record has contradictory counts (no groups, or a streak longer than its groups)")
    if bool(np.any((easy > 0) & (hard > 0))):
        _fail("a record is on an all-correct and an all-wrong streak at once")
    total = sum(groups.tolist())  # exact: an int64 sum of a damaged column could wrap around
    if total != folded:
        _fail(f"'folded' ({folded}) must equal the groups the records hold ({total})")
    steps = data["step"]
    if bool(np.any(steps < 0)) or (len(steps) and int(steps.max()) != pool.step):
        _fail(f"the records' latest step must be the pool's ('pool[5]' = {pool.step})")
    _check_weights(data, forgets)
    _check_totals(data, pool)


def _check_weights(data: np.ndarray, forgets: bool) -> None:
    """
    What each record's folds imply: one verdict per group, and at least one sample per verdict.

    Every group adds 1 to ``admitted + rejected`` and its samples (>= 1) to ``successes +
    failures``, each weighted alike: by at most 1, or exactly 1 without forgetting.
    """
    groups = data["groups"].astype(np.float64)
    verdicts = data["admitted"] + data["rejected"]
    samples = data["successes"] + data["failures"]
    # Without forgetting the verdicts are sums of whole numbers, exact in floats.
    wrong = ((verdicts > groups * (1 + _SLACK)) | ~(verdicts > 0)) if forgets else verdicts != groups
    if bool(np.any(wrong)):
        row = int(np.flatnonzero(wrong)[0])
        rule = "at most" if forgets else "equal to"
        _fail(
            f"a record's admitted + rejected ({float(verdicts[row])!r}) must be {rule} its groups "
            f"({int(groups[row])}): each group is one verdict"
        )
    short = np.flatnonzero(samples < verdicts * (1 - _SLACK))
    if short.size:
        row = int(short[0])
        _fail(
            f"a record's successes + failures ({float(samples[row])!r}) must be at least its admitted + "
            f"rejected ({float(verdicts[row])!r}): each group has at least one sample"
        )


def _check_totals(data: np.ndarray, pool: PoolStats) -> None:
    """
    The records hold every group the pool does, each weighted at least as much.

    A group counts in its prompt's record decayed to that prompt's latest step and in the
    pool decayed to the pool's, which is later: so summed over the records, successes,
    failures and verdicts are at least the pool's (a column written in another dtype is not).
    """
    weight = pool.weight
    totals = {
        "successes": (float(data["successes"].sum()), pool.sum_rate),
        "failures": (float(data["failures"].sum()), weight - pool.sum_rate),
        "admitted": (float(data["admitted"].sum()), pool.admitted),
        "admitted + rejected": (float((data["admitted"] + data["rejected"]).sum()), weight),
    }
    for name, (held, least) in totals.items():
        if held < least - weight * _SLACK:
            _fail(f"the records' {name} ({held!r}) must be at least the pool's ({least!r})")


def _check_pool(pool: PoolStats, folded: int, forgets: bool) -> None:
    """The pool's moments are weighted sums over the folded groups: each term at most its weight."""
    weight, rate = pool.weight, pool.sum_rate
    bounds = {
        "admitted": weight,
        "sum_rate": weight,
        "inverse_size": weight,
        "sum_square": rate,
        "rechecks": weight,
        "rechecks_informative": min(pool.rechecks, pool.admitted),
    }
    for name, bound in bounds.items():
        if getattr(pool, name) > bound * (1 + _SLACK):
            _fail(f"the pool's {name} exceeds what its terms allow ({bound!r}) (got 'pool' {pool.to_list()})")
    if weight > folded * (1 + _SLACK) or (not forgets and weight != folded):
        rule = "at most" if forgets else "equal to"
        _fail(f"the pool's weight ({weight!r}) must be {rule} the groups folded ({folded})")


def _check_folded(config: PromptHistoryConfig, parts: HistoryParts) -> None:
    """What the fold count implies: nothing at 0; else a digest, and keep bases in GRESO's bounds."""
    greso = (parts.p_easy, parts.p_hard)
    if parts.folded == 0:
        untouched = PoolStats().to_list()
        if (
            parts.digest
            or greso != (config.greso_p_easy, config.greso_p_hard)
            or parts.pool.to_list() != untouched
        ):
            _fail("a history that folded nothing has no digest, its initial keep bases and an empty pool")
        return
    if len(parts.digest) != 32 or not all(c in "0123456789abcdef" for c in parts.digest):
        _fail(f"'folded' must be [count, 32 hex digits] (got digest {describe(parts.digest)})")
    low, high = GRESO_BOUNDS
    if not all(low <= p <= high for p in greso):
        _fail(f"'greso' must lie within {list(GRESO_BOUNDS)} once evidence is folded (got {list(greso)})")


def _check_pending(pending: Pending, rank: int, sequence: int, folded: int) -> None:
    if any(s + f <= 0 for s, f in zip(pending.successes, pending.failures, strict=True)):
        _fail("a pending observation has no samples (successes + failures must be > 0)")
    own = [s for r, s in zip(pending.rank, pending.sequence, strict=True) if r == rank]
    if own and max(own) >= sequence:
        _fail(f"a pending observation of rank {rank} is numbered at or past 'sequence' ({sequence})")
    # Each of the rank's own observations (numbered 0 to sequence - 1) is pending or folded.
    if sequence > folded + len(own):
        _fail(
            f"'sequence' ({sequence}) counts more observations of rank {rank} than are pending "
            f"({len(own)}) or folded ({folded})"
        )
    if folded + len(pending) > INT64_MAX:  # every pending observation folds into the count
        _fail(f"'folded' ({folded}) and the pending observations ({len(pending)}) exceed 2**63 - 1 groups")


def restore_history(data: object) -> tuple[PromptHistoryConfig, int, HistoryParts]:
    """
    Check a saved state (version 3, 2 or 1) and return the config, the rank and the parts to build.

    Raises:
        CheckpointError: naming the first problem found.
    """
    state = _FORMAT.read(data)
    version = state["version"]
    if version < 3 and isinstance(state["config"], Mapping) and "max_wrong_skip_share" not in state["config"]:
        # Before version 3 nothing bounded the wrong skips: restore exactly that.
        state = {**state, "config": {**state["config"], "max_wrong_skip_share": None}}
    try:
        config = PromptHistoryConfig.from_mapping(state["config"])
    except (TypeError, ValueError) as exc:
        _fail(f"'config': {exc}")
    if not exactly_equal(config.to_dict(), state["config"]):  # no default filled in, no 1 for 1.0
        _fail(f"'config' must be a whole PromptHistoryConfig.to_dict() (got {describe(state['config'])})")
    greso = _list(state["greso"], "greso", 2)
    folded = _list(state["folded"], "folded", 2)
    if not isinstance(folded[1], str):
        _fail(f"'folded' must be [count, digest] (got {describe(folded)})")
    version_1 = state["version"] == 1
    parts = HistoryParts(
        sequence=_int(state["sequence"], "sequence"),
        p_easy=_float(greso[0], "greso[0]"),
        p_hard=_float(greso[1], "greso[1]"),
        pool=_pool(state["pool"], version),
        folded=_int(folded[0], "folded[0]"),
        digest=folded[1],
        records=_records_v1(state["records"]) if version_1 else _records_v2(state["prompts"]),
        pending=_pending_v1(state["pending"]) if version_1 else _pending_v2(state["pending"]),
    )
    rank = _int(state["rank"], "rank")
    forgets = config.half_life is not None
    _check_records(parts.records, parts.pool, parts.folded, forgets)
    _check_pool(parts.pool, parts.folded, forgets)
    _check_folded(config, parts)
    _check_pending(parts.pending, rank, parts.sequence, parts.folded)
    return config, rank, parts
