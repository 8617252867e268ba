"""
The ``group-admission`` command: ``simulate`` strategies and ``explain`` a config.

Every error in the user's input (a missing file, bad YAML, an out-of-range value, an
unknown key) ends the command with exit status 2 and one line on stderr that names the
problem; no traceback.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from ._budget import SamplingBudgetConfig
from ._config import GroupAdmissionConfig
from ._loading import load_yaml_mapping, require_extra
from ._validation import describe

__all__ = ["main"]

PROG = "group-admission"
#: The top-level keys a config file may hold.
SECTIONS = ("policy", "budget", "simulation", "strategies")


class UsageError(Exception):
    """A problem with the user's input: reported on one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _flag(parser: argparse._ActionsContainer, name: str, kind: Callable[[str], Any], help_text: str) -> None:
    parser.add_argument(name, type=kind, default=None, help=help_text)


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description=(
            "Decide which GRPO prompt groups carry training signal, and plan bounded resampling. "
            "Use 'simulate' to compare admission strategies before spending GPU hours, and "
            "'explain' to check a policy/budget config and read what it will do."
        ),
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    simulate = commands.add_parser(
        "simulate",
        help="simulate admission strategies and print their cost and yield",
        description=(
            "Simulate resampling strategies side by side on the same steps and print, per strategy, "
            "the initial and final informative group rate, the recovery rate, the sampling cost "
            "multiplier, the budget exhaustion rate, rounds per step and what was generated. "
            "Settings come from --config (a YAML file with optional 'simulation', 'policy', "
            "'budget' and 'strategies' sections) and flags; flags win."
        ),
    )
    simulate.add_argument("--config", metavar="PATH", help="YAML file with the settings")
    run = simulate.add_argument_group("simulation (the 'simulation' section)")
    _flag(run, "--steps", int, "training steps to simulate")
    _flag(run, "--seed", int, "seed; the same seed gives the same figures")
    _flag(run, "--target-groups", int, "groups each step trains on (rollout/train batch size)")
    _flag(run, "--group-size", int, "completions per group")
    _flag(run, "--failure-rate", float, "probability that a group's rollout fails (rejected as external)")
    _flag(run, "--safety-max-rounds", int, "safety limit on rounds per step for uncapped strategies")
    tasks = simulate.add_argument_group("tasks and lengths ('simulation.tasks', 'simulation.lengths')")
    tasks.add_argument("--tasks", choices=("binary", "composite"), default=None, help="task model kind")
    _flag(tasks, "--alpha", float, "Beta shape alpha of task pass rates")
    _flag(tasks, "--beta", float, "Beta shape beta of task pass rates")
    _flag(tasks, "--shaping-mean", float, "mean of the shaping term (composite)")
    _flag(tasks, "--shaping-spread", float, "std of the shaping term (composite)")
    _flag(tasks, "--shaping-resolution", float, "grid step of the shaping term (composite)")
    _flag(tasks, "--mean-tokens", float, "mean response length in tokens")
    _flag(tasks, "--tokens-cv", float, "coefficient of variation of response lengths")
    _flag(tasks, "--max-tokens", int, "truncation length of responses")
    policy = simulate.add_argument_group("policy (the 'policy' section)")
    _flag(policy, "--min-reward-std", float, "minimum population std of the gated reward")
    _flag(policy, "--min-reward-range", float, "minimum max - min of the gated reward")
    _flag(policy, "--min-nontrivial-advantages", int, "minimum members off the group mean")
    _flag(policy, "--gate-on", str, "comma-separated reward components to gate on (e.g. outcome)")
    budget = simulate.add_argument_group("budget of the controller strategies (the 'budget' section)")
    _flag(budget, "--max-extra-groups", int, "groups a step may generate beyond the target")
    _flag(budget, "--max-extra-groups-per-round", int, "cap on the groups of one round")
    _flag(budget, "--max-resample-rounds", int, "rounds after the first")
    _flag(budget, "--max-total-samples", int, "cap on samples per step")
    _flag(budget, "--max-total-tokens", int, "cap on tokens per step")
    _flag(budget, "--confidence", float, "probability target of confidence mode")
    output = simulate.add_argument_group("strategies and output")
    _flag(
        output,
        "--strategies",
        str,
        "comma-separated kinds: no_filtering, slime, dapo, roll, ragen, per_task_retry, controller, "
        "oracle (default: the 'strategies' section, else one of each)",
    )
    output.add_argument("--csv", metavar="PATH", help="also write one CSV row per strategy")
    output.add_argument("--json", metavar="PATH", help="also write the full result as JSON")
    output.add_argument("--plot", metavar="PATH", help="also write a PNG plot (needs matplotlib)")

    explain = commands.add_parser(
        "explain",
        help="validate a policy/budget config and say what each gate and cap will do",
        description=(
            "Validate CONFIG.yaml (a 'policy' and/or 'budget' mapping; 'simulation' and "
            "'strategies' sections are checked too) and print, in plain words, what each "
            "admission gate and each budget cap will do."
        ),
    )
    explain.add_argument("config", metavar="CONFIG.yaml", help="the YAML file to explain")
    return parser


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None:
        text = f"cannot access '{os.fspath(exc.filename)}': {exc.strerror or exc}"
    else:
        text = str(exc)
    return " ".join(text.split())


def _read_config(path: str | None) -> tuple[dict[str, Any], set[str]]:
    """The file's sections (absent or empty ones as empty mappings) and the keys present."""
    if path is None:
        return {key: {} for key in ("policy", "budget", "simulation")}, set()
    data = dict(load_yaml_mapping(path))
    present = {str(key) for key in data}
    unknown = sorted(str(key) for key in data if key not in SECTIONS)
    if unknown:
        msg = f"unknown section(s) {unknown} in '{path}' (known: {', '.join(SECTIONS)})"
        raise UsageError(msg)
    for key in ("policy", "budget", "simulation"):
        if data.get(key) is None:
            data[key] = {}
        elif not isinstance(data[key], Mapping):
            msg = f"'{key}' in '{path}' must be a mapping (got {describe(data[key])})"
            raise UsageError(msg)
        else:
            data[key] = dict(data[key])
    return data, present


def _overlay(target: dict[str, Any], values: Mapping[str, Any]) -> None:
    target.update({key: value for key, value in values.items() if value is not None})


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        value = {}
    elif not isinstance(value, Mapping):
        msg = f"'simulation.{key}' must be a mapping (got {describe(value)})"
        raise UsageError(msg)
    return dict(value)


def _simulate(args: argparse.Namespace) -> int:
    from . import simulation  # noqa: PLC0415  (--help and a policy-only explain stay light)

    data, _ = _read_config(args.config)
    if args.plot is not None:
        # Fail before simulating, not after.
        require_extra("matplotlib", "plot", "--plot")
    config = data["simulation"]
    _overlay(
        config,
        {
            "steps": args.steps,
            "seed": args.seed,
            "target_groups": args.target_groups,
            "group_size": args.group_size,
            "failure_rate": args.failure_rate,
            "safety_max_rounds": args.safety_max_rounds,
        },
    )
    tasks, lengths = _section(config, "tasks"), _section(config, "lengths")
    _overlay(
        tasks,
        {
            "kind": args.tasks,
            "alpha": args.alpha,
            "beta": args.beta,
            "shaping_mean": args.shaping_mean,
            "shaping_spread": args.shaping_spread,
            "shaping_resolution": args.shaping_resolution,
        },
    )
    _overlay(lengths, {"mean_tokens": args.mean_tokens, "cv": args.tokens_cv, "max_tokens": args.max_tokens})
    config["tasks"], config["lengths"] = tasks, lengths
    policy = data["policy"]
    gate_on = None if args.gate_on is None else [name.strip() for name in args.gate_on.split(",")]
    _overlay(
        policy,
        {
            "min_reward_std": args.min_reward_std,
            "min_reward_range": args.min_reward_range,
            "min_nontrivial_advantages": args.min_nontrivial_advantages,
            "gate_on": gate_on,
        },
    )
    budget = data["budget"]
    _overlay(
        budget,
        {
            "max_extra_groups": args.max_extra_groups,
            "max_extra_groups_per_round": args.max_extra_groups_per_round,
            "max_resample_rounds": args.max_resample_rounds,
            "max_total_samples": args.max_total_samples,
            "max_total_tokens": args.max_total_tokens,
            "confidence": args.confidence,
        },
    )
    strategies = data.get("strategies")
    if args.strategies is not None:
        strategies = [kind.strip() for kind in args.strategies.split(",") if kind.strip()]
    if strategies is not None and (
        isinstance(strategies, (str, Mapping)) or not isinstance(strategies, list)
    ):
        msg = f"'strategies' must be a list of kinds or mappings (got {describe(strategies)})"
        raise UsageError(msg)
    result = simulation.simulate(
        simulation.SimulationConfig.from_mapping(config),
        policy=GroupAdmissionConfig.from_mapping(policy) if policy else None,
        strategies=strategies,
        budget=SamplingBudgetConfig.from_mapping(budget) if budget else None,
    )
    print(result.format_table())
    if args.csv is not None:
        rows = result.rows()
        with open(args.csv, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {args.csv}")
    if args.json is not None:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result.to_dict(), handle, indent=2)
            handle.write("\n")
        print(f"wrote {args.json}")
    if args.plot is not None:
        simulation.plot_result(result, args.plot)
        print(f"wrote {args.plot}")
    return 0


def _number(value: float) -> str:
    return f"{value:g}"


def _explain_policy(config: GroupAdmissionConfig) -> list[str]:
    gated = (
        "the sum of all reward components"
        if config.gate_on is None
        else f"the sum of the reward component(s) {', '.join(config.gate_on)}"
    )
    lines = [f"Policy: every check looks at the gated reward, {gated}; groups are judged whole."]
    if config.min_reward_std > 0:
        lines.append(
            f"  - std gate: rejects a group whose population std is below {_number(config.min_reward_std)} "
            "(GRPO's sample std is larger by sqrt(n/(n-1)))."
        )
    else:
        lines.append("  - std gate: off (min_reward_std = 0).")
    if config.min_reward_range > 0:
        lines.append(
            f"  - range gate: rejects a group whose max - min is below {_number(config.min_reward_range)}, "
            "the reward's effective resolution."
        )
    else:
        lines.append("  - range gate: off (min_reward_range = 0).")
    if config.min_nontrivial_advantages > 0:
        lines.append(
            "  - advantage gate: rejects a group with fewer than "
            f"{config.min_nontrivial_advantages} member(s) whose reward differs from the group "
            f"mean by more than {_number(config.advantage_tolerance)}."
        )
    else:
        lines.append("  - advantage gate: off (min_nontrivial_advantages = 0).")
    if config.similarity_gate_enabled:
        lines.append(
            "  - redundancy gate: rejects a group whose completions' mean pairwise similarity "
            f"(token {config.similarity_ngram_size}-gram Jaccard) exceeds "
            f"{_number(config.max_mean_pairwise_similarity or 0.0)}; completion texts are then required."
        )
    else:
        lines.append("  - redundancy gate: off (max_mean_pairwise_similarity is None).")
    if config.reward_gate_enabled:
        lines.append(
            "  A group whose gated rewards are all identical is rejected as exact_dead; one whose "
            "rewards differ but fail a reward gate is rejected as near_tie."
        )
    else:
        lines.append("  No reward gate is on: every well-formed group passes the reward checks.")
    lines.append(
        "  Missing or non-finite rewards, and caller-supplied reasons, reject a group as external "
        "(counted, never raised)."
    )
    return lines


def _cap(value: int | None, text: str, none_text: str) -> str:
    return f"  - {text.format(value)}" if value is not None else f"  - {none_text}"


def _explain_budget(config: SamplingBudgetConfig) -> list[str]:
    lines = [
        "Budget: the controller plans extra groups of a step until its target of admitted groups is met."
    ]
    if config.max_extra_groups == 0 or config.max_resample_rounds == 0:
        lines.append(
            "  - resampling is disabled (max_extra_groups or max_resample_rounds is 0): every plan after "
            "the first round is exhausted unless the target is already met."
        )
    lines.append(
        f"  - at most {config.max_extra_groups} group(s) beyond the target per step "
        f"(a step generates at most target + {config.max_extra_groups} groups)."
    )
    lines.append(f"  - at most {config.max_resample_rounds} resample round(s) after the first.")
    lines.append(
        _cap(config.max_extra_groups_per_round, "at most {} group(s) per round.", "no per-round group cap.")
    )
    lines.append(_cap(config.max_total_samples, "at most {} samples per step.", "no sample cap."))
    lines.append(
        _cap(
            config.max_total_tokens,
            "at most {} tokens per step, checked against the tokens per group observed so far "
            "(or the caller's estimate).",
            "no token cap.",
        )
    )
    lines.append(
        f"  - rate estimate: moving average (alpha {_number(config.effective_rate_ema_alpha)}) of the "
        "share of judged groups admitted per round (the first round sets it), floored at "
        f"{_number(config.min_effective_rate)}."
    )
    if config.mode == "expected":
        lines.append("  - expected mode: a round asks for ceil(remaining / rate) groups.")
    else:
        lines.append(
            "  - confidence mode: a round asks for the smallest n with "
            f"P[Binomial(n, rate) >= remaining] >= {_number(config.confidence)}, never fewer than "
            "ceil(remaining / rate): more groups per round, fewer rounds."
        )
    lines.append(
        "  When a cap leaves no room before the target is met, the plan is exhausted and names the "
        "cap(s) in limited_by: train on fewer groups, skip the step, or stop; it never waits."
    )
    return lines


def _explain(args: argparse.Namespace) -> int:
    data, present = _read_config(args.config)
    if not {"policy", "budget"} & present:
        msg = f"'{args.config}' must hold a 'policy' and/or a 'budget' mapping"
        raise UsageError(msg)
    lines: list[str] = []
    if "policy" in present:
        lines.extend(_explain_policy(GroupAdmissionConfig.from_mapping(data["policy"])))
    if "budget" in present:
        lines.extend(_explain_budget(SamplingBudgetConfig.from_mapping(data["budget"])))
    if {"simulation", "strategies"} & present:
        from . import simulation  # noqa: PLC0415

        config = simulation.SimulationConfig.from_mapping(data["simulation"])
        lines.append(
            f"Simulation: {config.steps} step(s) of target {config.target_groups} group(s) of "
            f"{config.group_size}, {config.tasks.kind} tasks (mean pass rate "
            f"{config.tasks.mean_pass_rate:.3f}), seed {config.seed}."
        )
        strategies = data.get("strategies")
        if strategies is not None:
            if not isinstance(strategies, list):
                msg = f"'strategies' must be a list of kinds or mappings (got {describe(strategies)})"
                raise UsageError(msg)
            budget = SamplingBudgetConfig.from_mapping(data["budget"]) if data["budget"] else None
            built = [simulation.strategy_from_mapping(item, budget=budget) for item in strategies]
            for strategy in built:
                strategy.check(config)
            lines.append(f"Strategies: {', '.join(strategy.name for strategy in built)}.")
    print("\n".join(lines))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """
    Run the ``group-admission`` command line; return the exit status.

    Args:
        argv: The arguments (default: ``sys.argv[1:]``).

    Returns:
        0 on success, 2 on a usage or input error (reported on one line of stderr).

    .. versionadded:: 0.1.0
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or an argparse error already printed
        return exc.code if isinstance(exc.code, int) else 2
    if args.version:
        from importlib.metadata import version  # noqa: PLC0415

        print(f"{PROG} {version('group-admission')}")
        return 0
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return _simulate(args) if args.command == "simulate" else _explain(args)
    except (UsageError, ValueError, TypeError, OSError, ImportError) as exc:
        print(f"{PROG} {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
