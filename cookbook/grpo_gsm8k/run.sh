#!/usr/bin/env bash
# Full-size GRPO on GSM8K on one GPU: Qwen2.5-0.5B-Instruct on openai/gsm8k (main), real hub ids.
# Needs network access to the hub (or both in the local HF cache, or shadowed by folders of the
# same names under the current directory). Every flag can be overridden: bash run.sh --steps 20
# Memory: ~8 GB of float32 weights + AdamW state, plus 16 prompts x 8 samples x 512 tokens.
set -euo pipefail
cd "$(dirname "$0")/../.."
export TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg

python -m cookbook.grpo_gsm8k.train \
  --model Qwen/Qwen2.5-0.5B-Instruct --dataset openai/gsm8k --subset main \
  --device cuda --dtype bfloat16 --seed 0 \
  --steps 200 --batch-size 16 --num-generations 8 --max-new-tokens 512 \
  --temperature 1.0 --top-p 1.0 --generation-batch-size 16 --resample fresh \
  --brevity-weight 0.5 --brevity-chars 300 \
  --lr 1e-6 --max-grad-norm 1.0 --clip-eps 0.2 --clip-eps-high 0.28 \
  --advantage-scale group --loss-aggregation token \
  --mini-batch-groups 4 --ppo-epochs 1 --micro-batch-size 8 \
  --admission.preset recommended --admission.policy.gate_on '[accuracy]' \
  --admission.budget.max_extra_groups 16 --admission.budget.max_extra_groups_per_round 16 \
  --admission.budget.max_resample_rounds 2 --admission.budget.max_total_samples 256 \
  --admission.budget.max_total_tokens 131072 --admission.budget.mode confidence \
  --eval-problems 200 --output-dir runs/grpo_gsm8k_qwen2.5-0.5b \
  "$@"
