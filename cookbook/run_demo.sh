#!/usr/bin/env bash
# The README's main job: GRPO with group admission (the recommended configuration) beside plain GRPO,
# end to end, offline, on a 2-core CPU. Creates .venv and installs requirements-dev.txt unless
# .venv was already installed from it (.ci/lib.sh), builds the tiny demo policy and the
# synthetic GSM8K-format problems under .cache/grpo_gsm8k/ (once), then trains both runs side
# by side (cookbook/grpo_gsm8k/offline/config.yaml). Extra arguments go to the training
# script, e.g. `bash cookbook/run_demo.sh --max-samples 1024 --resample retry`.
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/lib.sh

ensure_dev_venv

# Nothing may reach a hub. The same figures on every x86-64 CPU with AVX2: pinned code paths,
# one thread per process (also what a shared 2-core box needs: torch threads spin).
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export HF_HOME="${HF_HOME:-$PWD/.cache/huggingface}"
export TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg
. cookbook/grpo_gsm8k/offline/pin.sh

phase "building the demo's problems and tiny policy (once, about a minute; then reused)" \
  .venv/bin/python -m cookbook.grpo_gsm8k.offline.prepare_demo
phase "training with admission, and plain GRPO beside it (cookbook/grpo_gsm8k/offline/config.yaml)" \
  .venv/bin/python -m cookbook.grpo_gsm8k.train --config cookbook/grpo_gsm8k/offline/config.yaml "$@"
