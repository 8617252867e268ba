#!/usr/bin/env bash
# Run RAGEN's train.py with group admission. Usage, from a RAGEN checkout:
#   bash /path/to/cookbook/configs/ragen/run_group_admission.sh --config-name _2_sokoban [more overrides]
# Needs RAGEN's own environment (GPU, vLLM, verl) plus: pip install group-admission
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mapfile -t overrides < <(grep -v '^#' "${here}/overrides.txt" | grep -v '^[[:space:]]*$')
exec python train.py "$@" "${overrides[@]}"
