"""
Regenerate ``ragen_selection_golden.json`` from RAGEN's own selection code.

Not a test and not run in CI: it needs a RAGEN checkout (``mll-lab-nu/RAGEN@20daedc``) and
an environment where ``from verl import DataProto`` works (``pip install verl==0.9.1`` in a
throwaway venv with torch==2.13.0 is enough; ``rollout_filter.py`` only needs DataProto,
and ``import ragen`` also imports ``hydra``: add ``hydra-core``).

    RAGEN_ROOT=/path/to/RAGEN python tests/adapters/ragen/ragen_golden_gen.py

The script draws score vectors and selection parameters with a fixed seed, asks RAGEN's
``RewardRolloutFilter._select_top_groups`` which groups it keeps, and writes the cases:
400 finite ones, then 160 with NaN and infinite scores drawn from a second seed (a group
of one sample has a NaN std; a shaped reward can overflow), where torch's comparisons
decide (``searchsorted`` and ``sort`` on NaN). JSON holds those as ``NaN`` and
``Infinity``, which Python's ``json`` reads back.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

RAGEN_COMMIT = "20daedc47558e000f7de912b060646bf2e8026bd"
OUT = Path(__file__).with_name("ragen_selection_golden.json")

VALUES = {
    "top_p": [0.3, 0.5, 0.6, 0.8, 0.9, 0.95, 1.0, 1.5],
    "top_k": [0.0, 0.1, 0.25, 0.5, 0.75, 1.0],
    "top_k_abs": [0.0, 1.0, 2.0, 3.0, 5.0, 100.0],
    "min_p": [0.0, 0.3, 0.5, 0.9, 1.0],
}


def _scores(rng: np.random.RandomState, kind: str, groups: int) -> list[float]:
    if kind == "std":
        values = np.abs(rng.normal(0.25, 0.2, groups))
        values[rng.rand(groups) < 0.3] = 0.0
    elif kind == "binary_std":
        # Sample std of groups of 8 binary rewards, the common RAGEN case (many exact ties).
        values = np.array([np.std([1.0] * k + [0.0] * (8 - k), ddof=1) for k in rng.randint(0, 9, groups)])
    elif kind == "ties":
        values = rng.randint(0, 4, groups).astype(float)
    elif kind == "one_member":  # groups of one sample: torch.std is NaN for every group
        values = np.full(groups, np.nan)
    elif kind == "nan_std":  # some groups of one sample among larger ones
        values = np.abs(rng.normal(0.25, 0.2, groups))
        values[rng.rand(groups) < 0.4] = np.nan
    elif kind == "non_finite":  # signed scores with NaN, +inf and -inf mixed in
        values = rng.normal(0.0, 1.0, groups)
        odd = rng.rand(groups) < 0.4
        values[odd] = rng.choice([np.nan, np.inf, -np.inf], int(odd.sum()))
    else:  # signed: group means of a shaped reward
        values = rng.normal(0.0, 1.0, groups)
    # Round to float32 so the JSON floats are exactly what torch sees.
    return [float(v) for v in np.asarray(values, dtype=np.float32)]


def _case(
    rng: np.random.RandomState, kinds: list[str], sizes: list[int], strategies: list[str]
) -> dict[str, Any]:
    strategy = rng.choice(strategies)
    groups = int(rng.choice(sizes))
    kind = str(rng.choice(kinds))
    return {
        "scores": _scores(rng, kind, groups),
        "strategy": str(strategy),
        "value": float(rng.choice(VALUES[strategy])),
        "filter_type": str(rng.choice(["largest", "smallest"])),
        "include_zero": bool(rng.rand() < 0.5),
        "top_p_prob_mode": str(rng.choice(["linear", "softmax"])),
        "selection_eps": float(rng.choice([0.0, 0.01, 0.05])),
    }


def main() -> None:
    sys.path.insert(0, os.environ["RAGEN_ROOT"])
    from ragen.trainer.rollout_filter import RewardRolloutFilter, RolloutFilterConfig

    finite = np.random.RandomState(20260414)
    kinds, sizes = ["std", "binary_std", "ties", "signed"], [1, 2, 3, 4, 5, 8, 16]
    cases = [_case(finite, kinds, sizes, list(VALUES)) for _ in range(400)]
    # Non-finite scores, top_p twice as often: its softmax mode is where torch and numpy part.
    non_finite = np.random.RandomState(20260415)
    kinds, sizes = ["one_member", "nan_std", "non_finite"], [1, 2, 3, 5, 8, 17, 33]
    cases += [_case(non_finite, kinds, sizes, ["top_p", *VALUES]) for _ in range(160)]
    for case in cases:
        config = RolloutFilterConfig(
            value=case["value"],
            filter_type=case["filter_type"],
            num_groups=len(case["scores"]),
            group_size=2,
            include_zero=case["include_zero"],
            strategy=case["strategy"],
            top_p_prob_mode=case["top_p_prob_mode"],
            selection_eps=case["selection_eps"],
        )
        kept = RewardRolloutFilter(config)._select_top_groups(torch.tensor(case["scores"]))
        case["expected"] = [int(i) for i in kept.tolist()]
    header = json.dumps({"ragen_commit": RAGEN_COMMIT, "torch": torch.__version__})[:-1]
    lines = ",\n".join(json.dumps(case) for case in cases)
    OUT.write_text(f'{header}, "cases": [\n{lines}\n]}}\n', encoding="utf-8")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
