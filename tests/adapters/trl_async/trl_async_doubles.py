"""
What the TRL asynchronous adapter's tests stand in for: vLLM's completion endpoint, and nothing else.

:class:`StandInLoop` is the adapter's :class:`AdmissionRolloutLoop` (TRL's own rollout loop)
whose one HTTP call to vLLM, ``_generate_one_turn``, returns tokens drawn here instead. The
spawned worker imports this module by name, so it lives on the tests' ``sys.path``.
"""

from __future__ import annotations

import asyncio
import random
import zlib
from typing import Any

from group_admission.adapters.trl_async import AdmissionRolloutLoop

#: The token a completion is made of when it answers right ("1") or wrong ("0").
RIGHT, WRONG = "1", "0"


def accuracy(completions: list[Any], answer: list[str], **_: Any) -> list[float]:
    """1.0 when the completion's text is the answer, else 0.0 (a reward function TRL calls)."""
    return [float(c[-1]["content"].strip() == a) for c, a in zip(completions, answer, strict=True)]


def pass_rate(prompt_text: str) -> float:
    """Each prompt's fixed chance of a right answer: 0, 1 or in between, read off its text."""
    return {"dead": 0.0, "solved": 1.0}.get(prompt_text.split(maxsplit=1)[0], 0.5)


class StandInLoop(AdmissionRolloutLoop):  # type: ignore[misc]
    """The adapter's loop with vLLM's ``/v1/completions`` stood in: one answer token and EOS."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._draws = random.Random(0)

    async def _generate_one_turn(self, prompt_ids: list[int]) -> tuple[list[int], list[float]]:
        await asyncio.sleep(0)
        text = self.tokenizer.decode(prompt_ids)
        start = text.rfind("user\n") + len("user\n")
        seed = zlib.crc32(text.encode()) ^ self._draws.getrandbits(32)
        right = random.Random(seed).random() < pass_rate(text[start:])
        answer = self.tokenizer.convert_tokens_to_ids(RIGHT if right else WRONG)
        ids = [answer, self.eos_token_ids[0]]
        return ids, [-0.5] * len(ids)


class CpuFlashAttention:
    """FlashAttention-3's ``flash_attn_varlen_func`` (a GPU kernel TRL loads from the Hub), in torch."""

    @staticmethod
    def flash_attn_varlen_func(
        q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any, _max_q: int, _max_k: int, **options: Any
    ) -> Any:
        import torch

        out = torch.empty_like(q)
        for i in range(len(cu_q) - 1):
            qs, ks = slice(int(cu_q[i]), int(cu_q[i + 1])), slice(int(cu_k[i]), int(cu_k[i + 1]))
            query, key, value = q[qs].transpose(0, 1), k[ks].transpose(0, 1), v[ks].transpose(0, 1)
            repeat = query.shape[0] // key.shape[0]
            key, value = key.repeat_interleave(repeat, 0), value.repeat_interleave(repeat, 0)
            lq, lk = query.shape[1], key.shape[1]
            # Causal from the bottom right, as flash-attn aligns queries shorter than keys.
            mask = torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=lk - lq)
            out[qs] = torch.nn.functional.scaled_dot_product_attention(
                query, key, value, attn_mask=mask, scale=options.get("softmax_scale")
            ).transpose(0, 1)
        return out


class NoWeightSync:
    """TRL's ``weight_transfer`` injection point with nothing to send to (no vLLM server)."""

    def init_weight_transfer(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def destroy(self) -> None: ...

    def send_weights(self, iterator: Any) -> None:
        for _ in iterator:
            pass


def stand_in_gpu_only_parts() -> None:
    """Stand in what TRL's async trainer needs a GPU or vLLM for (see the module's docstring)."""
    import trl.experimental.async_grpo.async_grpo_trainer as trainer_module
    import trl.experimental.async_grpo.async_rollout_worker as worker_module
    import trl.experimental.async_grpo.packing as packing

    worker_module.is_vllm_available = lambda: True  # the worker checks vLLM is installed; it is stood in
    trainer_module.get_peak_flops_per_device = lambda *_a, **_k: None  # a CUDA device query, for MFU logs
    packing._flash_attn = lambda: CpuFlashAttention  # the FA3 kernel


def prompts(kinds: list[str]) -> Any:
    """A TRL prompt dataset: one chat prompt per kind (``dead``, ``mixed``, ``solved``), answer "1"."""
    from datasets import Dataset

    rows = [
        {"prompt": [{"role": "user", "content": f"{kind} {i}"}], "answer": RIGHT}
        for i, kind in enumerate(kinds)
    ]
    return Dataset.from_list(rows)
