"""
``group-admission simulate-pool``: prompt-pool strategies side by side on one drifting pool.

The command runs :func:`~group_admission.simulation.simulate_pool`: the round controller
alone, a :class:`PromptHistory` that skips likely-dead prompts (in its posterior mode or
GRESO's), and the oracle bound. Its flags are generated from :class:`PromptPoolConfig`,
:class:`ResponseLengthModel`, :class:`GroupAdmissionConfig`, :class:`SamplingBudgetConfig`
and :class:`PromptHistoryConfig`, as ``simulate``'s are.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

import attrs

from ._budget import SamplingBudgetConfig
from ._cli_flags import (
    PROG,
    Section,
    add_settings_command,
    apply_flags,
    default_budget_text,
    policy_title,
    read_config,
    run_settings,
    strategy_list,
    user_input,
    write_json,
)
from ._config import GroupAdmissionConfig
from ._history_config import PromptHistoryConfig
from ._validation import describe
from .simulation import DEFAULT_POLICY, PromptPoolConfig, ResponseLengthModel
from .simulation._planning_strategies import PoolController, history_config
from .simulation._pool_simulate import POOL_STRATEGY_KINDS, PreparedPool, prepare_pool, run_pool

__all__ = ["COMMAND", "POOL_SECTIONS", "add_pool_command", "run_pool_command"]

COMMAND = "simulate-pool"
#: The top-level keys a ``simulate-pool`` config file may hold.
POOL_SECTIONS = ("pool", "policy", "budget", "history", "strategies")
#: The kinds the command accepts: the pool strategies', and ``greso`` (the history in GRESO's mode).
POOL_KINDS = (*sorted(POOL_STRATEGY_KINDS), "greso")
#: What a pool strategy allows without a budget (its own or the section's).
DEFAULT_BUDGET = default_budget_text("a strategy", PoolController().effective_budget)
#: The strategies run without a 'strategies' section or ``--strategies``.
DEFAULT_KINDS = ("controller", "greso", "history", "oracle_skip")

_FLAG_SECTIONS = (
    Section(("pool",), (PromptPoolConfig,), "pool and run (the 'pool' section)", skip=("lengths",)),
    Section(
        ("pool", "lengths"),
        (ResponseLengthModel,),
        "response lengths ('pool.lengths')",
        rename={"cv": "tokens-cv"},
    ),
    Section(("policy",), (GroupAdmissionConfig,), policy_title(DEFAULT_POLICY)),
    Section(
        ("budget",),
        (SamplingBudgetConfig,),
        "budget of every strategy without its own (the 'budget' section; without any budget "
        f"setting, {DEFAULT_BUDGET})",
    ),
    Section(
        ("history",),
        (PromptHistoryConfig,),
        "prompt history of the history and greso strategies (the 'history' section)",
        skip=("group_size",),
        rename={"mode": "history-mode", "seed": "history-seed"},
    ),
)


@attrs.frozen
class PoolSettings:
    """Every setting of ``simulate-pool``, checked: the run, and the 'budget' and 'history' sections."""

    prepared: PreparedPool
    budget: SamplingBudgetConfig | None
    history: PromptHistoryConfig | None


def add_pool_command(commands: Any) -> None:
    """Add ``simulate-pool`` to the subcommands ``commands`` (an argparse subparsers action)."""
    command = commands.add_parser(
        COMMAND,
        help="simulate prompt skipping (a prompt history, GRESO's rule) on a drifting prompt pool",
        description=(
            "Simulate prompt-pool strategies side by side on one finite pool revisited epoch "
            "after epoch, whose pass rates drift as the model learns, and print, per strategy, "
            "the final informative rate, generated groups per informative trained group, the "
            "cost, the prompts skipped and the share of them that would have been informative. "
            "Settings come from --config (a YAML file with optional 'pool', 'policy', 'budget', "
            "'history' and 'strategies' sections) and flags; flags win."
        ),
    )
    add_settings_command(
        command,
        _FLAG_SECTIONS,
        f"comma-separated kinds: {', '.join(POOL_KINDS)} "
        f"(default: the 'strategies' section, else {', '.join(DEFAULT_KINDS)})",
    )


def _spec(item: object, history: Mapping[str, Any], budget: SamplingBudgetConfig | None) -> object:
    """A strategy entry with the 'history' and 'budget' sections filled in where it sets none."""
    if isinstance(item, str):
        spec: dict[str, Any] = {"kind": item}
    elif isinstance(item, Mapping):
        spec = dict(item)
    else:
        return item  # refused, with its type, by as_pool_strategies
    if spec.get("kind") not in POOL_KINDS:
        msg = f"a pool strategy's kind must be one of {list(POOL_KINDS)} (got {describe(spec.get('kind'))})"
        raise ValueError(msg)
    greso = spec.get("kind") == "greso"
    if greso or spec.get("kind") == "history":
        own = spec.get("history", {})
        if isinstance(own, Mapping):  # anything else is refused by the strategy
            spec["history"] = {**history, **({"mode": "greso"} if greso else {}), **own}
        spec["kind"] = "history"
    if budget is not None and "budget" not in spec:
        spec["budget"] = budget
    return spec


def _prepare(args: argparse.Namespace) -> PoolSettings:
    """Every setting of ``simulate-pool``, checked; a mistake raises ``ConfigurationError``."""
    with user_input(f"{PROG} {args.command}"):
        data, _ = read_config(args.config, POOL_SECTIONS, args.preset)
        apply_flags(data, args)
        items = strategy_list(data.get("strategies") if args.strategies is None else args.strategies)
        items = list(DEFAULT_KINDS) if items is None else items
        config = PromptPoolConfig.from_mapping(data["pool"])
        policy = GroupAdmissionConfig.from_mapping(data["policy"]) if data["policy"] else None
        budget = SamplingBudgetConfig.from_mapping(data["budget"]) if data["budget"] else None
        strategies: list[Any] = [_spec(item, data["history"], budget) for item in items]
        prepared = prepare_pool(config, policy=policy, strategies=strategies)
        # The section's own fields, for the settings line (group_size is the pool's).
        history = history_config(data["history"], config.group_size) if data["history"] else None
    return PoolSettings(prepared, budget, history)


def run_pool_command(args: argparse.Namespace) -> int:
    """Run ``simulate-pool``: print the table, write the JSON if asked."""
    settings = _prepare(args)
    result = run_pool(settings.prepared)
    sections = {
        "budget": (settings.budget, f"none given; {DEFAULT_BUDGET}"),
        "history": (settings.history, "none given; every field at its default"),
    }
    print(run_settings(("pool", result.config.to_dict()), result.policy, sections))
    print(result.format_table())
    if args.json is not None:
        write_json(args.json, result.to_dict())
    return 0
