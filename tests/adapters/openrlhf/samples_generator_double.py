"""
A double of OpenRLHF 0.11.2's ``openrlhf.trainer.ppo_utils.samples_generator``, for the fast lane.

It has what the adapter relies on: module globals ``ray`` and ``_collect_prompt_batch``,
and a ``SamplesGenerator`` with the same constructor and ``_dispatch_prompts_to_vllm`` /
``_process_response_into_experience`` / ``_generate_vllm``. The keep rule and the
one-for-one replacement behave as OpenRLHF's (read from its source, written anew); the
lane ``.ci/openrlhf`` runs the same tests against the real module.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from adapters.openrlhf.scripted_engine import FakeRay

ray = FakeRay()


def _collect_prompt_batch(dataloader_iter: Any, num_prompts: int) -> tuple[list, list, list, bool]:
    prompts: list[Any] = []
    labels: list[Any] = []
    images: list[Any] = []
    while len(prompts) < num_prompts:
        try:
            _, batch_prompts, batch_labels, batch_images = next(dataloader_iter)
        except StopIteration:
            return prompts, labels, images, True
        room = num_prompts - len(prompts)
        prompts += batch_prompts[:room]
        labels += batch_labels[:room]
        images += batch_images[:room]
    return prompts, labels, images, False


class SamplesGenerator:
    def __init__(
        self, strategy: Any, prompts_dataloader: Any, eval_dataloader: Any, tokenizer: Any, vllm_engines: Any
    ):
        self.strategy = strategy
        self.args = strategy.args
        self.tokenizer = tokenizer
        self.vllm_engines = vllm_engines or []
        self.prompts_dataloader = prompts_dataloader
        self.eval_dataloader = eval_dataloader

    def _generate_vllm(
        self, dataloader_iter: Any, num_prompts: int, dynamic_filtering: Any, **generate_kwargs: Any
    ):
        prompts, labels, images, exhausted = _collect_prompt_batch(dataloader_iter, num_prompts)
        if not prompts:
            return [], 0, True
        pending = self._dispatch_prompts_to_vllm(prompts, labels, images=images, **generate_kwargs)
        consumed = len(prompts)
        accepted: list[Any] = []
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=10.0)
            for ref in ready:
                group = [self._process_response_into_experience(r, **generate_kwargs) for r in ray.get(ref)]
                if dynamic_filtering and all(e.scores is not None for e in group):
                    mean = sum(e.scores[0] for e in group) / len(group)
                    low, high = self.args.algo.dynamic_filtering_range
                    if not low < mean < high:
                        group = []
                if group:
                    accepted += group
                elif dynamic_filtering:
                    new, new_labels, new_images, exhausted = _collect_prompt_batch(dataloader_iter, 1)
                    consumed += len(new)
                    if new:
                        pending += self._dispatch_prompts_to_vllm(
                            new, new_labels, images=new_images, **generate_kwargs
                        )
        return accepted, consumed, exhausted

    def _dispatch_prompts_to_vllm(
        self, prompts: list, labels: list, *, images: Any = None, **generate_kwargs: Any
    ):
        n = generate_kwargs.get("n_samples_per_prompt", self.args.rollout.n_samples_per_prompt)
        engine = self.vllm_engines[0]
        return [
            engine.generate_responses.remote(
                prompt=prompt,
                label=label,
                sampling_params=None,
                max_length=2048,
                hf_tokenizer=None,
                num_samples=n,
            )
            for prompt, label in zip(prompts, labels, strict=True)
        ]

    def _process_response_into_experience(self, response: dict, **generate_kwargs: Any) -> Any:
        score = response.get("scores")
        info = {
            "reward": [response["reward"]],
            "score": [score],
            **{k: [v] for k, v in response["extra_logs"].items()},
        }
        length = response["action_ranges"][0][1] - response["action_ranges"][0][0]
        return SimpleNamespace(
            prompts=[response["prompt"]],
            labels=[response["label"]],
            scores=None if score is None else [score],
            rewards=[response["reward"]],
            response_length=[length],
            info=info,
            sample=response["sample"],
        )
