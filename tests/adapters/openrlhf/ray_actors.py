"""
The Ray actors of the real-Ray tests: the scripted vLLM engine, and a process building OpenRLHF's generator.

Kept out of the test modules so that a Ray worker unpickling them imports only this file,
``scripted_engine`` and what OpenRLHF itself imports.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from adapters.openrlhf.scripted_engine import args, loader, responses


class AsyncScriptedEngine:
    """The engine's remote methods as in OpenRLHF's ``RolloutRayActor``: ``generate_responses`` is async."""

    def __init__(self, script: Mapping[str, Mapping[str, Any]]) -> None:
        self.script = dict(script)
        self.calls: list[str] = []
        self.running = 0

    def get_num_unfinished_requests(self) -> int:
        return self.running

    async def generate_responses(
        self,
        prompt: str,
        label: Any,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        num_samples: int = 1,
        images: Any = None,
    ) -> list[dict[str, Any]]:
        del max_length, hf_tokenizer, images
        assert type(sampling_params).__name__ == "SamplingParams"
        self.calls.append(prompt)
        entry = self.script[prompt]
        self.running += 1
        try:
            await asyncio.sleep(float(entry.get("delay", 0.0)))
        finally:
            self.running -= 1
        return responses(prompt, label, num_samples, entry)

    def generated(self) -> list[str]:
        return list(self.calls)


class TrainerProcess:
    """Stands in for the actor that builds OpenRLHF's generator (``PPOTrainer``, ``GenerateSamplesActor``)."""

    def trainer_classes(self) -> dict[str, Any]:
        """The ``SamplesGenerator`` each trainer module builds, as imported in this worker."""
        import openrlhf.trainer.ppo_trainer as sync
        import openrlhf.trainer.ppo_trainer_async as asynchronous

        from group_admission.adapters.openrlhf import AdmissionGeneratorMixin
        from group_admission.adapters.openrlhf._settings import current_settings

        return {
            "sync": sync.SamplesGenerator.__name__,
            "async": asynchronous.SamplesGenerator.__name__,
            "both_admission": all(
                issubclass(m.SamplesGenerator, AdmissionGeneratorMixin) for m in (sync, asynchronous)
            ),
            "same_class": sync.SamplesGenerator is asynchronous.SamplesGenerator,
            "max_extra_groups": current_settings().budget.max_extra_groups,
        }

    def generate(self, engines: list[Any], prompts: list[str], n: int, batch_size: int) -> dict[str, Any]:
        """One ``generate_samples`` call of the generator built as the sync trainer's ``__init__`` does."""
        import openrlhf.trainer.ppo_trainer as sync

        strategy = SimpleNamespace(args=args(n=n, batch_size=batch_size))
        generator = sync.SamplesGenerator(
            strategy=strategy,
            prompts_dataloader=loader(prompts),
            eval_dataloader=None,
            tokenizer=None,
            vllm_engines=engines,
        )
        samples, pass_rate, consumed, exhausted = generator.generate_samples()
        return {
            "rows": [e.prompts[0] for e in samples],
            "pass_rate": pass_rate,
            "consumed": consumed,
            "exhausted": exhausted,
            "metrics": generator.last_admission_metrics,
            "info_keys": sorted(samples[0].info) if samples else [],
        }
