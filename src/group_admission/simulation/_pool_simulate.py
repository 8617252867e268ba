"""``simulate_pool``: run prompt-pool strategies side by side on one drifting pool."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from .._config import GroupAdmissionConfig
from .._history import PromptHistory, SkipReport
from .._loading import coerce_config, from_mapping
from .._policy import GroupAdmissionPolicy
from .._validation import describe
from ._planning_strategies import HistorySkipping, OracleSkipping, PoolController, PoolStrategy
from ._prompt_pool import DIFFICULTY_BINS, PoolContext, PromptPool, PromptPoolConfig
from ._results import NamedResults, aligned_table
from ._simulate import Prepared, simulated_policy

__all__ = [
    "POOL_STRATEGY_KINDS",
    "PoolResult",
    "PoolStrategyResult",
    "PreparedPool",
    "default_pool_strategies",
    "prepare_pool",
    "run_pool",
    "simulate_pool",
]

#: Every pool strategy class by its ``kind``.
POOL_STRATEGY_KINDS: dict[str, type[Any]] = {
    cls.kind: cls for cls in (PoolController, HistorySkipping, OracleSkipping)
}
_COUNTS = ("groups", "tokens", "rounds", "admitted", "trained", "skipped", "wrongly_skipped")
_BINS = ("generated_by_bin", "skipped_by_bin", "wrongly_skipped_by_bin", "trained_by_bin")


@attrs.frozen(kw_only=True)
class PoolStrategyResult:
    """
    One pool strategy's figures over a run; ratios are of counts summed over steps.

    Attributes:
        name, kind: The strategy.
        steps: Steps simulated.
        target_groups: Target slots over all steps.
        final_informative_rate: Informative groups trained on / target slots.
        groups_per_informative: Generated groups / informative groups trained on.
        generated_groups, generated_tokens: The cost.
        admitted_groups: Generated groups the policy admitted.
        trained_groups: Informative groups trained on.
        skipped_prompts: Prompts skipped before generation.
        wrongly_skipped: Of those, prompts whose group (the one they would have got, by
            common random numbers) the policy would have admitted.
        wrongly_skipped_share: ``wrongly_skipped / skipped_prompts`` (``None`` without skips).
        time_per_step: Mean generation time per step, in decoding steps (rounds back to back).
        rounds_per_step: Mean rounds per step.
        safety_limit_hits: Steps that ran ``safety_max_rounds`` rounds short of their target.
        epochs: Epochs of the pool begun.
        by_difficulty: Per difficulty bin (:data:`DIFFICULTY_BINS`): groups generated,
            prompts skipped, wrongly skipped, groups trained on.
        skip_report: A history strategy's :meth:`PromptHistory.skip_report` after the
            last step: its re-checks, the informative ones and its own estimate of the
            wrongly skipped share, which ``wrongly_skipped_share`` measures; ``None`` for
            a strategy without a history.
        per_step: Every step's counts (not part of :meth:`to_dict` unless asked).

    .. versionadded:: 0.2.0
    """

    name: str
    kind: str
    steps: int
    target_groups: int
    final_informative_rate: float
    groups_per_informative: float | None
    generated_groups: int
    generated_tokens: int
    admitted_groups: int
    trained_groups: int
    skipped_prompts: int
    wrongly_skipped: int
    wrongly_skipped_share: float | None
    time_per_step: float
    rounds_per_step: float
    safety_limit_hits: int
    epochs: int
    by_difficulty: Mapping[str, Mapping[str, int]]
    skip_report: SkipReport | None = None
    per_step: tuple[Mapping[str, Any], ...] = attrs.field(default=(), repr=False, eq=False)

    def to_dict(self, *, include_steps: bool = False) -> dict[str, Any]:
        """A JSON-safe snapshot; ``include_steps`` adds every step's counts."""
        data = attrs.asdict(self, filter=lambda attribute, _value: attribute.name != "per_step")
        if include_steps:
            data["per_step"] = [dict(step) for step in self.per_step]
        return data


def _summarize(
    strategy: PoolStrategy, tallies: list[dict[str, Any]], cursor: dict[str, Any]
) -> PoolStrategyResult:
    totals = {key: sum(int(t[key]) for t in tallies) for key in _COUNTS}
    bins = {key: np.sum([t[key] for t in tallies], axis=0) for key in _BINS}
    target = sum(int(t["target"]) for t in tallies)
    by_difficulty = {
        label: {key.removesuffix("_by_bin"): int(bins[key][index]) for key in _BINS}
        for index, (label, _) in enumerate(DIFFICULTY_BINS)
    }
    per_step = tuple(
        {key: (t[key].tolist() if key in _BINS else t[key]) for key in (*_COUNTS, "time", *_BINS)}
        for t in tallies
    )
    history = cursor.get("memory", {}).get("history")  # a HistorySkipping strategy's
    return PoolStrategyResult(
        name=strategy.name,
        kind=strategy.kind,
        steps=len(tallies),
        target_groups=target,
        final_informative_rate=totals["trained"] / target,
        groups_per_informative=totals["groups"] / totals["trained"] if totals["trained"] else None,
        generated_groups=totals["groups"],
        generated_tokens=totals["tokens"],
        admitted_groups=totals["admitted"],
        trained_groups=totals["trained"],
        skipped_prompts=totals["skipped"],
        wrongly_skipped=totals["wrongly_skipped"],
        wrongly_skipped_share=totals["wrongly_skipped"] / totals["skipped"] if totals["skipped"] else None,
        time_per_step=sum(float(t["time"]) for t in tallies) / len(tallies),
        rounds_per_step=totals["rounds"] / len(tallies),
        safety_limit_hits=sum(bool(t["safety_limit"]) for t in tallies),
        epochs=cursor["epoch"] + 1,
        by_difficulty=by_difficulty,
        skip_report=history.skip_report(step=len(tallies)) if isinstance(history, PromptHistory) else None,
        per_step=per_step,
    )


@attrs.frozen(kw_only=True)
class PoolResult(NamedResults[PoolStrategyResult]):
    """
    The figures of every pool strategy on the same pool and draws.

    .. versionadded:: 0.2.0
    """

    config: PromptPoolConfig
    policy: GroupAdmissionConfig
    strategies: tuple[dict[str, Any], ...]
    results: tuple[PoolStrategyResult, ...]

    def format_table(self) -> str:
        """The main figures as an aligned plain-text table, one row per strategy."""
        header = (
            "strategy", "final", "groups/inf", "groups", "tokens", "skipped", "wrong skip", "re-checks",
            "informative", "est. wrong", "safety hits", "epochs",
        )  # fmt: skip
        return aligned_table([header, *(_row(r) for r in self.results)])


def _row(r: PoolStrategyResult) -> tuple[str, ...]:
    """One strategy's cells of :meth:`PoolResult.format_table`."""
    return (
        r.name,
        f"{r.final_informative_rate:.3f}",
        _figure(r.groups_per_informative),
        str(r.generated_groups),
        str(r.generated_tokens),
        str(r.skipped_prompts),
        _figure(r.wrongly_skipped_share),
        *_report_cells(r.skip_report),
        str(r.safety_limit_hits),
        str(r.epochs),
    )


def _figure(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _report_cells(report: SkipReport | None) -> tuple[str, str, str]:
    """A history's re-checks, the informative ones (decayed weights) and its estimated wrong-skip share."""
    if report is None:
        return ("-", "-", "-")
    return (
        _figure(report.rechecks, 1),
        _figure(report.rechecks_informative, 1),
        _figure(report.wrong_skip_share),
    )


def default_pool_strategies() -> tuple[PoolStrategy, ...]:
    """
    The controller alone, GRESO's rule, the history's posterior rule and the oracle bound.

    .. versionadded:: 0.2.0
    """
    return (
        PoolController(),
        HistorySkipping(history={"mode": "greso"}),
        HistorySkipping(),
        OracleSkipping(),
    )


def as_pool_strategies(strategies: Iterable[Any] | None) -> tuple[PoolStrategy, ...]:
    """Strategy objects from objects, kind names or mappings (``None``: the defaults), names unique."""
    if strategies is None:
        return default_pool_strategies()
    if isinstance(strategies, (str, Mapping)) or not isinstance(strategies, Iterable):
        msg = f"'strategies' must be a list of pool strategies (got {describe(strategies)})"
        raise TypeError(msg)
    built = []
    for item in strategies:
        if isinstance(item, PoolStrategy):
            built.append(item)
            continue
        spec: dict[str, Any] = (
            {"kind": item} if isinstance(item, str) else dict(item) if isinstance(item, Mapping) else {}
        )
        kind = spec.pop("kind", None)
        cls = POOL_STRATEGY_KINDS.get(kind) if isinstance(kind, str) else None
        if cls is None:
            msg = (
                f"a pool strategy must be one of {sorted(POOL_STRATEGY_KINDS)} or a mapping "
                f"with a 'kind' (got {describe(item)})"
            )
            raise ValueError(msg)
        built.append(from_mapping(cls, spec, source=f"pool strategy {kind!r}"))
    names = [s.name for s in built]
    if not built or len(set(names)) != len(names):
        msg = f"'strategies' must name at least one strategy, each with a unique name (got {names})"
        raise ValueError(msg)
    return tuple(built)


PreparedPool = Prepared[PromptPoolConfig, PoolStrategy]


def prepare_pool(
    config: PromptPoolConfig | Mapping[str, Any] | None,
    *,
    policy: GroupAdmissionPolicy | GroupAdmissionConfig | Mapping[str, Any] | None,
    strategies: Iterable[PoolStrategy | str | Mapping[str, Any]] | None,
) -> PreparedPool:
    """
    Check and build every input of :func:`simulate_pool` (which gives the defaults), simulating nothing.

    Raises:
        ValueError, TypeError: a config, policy or strategy is invalid, or a strategy
            cannot run on the pool.
    """
    config = coerce_config(PromptPoolConfig, config)
    judge = simulated_policy(policy, None)
    chosen = as_pool_strategies(strategies)
    for strategy in chosen:
        strategy.check(config)
    return PreparedPool(config=config, policy=judge, strategies=chosen)


def run_pool(prepared: PreparedPool) -> PoolResult:
    """Run a :class:`PreparedPool` (see :func:`simulate_pool`)."""
    config, judge, chosen = prepared.config, prepared.policy, prepared.strategies
    pool = PromptPool(config)
    cursors: dict[str, dict[str, Any]] = {s.name: {} for s in chosen}
    tallies: dict[str, list[dict[str, Any]]] = {s.name: [] for s in chosen}
    for step in range(config.steps):
        for strategy in chosen:
            context = PoolContext(pool, judge, step, cursors[strategy.name])
            strategy.run_step(context)
            tally = {
                **context.tally,
                "target": context.target_groups,
                "safety_limit": context.safety_limit_hit,
            }
            tallies[strategy.name].append(tally)
    return PoolResult(
        config=config,
        policy=judge.config,
        strategies=tuple(s.to_dict() for s in chosen),
        results=tuple(_summarize(s, tallies[s.name], cursors[s.name]) for s in chosen),
    )


def simulate_pool(
    config: PromptPoolConfig | Mapping[str, Any] | None = None,
    *,
    policy: GroupAdmissionPolicy | GroupAdmissionConfig | Mapping[str, Any] | None = None,
    strategies: Sequence[PoolStrategy | str | Mapping[str, Any]] | None = None,
) -> PoolResult:
    """
    Run pool strategies side by side on one drifting prompt pool, with common random numbers.

    Args:
        config: The pool and the run (default :class:`PromptPoolConfig`).
        policy: The admission policy (default: the zero-std filter, ``min_reward_std=1e-6``).
        strategies: Strategy objects, kind names (``"controller"``, ``"history"``,
            ``"oracle_skip"``) or mappings; default :func:`default_pool_strategies`.

    The same arguments give the same result. Every input is checked before the first step
    is simulated.

    .. versionadded:: 0.2.0
    """
    return run_pool(prepare_pool(config, policy=policy, strategies=strategies))
