"""
A scripted SGLang engine and reward model for slime's rollout loops, on the virtual clock.

slime loads ``generate`` as its ``--custom-generate-function-path`` and ``reward`` as its
``--custom-rm-path`` (both are slime plug-in points, called inside slime's own
``generate_and_rm``), so everything around them is slime's code. Each member of a group
decodes one token per time unit up to its scripted length, as in the simulator
(``group_admission.simulation``: a group finishes when its longest member does; an
aborted member keeps the tokens it produced). ``abort_all`` is what SGLang's
``/abort_request {"abort_all": true}`` does: every running request returns at once with
``finish_reason: abort`` and the tokens decoded so far, which slime turns into an ABORTED
sample that ``--partial-rollout`` resumes later from where it stopped.

Groups are scripted by (rollout, position): the k-th fresh group a rollout starts gets
``script(rollout_id, k)``, whichever loop starts it (common random numbers); a group
resumed from slime's buffer keeps its script.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from group_admission.adapters.slime import record_all_samples
from group_admission.simulation import SimulationConfig
from group_admission.simulation._stream import GroupStream

GENERATE_PATH = "adapters.slime.scripted_engine.generate"
REWARD_PATH = "adapters.slime.scripted_engine.reward"


@attrs.frozen
class GroupScript:
    """One group: each member's response length (tokens) and reward, and whether its rollout fails."""

    lengths: tuple[int, ...]
    rewards: tuple[float | None, ...]
    failed: bool = False
    reward_delay: float = 0.0


Script = Callable[[int, int], GroupScript]


def simulated_script(config: SimulationConfig) -> Script:
    """The simulator's groups: rollout ``r``'s k-th fresh group is the k-th group of its step ``r``."""
    streams: dict[int, GroupStream] = {}

    def script(rollout_id: int, position: int) -> GroupScript:
        stream = streams.setdefault(rollout_id, GroupStream(config, rollout_id))
        batch = stream.groups(position, 1)
        return GroupScript(
            lengths=tuple(int(t) for t in batch.tokens[0]),
            rewards=tuple(float(r) for r in batch.total_rewards()[0]),
            failed=bool(batch.failed[0]),
        )

    return script


def bernoulli_script(
    *, size: int, pass_rate: float, length: tuple[int, int] = (4, 40), seed: int = 0
) -> Script:
    """Pass/fail rewards at ``pass_rate``, lengths uniform in ``length``, drawn by (rollout, position)."""

    def script(rollout_id: int, position: int) -> GroupScript:
        rng = np.random.default_rng([seed, rollout_id, position])
        lengths = rng.integers(length[0], length[1] + 1, size=size)
        rewards = (rng.random(size) < pass_rate).astype(float)
        return GroupScript(tuple(int(x) for x in lengths), tuple(float(r) for r in rewards))

    return script


class ScriptedEngine:
    """The engine and reward model; one per test, reached by slime through ``ENGINE``."""

    def __init__(self, script: Script, group_size: int) -> None:
        self.script = script
        #: When set, a fresh group is scripted by its first sample and the rollout instead.
        self.by_prompt: Callable[[Any, int], GroupScript] | None = None
        self.group_size = group_size
        self.rollout_id = 0
        self.groups: dict[int, GroupScript] = {}
        self.started: dict[int, list[int]] = defaultdict(list)  # groups that decoded, by rollout, in order
        self.fresh: dict[int, int] = defaultdict(int)
        self.tokens: dict[int, int] = defaultdict(int)  # tokens decoded, by rollout
        self.aborts: dict[int, int] = defaultdict(int)  # abort_all calls, by rollout
        self.aborted_requests: dict[int, int] = defaultdict(int)
        self.running = 0
        self.max_running = 0
        self._active: dict[asyncio.Future[str], asyncio.TimerHandle | None] = {}

    def begin_rollout(self, rollout_id: int) -> None:
        self.rollout_id = rollout_id

    def _group(self, sample: Any) -> tuple[GroupScript, int]:
        key = sample.group_index
        if key is None:  # an evaluation sample: one token, reward 1
            return GroupScript((1,), (1.0,)), 0
        if key not in self.groups:
            if self.by_prompt is not None:
                self.groups[key] = self.by_prompt(sample, self.rollout_id)
            else:
                self.groups[key] = self.script(self.rollout_id, self.fresh[self.rollout_id])
            self.fresh[self.rollout_id] += 1
        return self.groups[key], sample.index % self.group_size

    async def generate(self, args: Any, sample: Any, sampling_params: dict[str, Any]) -> Any:
        group, member = self._group(sample)
        if sample.group_index is not None and sample.group_index not in self.started[self.rollout_id]:
            self.started[self.rollout_id].append(sample.group_index)
        remaining = max(0, group.lengths[member] - sample.response_length)
        loop = asyncio.get_running_loop()
        start = loop.time()
        done: asyncio.Future[str] = loop.create_future()
        self._active[done] = loop.call_later(remaining, done.set_result, "stop") if remaining else None
        if not remaining:
            done.set_result("stop")
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            finish = await done
        finally:
            self.running -= 1
            del self._active[done]
        produced = remaining if finish == "stop" else min(remaining, int(loop.time() - start))
        self.tokens[self.rollout_id] += produced
        sample.append_response_tokens(
            args,
            tokens=[7] * produced,
            log_probs=[-0.5] * produced,
            meta_info={"finish_reason": {"type": finish}, "weight_version": str(self.rollout_id)},
            text="a" * produced,
        )
        if group.failed and finish == "stop":
            sample.status = type(sample.status).FAILED
        return sample

    async def reward(self, args: Any, sample: Any, **kwargs: Any) -> float | None:
        group, member = self._group(sample)
        if group.reward_delay:
            await asyncio.sleep(group.reward_delay)
        return group.rewards[member]

    def abort_all(self) -> None:
        """SGLang's ``abort_all``: every running request returns now, with what it has decoded."""
        self.aborts[self.rollout_id] += 1
        for done, timer in list(self._active.items()):
            if timer is not None:
                timer.cancel()
            if not done.done():
                self.aborted_requests[self.rollout_id] += 1
                done.set_result("abort")


ENGINE: ScriptedEngine | None = None


def _engine() -> ScriptedEngine:
    assert ENGINE is not None, "no ScriptedEngine installed"
    return ENGINE


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any]) -> Any:
    """slime's ``--custom-generate-function-path`` signature."""
    return await _engine().generate(args, sample, sampling_params)


async def reward(args: Any, sample: Any, **kwargs: Any) -> float | None:
    """slime's ``--custom-rm-path`` signature (awaited by ``async_rm``)."""
    return await _engine().reward(args, sample, **kwargs)


async def abort_servers_until_idle(urls: list[str]) -> None:
    """slime's ``abort_servers_until_idle``: abort every request; the scripted engine is idle at once."""
    _engine().abort_all()


async def get_workers(url: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The router's ``/workers`` reply, for slime's ``abort``."""
    return {"workers": [{"url": "http://scripted-engine"}]}


#: Calls of the post-rollout hooks below: (name, groups, data source).
HOOK_CALLS: list[tuple[str, Any, Any]] = []


def sample_filter(args: Any, data: Any) -> None:
    """A ``--rollout-sample-filter-path`` that records its call."""
    HOOK_CALLS.append(("sample_filter", data, None))


def all_samples(args: Any, all_groups: Any, data_source: Any) -> None:
    """A ``--rollout-all-samples-process-path`` that records its call."""
    HOOK_CALLS.append(("all_samples", all_groups, data_source))


def all_samples_then_admission(args: Any, all_groups: Any, data_source: Any) -> None:
    """Record the call, then the adapter's ``record_all_samples`` (closes the filter's rollout)."""
    HOOK_CALLS.append(("all_samples", all_groups, data_source))
    record_all_samples(args, all_groups, data_source)
