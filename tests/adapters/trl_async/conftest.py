"""
Fixtures of the TRL asynchronous adapter's tests: TRL's real loop and trainer, with vLLM stood in.

What is stood in, and only that (``trl_async_doubles``): vLLM's completion endpoint (the
loop's ``_generate_one_turn``), the worker's check that vLLM is installed, the weight sync
to the vLLM server (TRL's ``weight_transfer`` injection point), the FlashAttention-3 kernel
TRL's packed training forward loads from the Hub (GPU only: a torch version on the CPU),
and the CUDA device query behind TRL's MFU logs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
pytest.importorskip("aiohttp")

HERE = Path(__file__).parent
if str(HERE) not in sys.path:  # the doubles: the spawned worker imports them by name
    sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    """The cookbook's offline byte-level tokenizer, with the response template TRL parses completions by."""
    from trl.chat_template_utils import qwen3_template

    from cookbook.grpo_gsm8k.offline.tiny_model import train_tokenizer

    tok = train_tokenizer(["0123456789 dead solved mixed user assistant"], vocab_size=300)
    tok.response_template = qwen3_template
    return tok


@pytest.fixture(scope="session")
def tiny_model(tokenizer: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A randomly initialised one-layer Qwen2 and the tokenizer, saved to disk."""
    from cookbook.grpo_gsm8k.offline.tiny_model import build_model

    folder = tmp_path_factory.mktemp("tiny-qwen2-async")
    build_model(tokenizer, hidden_size=32, layers=1, seed=0).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(autouse=True)
def _stand_ins() -> None:
    from trl_async_doubles import stand_in_gpu_only_parts

    stand_in_gpu_only_parts()
