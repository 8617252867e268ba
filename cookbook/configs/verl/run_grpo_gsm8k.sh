#!/usr/bin/env bash
# verl's GSM8K GRPO example (examples/grpo_trainer/run_qwen2-7b.sh) with group admission:
# the same overrides, on top of group_admission.yaml. Extra arguments are passed to verl.
# Prepare the data first: python examples/data_preprocess/gsm8k.py --local_save_dir ~/data/gsm8k
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
overrides=()
while IFS= read -r line; do
  [[ -n "$line" ]] && overrides+=("${line//\$\{HOME\}/$HOME}")
done < "$here/gsm8k_grpo_overrides.txt"
exec python3 -m verl.trainer.main_ppo --config-path="$here" --config-name=group_admission \
  "${overrides[@]}" "$@"
