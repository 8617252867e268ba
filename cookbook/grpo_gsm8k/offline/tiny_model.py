r"""
Build the embedded demo's tiny policy offline.

A byte-level BPE tokenizer, a ~1 M-parameter Qwen2, and a short supervised warm-start on a
few correct solutions.

Nothing is downloaded. The result is saved with ``save_pretrained``, so the training script
loads it through the same ``from_pretrained`` call it uses for a hub model. The warm-start
is deliberately short: the model learns the answer format and part of the arithmetic, so
its sampled groups have mixed rewards and GRPO has something to improve.

    python -m cookbook.grpo_gsm8k.offline.tiny_model --data .cache/grpo_gsm8k/gsm8k-easy \
        --out .cache/grpo_gsm8k/tiny-qwen2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cookbook.grpo_gsm8k.data import Problem, build_prompt, load_problems

__all__ = ["build_tiny_policy", "train_tokenizer", "warm_start"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<pad>")
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def train_tokenizer(corpus: Iterable[str], *, vocab_size: int = 512) -> Any:
    """
    A byte-level BPE tokenizer trained on ``corpus``, with a ChatML template.

    Byte-level means every string is encodable, so the tokenizer never produces unknown
    tokens. ``<|im_end|>`` is the EOS (it closes the assistant's turn), ``<pad>`` the pad.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<pad>")
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(tokenizer: Any, *, hidden_size: int = 128, layers: int = 2, seed: int = 0) -> Any:
    """A randomly initialised Qwen2 sized for a CPU (about 0.5 M parameters at the defaults)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    return AutoModelForCausalLM.from_config(config)


def warm_start(
    model: Any,
    tokenizer: Any,
    problems: Sequence[Problem],
    *,
    steps: int,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    system_prompt: str | None = None,
) -> list[float]:
    """
    Supervised fine-tuning on ``prompt + solution + EOS``, with the loss on the solution only.

    Returns:
        The loss of every step.
    """
    import torch

    rng = random.Random(seed)
    pad = tokenizer.pad_token_id
    encoded = []
    for problem in problems:
        prompt = tokenizer(build_prompt(tokenizer, problem.question, system_prompt))["input_ids"]
        target = tokenizer(problem.answer + tokenizer.eos_token)["input_ids"]
        encoded.append((prompt, target))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(steps):
        batch = rng.sample(encoded, min(batch_size, len(encoded)))
        width = max(len(p) + len(t) for p, t in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (prompt, target) in enumerate(batch):
            sequence = prompt + target
            ids[row, : len(sequence)] = torch.tensor(sequence)
            labels[row, len(prompt) : len(sequence)] = torch.tensor(target)
            mask[row, : len(sequence)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


def _as_training_loads_it(model: Any, tokenizer: Any, folder: Path) -> Any:
    """
    The tokenizer as ``from_pretrained`` gives it back beside this model, to warm-start with.

    For a Qwen2 folder ``AutoTokenizer`` returns a ``Qwen2Tokenizer``, whose pre-tokenizer
    splits digits and words unlike the trained tokenizer's: a warm start on the trained
    tokenizer's ids would teach the policy token sequences that training never shows it.
    """
    from transformers import AutoTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def build_tiny_policy(
    data: str,
    out: str | Path,
    *,
    warm_start_steps: int = 400,
    warm_start_problems: int = 2000,
    hidden_size: int = 128,
    layers: int = 2,
    vocab_size: int = 512,
    seed: int = 0,
    system_prompt: str | None = None,
    force: bool = False,
) -> Path:
    """
    Build (or reuse) the tiny policy at ``out`` and return the folder.

    The folder is reused when its ``build.json`` records the same arguments, so repeated
    demo runs skip the build. The tokenizer is trained on the training split's text; the
    warm-start sees only the first ``warm_start_problems`` solutions.
    """
    import torch

    folder = Path(out)
    settings = {"warm_start_steps": warm_start_steps, "warm_start_problems": warm_start_problems}
    settings |= {"hidden_size": hidden_size, "layers": layers, "vocab_size": vocab_size, "seed": seed}
    recipe = _recipe(data, settings | {"system_prompt": system_prompt})
    stamp = folder / "build.json"
    if not force and stamp.is_file() and json.loads(stamp.read_text())["recipe"] == recipe:
        return folder
    started = time.perf_counter()
    problems = load_problems(data, "main", "train")
    corpus = [text for problem in problems for text in (problem.question, problem.answer)]
    tokenizer = train_tokenizer([*corpus, CHAT_TEMPLATE, *SPECIAL_TOKENS], vocab_size=vocab_size)
    model = build_model(tokenizer, hidden_size=hidden_size, layers=layers, seed=seed)
    tokenizer = _as_training_loads_it(model, tokenizer, folder)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        losses = warm_start(
            model,
            tokenizer,
            problems[:warm_start_problems],
            steps=warm_start_steps,
            seed=seed,
            system_prompt=system_prompt,
        )
    folder.mkdir(parents=True, exist_ok=True)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    summary = {
        "recipe": recipe,
        "parameters": sum(p.numel() for p in model.parameters()),
        "warm_start_loss_first_last": [losses[0], losses[-1]] if losses else None,
        "build_seconds": round(time.perf_counter() - started, 2),
    }
    stamp.write_text(json.dumps(summary, indent=2))
    return folder


def _recipe(data: str, settings: dict[str, Any]) -> dict[str, Any]:
    """What a build depends on: its data and settings, and the CPU code paths it ran on."""
    import torch

    return {
        "data": str(data),
        **settings,
        "version": 2,  # 2: warm-started on the tokenizer as training reloads it
        # The CPU code paths decide the weights' last bits (cookbook/grpo_gsm8k/offline/pin.sh):
        # a build made under others is rebuilt, not reused.
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl_cbwr": os.environ.get("MKL_CBWR"),
        "threads": torch.get_num_threads(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", required=True, help="GSM8K-format dataset folder (hub layout)")
    parser.add_argument("--out", required=True, help="folder to save the model and tokenizer to")
    parser.add_argument("--warm-start-steps", type=int, default=400)
    parser.add_argument("--warm-start-problems", type=int, default=2000)
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--force", action="store_true", help="rebuild even if a matching build exists")
    args = parser.parse_args(argv)
    folder = build_tiny_policy(
        args.data,
        args.out,
        warm_start_steps=args.warm_start_steps,
        warm_start_problems=args.warm_start_problems,
        hidden_size=args.hidden_size,
        layers=args.layers,
        seed=args.seed,
        force=args.force,
    )
    print(json.dumps(json.loads((folder / "build.json").read_text()), indent=2))


if __name__ == "__main__":
    main()
