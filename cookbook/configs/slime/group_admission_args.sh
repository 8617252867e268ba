#!/usr/bin/env bash
# slime arguments that turn on group admission. Source this file from your launch script,
# then add "${GROUP_ADMISSION_ARGS[@]}" to the train.py (or train_async.py) command line:
#   source /path/to/cookbook/configs/slime/group_admission_args.sh
#   python train.py "${MODEL_ARGS[@]}" ... "${GROUP_ADMISSION_ARGS[@]}"
# group-admission must be installed where slime's RolloutManager actor runs.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GROUP_ADMISSION_ARGS=(
  # Over-sample 2x: with equal sizes the keep_when_insufficient fallback never drops.
  --rollout-batch-size 16
  --n-samples-per-prompt 8
  --over-sampling-batch-size 32
  --dynamic-sampling-filter-path group_admission.adapters.slime.admission_filter
  --rollout-all-samples-process-path group_admission.adapters.slime.record_all_samples
  --custom-rollout-log-function-path group_admission.adapters.slime.log_rollout_metrics
  --custom-config-path "${here}/group_admission.yaml"
)
