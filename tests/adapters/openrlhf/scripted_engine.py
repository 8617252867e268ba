"""
A scripted stand-in for OpenRLHF's vLLM engine (``RolloutRayActor``): the remote methods the generator calls.

``get_num_unfinished_requests()`` and ``generate_responses(prompt, label, sampling_params,
max_length, hf_tokenizer, num_samples, images)`` return what OpenRLHF 0.11.2's engine
returns: one response dict per sample, with the fields ``_process_response_into_experience``
reads. The script maps a prompt to its members' scores (and optional ``extra_logs``, a
delay, or a failure). ``LocalEngine`` answers ``.remote(...)`` calls in-process for the fake
``ray`` of the doubles; ``ScriptedEngine`` is the body of the Ray actor of the real-Ray tests.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

PROMPT_TOKENS = 3


class EngineFailureError(RuntimeError):
    """What a scripted prompt marked ``fail`` raises (an engine or reward-function error)."""


def responses(prompt: str, label: Any, num_samples: int, entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``num_samples`` response dicts of one scripted prompt."""
    if entry.get("fail"):
        raise EngineFailureError(f"scripted failure for {prompt!r}")
    scores = list(entry["scores"])
    if len(scores) != num_samples and not entry.get("any_size"):  # any_size: a malformed engine answer
        raise ValueError(f"{prompt!r} scripts {len(scores)} scores for {num_samples} samples")
    extra = entry.get("extra_logs", [{}] * len(scores))
    out = []
    for index, score in enumerate(scores):
        length = 2 + index % 3
        out.append(
            {
                "prompt": prompt,
                "label": label,
                "observation_tokens": list(range(PROMPT_TOKENS + length)),
                "action_ranges": [(PROMPT_TOKENS, PROMPT_TOKENS + length)],
                "reward": entry.get("reward", score),
                "scores": score,
                "rollout_log_probs": None,
                "truncated": False,
                "extra_logs": dict(extra[index]),
                "sample": index,
            }
        )
    return out


class ScriptedEngine:
    """The engine's behaviour: ``generate_responses`` answers from the script, counting calls."""

    def __init__(self, script: Mapping[str, Mapping[str, Any]]) -> None:
        self.script = dict(script)
        self.calls: list[str] = []

    def get_num_unfinished_requests(self) -> int:
        return 0

    def generate_responses(
        self,
        prompt: str,
        label: Any,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        num_samples: int = 1,
        images: Any = None,
    ) -> list[dict[str, Any]]:
        del sampling_params, max_length, hf_tokenizer, images
        self.calls.append(prompt)
        entry = self.script[prompt]
        if entry.get("delay"):
            time.sleep(float(entry["delay"]))
        return responses(prompt, label, num_samples, entry)

    def generated(self) -> list[str]:
        return list(self.calls)


class FakeRef:
    """A finished "ref": the responses of one prompt, or the error its generation raised."""

    def __init__(self, call: Any) -> None:
        try:
            self.value, self.error = call(), None
        except Exception as exc:  # resolved by FakeRay.get, as Ray re-raises a task's error
            self.value, self.error = None, exc


class _Remote:
    def __init__(self, method: Any) -> None:
        self._method = method

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return FakeRef(lambda: self._method(*args, **kwargs))


class LocalEngine:
    """A :class:`ScriptedEngine` whose methods answer ``.remote(...)`` with :class:`FakeRef`."""

    def __init__(self, script: Mapping[str, Mapping[str, Any]]) -> None:
        self.engine = ScriptedEngine(script)
        self.get_num_unfinished_requests = _Remote(self.engine.get_num_unfinished_requests)
        self.generate_responses = _Remote(self.engine.generate_responses)


class FakeRay:
    """The ``ray`` functions the generator calls: ``wait`` yields refs first in, first out; no cancel."""

    def __init__(self) -> None:
        self.cancelled: list[Any] = []
        self.waits = 0

    def wait(self, refs: list[Any], num_returns: int = 1, timeout: float | None = None) -> tuple[list, list]:
        del timeout
        self.waits += 1
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref: Any) -> Any:
        if isinstance(ref, list):
            return [self.get(item) for item in ref]
        if isinstance(ref, FakeRef):
            if ref.error is not None:
                raise ref.error
            return ref.value
        return ref

    def cancel(self, ref: Any) -> None:
        self.cancelled.append(ref)


def args(*, n: int, batch_size: int, low: float = 0.0, high: float = 1.0, filtering: bool = True) -> Any:
    """The slice of OpenRLHF's parsed arguments the generator reads."""
    return SimpleNamespace(
        rollout=SimpleNamespace(batch_size=batch_size, n_samples_per_prompt=n, vllm_generate_batch_size=None),
        algo=SimpleNamespace(
            dynamic_filtering_enable=filtering,
            dynamic_filtering_range=(low, high),
            advantage=SimpleNamespace(is_correction_level="off"),
        ),
        vllm=SimpleNamespace(enable_sleep=False),
    )


def loader(prompts: list[str], batch: int = 1) -> list[tuple[Any, list[str], list[Any], list[Any]]]:
    """OpenRLHF's prompt dataloader batches: ``(datasource, prompts, labels, images)``."""
    return [
        (
            "data",
            prompts[i : i + batch],
            [f"label-{p}" for p in prompts[i : i + batch]],
            [None] * len(prompts[i : i + batch]),
        )
        for i in range(0, len(prompts), batch)
    ]
