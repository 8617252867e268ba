#!/usr/bin/env bash
# The README's main job: set up the environment if needed, then run the demo offline.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -r requirements-dev.txt
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg
exec .venv/bin/python cookbook/quickstart.py "$@"
