"""
Easy GSM8K-format word problems, generated offline, written in the hub's dataset layout.

Each row is ``{"question": str, "answer": str}`` and the answer ends in ``#### N``, exactly
like ``openai/gsm8k``. :func:`write_gsm8k_layout` writes a folder that mirrors the hub
repository (``README.md`` declaring the ``main`` config, ``main/{train,test}-*.parquet``),
so ``load_dataset(folder, "main")`` treats it exactly like ``load_dataset("openai/gsm8k",
"main")``. Run it as a script to write one::

    python -m cookbook.grpo_gsm8k.offline.problems --out .cache/grpo_gsm8k/gsm8k-easy
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from pathlib import Path

NAMES = ("Tom", "Ana", "Sam", "Mia", "Leo", "Ivy", "Max", "Zoe", "Ben", "Eva", "Kai", "Lily")
ITEMS = ("apples", "pens", "books", "cards", "shells", "coins", "stickers", "marbles", "eggs", "cups")

README = """---
configs:
- config_name: main
  data_files:
  - split: train
    path: main/train-*
  - split: test
    path: main/test-*
---
# Easy GSM8K-format problems

Synthetic one- and two-step arithmetic word problems written by
`cookbook/grpo_gsm8k/offline/problems.py` (seed {seed}, operands up to {max_value}).
Answers end in `#### N`, as in GSM8K. This is not GSM8K.
"""

Template = Callable[[random.Random, int], tuple[str, str]]


def _add(rng: random.Random, top: int) -> tuple[str, str]:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b = rng.randint(1, top), rng.randint(1, top)
    question = f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?"
    return question, f"{a} + {b} = {a + b}\n#### {a + b}"


def _sub(rng: random.Random, top: int) -> tuple[str, str]:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a = rng.randint(2, max(2, top))
    b = rng.randint(1, a - 1)
    question = f"{name} has {a} {item} and gives away {b}. How many {item} does {name} have left?"
    return question, f"{a} - {b} = {a - b}\n#### {a - b}"


def _two_step(rng: random.Random, top: int) -> tuple[str, str]:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b = rng.randint(2, top), rng.randint(1, top)
    c = rng.randint(1, a + b - 1)
    question = (
        f"{name} has {a} {item}, finds {b} more and then loses {c}. "
        f"How many {item} does {name} have at the end?"
    )
    return question, f"{a} + {b} = {a + b}\n{a + b} - {c} = {a + b - c}\n#### {a + b - c}"


TEMPLATES: dict[str, Template] = {"add": _add, "sub": _sub, "two_step": _two_step}


def generate_problems(
    count: int,
    *,
    seed: int = 0,
    max_value: int = 9,
    kinds: tuple[str, ...] = ("add", "sub"),
    terse: float = 0.0,
) -> list[dict[str, str]]:
    """
    Generate ``count`` GSM8K-format problems.

    Args:
        count: How many rows.
        seed: Seed of the generator (the same seed gives the same rows).
        max_value: Largest operand; the default keeps every problem single-digit.
        kinds: Templates to draw from: ``add``, ``sub``, ``two_step``.
        terse: Fraction of solutions that give only the final ``#### N`` line (the others
            show the working first), so solution lengths vary.

    Returns:
        Rows ``{"question", "answer"}``; every answer ends in ``#### N``.

    Raises:
        ValueError: an argument is out of range or a kind is unknown.
    """
    if count < 0:
        raise ValueError(f"'count' must be >= 0 (got {count})")
    if max_value < 2:
        raise ValueError(f"'max_value' must be >= 2 (got {max_value})")
    if not 0.0 <= terse <= 1.0:
        raise ValueError(f"'terse' must be in [0, 1] (got {terse})")
    unknown = [kind for kind in kinds if kind not in TEMPLATES]
    if unknown or not kinds:
        raise ValueError(f"'kinds' must be a non-empty subset of {sorted(TEMPLATES)} (got {list(kinds)})")
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        question, answer = TEMPLATES[rng.choice(kinds)](rng, max_value)
        if rng.random() < terse:
            answer = answer.rsplit("\n", 1)[-1]
        rows.append({"question": question, "answer": answer})
    return rows


def write_gsm8k_layout(
    out: str | Path,
    *,
    train_size: int = 2000,
    test_size: int = 200,
    seed: int = 0,
    max_value: int = 9,
    kinds: tuple[str, ...] = ("add", "sub"),
    terse: float = 0.0,
) -> Path:
    """
    Write train and test splits in ``openai/gsm8k``'s layout (config ``main``, parquet).

    Returns:
        The folder, loadable with ``datasets.load_dataset(str(folder), "main")``.
    """
    import datasets

    folder = Path(out)
    (folder / "main").mkdir(parents=True, exist_ok=True)
    # Distinct seeds per split; the test split is still drawn from the same easy family.
    splits = {
        "train": generate_problems(train_size, seed=seed, max_value=max_value, kinds=kinds, terse=terse),
        "test": generate_problems(
            test_size, seed=seed + 1_000_003, max_value=max_value, kinds=kinds, terse=terse
        ),
    }
    for split, rows in splits.items():
        datasets.Dataset.from_list(rows).to_parquet(str(folder / "main" / f"{split}-00000-of-00001.parquet"))
    (folder / "README.md").write_text(README.format(seed=seed, max_value=max_value), encoding="utf-8")
    return folder


def main(argv: list[str] | None = None) -> None:
    """Write the problems in GSM8K's layout (the flags: ``--help``)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, help="folder to write (created if missing)")
    parser.add_argument("--train-size", type=int, default=2000)
    parser.add_argument("--test-size", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-value", type=int, default=9)
    parser.add_argument("--kinds", default="add,sub", help="comma-separated: add, sub, two_step")
    parser.add_argument("--terse", type=float, default=0.0, help="fraction of answer-only solutions")
    args = parser.parse_args(argv)
    folder = write_gsm8k_layout(
        args.out,
        train_size=args.train_size,
        test_size=args.test_size,
        seed=args.seed,
        max_value=args.max_value,
        kinds=tuple(k.strip() for k in args.kinds.split(",") if k.strip()),
        terse=args.terse,
    )
    print(f"wrote {folder}")


if __name__ == "__main__":
    main()
