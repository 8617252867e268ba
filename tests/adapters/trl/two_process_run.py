"""Run by test_distributed under torchrun: two gloo processes, masking only; each rank writes its verdicts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from trl_helpers import accuracy, brevity, grpo_config, prompt_dataset

from group_admission.adapters.trl import AdmissionGRPOTrainer


class Recording(AdmissionGRPOTrainer):
    """Keeps every step's group verdicts and this rank's masked batch summary."""

    verdicts: list[list[bool]]
    local: list[dict[str, Any]]

    def _judge(self, output: dict[str, Any]) -> Any:
        verdict = super()._judge(output)
        self.verdicts.append(verdict.keep.tolist())
        return verdict

    def _mask(self, output: dict[str, Any], filled: Any) -> dict[str, Any]:
        masked = super()._mask(output, filled)
        self.local.append(
            {
                "rows_with_tokens": int((masked["completion_mask"].sum(dim=1) > 0).sum()),
                "num_items_in_batch": int(masked["num_items_in_batch"]),
                "local_tokens": int(masked["completion_mask"].sum()),
            }
        )
        return masked


def main(model: str, out: str) -> None:
    trainer = Recording(
        model=model,
        reward_funcs=[accuracy, brevity],
        args=grpo_config(Path(out), per_device_train_batch_size=4, max_steps=3),
        train_dataset=prompt_dataset(),
        admission={"min_reward_std": 1e-6, "gate_on": ["accuracy"]},
    )
    trainer.verdicts, trainer.local = [], []
    trainer.train()
    rank = int(os.environ["RANK"])
    record = {
        "world": trainer.accelerator.num_processes,
        "verdicts": trainer.verdicts,
        "local": trainer.local,
        "stats": trainer.admission_session.stats.to_dict(),
    }
    Path(out, f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
