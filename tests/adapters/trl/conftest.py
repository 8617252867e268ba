"""Fixtures of the TRL adapter tests: a tiny Qwen2 built offline and a prompt set with dead groups."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

# The helpers module of these tests: `from trl_helpers import accuracy, ...`.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A randomly initialised ~0.2 M-parameter Qwen2 and its byte-level tokenizer, saved to disk."""
    from cookbook.grpo_gsm8k.offline.tiny_model import build_model, train_tokenizer

    folder = tmp_path_factory.mktemp("tiny-qwen2")
    tokenizer = train_tokenizer(["#### 0123456789 How many apples? Tom has 3 pens."], vocab_size=300)
    model = build_model(tokenizer, hidden_size=64, layers=2, seed=0)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)
