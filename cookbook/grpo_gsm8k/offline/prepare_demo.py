"""
Build the embedded demo's assets offline.

Easy GSM8K-format problems and a tiny warm-started policy, under ``.cache/grpo_gsm8k/``
(reused when already built with the same recipe).

    python -m cookbook.grpo_gsm8k.offline.prepare_demo [--cache-dir .cache/grpo_gsm8k]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from cookbook.grpo_gsm8k.offline.problems import write_gsm8k_layout
from cookbook.grpo_gsm8k.offline.tiny_model import build_tiny_policy
from cookbook.grpo_gsm8k.report import on_a_terminal, plain_output

__all__ = ["prepare_demo"]

DEFAULT_CACHE = Path(".cache/grpo_gsm8k")
DATA_RECIPE = {
    "train_size": 2000,
    "test_size": 200,
    "seed": 0,
    "max_value": 9,
    "kinds": ["two_step"],  # writing the working out helps the tiny policy: brevity conflicts
    "terse": 0.5,
}


def prepare_demo(
    cache_dir: str | Path = DEFAULT_CACHE, *, warm_start_steps: int = 400, force: bool = False
) -> tuple[Path, Path]:
    """
    Write the problems and build the tiny policy; return ``(data_dir, model_dir)``.

    Both are skipped when their recorded recipe matches, so only the first run pays.
    """
    cache = Path(cache_dir)
    data = cache / "gsm8k-easy"
    stamp = data / "recipe.json"
    if force or not stamp.is_file() or json.loads(stamp.read_text()) != DATA_RECIPE:
        recipe = dict(DATA_RECIPE)
        write_gsm8k_layout(data, **{**recipe, "kinds": tuple(recipe["kinds"])})  # type: ignore[arg-type]
        stamp.write_text(json.dumps(DATA_RECIPE))
    model = build_tiny_policy(str(data), cache / "tiny-qwen2", warm_start_steps=warm_start_steps, force=force)
    return data, model


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache-dir", default=str(DEFAULT_CACHE))
    parser.add_argument("--warm-start-steps", type=int, default=400)
    parser.add_argument("--force", action="store_true", help="rebuild even when a matching build exists")
    args = parser.parse_args(argv)
    if not on_a_terminal():
        plain_output()
    started = time.perf_counter()
    data, model = prepare_demo(args.cache_dir, warm_start_steps=args.warm_start_steps, force=args.force)
    print(f"demo assets ready in {time.perf_counter() - started:.1f}s: data {data}, model {model}")


if __name__ == "__main__":
    main()
