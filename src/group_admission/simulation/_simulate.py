"""``simulate``: run strategies side by side on the same simulated steps."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar

import attrs

from .._budget import SamplingBudgetConfig
from .._config import GroupAdmissionConfig
from .._loading import coerce_config, coerce_instance, from_mapping
from .._policy import GroupAdmissionPolicy
from .._presets import PRESETS
from .._validation import describe
from ._frameworks import DapoDynamicSampling, RollResampling, SlimeWaves
from ._models import SimulationConfig
from ._planning_strategies import StreamingLaunches
from ._results import NamedResults, StepOutcome, StrategyResult, aligned_table, summarize
from ._strategies import (
    ControllerResampling,
    NoFiltering,
    Oracle,
    PerTaskRetry,
    RagenTopP,
    Strategy,
    to_budget,
)
from ._stream import GroupStream, StepContext

__all__ = [
    "DEFAULT_POLICY",
    "STRATEGY_KINDS",
    "Prepared",
    "PreparedSimulation",
    "SimulationResult",
    "check_simulated_policy",
    "default_strategies",
    "prepare_simulation",
    "run_simulation",
    "simulate",
    "simulated_policy",
    "strategy_from_mapping",
]

#: Every strategy class by its ``kind``.
STRATEGY_KINDS: dict[str, type[Any]] = {
    cls.kind: cls
    for cls in (
        NoFiltering,
        SlimeWaves,
        DapoDynamicSampling,
        RollResampling,
        RagenTopP,
        PerTaskRetry,
        ControllerResampling,
        Oracle,
        StreamingLaunches,
    )
}
#: The policy used when none is given: the ``zero_std`` preset's, slime's and DAPO's zero-std
#: filter, the rule of the hosts whose resampling the simulator compares.
DEFAULT_POLICY = GroupAdmissionConfig.from_mapping(PRESETS["zero_std"]["policy"])

_TABLE = (
    ("strategy", "name", "{}"),
    ("initial", "initial_informative_rate", "{:.3f}"),
    ("final", "final_informative_rate", "{:.3f}"),
    ("recovery", "recovery_rate", "{:.3f}"),
    ("cost x", "sampling_cost_multiplier", "{:.3f}"),
    ("exhausted", "budget_exhaustion_rate", "{:.3f}"),
    ("rounds", "rounds_per_step", "{:.2f}"),
    ("max rounds", "max_rounds_per_step", "{}"),
    ("time (decoding steps)", "time_per_step", "{:.0f}"),
    ("groups", "generated_groups", "{}"),
    ("surplus", "surplus_groups", "{}"),
    ("samples", "generated_samples", "{}"),
    ("tokens", "generated_tokens", "{}"),
    ("errors", "error_steps", "{}"),
    ("safety hits", "safety_limit_hits", "{}"),
)


def strategy_from_mapping(
    spec: str | Mapping[str, Any], *, budget: SamplingBudgetConfig | Mapping[str, Any] | None = None
) -> Strategy:
    """
    Build a strategy from its kind (``"roll"``) or a mapping with a ``kind`` and its fields.

    Args:
        spec: ``"no_filtering"``, ``"slime"``, ``"dapo"``, ``"roll"``, ``"ragen"``,
            ``"per_task_retry"``, ``"controller"``, ``"oracle"``, or a mapping such as
            ``{"kind": "slime", "over_sampling_batch_size": 32}``.
        budget: The step budget for a ``controller`` spec that has none of its own.

    Raises:
        ValueError: the kind or a field is unknown, or a value is out of range.
        TypeError: a value has the wrong type.

    .. versionadded:: 0.1.0
    """
    if isinstance(spec, str):
        spec = {"kind": spec}
    if not isinstance(spec, Mapping):
        msg = f"a strategy must be a kind name or a mapping with a 'kind' (got {describe(spec)})"
        raise TypeError(msg)
    fields = dict(spec)
    kind = fields.pop("kind", None)
    cls = STRATEGY_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        msg = f"strategy 'kind' must be one of {sorted(STRATEGY_KINDS)} (got {describe(kind)})"
        raise ValueError(msg)
    if cls is ControllerResampling and "budget" not in fields and budget is not None:
        fields["budget"] = to_budget(budget)
    strategy: Strategy = from_mapping(cls, fields, source=f"strategy {kind!r}")
    return strategy


def default_strategies(
    config: SimulationConfig, budget: SamplingBudgetConfig | Mapping[str, Any] | None = None
) -> tuple[Strategy, ...]:
    """
    One of each strategy, as ``simulate`` runs them when none are given.

    slime over-samples twice the target (its ``run_full_train.sh`` ratio, 32 for 16), in
    strict and fallback mode; DAPO uses its recipe defaults; RAGEN keeps ``top_p=0.9``;
    the per-task retry uses the pull request's caps; the controller runs in both modes
    with ``budget`` (see :class:`ControllerResampling` for the default).

    .. versionadded:: 0.1.0
    """
    step_budget = to_budget(budget)
    wave = 2 * config.target_groups
    return (
        NoFiltering(),
        SlimeWaves(over_sampling_batch_size=wave, keep_when_insufficient=False),
        SlimeWaves(over_sampling_batch_size=wave, keep_when_insufficient=True),
        DapoDynamicSampling(),
        RollResampling(),
        RagenTopP(),
        PerTaskRetry(),
        ControllerResampling(budget=step_budget, mode="expected"),
        ControllerResampling(budget=step_budget, mode="confidence"),
        Oracle(),
    )


def simulated_policy(policy: Any, simulation: SimulationConfig | None) -> GroupAdmissionPolicy:
    """
    The policy of a simulation (``None``: :data:`DEFAULT_POLICY`), checked by :func:`check_simulated_policy`.

    Raises:
        TypeError: ``policy`` is not a policy, a config, a mapping or ``None``.
        ValueError: simulated groups cannot be judged by it.
    """
    chosen = DEFAULT_POLICY if policy is None else policy
    judge = coerce_instance(chosen, GroupAdmissionPolicy, GroupAdmissionConfig, name="policy")
    check_simulated_policy(judge.config, simulation)
    return judge


def check_simulated_policy(policy: GroupAdmissionConfig, simulation: SimulationConfig | None) -> None:
    """
    Refuse a policy that simulated groups cannot be judged by, before anything runs.

    Simulated groups have no completion texts; ``gate_on`` must name components of the
    task model of ``simulation`` (``None``: a prompt pool, whose rewards have no components).
    """
    if policy.similarity_gate_enabled:
        msg = (
            "'max_mean_pairwise_similarity' must be None for a simulation: simulated groups "
            f"have no completion texts (got {policy.max_mean_pairwise_similarity!r})"
        )
        raise ValueError(msg)
    gate_on = policy.gate_on
    if simulation is None:
        if gate_on is not None:
            msg = (
                "'gate_on' must be None for simulate_pool: the pool's rewards have no "
                f"components (got {gate_on!r})"
            )
            raise ValueError(msg)
        return
    tasks = simulation.tasks
    unknown = [name for name in gate_on or () if name not in tasks.components]
    if unknown:
        msg = (
            f"'gate_on' names reward component(s) {unknown!r} that the {tasks.kind} task "
            f"model does not produce (it has {list(tasks.components)!r})"
        )
        raise ValueError(msg)


def _as_strategies(strategies: Any, budget: Any, config: SimulationConfig) -> tuple[Strategy, ...]:
    if strategies is None:
        return default_strategies(config, budget)
    if isinstance(strategies, (str, Mapping)) or not isinstance(strategies, Iterable):
        msg = f"'strategies' must be a list of strategies (got {describe(strategies)})"
        raise TypeError(msg)
    built = tuple(
        item if isinstance(item, Strategy) else strategy_from_mapping(item, budget=budget)
        for item in strategies
    )
    if not built:
        msg = "'strategies' must name at least one strategy (got [])"
        raise ValueError(msg)
    names = [strategy.name for strategy in built]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        msg = f"strategy names must be unique; give each a 'name' (repeated: {repeated})"
        raise ValueError(msg)
    return built


@attrs.frozen(kw_only=True)
class SimulationResult(NamedResults[StrategyResult]):
    """
    The figures of every strategy on the same simulated steps.

    Attributes:
        config: What was simulated.
        policy: The admission thresholds used.
        strategies: Every strategy's settings (``to_dict`` of each).
        results: One :class:`StrategyResult` per strategy, in the order given.

    .. versionadded:: 0.1.0
    """

    config: SimulationConfig
    policy: GroupAdmissionConfig
    strategies: tuple[dict[str, Any], ...]
    results: tuple[StrategyResult, ...]

    def rows(self) -> list[dict[str, Any]]:
        """One flat dict per strategy (the table's figures plus every count), for CSV."""
        rows = []
        for result in self.results:
            data = result.to_dict()
            rejected = data.pop("rejected")
            data.update({f"rejected_{reason}": count for reason, count in rejected.items()})
            rows.append(data)
        return rows

    def format_table(self) -> str:
        """The main figures as an aligned plain-text table, one row per strategy."""
        cells = [[header for header, _, _ in _TABLE]]
        for result in self.results:
            row = []
            for _, field, spec in _TABLE:
                value = getattr(result, field)
                row.append("-" if value is None else spec.format(value))
            cells.append(row)
        return aligned_table(cells)


C = TypeVar("C")
S = TypeVar("S")


@attrs.frozen(kw_only=True)
class Prepared(Generic[C, S]):
    """A run whose inputs are all checked: nothing left to refuse, only to run (simulator or pool)."""

    config: C
    policy: GroupAdmissionPolicy
    strategies: tuple[S, ...]


PreparedSimulation = Prepared[SimulationConfig, Strategy]


def prepare_simulation(
    config: SimulationConfig | Mapping[str, Any] | None,
    *,
    policy: GroupAdmissionPolicy | GroupAdmissionConfig | Mapping[str, Any] | None,
    strategies: Iterable[Strategy | str | Mapping[str, Any]] | None,
    budget: SamplingBudgetConfig | Mapping[str, Any] | None,
) -> PreparedSimulation:
    """
    Check and build every input of :func:`simulate` (which gives the defaults), without simulating anything.

    Raises:
        ValueError, TypeError: a config, policy or strategy is invalid, or a strategy
            cannot run on the config.
    """
    config = coerce_config(SimulationConfig, config)
    judge = simulated_policy(policy, config)
    budget = None if budget is None else coerce_config(SamplingBudgetConfig, budget, name="budget")
    chosen = _as_strategies(strategies, budget, config)
    for strategy in chosen:
        strategy.check(config)
    return PreparedSimulation(config=config, policy=judge, strategies=chosen)


def run_simulation(prepared: PreparedSimulation) -> SimulationResult:
    """Run a :class:`PreparedSimulation` (see :func:`simulate`)."""
    config, judge, chosen = prepared.config, prepared.policy, prepared.strategies
    outcomes: dict[str, list[StepOutcome]] = {strategy.name: [] for strategy in chosen}
    memories: dict[str, dict[str, Any]] = {strategy.name: {} for strategy in chosen}
    for step in range(config.steps):
        stream = GroupStream(config, step)
        for strategy in chosen:
            context = StepContext(config, judge, stream, step, memories[strategy.name])
            outcome = strategy.run_step(context)
            # Strategies count decoding steps; the engine turns them into time.
            time = config.engine.wall_time(outcome.generation_time, outcome.generated_tokens)
            outcomes[strategy.name].append(attrs.evolve(outcome, generation_time=time))
    return SimulationResult(
        config=config,
        policy=judge.config,
        strategies=tuple(strategy.to_dict() for strategy in chosen),
        results=tuple(summarize(s.name, s.kind, outcomes[s.name]) for s in chosen),
    )


def simulate(
    config: SimulationConfig | Mapping[str, Any] | None = None,
    *,
    policy: GroupAdmissionPolicy | GroupAdmissionConfig | Mapping[str, Any] | None = None,
    strategies: Iterable[Strategy | str | Mapping[str, Any]] | None = None,
    budget: SamplingBudgetConfig | Mapping[str, Any] | None = None,
) -> SimulationResult:
    """
    Run strategies side by side on the same simulated steps.

    Each step draws one stream of fresh tasks from the seed; every strategy reads it from
    the start, so differences between strategies are not sampling noise of different
    draws. The same arguments give the same result. Every input is checked before the
    first step is simulated.

    Args:
        config: What to simulate (default :class:`SimulationConfig`).
        policy: The admission policy judging every group (default: ``min_reward_std=1e-6``,
            the zero-std filter). Its redundancy gate must be off (there are no texts).
        strategies: Strategy objects, kind names or mappings (see
            :func:`strategy_from_mapping`); default :func:`default_strategies`.
        budget: The step budget of ``controller`` strategies that have none.

    Returns:
        The figures of every strategy.

    Raises:
        ValueError, TypeError: a config, policy or strategy is invalid, or a strategy
            cannot run on the config.

    .. versionadded:: 0.1.0
    """
    return run_simulation(prepare_simulation(config, policy=policy, strategies=strategies, budget=budget))
