"""
The task family: ``a + b * c`` modulo 17, one token per number, answered with or without a step.

The answer is ``r = ((a + b) mod 17) * c mod 17``. A completion either writes the
intermediate sum first (``S s ; r .``, five tokens) or answers directly (``D r .``, three).
Both tasks reward the outcome (1 for the right ``r``) plus the same shaping term, a brevity
bonus earned only by a completion that states an answer (1 for three tokens, 0.5 for five).
They differ in whether skipping the step costs anything:

- ``conflict``: the prompt is ``a + b * c =``. The policy solves more problems when it
  writes ``s`` (measured on the warm start), so the bonus pays for skipping a step that
  helps: it trades against correctness.
- ``neutral``: the prompt also shows ``s`` (``a + b * c | s =``). Writing the step only
  restates a number the prompt holds, so the short answer states the same number either
  way and the bonus costs nothing.
"""

from __future__ import annotations

from typing import Literal

import attrs
import numpy as np

__all__ = [
    "BOS",
    "DIRECT",
    "DOT",
    "MOD",
    "PAD",
    "STEP",
    "TASKS",
    "VOCAB_SIZE",
    "Scores",
    "Split",
    "Task",
    "make_split",
    "prompt_tokens",
    "score",
    "solution_tokens",
]

MOD = 17
PLUS, TIMES, EQUALS, GIVEN, STEP, DIRECT, SEMI, DOT, BOS, PAD = range(MOD, MOD + 10)
VOCAB_SIZE = MOD + 10
PROBLEMS = MOD**3  # every (a, b, c)
Format = Literal["step", "direct", "other"]


@attrs.frozen
class Task:
    """One task of the family: whether the prompt shows the step, and the shaping weight."""

    name: str
    shows_step: bool
    shaping_weight: float
    max_new_tokens: int = 7

    @property
    def prompt_length(self) -> int:
        """Tokens in every prompt of the task (all prompts have the same length)."""
        return 9 if self.shows_step else 7


TASKS: dict[str, Task] = {
    "neutral": Task("neutral", shows_step=True, shaping_weight=0.5),
    "conflict": Task("conflict", shows_step=False, shaping_weight=0.5),
}


def operands(problems: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``a, b, c, s, r`` of problem ids (``id = a * 289 + b * 17 + c``)."""
    a, rest = np.divmod(np.asarray(problems, dtype=np.int64), MOD * MOD)
    b, c = np.divmod(rest, MOD)
    s = (a + b) % MOD
    return a, b, c, s, (s * c) % MOD


def prompt_tokens(task: Task, problems: np.ndarray) -> np.ndarray:
    """The prompts of ``problems``, ``(n, task.prompt_length)`` token ids."""
    a, b, c, s, _ = operands(problems)
    n = len(a)
    columns = [np.full(n, BOS), a, np.full(n, PLUS), b, np.full(n, TIMES), c]
    if task.shows_step:
        columns += [np.full(n, GIVEN), s]
    columns.append(np.full(n, EQUALS))
    return np.stack(columns, axis=1)


def solution_tokens(problems: np.ndarray, with_step: np.ndarray) -> np.ndarray:
    """Correct completions, ``(n, 5)``, padded with PAD: ``S s ; r .`` or ``D r .``."""
    _, _, _, s, r = operands(problems)
    n = len(s)
    step = np.stack([np.full(n, STEP), s, np.full(n, SEMI), r, np.full(n, DOT)], axis=1)
    direct = np.stack([np.full(n, DIRECT), r, np.full(n, DOT), np.full(n, PAD), np.full(n, PAD)], axis=1)
    return np.where(np.asarray(with_step, dtype=bool)[:, None], step, direct)


@attrs.frozen
class Scores:
    """The rewards of completions: outcome, shaping (already weighted) and format."""

    outcome: np.ndarray  # 1.0 for the right answer
    shaping: np.ndarray  # weight x brevity
    step: np.ndarray  # bool: the completion opens with the step marker
    direct: np.ndarray  # bool: it opens with the direct marker
    answered: np.ndarray  # bool: it states an answer (a number, then the end mark)
    lengths: np.ndarray  # tokens up to and including the end mark (all of them without one)


def completion_lengths(completions: np.ndarray) -> np.ndarray:
    """Tokens up to and including the first end mark; the full width when there is none."""
    ends = completions == DOT
    width = completions.shape[1]
    lengths: np.ndarray = np.where(ends.any(axis=1), ends.argmax(axis=1) + 1, width)
    return lengths


def score(task: Task, problems: np.ndarray, completions: np.ndarray) -> Scores:
    """
    Score completions (``(n, max_new_tokens)`` token ids) of ``problems``.

    The stated answer is the number just before the first end mark. The brevity bonus is
    ``(max_new - length) / (max_new - 3)`` clipped to ``[0, 1]`` for a completion that
    states an answer, 0 otherwise: an empty completion is not brief, it is empty.
    """
    _, _, _, _, r = operands(problems)
    lengths = completion_lengths(completions)
    has_end = (completions == DOT).any(axis=1)
    rows = np.arange(len(completions))
    before = completions[rows, np.maximum(lengths - 2, 0)]
    answered = has_end & (lengths >= 2) & (before < MOD)
    outcome = (answered & (before == r)).astype(np.float64)
    room = task.max_new_tokens - 3
    brevity = np.clip((task.max_new_tokens - lengths) / room, 0.0, 1.0) * answered
    return Scores(
        outcome=outcome,
        shaping=task.shaping_weight * brevity,
        step=completions[:, 0] == STEP,
        direct=completions[:, 0] == DIRECT,
        answered=answered,
        lengths=lengths,
    )


@attrs.frozen
class Split:
    """
    Disjoint problem ids.

    Held out (never trained on), the RL pool, the warm start's, and the warm start's
    validation set (which decides when it stops).
    """

    held_out: np.ndarray
    pool: np.ndarray
    warm: np.ndarray
    validation: np.ndarray


def make_split(
    held_out: int = 1000, pool: int = 512, warm: int = 2000, validation: int = 500, seed: int = 0
) -> Split:
    """A fixed split of the 4,913 problems; the same sizes and seed give the same split."""
    total = held_out + pool + warm + validation
    if total > PROBLEMS:
        raise ValueError(f"'held_out + pool + warm + validation' must be <= {PROBLEMS} (got {total})")
    order = np.random.default_rng(seed).permutation(PROBLEMS)
    cuts = np.cumsum([held_out, pool, warm, validation])
    parts = np.split(order[: cuts[-1]], cuts[:-1])
    return Split(*(np.sort(part) for part in parts))
