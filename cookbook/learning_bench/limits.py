"""
The pass-rate oracle: the limit of any predictor that decides before (or while) a group is decoded.

Given the policy and the prompt, a group's members are independent draws that succeed with
the prompt's pass rate ``p``: nothing a predictor learns before the group is decoded, from the
prompt's history, other prompts or a difficulty feature, tells it more about the group's
outcomes than ``p`` does. An arm that knows ``p`` and skips a prompt when its group's chance of
outcome spread, ``1 - p^n - (1 - p)^n``, is below a bound is therefore the frontier of
pre-generation allocation at that bound: every skip it makes is wrong with at most that
chance. (``oracle_skip`` goes further: it knows the group's own luck, which no predictor can.)

Decoding a group member by member reveals part of the luck: after ``k`` members that all
agree, the chance that the rest break the tie is ``1 - q^(n - k)`` (``q`` the chance of the
agreeing outcome). Stopping a group when that chance falls below the same bound is the
frontier of screening with a pilot (Pilot-Commit, SPEED-RL) at that bound; its decoded
members are charged.

The pass rate is measured, not charged: ``samples`` completions of the prompt under the
current policy, drawn from uniforms keyed apart from the group's own (so they reveal nothing
of its luck). These are measurements of what is possible, not strategies a host can run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from cookbook.learning_bench.model import Policy, uniforms
from cookbook.learning_bench.task import Task, prompt_tokens, score

__all__ = ["pass_rates", "spread_chance", "stop_points"]

#: Appended to a group's uniforms key: the measurement's draws are not the group's.
MEASUREMENT_KEY = 1_000_003


def pass_rates(
    policy: Policy,
    task: Task,
    problems: Sequence[int],
    *,
    samples: int,
    seed: int,
    keys: Sequence[Sequence[int]],
) -> np.ndarray:
    """Each problem's pass rate under ``policy``, from ``samples`` completions at temperature 1."""
    if not problems:
        return np.zeros(0)
    ids = np.asarray(problems, dtype=np.int64)
    prompts = np.repeat(prompt_tokens(task, ids), samples, axis=0)
    noise = np.concatenate(
        [uniforms(seed, (*key, MEASUREMENT_KEY), (samples, task.max_new_tokens)) for key in keys]
    )
    tokens, _ = policy.decode(
        torch.as_tensor(prompts, device=policy.device),
        task.max_new_tokens,
        torch.as_tensor(noise, device=policy.device),
    )
    outcome = score(task, np.repeat(ids, samples), tokens.cpu().numpy()).outcome
    rates: np.ndarray = outcome.reshape(len(ids), samples).mean(axis=1)
    return rates


def spread_chance(rates: np.ndarray, members: int) -> np.ndarray:
    """The chance that a group of ``members`` has outcome spread, given each prompt's pass rate."""
    p = np.asarray(rates, dtype=np.float64)
    chance: np.ndarray = 1.0 - p**members - (1.0 - p) ** members
    return chance


def stop_points(outcomes: np.ndarray, rates: np.ndarray, bound: float) -> np.ndarray:
    """
    The members decoded before each group is stopped (its size when it is not).

    Members are decoded in order; after ``k`` that agree, the group stops when the chance
    that the remaining ones break the tie is below ``bound``. A group whose members already
    disagree is never stopped. ``outcomes`` is ``(groups, members)`` in {0, 1}.
    """
    groups, members = outcomes.shape
    stops = np.full(groups, members, dtype=np.int64)
    p = np.asarray(rates, dtype=np.float64)
    for k in range(1, members):
        first = outcomes[:, :k]
        agree = (first == first[:, :1]).all(axis=1)
        q = np.where(first[:, 0] > 0, p, 1.0 - p)  # the chance of the agreeing outcome
        stop = agree & (1.0 - q ** (members - k) < bound) & (stops == members)
        stops[stop] = k
    return stops
