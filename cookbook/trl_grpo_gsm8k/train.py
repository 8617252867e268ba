r"""
GRPO on GSM8K the TRL way, training only on groups whose *accuracy* varies.

Offline (default): the embedded easy GSM8K-format data and tiny Qwen2 of cookbook/grpo_gsm8k.
On a GPU: python -m cookbook.trl_grpo_gsm8k.train --model Qwen/Qwen2.5-0.5B-Instruct \
    --dataset openai/gsm8k --steps 200 --batch-size 16 --max-completion-length 512
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from datasets import load_dataset
from trl import GRPOConfig

from cookbook.grpo_gsm8k.rewards import answers_match, brevity_score, extract_answer, gold_answer
from group_admission.adapters.trl import AdmissionGRPOTrainer

#: A completion as TRL passes it: text, or conversational ``[{"role": "assistant", "content": ...}]``.
Completion = str | list[dict[str, str]]


def text(completion: Completion) -> str:
    """A completion's text."""
    return completion if isinstance(completion, str) else completion[-1]["content"]


def accuracy(completions: Sequence[Completion], answer: Sequence[str], **_: Any) -> list[float]:
    """1.0 for each completion whose final answer is the gold one (a TRL reward function)."""
    return [
        float(answers_match(extract_answer(text(c), lenient=True), gold_answer(a)))
        for c, a in zip(completions, answer, strict=True)
    ]


def brevity(completions: Sequence[Completion], **_: Any) -> list[float]:
    """A shaping term (a TRL reward function): spread even when every answer is wrong."""
    return [0.5 * brevity_score(text(c), free_chars=300, lenient=True) for c in completions]


def main() -> None:
    """Train with TRL's GRPO trainer and admission gated on accuracy (the flags: ``--help``)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="hub id or folder (default: the embedded tiny model)")
    parser.add_argument("--dataset", help="GSM8K-format hub id or folder (default: the embedded data)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-completion-length", type=int, default=24)
    parser.add_argument("--output-dir", default="runs/trl_grpo_gsm8k")
    args = parser.parse_args()
    if args.model is None or args.dataset is None:
        from cookbook.grpo_gsm8k.offline.prepare_demo import prepare_demo

        data, model = prepare_demo()
        args.dataset, args.model = args.dataset or str(data), args.model or str(model)
    dataset = load_dataset(args.dataset, "main", split="train")
    dataset = dataset.map(lambda row: {"prompt": [{"role": "user", "content": row["question"]}]})
    on_cpu = "tiny-qwen2" in args.model
    config = GRPOConfig(
        output_dir=args.output_dir,
        max_steps=args.steps,
        per_device_train_batch_size=args.batch_size,
        num_generations=8,
        max_completion_length=args.max_completion_length,
        learning_rate=1e-3 if on_cpu else 1e-6,
        beta=0.0,  # masking is exact for every loss type at beta=0
        bf16=not on_cpu,
        gradient_checkpointing=not on_cpu,
        use_cpu=on_cpu,
        logging_steps=5,
        report_to=[],
        save_strategy="no",
    )
    trainer = AdmissionGRPOTrainer(
        model=args.model,
        reward_funcs=[accuracy, brevity],
        args=config,
        train_dataset=dataset,
        admission={"min_reward_std": 1e-6, "gate_on": ["accuracy"]},
        budget={"max_extra_groups": 4, "max_resample_rounds": 2},
    )
    trainer.train()
    print(trainer.admission_session.stats)


if __name__ == "__main__":
    main()
