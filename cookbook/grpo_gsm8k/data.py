"""
Loading GSM8K-format data and models through the ordinary Hugging Face entry points.

``load_problems`` calls ``datasets.load_dataset`` and ``load_policy`` calls
``from_pretrained``, so a hub id (``openai/gsm8k``, ``Qwen/Qwen2.5-0.5B-Instruct``), a
local folder in the hub's layout, or (for data) a ``.jsonl``/``.json``/``.parquet`` file all
work the same way. Nothing here downloads anything by itself: with ``HF_HUB_OFFLINE=1`` a
hub id resolves only from the local cache, or from a folder of that name under the CWD.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cookbook.grpo_gsm8k.rewards import gold_answer

__all__ = [
    "Problem",
    "autocast",
    "build_prompt",
    "eos_token_ids",
    "load_policy",
    "load_problems",
    "resolve_device",
]

_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


@dataclass(frozen=True)
class Problem:
    """One GSM8K row: the question, its reference solution and the gold number."""

    question: str
    answer: str
    gold: float


def load_problems(
    dataset: str,
    subset: str | None = "main",
    split: str = "train",
    *,
    question_field: str = "question",
    answer_field: str = "answer",
    limit: int | None = None,
) -> list[Problem]:
    """
    Load a GSM8K-format split with ``datasets.load_dataset``.

    Args:
        dataset: A hub id, a local folder (hub layout) or a data file
            (``.json``/``.jsonl``/``.parquet``/``.csv``).
        subset: The config name (``main`` for GSM8K); ignored for a data file; ``None`` or
            ``""`` for a dataset without configs.
        split: The split to read.
        question_field: Column holding the question.
        answer_field: Column holding the solution that ends in ``#### N``.
        limit: Keep only the first ``limit`` rows.

    Returns:
        The problems, in dataset order.

    Raises:
        ValueError: a column is missing, or an answer has no ``#### N``.
    """
    import datasets

    # Offline, datasets keys its cache of a local folder by the folder's *name*: a second
    # folder called "gsm8k" (or a rewritten one) is served the first one's rows. Local data
    # is small, so it is read through a throw-away cache instead.
    with tempfile.TemporaryDirectory(prefix="grpo-gsm8k-data-") as scratch:
        local = {"cache_dir": scratch, "keep_in_memory": True} if Path(dataset).exists() else {}
        suffix = Path(dataset).suffix.lower()
        if suffix in _FILE_BUILDERS and Path(dataset).is_file():
            table = datasets.load_dataset(
                _FILE_BUILDERS[suffix], data_files={split: dataset}, split=split, **local
            )
        else:
            table = datasets.load_dataset(dataset, subset or None, split=split, **local)
        missing = [name for name in (question_field, answer_field) if name not in table.column_names]
        if missing:
            columns = table.column_names
            raise ValueError(
                f"dataset '{dataset}' split '{split}' has no column(s) {missing} (columns: {columns})"
            )
        if limit is not None:
            table = table.select(range(min(limit, len(table))))
        return [
            Problem(
                question=row[question_field], answer=row[answer_field], gold=gold_answer(row[answer_field])
            )
            for row in table
        ]


def build_prompt(tokenizer: Any, question: str, system_prompt: str | None = None) -> str:
    r"""
    The chat-formatted prompt text, ending where the assistant's answer starts.

    Falls back to ``"Question: ...\nAnswer:"`` for a tokenizer without a chat template.
    """
    messages = [{"role": "user", "content": question}]
    if system_prompt:
        messages.insert(0, {"role": "system", "content": system_prompt})
    if getattr(tokenizer, "chat_template", None):
        text: str = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return text
    prefix = f"{system_prompt}\n\n" if system_prompt else ""
    return f"{prefix}Question: {question}\nAnswer:"


def resolve_device(device: str) -> str:
    """Map ``auto`` to ``cuda`` when available, else ``cpu``; check an explicit ``cuda``."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"'device' is {device!r} but torch sees no CUDA device; use 'cpu' or 'auto'")
    if device != "cpu" and not device.startswith("cuda"):
        raise ValueError(f"'device' must be 'cpu', 'cuda', 'cuda:N' or 'auto' (got {device!r})")
    return device


def load_policy(model: str, *, device: str = "cpu") -> tuple[Any, Any]:
    """
    Load the policy and its tokenizer with ``from_pretrained`` (hub id or local folder).

    The weights are float32 whatever the checkpoint holds (optimizer updates of ~1e-6 vanish
    in bf16 weights); lower-precision compute comes from :func:`autocast`. The tokenizer pads
    on the left (prompts are generated in batches) and always has a pad token.

    Returns:
        ``(model, tokenizer)``, the model in train mode on ``device``.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    policy = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).to(device)
    policy.train()
    # Sampling must follow our settings only: a checkpoint's own top_k, repetition_penalty...
    # would make generate sample from a distribution the loss's log-probs do not describe.
    configured = policy.generation_config
    policy.generation_config = GenerationConfig(
        eos_token_id=configured.eos_token_id,
        bos_token_id=configured.bos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return policy, tokenizer


def autocast(device: str, dtype: str) -> Any:
    """
    A context for forward passes in ``dtype`` (``float32``: no autocast).

    Raises:
        ValueError: ``dtype`` is not ``float32``, ``bfloat16`` or ``float16``.
    """
    import contextlib

    import torch

    choices = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype not in choices:
        raise ValueError(f"'dtype' must be one of {sorted(choices)} (got {dtype!r})")
    low = choices[dtype]
    if low is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.split(":", maxsplit=1)[0], dtype=low)


def eos_token_ids(tokenizer: Any, model: Any) -> list[int]:
    """Every id that ends a completion: the tokenizer's EOS and the model's (may be a list)."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif isinstance(configured, Sequence):
        ids.update(int(i) for i in configured)
    if not ids:
        raise ValueError("the tokenizer and the model define no EOS token; cannot tell where completions end")
    return sorted(ids)
