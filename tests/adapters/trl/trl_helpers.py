"""Reward functions, data and config shared by the TRL adapter tests and benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from group_admission import GroupAdmissionPolicy, PromptHistory, PromptHistoryConfig


def prompt_dataset(count: int = 64, *, dead_every: int = 2) -> Any:
    """Prompts whose ``kind`` says whether ``accuracy`` gives its group a spread (``live``)."""
    from datasets import Dataset

    rows = [
        {"prompt": f"Tom has {i % 10} pens. How many?", "kind": "dead" if i % dead_every == 0 else "live"}
        for i in range(count)
    ]
    return Dataset.from_list(rows)


def accuracy(completions: list[Any], kind: list[str], **_: Any) -> list[float]:
    """1/0 alternating inside live groups (so they have spread), all 0 in dead groups."""
    return [float(i % 2) if k == "live" else 0.0 for i, k in enumerate(kind)]


def brevity(completions: list[Any], **_: Any) -> list[float]:
    """A shaping term: spread in every group, dead or not (a phantom signal)."""
    return [1.0 / (1.0 + len(text)) for text in completions]


def grpo_config(tmp_path: Path, **overrides: Any) -> Any:
    """A CPU-sized GRPOConfig: float32, no checkpointing, no reporting."""
    from trl import GRPOConfig

    settings: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "per_device_train_batch_size": 8,
        "num_generations": 4,
        "max_completion_length": 8,
        "max_steps": 2,
        "learning_rate": 1e-3,
        "beta": 0.0,
        "bf16": False,
        "gradient_checkpointing": False,
        "report_to": [],
        "logging_steps": 1,
        "save_strategy": "no",
        "use_cpu": True,
        "seed": 0,
        "disable_tqdm": True,
    }
    settings.update(overrides)
    return GRPOConfig(**settings)


def dead_history(dead: frozenset[int], live: frozenset[int] = frozenset()) -> PromptHistory:
    """A history (G = 4) that saw ``dead`` prompts all-wrong and ``live`` ones split, 20 times at step 0."""
    history = PromptHistory(PromptHistoryConfig(group_size=4))
    policy = GroupAdmissionPolicy({"min_reward_std": 1e-6})
    for prompts, rewards in ((dead, [0.0] * 4), (live, [1.0, 0.0, 1.0, 0.0])):
        for prompt in sorted(prompts):
            for _ in range(20):
                history.observe(prompt, policy.evaluate(rewards), step=0)
    return history
