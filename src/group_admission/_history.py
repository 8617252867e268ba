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
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ._decision import BatchAdmissionResult, GroupAdmissionDecision
from ._history_config import PromptHistoryConfig
from ._history_evidence import (
    GRESO_BOUNDS,
    GRESO_FLOOR,
    GRESO_NUDGE,
    Decays,
    Floats,
    Observation,
    greso_flags,
    informative_chances,
)
from ._history_ids import INT64_MAX, PromptId, check_prompt_id, check_prompt_ids, key_ranks, prompt_key
from ._history_state import HistoryParts, history_state, restore_history
from ._loading import coerce_config
from ._reasons import RejectionReason
from ._validation import check_count, describe

__all__ = [
    "PromptEstimate",
    "PromptHistory",
    "PromptId",
    "PromptPicks",
    "SkipReport",
    "prompt_key",
    "uniform_draw",
]


def _index(value: object, name: str) -> int:
    """A step or a rank: an integer in ``[0, 2**63 - 1]``."""
    number = check_count(value, name)
    if number > INT64_MAX:
        msg = f"'{name}' must be <= 2**63 - 1 (got {describe(number)})"
        raise ValueError(msg)
    return number


def uniform_draw(seed: int, key: str, step: int) -> float:
    """A uniform number in ``[0, 1)`` fixed by ``(seed, prompt, step)``: the same on every rank."""
    digest = hashlib.blake2b(f"{seed}\x1f{step}\x1f{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


@attrs.frozen(kw_only=True)
class PromptEstimate:
    """
    What a :class:`PromptHistory` believes about one prompt at one step.

    Attributes:
        prompt_id: The prompt (its canonical id: a plain ``str`` or ``int``).
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
class SkipReport:
    """
    What skipping has cost, measured on the history's re-checks (``PromptHistory.skip_report``).

    A re-check is a group of a prompt the history would have skipped at its step and
    generated anyway through the exploration floor: a random sample of the skipped prompts.

    Attributes:
        rechecks: Re-checked groups (decayed like the evidence, so a weight, not a count).
        rechecks_informative: Those that were informative: hard (or easy) prompts that
            skipping would have starved of a useful group.
        wrong_skip_share: The estimated share of skipped prompts whose group would have been
            informative (re-checks, plus a prior at ``max_wrong_skip_share``).
        skip_below: The threshold the next picks skip below (``skip_below``, shrunk while the
            estimate exceeds ``max_wrong_skip_share``).

    .. versionadded:: 0.2.0
    """

    rechecks: float
    rechecks_informative: float
    wrong_skip_share: float | None
    skip_below: float


@attrs.frozen(kw_only=True)
class PromptPicks:
    """
    The prompts :meth:`PromptHistory.pick` keeps and skips, each in the order given.

    Attributes:
        picked: The prompts to generate (canonical ids: a numpy integer given comes back
            as the ``int`` of its value).
        skipped: The prompts skipped this step.
        informative_probabilities: The informative probability of each picked prompt.

    .. versionadded:: 0.2.0
    """

    picked: tuple[PromptId, ...]
    skipped: tuple[PromptId, ...]
    informative_probabilities: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot (plain ``str`` and ``int`` ids, plain floats)."""
        return {
            "picked": check_prompt_ids(self.picked, "picked"),
            "skipped": check_prompt_ids(self.skipped, "skipped"),
            "informative_probabilities": [float(q) for q in self.informative_probabilities],
        }


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

    A prompt id is a ``str`` of valid Unicode or an ``int`` in the signed 64-bit range
    (numpy integers count as the ``int`` of their value; ``7`` and ``"7"`` are two
    prompts; a bool is none); every method that takes ids refuses anything else with a
    ``TypeError`` or ``ValueError`` naming it, and returns canonical ids. Steps and ranks
    are integers in ``[0, 2**63 - 1]``. The evidence is held in columns, so a step costs
    what it observes and picks, not what the history holds (a million prompts included).

    Args:
        config: The settings (a :class:`PromptHistoryConfig` or a mapping of its fields).
        rank: This process's rank; it tells the observations of different ranks apart
            when histories merge.

    .. versionadded:: 0.2.0
    """

    def __init__(self, config: PromptHistoryConfig | Mapping[str, Any], *, rank: int = 0) -> None:
        self._config = coerce_config(PromptHistoryConfig, config, optional=False)  # group_size has no default
        self._rank = _index(rank, "rank")
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
        prompt_id = check_prompt_id(prompt_id)
        external = decision.reason is RejectionReason.EXTERNAL
        self._add(
            [prompt_id],
            [decision.reward_mean],
            [decision.unique_rollouts],
            [decision.admitted],
            [external],
            step,
        )

    def observe_batch(
        self,
        prompt_ids: Sequence[PromptId],
        result: BatchAdmissionResult | Sequence[GroupAdmissionDecision],
        *,
        step: int,
    ) -> None:
        """Record judged groups, one per prompt id, from a batch result or a list of decisions."""
        ids = check_prompt_ids(prompt_ids)
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
        if len(ids) != len(means):
            msg = f"'prompt_ids' must name one prompt per group ({len(means)}) (got {len(ids)})"
            raise ValueError(msg)
        self._add(ids, means, sizes, admitted, external, step)

    def _add(
        self,
        ids: list[PromptId],
        means: list[float],
        sizes: list[int],
        admitted: list[bool],
        external: list[bool],
        step: int,
    ) -> None:
        step = _index(step, "step")
        low, high = self._config.reward_range
        width = high - low
        kept = [
            i
            for i, (m, n, f) in enumerate(zip(means, sizes, external, strict=True))
            if not f and n >= 1 and math.isfinite(m)
        ]
        rates = [min(1.0, max(0.0, (means[i] - low) / width)) for i in kept]
        successes = [rate * sizes[i] for rate, i in zip(rates, kept, strict=True)]
        failures = [(1.0 - rate) * sizes[i] for rate, i in zip(rates, kept, strict=True)]
        with self._lock:
            self._check_room(len(kept))
            first = self._sequence
            self._sequence += len(kept)
            self._pending.append(
                [ids[i] for i in kept],
                [step] * len(kept),
                [self._rank] * len(kept),
                list(range(first, self._sequence)),
                successes,
                failures,
                [bool(admitted[i]) for i in kept],
            )

    def _check_room(self, count: int) -> None:
        """Refuse observations beyond what a state can count: its groups are int64 (under the lock)."""
        if self._folded + len(self._pending) + count > INT64_MAX:
            msg = f"a PromptHistory holds at most 2**63 - 1 observations (got {count} more, past its last)"
            raise ValueError(msg)

    # -- folding -------------------------------------------------------------------
    def _fold(self, step: int) -> None:
        """Fold the pending observations of steps before ``step``, in canonical order (under the lock)."""
        ready = self._pending.split(step)
        if not len(ready):
            return
        # The canonical order: by step, then prompt key, then (rank, sequence), which is unique.
        identities = np.array([ready.step, ready.rank, ready.sequence], dtype=np.int64).T
        order = np.lexsort((identities[:, 2], identities[:, 1], key_ranks(ready.ids), identities[:, 0]))
        values = np.array([ready.successes, ready.failures, ready.admitted], dtype=np.float64).T[order]
        identities = identities[order]
        ids = [ready.ids[i] for i in order.tolist()]
        del ready
        bounds = np.flatnonzero(np.diff(identities[:, 0])) + 1
        for start, end in zip([0, *bounds.tolist()], [*bounds.tolist(), len(ids)], strict=True):
            self._fold_step(ids[start:end], values[start:end], identities[start:end])

    def _fold_step(self, ids: list[PromptId], values: Floats, identities: np.ndarray) -> None:
        """
        Fold one step's observations, sorted by prompt key: each prompt's in order, then the pool.

        ``values`` holds ``(successes, failures, admitted)`` rows, ``identities`` ``(step,
        rank, sequence)`` rows.
        """
        step, count = int(identities[0, 0]), len(ids)
        decays = Decays(self._config.half_life)
        rechecked = self._would_skip(ids, step)  # before this step's evidence: as the pick saw it
        rows = self._records.ensure(ids)
        # A prompt observed k times this step takes its k observations in k passes, in order.
        first = np.ones(count, dtype=bool)
        first[1:] = rows[1:] != rows[:-1]
        occurrence = np.arange(count) - np.flatnonzero(first)[np.cumsum(first) - 1]
        for turn in range(int(occurrence.max()) + 1):
            chosen = occurrence == turn
            self._records.add(rows[chosen], step, values[chosen], decays)
        self._pool.add_step(step, values, decays, rechecked)
        fingerprint = repr(ids).encode() + identities.tobytes() + values.tobytes()
        self._digest = hashlib.blake2b(self._digest.encode() + fingerprint, digest_size=16).hexdigest()
        self._folded += count
        # GRESO moves each keep base one notch per step towards its target share.
        easy_rows, hard_rows = greso_flags(values)
        easy, hard = int(np.count_nonzero(easy_rows)), int(np.count_nonzero(hard_rows))
        target = self._config.greso_target_zero_variance
        low, high = GRESO_BOUNDS
        nudge_hard = -GRESO_NUDGE if hard / count >= target * 2 / 3 else GRESO_NUDGE
        nudge_easy = -GRESO_NUDGE if easy / count >= target / 3 else GRESO_NUDGE
        self._p_hard = min(high, max(low, self._p_hard + nudge_hard))
        self._p_easy = min(high, max(low, self._p_easy + nudge_easy))

    # -- estimating and picking ----------------------------------------------------------
    def _beliefs(self, ids: list[PromptId], step: int) -> tuple[Floats, Floats, Floats, np.ndarray]:
        """Each prompt's ``(pass rate, informative and keep probability)`` and row (under the lock)."""
        config, decays = self._config, Decays(self._config.half_life)
        rows = self._records.lookup(ids)
        known = rows >= 0
        data = self._records.data[rows[known]]
        weight = np.zeros(len(ids))
        weight[known] = decays.of(step - data["step"])
        factor = decays.scalar(step - self._pool.step)

        def weighted(name: str) -> Floats:
            column = np.zeros(len(ids))
            column[known] = weight[known] * data[name]
            return column

        if config.evidence == "admissions":
            prior_alpha, prior_beta = config.prior or self._pool.admission_prior(factor)
            alpha, beta = prior_alpha + weighted("admitted"), prior_beta + weighted("rejected")
            informative = alpha / (alpha + beta)
            total = data["successes"] + data["failures"]
            mean = np.full(len(ids), np.nan)
            mean[known] = np.where(total > 0, data["successes"] / np.where(total > 0, total, 1.0), np.nan)
        else:
            prior_alpha, prior_beta = config.prior or self._pool.fitted_prior(factor)
            alpha, beta = prior_alpha + weighted("successes"), prior_beta + weighted("failures")
            mean, informative = alpha / (alpha + beta), informative_chances(alpha, beta, config.group_size)
        return mean, informative, self._keep(informative, data, known), rows

    def _threshold(self) -> float:
        """``skip_below``, shrunk in proportion while the measured wrong-skip share exceeds its bound."""
        config = self._config
        bound = config.max_wrong_skip_share
        if bound is None:
            return config.skip_below
        return config.skip_below * min(1.0, bound / self._pool.wrong_skip_share(bound))

    def _would_skip(self, ids: list[PromptId], step: int) -> Floats:
        """1.0 for each prompt ``"posterior"`` would skip at ``step`` on the evidence folded so far."""
        if self._config.mode != "posterior":
            return np.zeros(len(ids))
        _, informative, _, _ = self._beliefs(ids, step)
        return (informative < self._threshold()).astype(np.float64)

    def _keep(self, informative: Floats, data: np.ndarray, known: np.ndarray) -> Floats:
        """The keep probability of each prompt, by the config's rule."""
        config = self._config
        if config.mode != "greso":
            return np.where(informative >= self._threshold(), 1.0, config.exploration)
        # GRESO's max(p**k, floor) after k all-correct (or all-wrong) groups in a row, each k once.
        keep = np.ones(len(informative))
        easy, hard = data["easy"], data["hard"]
        kept = np.ones(len(easy))
        for streak, base in ((hard, self._p_hard), (easy, self._p_easy)):
            for length in np.unique(streak[streak > 0]).tolist():
                kept[streak == length] = max(base**length, GRESO_FLOOR)
        keep[known] = kept
        return keep

    def estimate(self, prompt_id: PromptId, *, step: int) -> PromptEstimate:
        """What the history believes about ``prompt_id`` at ``step`` (evidence of earlier steps)."""
        prompt_id, step = check_prompt_id(prompt_id), _index(step, "step")
        with self._lock:
            self._fold(step)
            mean, informative, keep, rows = self._beliefs([prompt_id], step)
            row = int(rows[0])
            return PromptEstimate(
                prompt_id=prompt_id,
                groups=0 if row < 0 else int(self._records.data["groups"][row]),
                pass_rate=float(mean[0]),
                informative_probability=float(informative[0]),
                keep_probability=float(keep[0]),
            )

    def skip_report(self, *, step: int) -> SkipReport:
        """What skipping has cost so far, on the evidence of steps before ``step`` (:class:`SkipReport`)."""
        step = _index(step, "step")
        with self._lock:
            self._fold(step)
            bound = self._config.max_wrong_skip_share
            pool = self._pool
            return SkipReport(
                rechecks=pool.rechecks,
                rechecks_informative=pool.rechecks_informative,
                wrong_skip_share=None if bound is None else pool.wrong_skip_share(bound),
                skip_below=self._threshold(),
            )

    def pick(self, prompt_ids: Sequence[PromptId], *, step: int) -> PromptPicks:
        """
        Split candidate prompts into those to generate at ``step`` and those to skip.

        Each prompt is kept when a uniform number fixed by ``(seed, prompt id, step)``
        falls below its keep probability, so asking again within a step gives the same
        answer, every rank gives the same answer, and a restored history replays it.
        ``prompt_ids`` is read once (a generator is fine); the picks hold canonical ids.
        """
        ids, step = check_prompt_ids(prompt_ids), _index(step, "step")
        with self._lock:
            self._fold(step)
            _, informative, keep, _ = self._beliefs(ids, step)
        seed, chances, keeps = self._config.seed, informative.tolist(), keep.tolist()
        picked: list[PromptId] = []
        skipped: list[PromptId] = []
        probabilities: list[float] = []
        for prompt_id, chance, odds in zip(ids, chances, keeps, strict=True):
            if odds >= 1.0 or uniform_draw(seed, prompt_key(prompt_id), step) < odds:
                picked.append(prompt_id)
                probabilities.append(chance)
            else:
                skipped.append(prompt_id)
        return PromptPicks(
            picked=tuple(picked), skipped=tuple(skipped), informative_probabilities=tuple(probabilities)
        )

    # -- persistence and distribution ------------------------------------------------------
    def _parts(self) -> HistoryParts:
        return HistoryParts(
            sequence=self._sequence,
            p_easy=self._p_easy,
            p_hard=self._p_hard,
            pool=self._pool,
            folded=self._folded,
            digest=self._digest,
            records=self._records,
            pending=self._pending,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe snapshot of everything that shapes later picks (version 2, columnar)."""
        with self._lock:
            return history_state(self._config, self._rank, self._parts())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PromptHistory:
        """
        Restore :meth:`to_dict` output exactly (its config included), of version 2 or 1.

        Raises:
            CheckpointError: the state is malformed, contradictory, or of another format.
        """
        config, rank, parts = restore_history(data)
        history = cls(config, rank=rank)
        history._restore(parts)
        return history

    def _merge_view(self) -> tuple[PromptHistoryConfig, int, str, list[Observation]]:
        with self._lock:
            return self._config, self._folded, self._digest, list(self._pending)

    def merge(self, *others: PromptHistory | Mapping[str, Any]) -> None:
        """
        Add the observations of other ranks' histories (objects or :meth:`to_dict` output).

        Merging is a union of observations: idempotent and order-free, so every rank may
        merge every other rank's state after a step and all end up identical. It is
        atomic: when one of ``others`` is refused, nothing is merged. A copy of this history's
        own rank may be merged too (a restored copy that observed more): its observations are
        added and this rank numbers its next ones after them.

        Raises:
            ValueError: a history has another config, or has folded different evidence
                (merge after every step, before the next pick), or claims an observation
                (rank, number) with different contents.
            CheckpointError: a state cannot be restored.
        """
        views = [
            (other if isinstance(other, PromptHistory) else PromptHistory.from_dict(other))._merge_view()
            for other in others
        ]
        with self._lock:
            union = {(o.rank, o.sequence): o for o in self._pending}
            added: list[Observation] = []
            for config, folded, digest, observations in views:
                if config != self._config:
                    msg = "cannot merge a PromptHistory built with a different config"
                    raise ValueError(msg)
                if (folded, digest) != (self._folded, self._digest):
                    msg = (
                        f"cannot merge histories that folded different evidence ({folded} vs "
                        f"{self._folded} groups): merge every rank's state after each step, "
                        "before the next pick"
                    )
                    raise ValueError(msg)
                for observation in observations:
                    identity = (observation.rank, observation.sequence)
                    mine = union.setdefault(identity, observation)
                    if mine is observation:
                        added.append(observation)
                    elif mine != observation:
                        msg = (
                            f"two histories hold different observations as rank {identity[0]}, "
                            f"number {identity[1]}"
                        )
                        raise ValueError(msg)
            self._check_room(len(added))
            self._pending.extend(added)
            # A copy of this rank that observed more: number this rank's next observation after
            # its, so that the merged history's own state restores and numbers stay unique.
            own = [o.sequence for o in added if o.rank == self._rank]
            self._sequence = max([self._sequence, *(number + 1 for number in own)])
