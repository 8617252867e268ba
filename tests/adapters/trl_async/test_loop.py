"""TRL's own ``_AsyncRolloutLoop`` generate and score loops, run in this process with the admission loop."""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import queue
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from trl_async_doubles import StandInLoop, accuracy, prompts

from group_admission import BudgetExhaustedError, CheckpointError
from group_admission.adapters.trl_async import NO_TRAINABLE_TOKENS

MIXED = ["dead", "mixed", "solved", "mixed"]


BUILT: list[StandInLoop] = []


@pytest.fixture(autouse=True)
def _close_loops() -> Any:
    """Close what TRL's ``run()`` closes when it ends: the event loop and the tool pool."""
    yield
    while BUILT:
        loop = BUILT.pop()
        loop._tool_pool.shutdown(wait=True)
        loop._loop.close()


def build(tokenizer: Any, kinds: list[str], admission: dict[str, Any], **kwargs: Any) -> StandInLoop:
    """The admission loop as TRL's worker builds it in its child, with plain multiprocessing channels."""
    from accelerate.state import PartialState

    PartialState()  # TRL's child does this before it builds the loop
    ctx = mp.get_context("spawn")
    loop_kwargs = {
        "model_name": "tiny",
        "dataset": prompts(kinds),
        "reward_funcs": [accuracy],
        "processing_class": tokenizer,
        "eos_token_ids": [tokenizer.eos_token_id],
        "num_generations": 4,
        "max_inflight_tasks": 8,
        "max_tokens": 4,
        **kwargs,
    }
    loop = StandInLoop(
        **loop_kwargs,
        admission=admission,
        rollout_buffer=queue.Queue(),
        model_version_value=ctx.Value("i", 0),
        heartbeat_value=ctx.Value("d", 0.0),
        failed_event=ctx.Event(),
        exception_info_queue=queue.Queue(),
        metrics_queue=queue.Queue(),
    )
    BUILT.append(loop)
    return loop


def run(loop: StandInLoop, groups: int, timeout: float = 60.0) -> list[Any]:
    """TRL's generate and score loops until the stream judged ``groups`` groups; the queued samples."""

    async def until_judged() -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while loop.admission.stats.candidates < groups and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        loop._stop_event.set()

    async def main() -> None:
        stop = loop._stop_event
        await asyncio.gather(
            loop._generate_loop(stop_event=stop), loop._score_loop(stop_event=stop), until_judged()
        )

    loop._loop.run_until_complete(main())
    return drain(loop.rollout_buffer)


def drain(channel: Any) -> list[Any]:
    items = []
    while True:
        try:
            items.append(channel.get_nowait())
        except queue.Empty:
            return items


def by_group(samples: list[Any]) -> dict[int, list[Any]]:
    groups: dict[int, list[Any]] = defaultdict(list)
    for sample in samples:
        groups[sample.group_id].append(sample)
    return groups


GATED = {
    "policy": {"min_reward_std": 1e-6},
    "budget": {"max_extra_groups": 8},
    "stream": {"window_groups": 2},
}


def test_dead_groups_never_reach_the_queue_and_counts_conserve(tokenizer: Any) -> None:
    loop = build(tokenizer, MIXED, GATED)
    queued = by_group(run(loop, groups=24))
    stats = loop.admission.stats

    assert stats.candidates >= 24
    assert stats.exact_dead > 0  # the dead and solved prompts were generated, judged and dropped
    for samples in queued.values():
        assert len({s.metrics["reward"] for s in samples}) > 1  # every queued group has outcome spread
        assert len(samples) == 4
    assert len(queued) == loop.admission.trained_groups() == stats.admitted + stats.fallback_admitted
    assert stats.admitted + stats.rejected == stats.candidates
    assert (
        loop.admission.tokens.generated == 2 * 4 * stats.candidates
    )  # every decoded token: 2 per completion


def test_the_metrics_reach_the_trainer_as_counters_that_sum_to_the_counts(tokenizer: Any) -> None:
    loop = build(tokenizer, MIXED, GATED)
    run(loop, groups=12)
    pushed: dict[str, float] = defaultdict(float)
    for payload in drain(loop._metrics_queue):
        for key, value in payload.items():
            if key.startswith("group_admission/") and key.endswith("_total"):
                pushed[key] += value
    stats = loop.admission.stats

    assert pushed["group_admission/candidate_group_count_total"] == stats.candidates
    assert pushed["group_admission/admitted_group_count_total"] == stats.admitted
    assert pushed["group_admission/exact_dead_group_count_total"] == stats.exact_dead
    assert pushed["group_admission/decoded_tokens_total"] == loop.admission.tokens.decoded
    assert pushed["group_admission/trained_groups_total"] == loop.admission.trained_groups()


def unscorable(completions: list[Any], answer: list[str], **_: Any) -> list[float | None]:
    """A reward function that cannot score the first member of each group (TRL reads None as NaN)."""
    return [None, *accuracy(completions[1:], answer[1:])]


def test_a_group_with_an_unscorable_member_is_external_and_counted_never_trained(tokenizer: Any) -> None:
    loop = build(tokenizer, ["mixed"] * 4, GATED, reward_funcs=[unscorable])
    queued = run(loop, groups=6)

    assert queued == []
    assert loop.admission.stats.external == loop.admission.stats.candidates >= 6
    assert loop.admission.stats.external_details == {"missing_reward": loop.admission.stats.candidates}


def test_a_conversation_without_a_trainable_token_makes_its_group_external(tokenizer: Any) -> None:
    loop = build(tokenizer, ["mixed"], GATED)
    group = _group(loop, rows=[1, 0, 1, 1])
    samples = loop._loop.run_until_complete(loop._score_group(group))

    assert samples == []
    assert loop.admission.stats.external == 1  # counted once, with both details
    assert loop.admission.stats.external_details == {NO_TRAINABLE_TOKENS: 1, "missing_reward": 1}


def _group(loop: StandInLoop, rows: list[int], rewards: tuple[str, ...] = ("1", "0", "1", "0")) -> Any:
    """A finished group as TRL's generate loop hands it to scoring, with ``rows`` training rows per member."""
    from trl.experimental.async_grpo.async_rollout_worker import RolloutGroup, TrainingSequence

    size = len(rows)
    return RolloutGroup(
        prompts=[[{"role": "user", "content": "mixed 0"}]] * size,
        reward_kwargs={"answer": ["1"] * size},
        completions=[[{"role": "assistant", "content": r}] for r in rewards[:size]],
        completions_ids=[[5, 6]] * size,
        completions_sequences=[
            [TrainingSequence([1, 5, 6], [0, 1, 1], [0.0, -0.5, -0.5], "r")] * n for n in rows
        ],
        tool_call_counts=[0] * size,
        tool_failure_counts=[0] * size,
        model_version=0,
        group_id=0,
        env_rewards=[],
        rollout_rewards=[None] * size,
    )


def test_an_exhausted_window_raises_where_the_host_stops(tokenizer: Any) -> None:
    admission = {
        **GATED,
        "budget": {"max_extra_groups": 1},
        "stream": {"window_groups": 1, "on_exhausted": "raise"},
    }
    loop = build(tokenizer, ["dead"], admission)
    dead = _group(loop, rows=[1, 1, 1, 1], rewards=("0", "0", "0", "0"))

    assert loop._loop.run_until_complete(loop._score_group(dead)) == []
    with pytest.raises(BudgetExhaustedError, match="max_extra_groups"):
        loop._loop.run_until_complete(loop._score_group(dead))


def test_the_loss_scale_multiplies_trls_advantages(tokenizer: Any) -> None:
    admission = {**GATED, "loss_scale": "linear", "stream": {"window_groups": 1}}
    loop = build(tokenizer, ["mixed"], admission)
    dead, live = _group(loop, [1] * 4, ("0",) * 4), _group(loop, [1] * 4)
    score = loop._loop.run_until_complete
    score(loop._score_group(dead))
    first = score(loop._score_group(live))  # closes window 0: 1 kept of 2 generated, a scale of 0.5
    second = score(loop._score_group(live))  # window 1's group gets window 0's scale

    assert loop.admission.last_report.loss_scale == 1.0  # window 1: 1 kept of 1
    assert [s.advantage for s in second] == pytest.approx([0.5 * s.advantage for s in first])


def test_gate_on_reads_one_reward_function(tokenizer: Any) -> None:
    def always_one(completions: list[Any], **_: Any) -> list[float]:
        return [1.0] * len(completions)

    admission = {**GATED, "policy": {"min_reward_std": 1e-6, "gate_on": ["always_one"]}}
    loop = build(tokenizer, ["mixed"], admission, reward_funcs=[accuracy, always_one])
    samples = loop._loop.run_until_complete(loop._score_group(_group(loop, [1] * 4)))

    assert samples == []  # the accuracy spread is there, but the gated component is dead
    assert loop.admission.stats.exact_dead == 1


def test_prompts_the_history_predicts_dead_are_skipped_before_generation(tokenizer: Any) -> None:
    admission = {"preset": "recommended", "stream": {"window_groups": 1}}
    loop = build(tokenizer, ["dead", "dead", "dead", "mixed"], admission)
    run(loop, groups=80)
    ledger = loop.admission.ledger

    assert ledger.skipped_prompts > 0
    assert loop.admission.stats.candidates >= 80  # skipping never stalls the stream


def test_the_stream_state_is_written_as_windows_close_and_restores_exactly(
    tokenizer: Any, tmp_path: Path
) -> None:
    path = tmp_path / "stream.json"
    loop = build(tokenizer, MIXED, GATED, admission_state_path=str(path))
    run(loop, groups=10)
    saved = json.loads(path.read_text())

    resumed = build(tokenizer, MIXED, GATED, admission_state=saved)
    assert resumed.admission.state_dict() == saved
    assert saved["session"]["stats"] == json.loads(json.dumps(saved))["session"]["stats"]
    with pytest.raises(CheckpointError, match="different settings"):
        build(tokenizer, MIXED, {**GATED, "stream": {"window_groups": 3}}, admission_state=saved)


def test_a_bad_admission_setting_names_the_field(tokenizer: Any) -> None:
    with pytest.raises(ValueError, match="'window_groups' must be >= 1"):
        build(tokenizer, MIXED, {"stream": {"window_groups": 0}})
    with pytest.raises(ValueError, match="unknown key"):
        build(tokenizer, MIXED, {"polcy": {}})
