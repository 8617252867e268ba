"""
The prompt history as it was before its evidence went columnar (0.2.0 until version 2 of its state).

A prompt-by-prompt reference, kept to check that the columnar history picks and estimates
bit for bit what this one does for the same evidence and seed. Only what shapes picks:
observing, folding, estimating, picking (no state, no merging).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, NamedTuple

from group_admission import GroupAdmissionDecision, PromptHistoryConfig, RejectionReason

_EASY, _HARD, _FLOOR, _NUDGE, _BOUNDS = 0.98, 0.11, 0.01, 0.01, (0.05, 0.95)
_MIN_FIT_WEIGHT, _JEFFREYS = 32.0, (0.5, 0.5)


def key_of(prompt_id: str | int) -> str:
    return "s" + prompt_id if isinstance(prompt_id, str) else f"i{int(prompt_id)}"


def draw(seed: int, key: str, step: int) -> float:
    digest = hashlib.blake2b(f"{seed}\x1f{step}\x1f{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def chance(alpha: float, beta: float, size: int) -> float:
    if size < 2:
        return 0.0
    if size <= 256:
        all_pass = all_fail = 1.0
        for i in range(size):
            total = alpha + beta + i
            all_pass *= (alpha + i) / total
            all_fail *= (beta + i) / total
    else:
        base = math.lgamma(alpha + beta) - math.lgamma(alpha + beta + size)
        all_pass = math.exp(base + math.lgamma(alpha + size) - math.lgamma(alpha))
        all_fail = math.exp(base + math.lgamma(beta + size) - math.lgamma(beta))
    return max(0.0, 1.0 - all_pass - all_fail)


class Obs(NamedTuple):
    step: int
    key: str
    rank: int
    sequence: int
    successes: float
    failures: float
    admitted: bool


class Record:
    def __init__(self) -> None:
        self.successes = self.failures = self.admitted = self.rejected = 0.0
        self.step = self.groups = self.easy = self.hard = 0

    def add(self, o: Obs, decay: Any) -> None:
        old, new = 1.0, 1.0
        if o.step >= self.step:
            old = decay(o.step - self.step) if self.groups else 1.0
            self.step = o.step
        else:
            new = decay(self.step - o.step)
        self.successes = old * self.successes + new * o.successes
        self.failures = old * self.failures + new * o.failures
        self.admitted = old * self.admitted + new * o.admitted
        self.rejected = old * self.rejected + new * (not o.admitted)
        self.groups += 1
        rate = o.successes / (o.successes + o.failures)
        self.easy = self.easy + 1 if rate >= _EASY else 0
        self.hard = self.hard + 1 if rate <= _HARD else 0


class Pool:
    def __init__(self) -> None:
        self.weight = self.sum_rate = self.sum_square = self.inverse_size = self.admitted = 0.0
        self.rechecks = self.rechecks_informative = 0.0
        self.step = 0

    def add(self, o: Obs, decay: Any, rechecked: bool) -> None:
        if o.step > self.step:
            factor = decay(o.step - self.step)
            self.weight *= factor
            self.sum_rate *= factor
            self.sum_square *= factor
            self.inverse_size *= factor
            self.admitted *= factor
            self.rechecks *= factor
            self.rechecks_informative *= factor
            self.step = o.step
        weight = decay(self.step - o.step)
        size = o.successes + o.failures
        rate = o.successes / size
        self.weight += weight
        self.sum_rate += weight * rate
        self.sum_square += weight * rate * rate
        self.inverse_size += weight / size
        self.admitted += weight * o.admitted
        if rechecked:
            self.rechecks += weight
            self.rechecks_informative += weight * o.admitted

    def fitted(self, factor: float) -> tuple[float, float]:
        if self.weight * factor < _MIN_FIT_WEIGHT:
            return _JEFFREYS
        mean = self.sum_rate / self.weight
        spread = mean * (1.0 - mean)
        inverse = self.inverse_size / self.weight
        if spread <= 1e-12 or inverse >= 1.0:
            return _JEFFREYS
        variance = max(0.0, self.sum_square / self.weight - mean * mean)
        rho = (variance / spread - inverse) / (1.0 - inverse)
        concentration = min(max(1.0 / min(max(rho, 1e-6), 1.0) - 1.0, 0.05), 1000.0)
        return max(mean * concentration, 1e-3), max((1.0 - mean) * concentration, 1e-3)

    def admissions(self, factor: float) -> tuple[float, float]:
        if self.weight * factor < _MIN_FIT_WEIGHT:
            return 1.0, 1.0
        rate = min(max(self.admitted / self.weight, 0.01), 0.99)
        return 2.0 * rate, 2.0 * (1.0 - rate)


class ReferenceHistory:
    def __init__(self, config: PromptHistoryConfig, rank: int = 0) -> None:
        self.config, self.rank, self.sequence = config, rank, 0
        self.p_easy, self.p_hard = config.greso_p_easy, config.greso_p_hard
        self.pool, self.records, self.pending = Pool(), dict[str, Record](), dict[tuple[int, int], Obs]()

    def decay(self, elapsed: int) -> float:
        half_life = self.config.half_life
        return 1.0 if half_life is None or elapsed <= 0 else 0.5 ** (elapsed / half_life)

    def observe(self, prompt_id: str | int, d: GroupAdmissionDecision, step: int) -> None:
        if d.reason is RejectionReason.EXTERNAL or not math.isfinite(d.reward_mean) or d.unique_rollouts < 1:
            return
        low, high = self.config.reward_range
        rate = min(1.0, max(0.0, (d.reward_mean - low) / (high - low)))
        size = d.unique_rollouts
        key = key_of(prompt_id)
        obs = Obs(step, key, self.rank, self.sequence, rate * size, (1 - rate) * size, d.admitted)
        self.pending[(self.rank, self.sequence)] = obs
        self.sequence += 1

    def fold(self, step: int) -> None:
        ready = sorted(o for o in self.pending.values() if o.step < step)
        for o in ready:
            del self.pending[(o.rank, o.sequence)]
        steps = sorted({o.step for o in ready})
        for batch in ([o for o in ready if o.step == s] for s in steps):
            easy = hard = 0
            # Whether each was a re-check: would the pick at its step have skipped it?
            posterior = self.config.mode == "posterior"
            rechecked = [posterior and self.judge(o.key, o.step)[1] < self.threshold() for o in batch]
            for o, again in zip(batch, rechecked, strict=True):
                self.records.setdefault(o.key, Record()).add(o, self.decay)
                self.pool.add(o, self.decay, again)
                rate = o.successes / (o.successes + o.failures)
                easy += rate >= _EASY
                hard += rate <= _HARD
            target, count = self.config.greso_target_zero_variance, len(batch)
            nudge_hard = -_NUDGE if hard / count >= target * 2 / 3 else _NUDGE
            nudge_easy = -_NUDGE if easy / count >= target / 3 else _NUDGE
            self.p_hard = min(_BOUNDS[1], max(_BOUNDS[0], self.p_hard + nudge_hard))
            self.p_easy = min(_BOUNDS[1], max(_BOUNDS[0], self.p_easy + nudge_easy))

    def threshold(self) -> float:
        bound = self.config.max_wrong_skip_share
        if bound is None:
            return self.config.skip_below
        estimate = (self.pool.rechecks_informative + 20.0 * bound) / (self.pool.rechecks + 20.0)
        return self.config.skip_below * min(1.0, bound / estimate)

    def judge(self, key: str, step: int) -> tuple[float, float, float, int]:
        config, record = self.config, self.records.get(key)
        weight = 0.0 if record is None else self.decay(step - record.step)
        factor = self.decay(step - self.pool.step)
        if config.evidence == "admissions":
            alpha, beta = config.prior or self.pool.admissions(factor)
            if record is not None:
                alpha, beta = alpha + weight * record.admitted, beta + weight * record.rejected
            total = 0.0 if record is None else record.successes + record.failures
            mean = math.nan if record is None or not total else record.successes / total
            informative = alpha / (alpha + beta)
        else:
            alpha, beta = config.prior or self.pool.fitted(factor)
            alpha += 0.0 if record is None else weight * record.successes
            beta += 0.0 if record is None else weight * record.failures
            mean, informative = alpha / (alpha + beta), chance(alpha, beta, config.group_size)
        if config.mode == "greso":
            keep = 1.0
            if record is not None and record.easy:
                keep = max(self.p_easy**record.easy, _FLOOR)
            elif record is not None and record.hard:
                keep = max(self.p_hard**record.hard, _FLOOR)
        else:
            keep = 1.0 if informative >= self.threshold() else config.exploration
        return mean, informative, keep, 0 if record is None else record.groups

    def pick(self, prompt_ids: list[str | int], step: int) -> tuple[list[Any], list[Any], list[float]]:
        self.fold(step)
        picked, skipped, chances = [], [], []
        for prompt_id in prompt_ids:
            key = key_of(prompt_id)
            _, informative, keep, _ = self.judge(key, step)
            if keep >= 1.0 or draw(self.config.seed, key, step) < keep:
                picked.append(prompt_id)
                chances.append(informative)
            else:
                skipped.append(prompt_id)
        return picked, skipped, chances

    def estimate(self, prompt_id: str | int, step: int) -> tuple[int, float, float, float]:
        self.fold(step)
        mean, informative, keep, groups = self.judge(key_of(prompt_id), step)
        return groups, mean, informative, keep
