#!/usr/bin/env bash
# The README's main job: GRPO with group admission and bounded resampling, end to end,
# offline, on a 2-core CPU. Creates .venv and installs requirements-dev.txt unless .venv was
# already installed from it (.ci/lib.sh), builds the tiny demo policy and the synthetic
# GSM8K-format problems under .cache/grpo_gsm8k/ (once), then trains
# (cookbook/grpo_gsm8k/offline/config.yaml). Extra arguments go to the training script, e.g.
# `bash cookbook/run_demo.sh --steps 10 --resample retry`.
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/lib.sh

ensure_dev_venv

# Nothing may reach a hub; one thread per process (torch threads spin on a shared 2-core box).
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export HF_HOME="${HF_HOME:-$PWD/.cache/huggingface}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg

phase "building the demo's problems and tiny policy (once, 10-35 s; then reused)" \
  .venv/bin/python cookbook/grpo_gsm8k/offline/prepare_demo.py
phase "training (cookbook/grpo_gsm8k/offline/config.yaml)" \
  .venv/bin/python cookbook/grpo_gsm8k/train.py --config cookbook/grpo_gsm8k/offline/config.yaml "$@"
