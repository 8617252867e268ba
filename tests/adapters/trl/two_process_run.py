"""Run by test_distributed under torchrun: two gloo processes, masking only; each rank writes its verdicts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from trl_helpers import accuracy, brevity, dead_history, grpo_config, prompt_dataset

from group_admission.adapters.trl import AdmissionGRPOTrainer


class Recording(AdmissionGRPOTrainer):
    """Keeps every step's group verdicts and this rank's masked batch summary."""

    verdicts: list[list[bool]]
    local: list[dict[str, Any]]

    def _judge(self, tokens: int) -> Any:
        verdict = super()._judge(tokens)
        self.verdicts.append(verdict.keep.tolist())
        return verdict

    def _mask(self, output: dict[str, Any], filled: Any, report: Any) -> dict[str, Any]:
        masked = super()._mask(output, filled, report)
        self.local.append(
            {
                "rows_with_tokens": int((masked["completion_mask"].sum(dim=1) > 0).sum()),
                "num_items_in_batch": int(masked["num_items_in_batch"]),
                "local_tokens": int(masked["completion_mask"].sum()),
            }
        )
        return masked


class RecordingPrompts(Recording):
    """Also keeps the prompt ids judged at each step."""

    judged: dict[int, list[Any]]

    def _judge_round(self, output: dict[str, Any], ids: Any, tokens: int) -> Any:
        self.judged.setdefault(self.admission_session.step, []).extend(ids or [])
        return super()._judge_round(output, ids, tokens)


def main(model: str, out: str, mode: str) -> None:
    history = mode == "history"
    trainer = (RecordingPrompts if history else Recording)(
        model=model,
        reward_funcs=[accuracy, brevity],
        args=grpo_config(Path(out), per_device_train_batch_size=4, max_steps=4 if history else 3),
        train_dataset=prompt_dataset(),
        admission={"min_reward_std": 1e-6, "gate_on": ["accuracy"]},
        loss_scale="kept",  # the normaliser recounted over both ranks (test_distributed)
        # Every rank builds the same history: the even rows (all-wrong groups) seen dead.
        prompt_history=dead_history(frozenset(range(0, 64, 2)), frozenset(range(1, 64, 2)))
        if history
        else None,
    )
    trainer.verdicts, trainer.local, trainer.judged = [], [], {}
    trainer.train()
    rank = int(os.environ["RANK"])
    record = {
        "world": trainer.accelerator.num_processes,
        "verdicts": trainer.verdicts,
        "local": trainer.local,
        "stats": trainer.admission_session.stats.to_dict(),
    }
    if history:
        record["judged"] = {str(step): ids for step, ids in trainer.judged.items()}
        record["history"] = trainer.prompt_history.to_dict()
        record["skipped"] = [
            e["group_admission/prompts_skipped"]
            for e in trainer.state.log_history
            if "group_admission/prompts_skipped" in e
        ]
    Path(out, f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "plain")
