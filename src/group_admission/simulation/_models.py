"""Task models (how rewards and response lengths are drawn) and the simulation config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt

from .._loading import MappingConfig, from_mapping
from .._validation import (
    check_ge,
    check_gt,
    check_range,
    describe,
    int_field,
    real_field,
)
from ._limits import (
    MAX_RESPONSE_TOKENS,
    MAX_ROUNDS,
    MAX_STEPS,
    MAX_TARGET_SAMPLES,
    check_at_most,
    check_samples,
    check_step_samples,
)

__all__ = [
    "MAX_RESPONSE_TOKENS",
    "TASK_MODELS",
    "BinaryTaskModel",
    "CompositeTaskModel",
    "EngineModel",
    "ResponseLengthModel",
    "SimulationConfig",
    "TaskModel",
    "task_model_from_mapping",
]

FloatArray = npt.NDArray[np.float64]


#: The coefficients of variation that the Gamma draw resolves: below the low end, 1 / cv^2
#: overflows; above the high end, almost every response is one token long.
_CV_RANGE = (1e-6, 10.0)


_check_at_most_tokens = check_at_most(
    MAX_RESPONSE_TOKENS, "tokens", "the longest response a simulation accepts"
)
#: Shaping terms are rewards: at most a million in magnitude, on a grid no finer than 1e-9
#: (below about 1e-308, dividing by the grid step overflows and every reward is NaN).
_SHAPING_RANGE = (-1e6, 1e6)
_RESOLUTION_RANGE = (1e-9, 1e6)


def _check_cv(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    low, high = _CV_RANGE
    if value != 0.0 and not low <= value <= high:
        msg = f"'{attribute.name}' must be 0 or in [{low:g}, {high:g}] (got {value!r})"
        raise ValueError(msg)


@attrs.frozen(kw_only=True)
class BinaryTaskModel:
    """
    Pass/fail rewards: each task has a pass rate drawn from ``Beta(alpha, beta)``.

    Every member of a group of that task independently scores 1 with the task's pass
    rate and 0 otherwise. The reward has one component, ``"outcome"``.

    Args:
        alpha: First shape parameter of the Beta distribution of pass rates (> 0).
        beta: Second shape parameter (> 0). The mean pass rate is ``alpha / (alpha + beta)``;
            shapes below 1 pile tasks up near 0 and 1 (many all-wrong and all-right groups).

    .. versionadded:: 0.1.0
    """

    kind: ClassVar[str] = "binary"
    components: ClassVar[tuple[str, ...]] = ("outcome",)

    alpha: float = real_field(1.0, check_gt(0))
    beta: float = real_field(1.0, check_gt(0))

    @property
    def mean_pass_rate(self) -> float:
        """The mean of the pass-rate distribution, ``alpha / (alpha + beta)``."""
        return self.alpha / (self.alpha + self.beta)

    def draw_tasks(self, rng: np.random.Generator, count: int) -> FloatArray:
        """Draw ``count`` tasks: shape ``(count, 1)``, the pass rate."""
        rates: FloatArray = rng.beta(self.alpha, self.beta, size=(count, 1))
        return rates

    def draw_rewards(
        self, rng: np.random.Generator, tasks: FloatArray, group_size: int
    ) -> dict[str, FloatArray]:
        """Draw one group of ``group_size`` rewards per task: ``{"outcome": (G, N)}``."""
        outcome = (rng.random((len(tasks), group_size)) < tasks[:, :1]).astype(np.float64)
        return {"outcome": outcome}

    def to_dict(self) -> dict[str, Any]:
        """The model as a plain dict, with its ``kind``."""
        return {"kind": self.kind, **attrs.asdict(self)}


@attrs.frozen(kw_only=True)
class CompositeTaskModel:
    """
    An outcome reward plus a shaping term on a grid, so that near-ties occur.

    The outcome is drawn as in :class:`BinaryTaskModel`. Each member also gets a shaping
    term (think brevity or format credit) drawn from ``Normal(shaping_mean,
    shaping_spread)`` and rounded to a multiple of ``shaping_resolution``. Within an
    all-wrong (or all-right) group the only spread is the shaping term's, so a small
    spread on a coarse grid produces exact ties and near-ties: with a spread of 0.005 on
    a 0.01 grid most such groups differ by 0 or 0.01. The reward has two components,
    ``"outcome"`` and ``"shaping"``; gate on ``["outcome"]`` to ignore the shaping term.

    Only a share of the tasks may have a shaping term (``shaping_task_share``): the
    others are all-or-nothing (their shaping term is exactly ``shaping_mean``), so their
    all-wrong and all-right groups are exact ties, task after task.

    Args:
        alpha: First Beta shape parameter of the task pass rates (> 0).
        beta: Second Beta shape parameter (> 0).
        shaping_mean: Mean of the shaping term, in ``[-1e6, 1e6]``.
        shaping_spread: Standard deviation of the shaping term, in ``[0, 1e6]`` (0 makes
            it constant).
        shaping_resolution: Grid step of the shaping term, in ``[1e-9, 1e6]``.
        shaping_task_share: Share of tasks whose reward has a shaping term, in ``[0, 1]``.

    .. versionadded:: 0.1.0
    """

    kind: ClassVar[str] = "composite"
    components: ClassVar[tuple[str, ...]] = ("outcome", "shaping")

    alpha: float = real_field(1.0, check_gt(0))
    beta: float = real_field(1.0, check_gt(0))
    shaping_mean: float = real_field(0.0, check_range(*_SHAPING_RANGE))
    shaping_spread: float = real_field(0.01, check_ge(0), check_range(0, _SHAPING_RANGE[1]))
    shaping_resolution: float = real_field(0.01, check_gt(0), check_range(*_RESOLUTION_RANGE))
    shaping_task_share: float = real_field(1.0, check_range(0, 1))

    @property
    def mean_pass_rate(self) -> float:
        """The mean of the pass-rate distribution, ``alpha / (alpha + beta)``."""
        return self.alpha / (self.alpha + self.beta)

    def draw_tasks(self, rng: np.random.Generator, count: int) -> FloatArray:
        """Draw ``count`` tasks: shape ``(count, 2)``, the pass rate and the shaping spread."""
        tasks = np.empty((count, 2))
        tasks[:, 0] = rng.beta(self.alpha, self.beta, size=count)
        shaped = rng.random(count) < self.shaping_task_share
        tasks[:, 1] = np.where(shaped, self.shaping_spread, 0.0)
        return tasks

    def draw_rewards(
        self, rng: np.random.Generator, tasks: FloatArray, group_size: int
    ) -> dict[str, FloatArray]:
        """Draw one group per task: ``{"outcome": (G, N), "shaping": (G, N)}``."""
        shape = (len(tasks), group_size)
        outcome = (rng.random(shape) < tasks[:, :1]).astype(np.float64)
        raw = self.shaping_mean + tasks[:, 1:2] * rng.standard_normal(shape)
        shaping = np.round(raw / self.shaping_resolution) * self.shaping_resolution
        return {"outcome": outcome, "shaping": shaping}

    def to_dict(self) -> dict[str, Any]:
        """The model as a plain dict, with its ``kind``."""
        return {"kind": self.kind, **attrs.asdict(self)}


TaskModel = BinaryTaskModel | CompositeTaskModel
#: Every task model by its ``kind``.
TASK_MODELS: dict[str, type[BinaryTaskModel] | type[CompositeTaskModel]] = {
    "binary": BinaryTaskModel,
    "composite": CompositeTaskModel,
}


def task_model_from_mapping(mapping: Mapping[str, Any]) -> TaskModel:
    """
    Build a task model from a mapping with a ``kind`` (``binary`` or ``composite``).

    Raises:
        ValueError: the kind or a key is unknown, or a value is out of range.
        TypeError: the mapping or a value has the wrong type.

    .. versionadded:: 0.1.0
    """
    if not isinstance(mapping, Mapping):
        msg = f"'tasks' must be a mapping with a 'kind' (got {describe(mapping)})"
        raise TypeError(msg)
    fields = dict(mapping)
    kind = fields.pop("kind", "binary")
    model = TASK_MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        msg = f"'tasks.kind' must be one of {sorted(TASK_MODELS)} (got {describe(kind)})"
        raise ValueError(msg)
    return from_mapping(model, fields, source=f"'tasks' ({kind})")


@attrs.frozen(kw_only=True)
class ResponseLengthModel:
    """
    Response lengths in tokens, for token budgets and for the order in which groups finish.

    Lengths follow a Gamma distribution with the given mean and coefficient of
    variation, rounded to whole tokens (at least 1) and cut at ``max_tokens``.

    Args:
        mean_tokens: Mean response length, in ``[1, MAX_RESPONSE_TOKENS]`` (ten million).
        cv: Coefficient of variation (std / mean): 0 gives every response the mean;
            otherwise in ``[1e-6, 10]``, the range the Gamma draw resolves.
        max_tokens: Truncation length, in ``[1, MAX_RESPONSE_TOKENS]`` (``None``: no
            truncation).

    .. versionadded:: 0.1.0
    """

    mean_tokens: float = real_field(512.0, check_ge(1), _check_at_most_tokens)
    cv: float = real_field(0.5, check_ge(0), _check_cv)
    max_tokens: int | None = int_field(None, check_ge(1), _check_at_most_tokens, optional=True)

    def draw(self, rng: np.random.Generator, shape: tuple[int, int]) -> npt.NDArray[np.int64]:
        """Draw response lengths of the given shape."""
        if self.cv == 0.0:
            lengths = np.full(shape, self.mean_tokens)
        else:
            k = 1.0 / (self.cv * self.cv)
            lengths = rng.gamma(k, self.mean_tokens / k, size=shape)
        tokens = np.maximum(np.rint(lengths), 1).astype(np.int64)
        if self.max_tokens is not None:
            np.minimum(tokens, self.max_tokens, out=tokens)
        drawn: npt.NDArray[np.int64] = tokens
        return drawn

    def to_dict(self) -> dict[str, Any]:
        """The model as a plain dict."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class EngineModel:
    """
    How the rollout engine's speed depends on how much it decodes at once.

    The simulator advances every running response by one token per decoding step. With
    ``half_speed_sequences`` unset, a step takes one time unit whatever runs beside it
    (unlimited parallel generation). With it set, a step that decodes ``n`` sequences
    takes ``1 + n / half_speed_sequences`` units: the weights are read once per step and
    every running sequence adds its own KV-cache reads and compute, so at
    ``half_speed_sequences`` sequences each one decodes at half its solo speed. A step's
    time is then its decoding steps plus its generated tokens over
    ``half_speed_sequences``, and launching groups that get discarded slows the ones
    that are kept.

    Args:
        half_speed_sequences: Sequences decoded at once at which each runs at half its
            solo speed, at least 1 (``None``: unlimited parallel generation). A 7B model
            with 2k-token contexts reaches it at roughly 50-150 sequences per GPU.

    .. versionadded:: 0.2.0
    """

    half_speed_sequences: int | None = int_field(None, check_ge(1), optional=True)

    def wall_time(self, decoding_steps: float, tokens: int) -> float:
        """The time of a step that took ``decoding_steps`` steps to generate ``tokens`` tokens."""
        if self.half_speed_sequences is None:
            return decoding_steps
        return decoding_steps + tokens / self.half_speed_sequences

    def to_dict(self) -> dict[str, Any]:
        """The model as a plain dict."""
        return attrs.asdict(self)


def _as_tasks(value: Any) -> Any:
    return task_model_from_mapping(value) if isinstance(value, Mapping) else value


def _as_lengths(value: Any) -> Any:
    if isinstance(value, Mapping):
        return from_mapping(ResponseLengthModel, value, source="'lengths'")
    return value


def _as_engine(value: Any) -> Any:
    if isinstance(value, Mapping):
        return from_mapping(EngineModel, value, source="'engine'")
    return value


def _check_instance(kind: type | tuple[type, ...], label: str) -> Any:
    def _check(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, kind):
            msg = f"'{attribute.name}' must be {label} (got {describe(value)})"
            raise TypeError(msg)

    return _check


check_steps = check_at_most(MAX_STEPS, "steps", "the most a simulation runs")
check_rounds = check_at_most(MAX_ROUNDS, "rounds", "the most one simulated step runs")


def check_target(target_groups: int, group_size: int, safety_max_rounds: int) -> None:
    """Require a step's target and its rounds up to the safety limit to fit the bounds."""
    target = {"target_groups": target_groups, "group_size": group_size}
    check_samples(target, MAX_TARGET_SAMPLES, "the most a simulated step's target holds")
    # slime, ROLL and the oracle refill about the target each round until the safety limit.
    check_step_samples(target, safety_max_rounds)


@attrs.frozen(kw_only=True)
class SimulationConfig(MappingConfig):
    """
    What to simulate: the tasks, the group shape, the target and how many steps.

    Args:
        tasks: The task model (:class:`BinaryTaskModel` or :class:`CompositeTaskModel`,
            or a mapping with a ``kind``).
        lengths: The response-length model (or a mapping of its fields).
        engine: How decoding slows down as more sequences run at once
            (:class:`EngineModel` or a mapping; default: unlimited parallel generation).
        group_size: Completions per group (``n_samples_per_prompt``, ``num_generations``).
        target_groups: Groups each step wants to train on (slime's ``rollout_batch_size``,
            DAPO's ``train_batch_size``; the tasks per round of the per-task strategy);
            ``target_groups x group_size`` is at most a million samples.
        steps: Training steps to simulate, at most 100,000.
        seed: Seed of the random streams; the same seed gives the same result.
        failure_rate: Probability that a group's rollout fails (the group is rejected
            as ``external``, like a technical failure in slime).
        safety_max_rounds: Safety limit on the rounds (waves, generation batches,
            launches) of one step, for every strategy: it stops those with no cap of their
            own (slime, ROLL, uncapped DAPO, the oracle) and those whose budget allows
            more rounds. A step that reaches it ends short and is counted in
            ``safety_limit_hits``. At most 10,000, and ``target_groups x group_size x
            safety_max_rounds`` at most a hundred million samples.

    .. versionadded:: 0.1.0
    """

    YAML_KEY = "simulation"
    tasks: TaskModel = attrs.field(
        factory=BinaryTaskModel,
        converter=_as_tasks,
        validator=_check_instance((BinaryTaskModel, CompositeTaskModel), "a task model or a mapping"),
    )
    lengths: ResponseLengthModel = attrs.field(
        factory=ResponseLengthModel,
        converter=_as_lengths,
        validator=_check_instance(ResponseLengthModel, "a ResponseLengthModel or a mapping"),
    )
    engine: EngineModel = attrs.field(
        factory=EngineModel,
        converter=_as_engine,
        validator=_check_instance(EngineModel, "an EngineModel or a mapping"),
    )
    group_size: int = int_field(8, check_ge(1))
    target_groups: int = int_field(16, check_ge(1))
    steps: int = int_field(100, check_ge(1), check_steps)
    seed: int = int_field(0, check_ge(0))
    failure_rate: float = real_field(0.0, check_range(0, 1))
    safety_max_rounds: int = int_field(100, check_ge(1), check_rounds)

    def __attrs_post_init__(self) -> None:
        check_target(self.target_groups, self.group_size, self.safety_max_rounds)

    @failure_rate.validator
    def _check_failure_rate(self, attribute: attrs.Attribute[float], value: float) -> None:
        if value >= 1.0:
            msg = f"'{attribute.name}' must be < 1, or no group could ever be admitted (got {value!r})"
            raise ValueError(msg)

    def to_dict(self) -> dict[str, Any]:
        """The config as a plain, YAML- and JSON-safe dict."""
        data = attrs.asdict(self, recurse=False)
        data["tasks"] = self.tasks.to_dict()
        data["lengths"] = self.lengths.to_dict()
        data["engine"] = self.engine.to_dict()
        return data
