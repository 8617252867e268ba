"""
How far can a pre-generation predictor go? Candidate predictors scored on the bench's own visits.

A run of ``gated_target`` (every group judged, the oracle's trajectory) records every visit of
every prompt: its step, its successes out of its members, its tokens. Each candidate then
predicts, before a visit, the probability that its group is informative (outcome spread),
from the visits before it only. Skipping the visits predicted least informative, in order,
until the skipped visits that would have been informative reach ``max_wrong`` of them (the
best operating point the predictor allows), gives the share of visits skipped, the share of
dead visits caught (recall) and the informative share of the tokens still generated: the
oracle's is 1, no skipping's is the run's own.

Candidates: the library's :class:`~group_admission.PromptHistory` posterior (with and
without forgetting); a pool-level table of how often a prompt is informative after its last
two outcomes (evidence shared between prompts); and a pilot of ``m`` members decoded first,
combined with the posterior (Pilot-Commit's slice as evidence; its members are charged).

    python -m cookbook.learning_bench.predictors --seeds 0,1 --out runs/predictors
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from group_admission import GroupAdmissionPolicy, PromptHistory

__all__ = ["evaluate", "main", "pilot_chances", "posterior_chances", "table_chances"]

Visits = np.ndarray  # rows of (step, prompt, successes, members, tokens)


def posterior_chances(visits: Visits, half_life: float | None) -> np.ndarray:
    """The library's ``PromptHistory`` estimate of each visit, from the visits of earlier steps."""
    members = int(visits[0, 3])
    history = PromptHistory({"group_size": members, "half_life": half_life, "skip_below": 0.0})
    policy = GroupAdmissionPolicy({"min_reward_std": 1e-6})
    chances = np.zeros(len(visits))
    for step in np.unique(visits[:, 0]).tolist():
        rows = np.flatnonzero(visits[:, 0] == step)
        ids = visits[rows, 1].tolist()
        chances[rows] = history.pick(ids, step=step).informative_probabilities
        outcomes = (np.arange(members)[None, :] < visits[rows, 2][:, None]).astype(float)
        history.observe_batch(ids, policy.evaluate_batch({"outcome": outcomes}), step=step)
    return chances


def _state(successes: int, members: int) -> str:
    return "M" if 0 < successes < members else ("R" if successes == members else "W")


def table_chances(visits: Visits, depth: int = 2, prior: float = 20.0) -> np.ndarray:
    """
    A pool-level model: how often a visit was informative after the same last outcomes.

    The last ``depth`` outcomes (all right, all wrong, mixed), over every prompt's earlier
    visits, shrunk to the pool's rate with ``prior`` pseudo-visits.
    """
    past: dict[int, list[str]] = defaultdict(list)
    counts: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    pool = [0.5, 1.0]
    chances = np.zeros(len(visits))
    for index, (_, prompt, successes, members, _) in enumerate(visits.tolist()):
        key = "".join(past[prompt][-depth:]) or "-"
        seen, informative = counts[key]
        chances[index] = (informative + prior * pool[0] / pool[1]) / (seen + prior)
        state = _state(successes, members)
        counts[key][0] += 1
        counts[key][1] += state == "M"
        pool[0] += state == "M"
        pool[1] += 1
        past[prompt].append(state)
    return chances


def beta_posteriors(visits: Visits, half_life: float | None) -> np.ndarray:
    """
    Each visit's Beta posterior ``(alpha, beta)`` of its prompt's pass rate from earlier visits.

    The prior: the pool's recent pass rates fitted by moments; each prompt's successes and
    failures decayed by ``half_life`` steps (a plain version of ``PromptHistory``'s).
    """
    successes: dict[int, float] = {}
    failures: dict[int, float] = {}
    last: dict[int, int] = {}
    rates: list[float] = []
    shapes = np.zeros((len(visits), 2))
    for index, (step, prompt, wins, members, _) in enumerate(visits.tolist()):
        alpha, beta = 0.5, 0.5
        if len(rates) >= 32:
            recent = np.array(rates[-2000:])
            mean, variance = recent.mean(), max(recent.var(), 1e-9)
            concentration = min(max(mean * (1 - mean) / variance - 1, 0.05), 1000.0)
            alpha, beta = mean * concentration, (1 - mean) * concentration
        decay = 1.0
        if half_life is not None and prompt in last:
            decay = 0.5 ** ((step - last[prompt]) / half_life)
        seen_wins = successes.get(prompt, 0.0) * decay
        seen_losses = failures.get(prompt, 0.0) * decay
        shapes[index] = alpha + seen_wins, beta + seen_losses
        successes[prompt], failures[prompt] = seen_wins + wins, seen_losses + members - wins
        last[prompt] = step
        rates.append(wins / members)
    return shapes


def _power_mean(alpha: np.ndarray, beta: np.ndarray, power: int) -> np.ndarray:
    """``E[p**power]`` for ``p ~ Beta(alpha, beta)``."""
    value = np.ones(len(alpha))
    for i in range(power):
        value *= (alpha + i) / (alpha + beta + i)
    return value


def pilot_chances(visits: Visits, pilot: int, half_life: float | None, seed: int = 0) -> np.ndarray:
    """
    The posterior updated by ``pilot`` members decoded first.

    1 when they disagree; otherwise the chance the other members break the tie, under the
    posterior given the pilot. The pilot's outcomes are drawn from the group's own members
    (they are exchangeable).
    """
    shapes = beta_posteriors(visits, half_life)
    alpha, beta = shapes[:, 0], shapes[:, 1]
    members = visits[:, 3]
    drawn = np.random.default_rng(seed).hypergeometric(visits[:, 2], members - visits[:, 2], pilot)
    rest = int(members[0]) - pilot
    after_right = 1.0 - _power_mean(alpha + pilot, beta, rest)  # all pilot members right
    after_wrong = 1.0 - _power_mean(beta + pilot, alpha, rest)  # all wrong
    return np.where(drawn == pilot, after_right, np.where(drawn == 0, after_wrong, 1.0))


def evaluate(visits: Visits, chances: np.ndarray, *, max_wrong: float, pilot: int = 0) -> dict[str, float]:
    """
    The shares left by skipping the visits with the lowest predicted chance, in order.

    Visits are skipped while at most ``max_wrong`` of the skipped would have been
    informative (a pilot's members charged).
    """
    members, tokens = visits[:, 3], visits[:, 4].astype(float)
    informative = (visits[:, 2] > 0) & (visits[:, 2] < members)
    order = np.argsort(chances, kind="stable")
    wrong = np.cumsum(informative[order]) / np.arange(1, len(order) + 1)
    allowed = np.flatnonzero(wrong <= max_wrong)
    count = int(allowed[-1]) + 1 if len(allowed) else 0
    skipped = np.zeros(len(visits), dtype=bool)
    skipped[order[:count]] = True
    spent = np.where(skipped, tokens * pilot / members, tokens).sum()
    return {
        "skipped_share": float(skipped.mean()),
        "wrong_share": float(informative[skipped].mean()) if count else 0.0,
        "dead_recall": float((skipped & ~informative).sum() / max(1, (~informative).sum())),
        "informative_token_share": float(tokens[informative & ~skipped].sum() / spent),
        "no_skip_informative_token_share": float(tokens[informative].sum() / tokens.sum()),
    }


CANDIDATES: dict[str, Callable[[Visits], tuple[np.ndarray, int]]] = {
    "posterior, half-life 150": lambda v: (posterior_chances(v, 150.0), 0),
    "posterior, no forgetting": lambda v: (posterior_chances(v, None), 0),
    "pool table, last 2 outcomes": lambda v: (table_chances(v, 2), 0),
    "pilot of 2 + posterior": lambda v: (pilot_chances(v, 2, 150.0), 2),
}


def collect(task_name: str, seed: int, tokens: int) -> Visits:
    """Every visit of a ``gated_target`` run of ``task_name`` (its warm start built first)."""
    import attrs

    from cookbook.learning_bench.arms import KNOWN_ARMS, profile_for
    from cookbook.learning_bench.learning_bench import prepare_task
    from cookbook.learning_bench.runner import make_run
    from cookbook.learning_bench.task import TASKS, make_split

    profile = attrs.evolve(profile_for("cpu"), token_budget=tokens)
    task = TASKS[task_name]
    split = make_split(profile.held_out, profile.pool, profile.warm)
    weights = prepare_task(profile, task, split)["weights"]
    run = make_run(KNOWN_ARMS["gated_target"], task, seed, profile, split, weights)
    run.visits = []
    step = 0
    while run.counts.tokens < tokens:
        run.step(step)
        step += 1
    return np.array(run.visits, dtype=np.int64)


def study(tasks: Sequence[str], seeds: Sequence[int], tokens: int, max_wrong: float) -> dict[str, Any]:
    """Every candidate on every (task, seed): the shares :func:`evaluate` gives, and their mean."""
    results: dict[str, Any] = {"max_wrong": max_wrong, "tokens": tokens, "tasks": {}}
    for task in tasks:
        per_seed: dict[str, list[Any]] = {name: [] for name in CANDIDATES}
        for seed in seeds:
            visits = collect(task, seed, tokens)
            for name, candidate in CANDIDATES.items():
                chances, pilot = candidate(visits)
                per_seed[name].append(evaluate(visits, chances, max_wrong=max_wrong, pilot=pilot))
        results["tasks"][task] = {
            name: {key: float(np.mean([r[key] for r in rows])) for key in rows[0]} | {"seeds": rows}
            for name, rows in per_seed.items()
        }
    return results


def table(results: dict[str, Any]) -> str:
    """The study as a markdown table per task."""
    lines = []
    for task, candidates in results["tasks"].items():
        lines += [
            f"#### {task}: at most {results['max_wrong']:.0%} of skipped visits informative",
            "",
            "| predictor | visits skipped | dead visits caught "
            "| informative share of tokens (none skipped) |",
            "|---|---|---|---|",
        ]
        for name, r in candidates.items():
            lines.append(
                f"| {name} | {r['skipped_share']:.0%} | {r['dead_recall']:.0%} | "
                f"{r['informative_token_share']:.2f} ({r['no_skip_informative_token_share']:.2f}) |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the study, write ``predictors.json`` and print the table."""
    parser = argparse.ArgumentParser(prog="predictors", description=__doc__)
    parser.add_argument("--tasks", default="neutral,conflict")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--max-wrong", type=float, default=0.1)
    parser.add_argument("--out", default="runs/predictors")
    args = parser.parse_args(argv)
    results = study(
        args.tasks.split(","), [int(s) for s in args.seeds.split(",")], args.tokens, args.max_wrong
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "predictors.json").write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))
    return results


if __name__ == "__main__":
    main()
