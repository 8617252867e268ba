"""
``PromptHistory``: remember each prompt's outcomes, and skip prompts that will probably be dead.

Reactive admission pays for a dead group before it can reject it. A prompt that was
all-wrong (or all-right) last time will probably be again, so the history estimates each
prompt's pass rate from its past groups (a Beta-Binomial posterior with forgetting) and the
probability that its next group is informative, and skips the likely-dead prompts before
they are generated, with an exploration floor so that none is starved forever.

Determinism is the point of the design: the skip draw is a hash of ``(seed, prompt id,
step)``, a step's observations count from the next step on (every pick within a step sees
the same evidence), and observations fold in one canonical order. So every rank that holds
the same observations picks the same prompts without talking, and a restored history
replays its picks exactly.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ._batch import BatchAdmissionResult
from ._decision import GroupAdmissionDecision
from ._history_config import PromptHistoryConfig
from ._history_state import (
    GRESO_BOUNDS,
    GRESO_EASY_MEAN,
    GRESO_FLOOR,
    GRESO_HARD_MEAN,
    GRESO_NUDGE,
    HistoryParts,
    Observation,
    Record,
    history_state,
    informative_chance,
    restore_history,
)
from ._loading import coerce_config
from ._reasons import RejectionReason
from ._validation import check_count, describe

__all__ = ["PromptEstimate", "PromptHistory", "PromptId", "PromptPicks"]

#: A prompt's identity: a string or an integer (``True``/``False`` are not prompt ids).
PromptId = str | int


def prompt_key(prompt_id: object) -> str:
    """The canonical text of a prompt id, for hashing and JSON (``"i7"``, ``"sgsm8k/12"``)."""
    if isinstance(prompt_id, str):
        return "s" + prompt_id
    if isinstance(prompt_id, (int, np.integer)) and not isinstance(prompt_id, (bool, np.bool_)):
        return f"i{int(prompt_id)}"
    msg = f"a prompt id must be a str or an int (got {describe(prompt_id)})"
    raise TypeError(msg)


def uniform_draw(seed: int, key: str, step: int) -> float:
    """A uniform number in ``[0, 1)`` fixed by ``(seed, prompt, step)``: the same on every rank."""
    digest = hashlib.blake2b(f"{seed}\x1f{step}\x1f{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


@attrs.frozen(kw_only=True)
class PromptEstimate:
    """
    What a :class:`PromptHistory` believes about one prompt at one step.

    Attributes:
        prompt_id: The prompt.
        groups: Groups of it observed (without forgetting).
        pass_rate: The posterior mean of its pass rate (scaled reward mean).
        informative_probability: The probability that its next group is informative.
        keep_probability: The probability that :meth:`PromptHistory.pick` keeps it.

    .. versionadded:: 0.2.0
    """

    prompt_id: PromptId
    groups: int
    pass_rate: float
    informative_probability: float
    keep_probability: float


@attrs.frozen(kw_only=True)
class PromptPicks:
    """
    The prompts :meth:`PromptHistory.pick` keeps and skips, each in the order given.

    Attributes:
        picked: The prompts to generate.
        skipped: The prompts skipped this step.
        informative_probabilities: The informative probability of each picked prompt.

    .. versionadded:: 0.2.0
    """

    picked: tuple[PromptId, ...]
    skipped: tuple[PromptId, ...]
    informative_probabilities: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot."""
        return {
            "picked": list(self.picked),
            "skipped": list(self.skipped),
            "informative_probabilities": list(self.informative_probabilities),
        }


def _prompt_keys(prompt_ids: object, name: str = "prompt_ids") -> list[str]:
    if isinstance(prompt_ids, (str, bytes, Mapping)) or not isinstance(prompt_ids, Iterable):
        msg = f"'{name}' must be a sequence of prompt ids (got {describe(prompt_ids)})"
        raise TypeError(msg)
    return [prompt_key(prompt_id) for prompt_id in prompt_ids]


class PromptHistory:
    """
    Remember each prompt's outcomes; pick the prompts worth generating at each step.

    A step runs::

        picks = history.pick(candidate_ids, step=step)    # skips likely-dead prompts
        ...generate and judge a group of each picked prompt...
        history.observe(prompt_id, decision, step=step)   # for each judged group

    Observations count from the next step on. For several ranks, gather every rank's
    :meth:`to_dict` after a step's observations and :meth:`merge` the others before the
    next :meth:`pick`; all ranks then pick the same prompts.

    Args:
        config: The settings (a :class:`PromptHistoryConfig` or a mapping of its fields).
        rank: This process's rank; it tells the observations of different ranks apart
            when histories merge.

    .. versionadded:: 0.2.0
    """

    def __init__(self, config: PromptHistoryConfig | Mapping[str, Any], *, rank: int = 0) -> None:
        if config is None:
            msg = "'config' must be a PromptHistoryConfig or a mapping with at least 'group_size' (got None)"
            raise TypeError(msg)
        self._config = coerce_config(PromptHistoryConfig, config)
        self._rank = check_count(rank, "rank")
        self._lock = threading.RLock()
        self._restore(HistoryParts(p_easy=self._config.greso_p_easy, p_hard=self._config.greso_p_hard))

    def _restore(self, parts: HistoryParts) -> None:
        """
        The one hook that sets what a checkpoint restores; ``__init__`` starts from empty parts.

        Every field is set by name here or in ``__init__``, never computed from a state's
        keys, so a renamed field fails the tests instead of becoming a new attribute.
        """
        self._sequence = parts.sequence
        self._p_easy, self._p_hard = parts.p_easy, parts.p_hard
        self._pool = parts.pool
        self._folded, self._digest = parts.folded, parts.digest
        self._records = parts.records
        self._pending = parts.pending

    @property
    def config(self) -> PromptHistoryConfig:
        """The settings."""
        return self._config

    @property
    def rank(self) -> int:
        """The rank that labels this history's own observations."""
        return self._rank

    @property
    def greso_keep_bases(self) -> tuple[float, float]:
        """GRESO's current ``(p_easy, p_hard)``."""
        return self._p_easy, self._p_hard

    def __len__(self) -> int:
        """Prompts with folded evidence."""
        return len(self._records)

    def __repr__(self) -> str:
        return f"PromptHistory({self._config!r}, prompts={len(self._records)}, pending={len(self._pending)})"

    # -- observing -----------------------------------------------------------------
    def observe(self, prompt_id: PromptId, decision: GroupAdmissionDecision, *, step: int) -> None:
        """
        Record one judged group of ``prompt_id`` (from the session's or the policy's decision).

        Groups rejected as ``external`` (a failed rollout, a missing reward) say nothing
        about the prompt's difficulty and are not recorded.
        """
        if not isinstance(decision, GroupAdmissionDecision):
            msg = f"'decision' must be a GroupAdmissionDecision (got {describe(decision)})"
            raise TypeError(msg)
        key = prompt_key(prompt_id)
        external = decision.reason is RejectionReason.EXTERNAL
        self._add(
            [key], [decision.reward_mean], [decision.unique_rollouts], [decision.admitted], [external], step
        )

    def observe_batch(
        self,
        prompt_ids: Sequence[PromptId],
        result: BatchAdmissionResult | Sequence[GroupAdmissionDecision],
        *,
        step: int,
    ) -> None:
        """Record judged groups, one per prompt id, from a batch result or a list of decisions."""
        keys = _prompt_keys(prompt_ids)
        if isinstance(result, BatchAdmissionResult):
            means, sizes = result.reward_mean.tolist(), result.unique_rollouts.tolist()
            admitted = result.admitted.tolist()
            external = (result.reason_codes == RejectionReason.EXTERNAL.code).tolist()
        elif isinstance(result, Sequence) and all(isinstance(d, GroupAdmissionDecision) for d in result):
            means = [d.reward_mean for d in result]
            sizes = [d.unique_rollouts for d in result]
            admitted = [d.admitted for d in result]
            external = [d.reason is RejectionReason.EXTERNAL for d in result]
        else:
            msg = f"'result' must be a BatchAdmissionResult or a list of decisions (got {describe(result)})"
            raise TypeError(msg)
        if len(keys) != len(means):
            msg = f"'prompt_ids' must name one prompt per group ({len(means)}) (got {len(keys)})"
            raise ValueError(msg)
        self._add(keys, means, sizes, admitted, external, step)

    def _add(
        self,
        keys: list[str],
        means: list[float],
        sizes: list[int],
        admitted: list[bool],
        external: list[bool],
        step: int,
    ) -> None:
        step = check_count(step, "step")
        low, high = self._config.reward_range
        with self._lock:
            for key, mean, size, kept, failed in zip(keys, means, sizes, admitted, external, strict=True):
                if failed or not np.isfinite(mean) or size < 1:
                    continue
                rate = min(1.0, max(0.0, (mean - low) / (high - low)))
                observation = Observation(
                    step, key, self._rank, self._sequence, rate * size, (1.0 - rate) * size, bool(kept)
                )
                self._pending[(self._rank, self._sequence)] = observation
                self._sequence += 1

    # -- folding -------------------------------------------------------------------
    def _decay(self, elapsed: int) -> float:
        half_life = self._config.half_life
        return 1.0 if half_life is None or elapsed <= 0 else 0.5 ** (elapsed / half_life)

    def _fold(self, step: int) -> None:
        """Fold the pending observations of steps before ``step``, in canonical order (under the lock)."""
        ready = sorted(o for o in self._pending.values() if o.step < step)
        if not ready:
            return
        for observation in ready:
            del self._pending[(observation.rank, observation.sequence)]
        start = 0
        for end in range(1, len(ready) + 1):
            if end == len(ready) or ready[end].step != ready[start].step:
                self._fold_step(ready[start:end])
                start = end

    def _fold_step(self, observations: list[Observation]) -> None:
        easy = hard = 0
        for observation in observations:
            record = self._records.setdefault(observation.key, Record())
            record.add(observation, self._decay)
            self._pool.add(observation, self._decay)
            size = observation.successes + observation.failures
            rate = observation.successes / size
            easy += rate >= GRESO_EASY_MEAN
            hard += rate <= GRESO_HARD_MEAN
            text = repr(observation).encode()
            self._digest = hashlib.blake2b(self._digest.encode() + text, digest_size=16).hexdigest()
            self._folded += 1
        # GRESO moves each keep base one notch per step towards its target share.
        target = self._config.greso_target_zero_variance
        low, high = GRESO_BOUNDS
        count = len(observations)
        nudge_hard = -GRESO_NUDGE if hard / count >= target * 2 / 3 else GRESO_NUDGE
        nudge_easy = -GRESO_NUDGE if easy / count >= target / 3 else GRESO_NUDGE
        self._p_hard = min(high, max(low, self._p_hard + nudge_hard))
        self._p_easy = min(high, max(low, self._p_easy + nudge_easy))

    # -- estimating and picking ----------------------------------------------------------
    def _beliefs(self, record: Record | None, step: int) -> tuple[float, float]:
        """``(pass rate, informative probability)`` of a prompt with ``record`` at ``step``."""
        config = self._config
        weight = 0.0 if record is None else self._decay(step - record.step)
        factor = self._decay(step - self._pool.step)
        if config.evidence == "admissions":
            alpha, beta = config.prior or self._pool.admission_prior(factor)
            if record is not None:
                alpha, beta = alpha + weight * record.admitted, beta + weight * record.rejected
            return (math.nan if record is None else record.pass_rate()), alpha / (alpha + beta)
        successes = 0.0 if record is None else weight * record.successes
        failures = 0.0 if record is None else weight * record.failures
        alpha, beta = config.prior or self._pool.fitted_prior(factor)
        alpha, beta = alpha + successes, beta + failures
        return alpha / (alpha + beta), informative_chance(alpha, beta, config.group_size)

    def _judge(self, key: str, step: int) -> tuple[float, float, float]:
        """``(pass rate, informative probability, keep probability)`` of one prompt (under the lock)."""
        record = self._records.get(key)
        mean, informative = self._beliefs(record, step)
        if self._config.mode == "greso":
            keep = 1.0 if record is None else record.greso_keep(self._p_easy, self._p_hard, GRESO_FLOOR)
        else:
            keep = 1.0 if informative >= self._config.skip_below else self._config.exploration
        return mean, informative, keep

    def estimate(self, prompt_id: PromptId, *, step: int) -> PromptEstimate:
        """What the history believes about ``prompt_id`` at ``step`` (evidence of earlier steps)."""
        key, step = prompt_key(prompt_id), check_count(step, "step")
        with self._lock:
            self._fold(step)
            mean, informative, keep = self._judge(key, step)
            record = self._records.get(key)
            return PromptEstimate(
                prompt_id=prompt_id,
                groups=0 if record is None else record.groups,
                pass_rate=mean,
                informative_probability=informative,
                keep_probability=keep,
            )

    def pick(self, prompt_ids: Sequence[PromptId], *, step: int) -> PromptPicks:
        """
        Split candidate prompts into those to generate at ``step`` and those to skip.

        Each prompt is kept when a uniform number fixed by ``(seed, prompt id, step)``
        falls below its keep probability, so asking again within a step gives the same
        answer, every rank gives the same answer, and a restored history replays it.
        """
        keys, step = _prompt_keys(prompt_ids), check_count(step, "step")
        picked: list[PromptId] = []
        skipped: list[PromptId] = []
        probabilities: list[float] = []
        with self._lock:
            self._fold(step)
            for prompt_id, key in zip(prompt_ids, keys, strict=True):
                _, informative, keep = self._judge(key, step)
                if keep >= 1.0 or uniform_draw(self._config.seed, key, step) < keep:
                    picked.append(prompt_id)
                    probabilities.append(informative)
                else:
                    skipped.append(prompt_id)
        return PromptPicks(
            picked=tuple(picked), skipped=tuple(skipped), informative_probabilities=tuple(probabilities)
        )

    # -- persistence and distribution ------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot of everything that shapes later picks."""
        with self._lock:
            parts = HistoryParts(
                sequence=self._sequence,
                p_easy=self._p_easy,
                p_hard=self._p_hard,
                pool=self._pool,
                folded=self._folded,
                digest=self._digest,
                records=self._records,
                pending=self._pending,
            )
            return history_state(self._config, self._rank, parts)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PromptHistory:
        """
        Restore :meth:`to_dict` output exactly (its config included).

        Raises:
            CheckpointError: the state is malformed, contradictory, or of another format.
        """
        config, rank, parts = restore_history(data)
        history = cls(config, rank=rank)
        history._restore(parts)
        return history

    def merge(self, *others: PromptHistory | Mapping[str, Any]) -> None:
        """
        Add the observations of other ranks' histories (objects or :meth:`to_dict` output).

        Merging is a union of observations: idempotent and order-free, so every rank may
        merge every other rank's state after a step and all end up identical.

        Raises:
            ValueError: a history has another config, or has folded different evidence
                (merge after every step, before the next pick), or claims this rank's
                observations with different contents.
        """
        histories = [
            other if isinstance(other, PromptHistory) else PromptHistory.from_dict(other) for other in others
        ]
        with self._lock:
            for other in histories:
                if other.config != self._config:
                    msg = "cannot merge a PromptHistory built with a different config"
                    raise ValueError(msg)
                if (other._folded, other._digest) != (self._folded, self._digest):
                    msg = (
                        f"cannot merge histories that folded different evidence ({other._folded} vs "
                        f"{self._folded} groups): merge every rank's state after each step, "
                        "before the next pick"
                    )
                    raise ValueError(msg)
                for identity, observation in other._pending.items():
                    mine = self._pending.get(identity)
                    if mine is not None and mine != observation:
                        msg = (
                            f"two histories hold different observations as rank {identity[0]}, "
                            f"number {identity[1]}"
                        )
                        raise ValueError(msg)
                    self._pending[identity] = observation
