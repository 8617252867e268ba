"""
Doubles of twinkle-kit 0.5.1 for the fast lane, and a scripted sampler shared with the real lane.

- ``grpo_advantage``: the arithmetic of ``twinkle.advantage.GRPOAdvantage.__call__``
  (``twinkle/advantage/grpo.py``): float32, a 2-D tensor summed over its last dimension,
  ``view(-1, G)``, minus the group mean, divided by torch's sample std + 1e-8 (``group``) or
  the std of every reward (``batch``); ``none`` only centres. ``test_real_twinkle.py``
  checks it against the installed class.
- ``Sequence`` / ``Response``: the fields of ``SampledSequence`` / ``SampleResponse``
  (``twinkle/data_format/sampling.py``) the adapter reads.
- ``scripted_sampler(base, sequence_cls, response_cls)``: a sampler class with twinkle's
  ``sample(inputs, sampling_params=None, adapter_name='', ...)`` whose completions are
  scripted per prompt. With twinkle's ``Sampler`` as ``base`` and its data types, it is a
  real ``Sampler`` subclass; here it is built on doubles.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch


def grpo_advantage(rewards: Any, num_generations: int = 1, scale: str = "group", **_: Any) -> torch.Tensor:
    """twinkle 0.5.1's GRPOAdvantage arithmetic (for G > 1)."""
    values = rewards if isinstance(rewards, torch.Tensor) else torch.tensor(rewards, dtype=torch.float32)
    if values.dim() > 1:
        values = values.sum(dim=-1)
    grouped = values.view(-1, num_generations)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if scale == "group":
        centred = centred / (grouped.std(dim=1, keepdim=True) + 1e-8)
    elif scale == "batch":
        centred = centred / (grouped.std() + 1e-8)
    return centred.view(-1)


@dataclass
class Sequence:
    """The fields of twinkle's ``SampledSequence`` the adapter and the tests read."""

    stop_reason: str
    tokens: list[int]
    logprobs: list[list[tuple[int, float]]] | None = None
    decoded: str | None = None
    new_input_feature: dict[str, Any] | None = None
    routed_experts: Any = None


@dataclass
class Response:
    """twinkle's ``SampleResponse``: the sequences of one request."""

    sequences: list[Any]
    prompt_token_ids: list[int] | None = None
    prompt_logprobs: Any = None
    topk_prompt_logprobs: Any = None


def prompt(pid: str, answer: str = "4") -> dict[str, Any]:
    """A twinkle ``Trajectory`` prompt (GSM8KProcessor's layout: ground truth in ``user_data``)."""
    return {
        "messages": [{"role": "user", "content": f"problem {pid}"}],
        "user_data": [("ground_truth", answer), ("pid", pid)],
    }


def pid_of(trajectory: dict[str, Any]) -> str:
    return dict(trajectory["user_data"])["pid"]


#: A completion script: (prompt id, member index, how often that prompt was sampled) -> text.
Script = Callable[[str, int, int], "str | tuple[str, str]"]


def by_kind(pid: str, member: int, _visit: int) -> str | tuple[str, str]:
    """The default script, by the prompt id's prefix (``dead-3``, ``live-0``, ...)."""
    kind = pid.split("-", maxsplit=1)[0]
    if kind == "live":  # half right: a real signal
        return r"so \boxed{4}" if member % 2 else r"so \boxed{5}"
    if kind == "solved":  # all right, lengths differ
        return "x" * member + r" \boxed{4}"
    if kind == "phantom":  # all wrong, lengths differ: brevity alone has spread
        return "x" * (10 * member) + r" \boxed{5}"
    if kind == "error":  # the engine failed one request
        return (r"\boxed{4}", "error") if member == 0 else r"\boxed{5}"
    return r"\boxed{5}"  # dead: all wrong, all the same


def scripted_sampler(
    base: type = object, sequence_cls: type = Sequence, response_cls: type = Response
) -> type:
    """A sampler class on ``base`` that answers each prompt as its script says."""

    class ScriptedSampler(base):  # type: ignore[misc, valid-type]
        """Blocks for a whole call, like vLLMSampler; honours ``SamplingParams.num_samples``."""

        def __init__(self, script: Script = by_kind) -> None:
            if base is not object:
                super().__init__()
            self.script = script
            self.calls: list[int] = []  # prompts (requests) per call
            self.visits: dict[str, int] = {}

        def sample(
            self, inputs: Any, sampling_params: Any = None, adapter_name: str = "", **_: Any
        ) -> list[Any]:
            params = sampling_params if sampling_params is not None else {}
            samples = params.get("num_samples", 1) if isinstance(params, dict) else params.num_samples
            requests = [inputs] if isinstance(inputs, dict) else list(inputs)
            self.calls.append(len(requests))
            members: dict[str, itertools.count[int]] = {}
            responses = []
            for request in requests:
                pid = pid_of(request)
                counter = members.setdefault(pid, itertools.count())
                visit = self.visits.get(pid, 0)
                sequences = [self._sequence(request, pid, next(counter), visit) for _ in range(samples)]
                responses.append(response_cls(sequences=sequences, prompt_token_ids=[1, 2, 3]))
            for pid in members:
                self.visits[pid] = self.visits.get(pid, 0) + 1
            return responses

        def apply_patch(self, patch_cls: Any, **kwargs: Any) -> None:
            raise NotImplementedError

        def _sequence(self, request: dict[str, Any], pid: str, member: int, visit: int) -> Any:
            outcome = self.script(pid, member, visit)
            text, stop = outcome if isinstance(outcome, tuple) else (outcome, "stop")
            tokens = list(range(len(text.split()) + 1))
            feature = {**request, "messages": [*request["messages"], {"role": "assistant", "content": text}]}
            return sequence_cls(
                stop_reason=stop,
                tokens=tokens,
                logprobs=[[(token, -0.5)] for token in tokens],
                decoded=text,
                new_input_feature=feature,
            )

    return ScriptedSampler


def completion(sequence: Any) -> str:
    return sequence.new_input_feature["messages"][-1]["content"]


def score(sequences: list[Any]) -> dict[str, list[float]]:
    """accuracy (the ``\\boxed{}`` answer is the ground truth) and brevity, per completion."""
    accuracy, brevity = [], []
    for sequence in sequences:
        text = completion(sequence)
        truth = dict(sequence.new_input_feature["user_data"])["ground_truth"]
        accuracy.append(1.0 if text.endswith(rf"\boxed{{{truth}}}") else 0.0)
        brevity.append(max(0.0, 1.0 - len(text) / 100))
    return {"accuracy": accuracy, "brevity": brevity}


@dataclass
class Prompts:
    """An endless supply of prompts of one kind, for ``extra_prompts``; counts what was drawn."""

    kinds: list[str]
    drawn: int = 0
    taken: list[str] = field(default_factory=list)

    def __iter__(self) -> Prompts:
        return self

    def __next__(self) -> dict[str, Any]:
        kind = self.kinds[self.drawn % len(self.kinds)]
        pid = f"{kind}-x{self.drawn}"
        self.drawn += 1
        self.taken.append(pid)
        return prompt(pid)
