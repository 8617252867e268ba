"""Benchmark the admission policy against baselines measured in the same run.

Prints a table and writes benchmarks/results/bench_policy.json. Not a test: run it with
    OMP_NUM_THREADS=1 python -m benchmarks.bench_policy
Targets (issue 2): evaluate() median <= 10 us per group of 8 and faster than both
baselines; the redundancy gate on 16 completions of ~2,000 characters >= 5x faster than a
plain Python set-based n-gram Jaccard. Issue 20: evaluate_batch() on 100,000 x 16 within
1.2x of numpy's rewards.std(axis=1) alone, the two timed alternately in the same run (the
best of 15 each), with the load average printed beside the ratio.
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from group_admission import GroupAdmissionConfig, GroupAdmissionPolicy

RESULTS = Path(__file__).parent / "results" / "bench_policy.json"
#: evaluate_batch on 100,000 x 16 may take at most this many times numpy's std(axis=1) (issue 20).
BATCH_LIMIT = 1.2
TOKEN = re.compile(r"\w+|[^\w\s]")


def per_call_us(fn: Callable[[Any], object], items: Sequence[Any], repeats: int = 7) -> float:
    """Median over repeats of the mean time per item, in microseconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for item in items:
            fn(item)
        samples.append((time.perf_counter() - start) / len(items) * 1e6)
    return statistics.median(samples)


def best_ms(fn: Callable[[], object], repeats: int = 7) -> float:
    """The best of ``repeats`` calls of ``fn``, in milliseconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return min(samples)


def bench_evaluate() -> dict[str, Any]:
    """One group's judgement against slime's and the pull request's filters, per call."""
    import torch

    torch.set_num_threads(1)
    rng = random.Random(0)
    groups = [[float(rng.random() < rng.choice([0.1, 0.5, 0.9])) for _ in range(8)] for _ in range(5000)]
    policy = GroupAdmissionPolicy(
        GroupAdmissionConfig(min_reward_std=1e-6, min_reward_range=0.02, min_nontrivial_advantages=2)
    )

    def slime_like(rewards: list[float]) -> bool:  # slime's built-in filter: float64 torch std > 1e-6
        return bool(torch.tensor(rewards, dtype=torch.float64).std() > 1e-6)

    # The pull request's policy: statistics.pstdev, range, non-trivial count.
    def pr_like(rewards: list[float]) -> bool:
        std = statistics.pstdev(rewards)
        mean = statistics.fmean(rewards)
        nontrivial = sum(abs(r - mean) > 1e-8 for r in rewards)
        return std >= 1e-6 and max(rewards) - min(rewards) >= 0.02 and nontrivial >= 2

    for fn in (policy.evaluate, slime_like, pr_like):  # warm up
        for g in groups[:200]:
            fn(g)
    ours = per_call_us(policy.evaluate, groups)
    torch_std = per_call_us(slime_like, groups)
    pstdev = per_call_us(pr_like, groups)
    return {
        "evaluate_us_per_group": ours,
        "baseline_torch_std_us": torch_std,
        "baseline_pstdev_us": pstdev,
        "speedup_vs_torch_std": torch_std / ours,
        "speedup_vs_pstdev": pstdev / ours,
        "target_met": ours <= 10 and ours < torch_std and ours < pstdev,
    }


def bench_batch() -> dict[str, Any]:
    """The batch path against the scalar path on 100,000 groups."""
    rng = np.random.default_rng(0)
    rewards = (rng.random((100_000, 16)) < rng.random((100_000, 1))).astype(np.float64)
    policy = GroupAdmissionPolicy(
        GroupAdmissionConfig(min_reward_std=1e-6, min_reward_range=0.02, min_nontrivial_advantages=2)
    )
    policy.evaluate_batch(rewards[:1000])
    # Alternately, so that a change of load on a shared machine hits both the same way.
    std_samples, ours_samples = [], []
    for _ in range(15):
        std_samples.append(best_ms(lambda: rewards.std(axis=1), repeats=1))
        ours_samples.append(best_ms(lambda: policy.evaluate_batch(rewards), repeats=1))
    std_ms, ours_ms = min(std_samples), min(ours_samples)
    return {
        "evaluate_batch_ms": ours_ms,
        "baseline_numpy_std_ms": std_ms,
        "ratio_to_std": ours_ms / std_ms,
        "limit": BATCH_LIMIT,
        "load_average_1m": os.getloadavg()[0],
        "target_met": ours_ms / std_ms <= BATCH_LIMIT,
    }


def completions(count: int, chars: int, seed: int) -> list[str]:
    """``count`` pseudo-completions of about ``chars`` characters."""
    rng = random.Random(seed)
    words = [
        "the",
        "answer",
        "is",
        "we",
        "need",
        "to",
        "compute",
        "total",
        "number",
        "of",
        "apples",
        "each",
        "box",
        "holds",
        "so",
        "first",
        "then",
        "multiply",
        "add",
        "subtract",
        "divide",
        "remaining",
        "left",
        "over",
        "therefore",
    ]
    texts = []
    for _ in range(count):
        parts: list[str] = []
        while sum(len(p) + 1 for p in parts) < chars:
            roll = rng.random()
            if roll < 0.75:
                parts.append(rng.choice(words))
            elif roll < 0.92:
                parts.append(f"{rng.randint(1, 99)} {rng.choice('+-*/=')} {rng.randint(1, 99)}")
            else:
                parts.append(rng.choice([",", ".", "$", "#### 42", "\\boxed{7}"]))
        texts.append(" ".join(parts))
    return texts


def bench_similarity() -> dict[str, Any]:
    """The similarity gate on one group of long completions against plain Python."""
    texts = completions(16, 2000, seed=1)

    # Tokenise each text once, then set intersections per pair.
    def plain_python(group: Sequence[str], n: int = 3) -> float:
        sets: list[set[tuple[str, ...]]] = []
        for text in group:
            tokens = TOKEN.findall(text.lower())
            sets.append(
                set(zip(*(tokens[i:] for i in range(n)), strict=False))
                if len(tokens) >= n
                else {tuple(tokens)}
            )
        scores = []
        for i in range(len(sets)):
            for j in range(i + 1, len(sets)):
                union = len(sets[i] | sets[j])
                scores.append(len(sets[i] & sets[j]) / union if union else 1.0)
        return sum(scores) / len(scores)

    policy = GroupAdmissionPolicy(GroupAdmissionConfig(max_mean_pairwise_similarity=0.9))
    rewards = [0.0, 1.0] * 8
    similarity = policy.evaluate(rewards, texts).mean_pairwise_similarity
    assert similarity is not None
    assert abs(similarity - plain_python(texts)) < 1e-12
    base_ms = best_ms(lambda: plain_python(texts), repeats=15)
    ours_ms = best_ms(lambda: policy.evaluate(rewards, texts), repeats=15)
    return {
        "similarity_gate_ms": ours_ms,
        "baseline_python_sets_ms": base_ms,
        "speedup": base_ms / ours_ms,
        "target_met": base_ms / ours_ms >= 5,
    }


def main() -> None:
    """Run every measurement and write the report."""
    results = {
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "processor": platform.machine(),
        },
        "evaluate": bench_evaluate(),
        "evaluate_batch": bench_batch(),
        "similarity": bench_similarity(),
    }
    e, b, s = results["evaluate"], results["evaluate_batch"], results["similarity"]
    rows = [
        (
            "evaluate, groups of 8 (us/group)",
            f"{e['evaluate_us_per_group']:.2f}",
            f"torch std {e['baseline_torch_std_us']:.2f} / pstdev {e['baseline_pstdev_us']:.2f}",
            f"{e['speedup_vs_torch_std']:.1f}x / {e['speedup_vs_pstdev']:.1f}x faster",
            e["target_met"],
        ),
        (
            "evaluate_batch 100k x 16 (ms)",
            f"{b['evaluate_batch_ms']:.1f}",
            f"numpy std {b['baseline_numpy_std_ms']:.1f}",
            f"{b['ratio_to_std']:.2f}x (limit {b['limit']}x, load {b['load_average_1m']:.1f})",
            b["target_met"],
        ),
        (
            "redundancy gate 16 x 2k chars (ms)",
            f"{s['similarity_gate_ms']:.2f}",
            f"python sets {s['baseline_python_sets_ms']:.2f}",
            f"{s['speedup']:.1f}x faster",
            s["target_met"],
        ),
    ]
    print(f"{'benchmark':38} {'ours':>8}  {'baseline':34} {'ratio':28} target")
    for name, ours, base, ratio, met in rows:
        print(f"{name:38} {ours:>8}  {base:34} {ratio:28} {'met' if met else 'MISSED'}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
