"""
A finite prompt pool revisited epoch after epoch, with pass rates that drift as the model learns.

``simulate`` draws fresh tasks every step, so no strategy can learn anything about a task
before it generates it. A real run revisits a finite dataset, and the model learns: some
prompts become solved, a few hard ones become solvable. ``simulate_pool`` models that, so
that strategies that remember prompts (a :class:`PromptHistory`, GRESO's rule) can be
compared with ones that do not, on the same draws.

Common random numbers: the group a prompt gets at a step is fixed by ``(seed, step,
prompt)``, whichever strategy generates it, so a prompt a strategy skipped can be judged
as it would have been (was the skip right?), and strategies differ only by what they do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from .._decision import BatchAdmissionResult
from .._history import PromptId
from .._loading import MappingConfig, from_mapping
from .._policy import GroupAdmissionPolicy
from .._session import AdmissionSession
from .._validation import (
    check_ge,
    check_range,
    int_field,
    real_field,
)
from ._limits import MAX_POOL_SAMPLES, check_samples
from ._models import ResponseLengthModel, check_rounds, check_steps, check_target

__all__ = ["DIFFICULTY_BINS", "PoolContext", "PromptPool", "PromptPoolConfig", "difficulty_bin"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Difficulty bins by the true pass rate when a prompt was met: (label, upper edge).
DIFFICULTY_BINS: tuple[tuple[str, float], ...] = (
    ("unsolved (<0.02)", 0.02),
    ("hard (0.02-0.2)", 0.2),
    ("medium (0.2-0.8)", 0.8),
    ("easy (0.8-0.98)", 0.98),
    ("solved (>=0.98)", float("inf")),
)
_EDGES = np.array([edge for _, edge in DIFFICULTY_BINS[:-1]])
#: Epoch orders a pool keeps (each is recomputed from its seed when needed again).
_ORDERS_KEPT = 16


def difficulty_bin(rates: FloatArray) -> IntArray:
    """The index in :data:`DIFFICULTY_BINS` of each pass rate."""
    bins: IntArray = np.searchsorted(_EDGES, rates, side="right").astype(np.int64)
    return bins


def _as_lengths(value: Any) -> Any:
    return (
        from_mapping(ResponseLengthModel, value, source="'lengths'") if isinstance(value, Mapping) else value
    )


def _check_lengths(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, ResponseLengthModel):
        msg = f"'{attribute.name}' must be a ResponseLengthModel or a mapping (got {value!r})"
        raise TypeError(msg)


@attrs.frozen(kw_only=True)
class PromptPoolConfig(MappingConfig):
    """
    A prompt pool and the run over it.

    Each prompt has an initial logit pass rate ``l ~ Normal(logit_mean, logit_std)``. A
    ``learnable_share`` of the prompts improves as training goes on: its logit grows by
    ``g`` per 100 steps, ``g ~ Exponential(learning_rate)``; the others stay where they
    are. So the pass rate of prompt ``i`` at step ``s`` is
    ``sigmoid(l_i + g_i * s / 100)``: easy learnable prompts become solved (all-right
    groups), and a few unsolvable ones become solvable. Each epoch visits the pool in a
    new shuffled order.

    Args:
        size: Prompts in the pool; ``size x group_size`` is at most ten million samples
            (each step draws a group of every prompt).
        group_size: Completions per group.
        target_groups: Informative groups each step trains on; ``target_groups x
            group_size`` is at most a million samples.
        steps: Training steps, at most 100,000.
        seed: Seed of every draw.
        logit_mean: Mean of the initial logit pass rates.
        logit_std: Their spread (a large spread piles prompts up near 0 and 1).
        learnable_share: Share of prompts the model learns, in ``[0, 1]``.
        learning_rate: Mean logit gain per 100 steps of a learnable prompt.
        lengths: Response lengths (a :class:`ResponseLengthModel` or mapping).
        safety_max_rounds: Safety limit on the rounds of one step, at most 10,000, for a
            strategy whose budget allows more (a step that reaches it ends short and is
            counted in ``safety_limit_hits``).

    .. versionadded:: 0.2.0
    """

    YAML_KEY = "pool"
    size: int = int_field(512, check_ge(1))
    group_size: int = int_field(8, check_ge(1))
    target_groups: int = int_field(16, check_ge(1))
    steps: int = int_field(300, check_ge(1), check_steps)
    seed: int = int_field(0, check_ge(0))
    logit_mean: float = real_field(-1.0)
    logit_std: float = real_field(4.0, check_ge(0))
    learnable_share: float = real_field(0.5, check_range(0, 1))
    learning_rate: float = real_field(2.0, check_ge(0))
    lengths: ResponseLengthModel = attrs.field(
        factory=ResponseLengthModel, converter=_as_lengths, validator=_check_lengths
    )
    safety_max_rounds: int = int_field(100, check_ge(1), check_rounds)

    def __attrs_post_init__(self) -> None:
        check_target(self.target_groups, self.group_size, self.safety_max_rounds)
        why = "the most a simulated pool draws per step (a group of every prompt)"
        check_samples({"size": self.size, "group_size": self.group_size}, MAX_POOL_SAMPLES, why)

    def to_dict(self) -> dict[str, Any]:
        """The config as a plain, YAML- and JSON-safe dict."""
        data = attrs.asdict(self, recurse=False)
        data["lengths"] = self.lengths.to_dict()
        return data


class PromptPool:
    """
    The pool's true pass rates, epoch orders and groups: shared by every strategy of a run.

    Args:
        config: The pool.

    .. versionadded:: 0.2.0
    """

    def __init__(self, config: PromptPoolConfig) -> None:
        self.config = config
        rng = np.random.default_rng(np.random.SeedSequence([config.seed, 0]))
        self._logits: FloatArray = rng.normal(config.logit_mean, config.logit_std, config.size)
        learnable = rng.random(config.size) < config.learnable_share
        gains = rng.exponential(config.learning_rate, config.size) if config.learning_rate > 0 else 0.0
        self._gains: FloatArray = np.where(learnable, gains, 0.0) / 100.0
        self._orders: dict[int, IntArray] = {}
        self._steps: dict[int, tuple[FloatArray, IntArray]] = {}

    def rates(self, step: int) -> FloatArray:
        """Every prompt's true pass rate at ``step``."""
        with np.errstate(over="ignore"):  # a logit beyond +-709: exp overflows, the rate is 0 or 1
            rates: FloatArray = 1.0 / (1.0 + np.exp(-(self._logits + self._gains * step)))
        return rates

    def order(self, epoch: int) -> IntArray:
        """The order in which ``epoch`` visits the pool."""
        if epoch not in self._orders:
            # Strategies are a few epochs apart at most: keep the latest orders, not every one.
            if len(self._orders) >= _ORDERS_KEPT:
                del self._orders[min(self._orders)]
            rng = np.random.default_rng(np.random.SeedSequence([self.config.seed, 1, epoch]))
            self._orders[epoch] = rng.permutation(self.config.size).astype(np.int64)
        return self._orders[epoch]

    def _draws(self, step: int) -> tuple[FloatArray, IntArray]:
        if step not in self._steps:
            config = self.config
            rng = np.random.default_rng(np.random.SeedSequence([config.seed, 2, step]))
            uniforms = rng.random((config.size, config.group_size))
            self._steps = {step: (uniforms, config.lengths.draw(rng, uniforms.shape))}
        return self._steps[step]

    def groups(self, step: int, prompts: IntArray, visits: IntArray) -> tuple[FloatArray, IntArray]:
        """
        The rewards and response lengths of one group of each prompt at ``step``.

        ``visits[j]`` counts earlier groups of ``prompts[j]`` in this step: the first group
        of a prompt in a step comes from the step's shared draws, so it is the same for
        every strategy; a second one of the same step gets draws of its own.
        """
        uniforms, lengths = self._draws(step)
        uniforms, lengths = uniforms[prompts].copy(), lengths[prompts].copy()
        for row in np.flatnonzero(visits > 0).tolist():
            seed = [self.config.seed, 3, step, int(prompts[row]), int(visits[row])]
            rng = np.random.default_rng(np.random.SeedSequence(seed))
            uniforms[row] = rng.random(self.config.group_size)
            lengths[row] = self.config.lengths.draw(rng, (1, self.config.group_size))[0]
        rewards = (uniforms < self.rates(step)[prompts, None]).astype(np.float64)
        return rewards, lengths


class PoolContext:
    """
    What a pool strategy sees during one step: the prompts in epoch order, the policy, the pool.

    Strategies take prompts with :meth:`next_prompts` (returning unused ones with
    :meth:`put_back`), generate and judge groups with :meth:`generate`, and report the
    prompts they skipped with :meth:`skip`; the context keeps the step's tally.

    Attributes:
        step: The step index.
        target_groups: Informative groups the step trains on.
        group_size: Completions per group.
        safety_max_rounds: The rounds a step may run at most.
        policy: The admission policy.
        memory: A dict a strategy may use to carry state to its next step.

    .. versionadded:: 0.2.0
    """

    def __init__(
        self, pool: PromptPool, policy: GroupAdmissionPolicy, step: int, cursor: dict[str, Any]
    ) -> None:
        self.pool = pool
        self.step = step
        self.target_groups = pool.config.target_groups
        self.group_size = pool.config.group_size
        self.safety_max_rounds = pool.config.safety_max_rounds
        self.policy = policy
        self.memory: dict[str, Any] = cursor.setdefault("memory", {})
        self._cursor = cursor
        cursor.setdefault("epoch", 0)
        cursor.setdefault("position", 0)
        cursor.setdefault("front", [])
        self._visits: dict[int, int] = {}
        bins = len(DIFFICULTY_BINS)
        self.tally: dict[str, Any] = {
            "groups": 0,
            "tokens": 0,
            "rounds": 0,
            "time": 0.0,
            "admitted": 0,
            "trained": 0,
            "skipped": 0,
            "wrongly_skipped": 0,
            "generated_by_bin": np.zeros(bins, dtype=np.int64),
            "skipped_by_bin": np.zeros(bins, dtype=np.int64),
            "wrongly_skipped_by_bin": np.zeros(bins, dtype=np.int64),
            "trained_by_bin": np.zeros(bins, dtype=np.int64),
        }

    @property
    def more_rounds(self) -> bool:
        """Whether the step may run another round (its safety limit is not reached)."""
        return int(self.tally["rounds"]) < self.safety_max_rounds

    @property
    def safety_limit_hit(self) -> bool:
        """Whether the step ran its last allowed round short of its target."""
        return not self.more_rounds and int(self.tally["trained"]) < self.target_groups

    @property
    def epoch(self) -> int:
        """The epoch the next prompt comes from."""
        return int(self._cursor["epoch"])

    def rates(self) -> FloatArray:
        """Every prompt's true pass rate at this step (for oracles and reports only)."""
        return self.pool.rates(self.step)

    def next_prompts(self, count: int) -> list[int]:
        """The next ``count`` prompts: those put back first, then the epoch order."""
        front: list[int] = self._cursor["front"]
        taken = front[:count]
        del front[:count]
        size = self.pool.config.size
        while len(taken) < count:
            order = self.pool.order(self._cursor["epoch"])
            position = self._cursor["position"]
            chunk = order[position : position + count - len(taken)].tolist()
            taken.extend(chunk)
            self._cursor["position"] = position + len(chunk)
            if self._cursor["position"] >= size:
                self._cursor["epoch"] += 1
                self._cursor["position"] = 0
        return taken

    def put_back(self, prompts: Sequence[PromptId]) -> None:
        """Return prompts taken but not used; they come first next time."""
        self._cursor["front"][:0] = [int(p) for p in prompts]

    def _draw(self, prompts: IntArray) -> tuple[FloatArray, IntArray]:
        visits = np.array([self._visits.get(int(p), 0) for p in prompts.tolist()], dtype=np.int64)
        return self.pool.groups(self.step, prompts, visits)

    def generate(self, prompts: Sequence[PromptId], session: AdmissionSession) -> BatchAdmissionResult:
        """Generate one group of each prompt (one round), judge it with ``session``; count the cost."""
        index = np.array([int(p) for p in prompts], dtype=np.int64)
        rewards, lengths = self._draw(index)
        result = session.judge_batch(rewards, generated_tokens=int(lengths.sum())).result
        for prompt in index.tolist():
            self._visits[prompt] = self._visits.get(prompt, 0) + 1
        tally, rates = self.tally, self.rates()
        bins = difficulty_bin(rates[index])
        tally["groups"] += len(index)
        tally["tokens"] += int(lengths.sum())
        tally["rounds"] += 1
        tally["time"] += float(lengths.max()) if len(index) else 0.0
        admitted = result.admitted
        tally["admitted"] += int(admitted.sum())
        np.add.at(tally["generated_by_bin"], bins, 1)
        # The first admitted groups up to the target are the ones trained on.
        room = max(0, self.target_groups - tally["trained"])
        trained = np.flatnonzero(admitted)[:room]
        tally["trained"] += len(trained)
        np.add.at(tally["trained_by_bin"], bins[trained], 1)
        return result

    def skip(self, prompts: Sequence[PromptId]) -> None:
        """Count prompts skipped at this step, and judge the group each would have got."""
        if not prompts:
            return
        index = np.array([int(p) for p in prompts], dtype=np.int64)
        rewards, _ = self._draw(index)
        wrong = self.policy.evaluate_batch(rewards).admitted
        bins = difficulty_bin(self.rates()[index])
        self.tally["skipped"] += len(index)
        self.tally["wrongly_skipped"] += int(wrong.sum())
        np.add.at(self.tally["skipped_by_bin"], bins, 1)
        np.add.at(self.tally["wrongly_skipped_by_bin"], bins[wrong], 1)
