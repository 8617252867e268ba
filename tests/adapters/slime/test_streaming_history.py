"""
``streaming_rollout`` with a prompt history: the launches are the history's picks, every judged group is
observed, and the rollout's checkpoint (slime's data source ``metadata``) restores exactly or is refused.

Every test runs on the doubles and, with ``SLIME_SRC`` (``.ci/slime-contracts``), on slime's
real tree, whose ``RolloutDataSourceWithBuffer`` reads the prompt file (slime's ``Dataset``)
and saves and loads its state with ``torch``.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from structlog.testing import capture_logs

from adapters.slime import scripted_engine
from adapters.slime.scripted_engine import GroupScript
from adapters.slime.stream_hosts import Host, make_args
from adapters.slime.test_streaming import PREFIX
from group_admission import CheckpointError, GroupAdmissionPolicy, PromptHistory, SessionConfig
from group_admission.adapters import slime as slime_adapter
from group_admission.adapters.slime._streaming_checkpoint import STATE_KEY
from group_admission.adapters.slime._streaming_prompts import prompt_id

SIZE = 4
PROMPTS = 30
#: A third of the prompts are never solved, a third always, a third half the time.
PASS_RATES = [(0.0, 1.0, 0.5)[index % 3] for index in range(PROMPTS)]
HISTORY = {"half_life": 150}


def prompt_file(folder: Path) -> str:
    path = folder / "prompts.jsonl"
    rows = [{"text": f"question {i}", "label": str(i), "metadata": {"id": f"q{i}"}} for i in range(PROMPTS)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def by_prompt(sample: Any, rollout_id: int) -> GroupScript:
    """A group of prompt ``label``: its pass rate, drawn by (prompt, rollout); lengths by prompt."""
    index = int(sample.label)
    rng = np.random.default_rng([index, rollout_id])
    rewards = (rng.random(SIZE) < PASS_RATES[index]).astype(float)
    return GroupScript(
        lengths=tuple(5 + (index + member) % 7 for member in range(SIZE)), rewards=tuple(rewards)
    )


def history_args(tmp_path: Path, **streaming: Any) -> Any:
    settings = {"budget": {"max_extra_groups": 12}, "history": HISTORY, **streaming}
    return make_args(
        rollout_batch_size=4,
        n_samples_per_prompt=SIZE,
        prompt_data=prompt_file(tmp_path),
        rollout_all_samples_process_path="adapters.slime.scripted_engine.all_samples",
        group_admission_streaming=settings,
        save=str(tmp_path / "checkpoint"),
        load=str(tmp_path / "checkpoint"),
    )


class Draws:
    """Every group a data source hands out, by rollout: the fresh ones (no response yet) and the carried."""

    def __init__(self, data_source: Any) -> None:
        self.rollout = 0
        self.fresh: dict[int, list[list[Any]]] = {}
        self._get = data_source.get_samples
        data_source.get_samples = self.get_samples

    def get_samples(self, count: int) -> list[list[Any]]:
        groups = self._get(count)
        fresh = [group for group in groups if not group[0].response]
        self.fresh.setdefault(self.rollout, []).append(fresh)
        return groups


def run(host: Host, args: Any, data_source: Any, rollouts: range) -> tuple[list[Any], Draws]:
    """Rollouts on the engine that scripts groups by prompt (installed once per test, or per restart)."""
    install(host)
    draws = Draws(data_source)
    outputs = []
    for rollout_id in rollouts:
        draws.rollout = rollout_id
        outputs.append(host.streaming(args, rollout_id, data_source))
    return outputs, draws


def install(host: Host) -> None:
    """The engine that scripts each group by its prompt, unless one is running."""
    if host.engine is None:
        host.install_engine(lambda _r, _p: GroupScript((1,), (1.0,)), SIZE).by_prompt = by_prompt


def restart(host: Host) -> None:
    """A new process: no session, no history, slime's singletons and the engine gone."""
    slime_adapter.reset()
    host.clear()
    host.engine = None


def judged_groups() -> list[list[Any]]:
    """The finished groups of each rollout, as slime's all-samples hook saw them (and forget them)."""
    calls = [groups for name, groups, _ in scripted_engine.HOOK_CALLS if name == "all_samples"]
    scripted_engine.HOOK_CALLS.clear()
    return calls


@pytest.fixture(autouse=True)
def _no_hook_calls() -> Any:
    scripted_engine.HOOK_CALLS.clear()
    yield
    scripted_engine.HOOK_CALLS.clear()


@pytest.mark.parametrize("partial", [False, True], ids=["aborted", "partial rollout"])
def test_the_launches_are_the_picks_of_a_history_that_observes_every_judged_group(
    slime_host: Host, tmp_path: Path, partial: bool
) -> None:
    """A reference history fed the judged groups picks, from each launch's draw, exactly what was launched."""
    args = history_args(tmp_path, budget={"max_extra_groups": 12}, race=2 if partial else 1)
    args.partial_rollout = partial
    data_source = slime_host.data_source(args)
    reference = SessionConfig(history=HISTORY).prompt_history(SIZE, seed=args.rollout_seed)
    policy = GroupAdmissionPolicy({"min_reward_std": 1e-6})
    skipped_total = 0

    for rollout_id in range(8):
        (output,), draws = run(slime_host, args, data_source, range(rollout_id, rollout_id + 1))
        (finished,) = judged_groups()
        metrics = output.metrics
        launched = metrics[f"{PREFIX}launched_group_count"] - metrics[f"{PREFIX}carried_in_group_count"]
        picked = skipped = forced = looked = 0
        for drawn in draws.fresh.get(rollout_id, []):
            within = max(0, PROMPTS - looked)  # past one pass of the data in this rollout: taken as drawn
            if within:
                picks = reference.pick([prompt_id(group, None) for group in drawn[:within]], step=rollout_id)
                picked, skipped = picked + len(picks.picked), skipped + len(picks.skipped)
            forced += len(drawn[within:])
            looked += len(drawn)
        assert (launched, skipped, forced) == (
            picked + forced,
            metrics[f"{PREFIX}prompts_skipped"],
            metrics[f"{PREFIX}prompts_forced"],
        )
        assert 0 == metrics[f"{PREFIX}prompts_unnamed"]
        for group in finished:
            rewards = [sample.get_reward_value(args) for sample in group]
            reference.observe(prompt_id(group, None), policy.evaluate(rewards), step=rollout_id)
        skipped_total += skipped
        assert 4 == len(output.samples)

    assert skipped_total > 0  # the dead and solved prompts are skipped once seen
    assert reference.pick(list(range(PROMPTS)), step=8) == _saved_history(data_source, 7).pick(
        list(range(PROMPTS)), step=8
    )


def test_dead_and_solved_prompts_are_launched_less_once_seen(slime_host: Host, tmp_path: Path) -> None:
    args = history_args(tmp_path)
    data_source = slime_host.data_source(args)

    outputs, draws = run(slime_host, args, data_source, range(30))

    def launched_useless(rollouts: range) -> float:
        """The share of never- or always-solved prompts among the drawn groups that ran (left pending)."""
        drawn = [group for r in rollouts for groups in draws.fresh.get(r, []) for group in groups]
        ran = [group for group in drawn if group[0].status.value != "pending"]
        return sum(PASS_RATES[int(group[0].label)] in (0.0, 1.0) for group in ran) / len(ran)

    assert launched_useless(range(20, 30)) < launched_useless(range(3))
    skipped = [output.metrics[f"{PREFIX}prompts_skipped"] for output in outputs]
    assert sum(skipped[20:]) > 0
    report = outputs[-1].metrics
    assert report[f"{PREFIX}history_prompts"] == PROMPTS
    assert report[f"{PREFIX}history_skip_below"] <= 0.1
    assert 0 <= report[f"{PREFIX}history_rechecks_informative"] <= report[f"{PREFIX}history_rechecks"]
    assert 0.0 <= report[f"{PREFIX}history_wrong_skip_share"] <= 1.0


def _saved_history(data_source: Any, rollout_id: int) -> PromptHistory:
    return PromptHistory.from_dict(data_source.metadata[STATE_KEY][str(rollout_id)]["history"])


def test_a_run_resumed_from_slimes_checkpoint_launches_what_the_uninterrupted_run_does(
    slime_host: Host, tmp_path: Path
) -> None:
    args = history_args(tmp_path)
    whole = slime_host.data_source(args)
    outputs, draws = run(slime_host, args, whole, range(8))

    restart(slime_host)
    first = slime_host.data_source(args)
    run(slime_host, args, first, range(4))
    first.save(3)  # slime's RolloutManager.save after rollout 3 (torch.save of the metadata)
    restart(slime_host)
    resumed = slime_host.data_source(args)
    resumed.load(3)  # RolloutManager.load(start_rollout_id - 1)
    again, redraws = run(slime_host, args, resumed, range(4, 8))

    assert _labels(draws, range(4, 8)) == _labels(redraws, range(4, 8))  # the same prompts drawn
    assert [_flat(o.samples) for o in outputs[4:]] == [_flat(o.samples) for o in again]  # and trained
    assert [o.metrics for o in outputs[4:]] == [o.metrics for o in again]
    assert whole.metadata[STATE_KEY] == resumed.metadata[STATE_KEY]  # the same session and history


def _labels(draws: Draws, rollouts: range) -> list[list[str]]:
    return [[group[0].label for groups in draws.fresh[r] for group in groups] for r in rollouts]


def _flat(groups: list[Any]) -> list[str]:
    return [group[0].label for group in groups]


def test_each_rollout_keeps_the_states_after_it_and_after_the_one_before(
    slime_host: Host, tmp_path: Path
) -> None:
    args = history_args(tmp_path)
    data_source = slime_host.data_source(args)

    run(slime_host, args, data_source, range(3))

    states = data_source.metadata[STATE_KEY]
    assert ["1", "2"] == sorted(states)
    assert {"session", "history"} == set(states["2"])
    assert _saved_history(data_source, 1).to_dict() != _saved_history(data_source, 2).to_dict()


def _refuses(slime_host: Host, args: Any, metadata: Any, rollout_id: int, match: str) -> None:
    restart(slime_host)
    install(slime_host)
    data_source = slime_host.data_source(args)
    data_source.metadata[STATE_KEY] = metadata
    with pytest.raises(CheckpointError, match=match):
        slime_host.streaming(args, rollout_id, data_source)


def test_a_checkpoint_that_cannot_be_restored_exactly_is_refused(slime_host: Host, tmp_path: Path) -> None:
    args = history_args(tmp_path)
    data_source = slime_host.data_source(args)
    run(slime_host, args, data_source, range(3))
    saved = copy.deepcopy(data_source.metadata[STATE_KEY])

    _refuses(slime_host, args, saved, 5, r"states after rollout\(s\) \['1', '2'\], not after rollout 4")
    _refuses(slime_host, args, [saved], 3, "must hold the streaming rollout's states by rollout")
    _refuses(
        slime_host, args, {"2": {"session": saved["2"]["session"]}}, 3, r"must hold \['history', 'session'\]"
    )
    damaged = copy.deepcopy(saved)
    damaged["2"]["history"]["version"] = 9
    _refuses(slime_host, args, damaged, 3, "version")
    other = history_args(tmp_path, history={**HISTORY, "skip_below": 0.3})
    _refuses(slime_host, other, saved, 3, "prompt history was saved with .* not the streaming settings'")
    budget = history_args(tmp_path, budget={"max_extra_groups": 5})
    _refuses(slime_host, budget, saved, 3, "saved under a different budget")


def test_a_refused_checkpoint_restores_nothing_and_is_refused_again(slime_host: Host, tmp_path: Path) -> None:
    args = history_args(tmp_path)
    data_source = slime_host.data_source(args)
    run(slime_host, args, data_source, range(3))
    saved = copy.deepcopy(data_source.metadata[STATE_KEY])
    other = history_args(tmp_path, history={**HISTORY, "skip_below": 0.3})
    _refuses(slime_host, other, saved, 3, "prompt history was saved with")

    fresh = slime_host.data_source(other)
    fresh.metadata[STATE_KEY] = saved
    with pytest.raises(CheckpointError):  # the same configuration asks again: still refused
        slime_host.streaming(other, 3, fresh)


def test_prompts_named_by_a_metadata_key_and_those_it_does_not_name(slime_host: Host, tmp_path: Path) -> None:
    args = history_args(tmp_path, prompt_id_key="id")
    data_source = slime_host.data_source(args)

    outputs, _ = run(slime_host, args, data_source, range(10))

    named = _saved_history(data_source, 9)
    assert PROMPTS == len(named)  # every prompt was seen, by its metadata id
    assert all(named.estimate(f"q{i}", step=10).groups >= 1 for i in range(PROMPTS))
    assert 0 == named.estimate(prompt_id([data_source.get_samples(1)[0][0]], None), step=10).groups
    assert all(o.metrics[f"{PREFIX}prompts_unnamed"] == 0 for o in outputs)

    restart(slime_host)
    missing = history_args(tmp_path, prompt_id_key="uid")
    fresh = slime_host.data_source(missing)
    with capture_logs() as logs:
        unnamed, _ = run(slime_host, missing, fresh, range(3))

    assert all(
        o.metrics[f"{PREFIX}prompts_unnamed"] == o.metrics[f"{PREFIX}launched_group_count"] for o in unnamed
    )
    assert all(o.metrics[f"{PREFIX}prompts_skipped"] == 0 for o in unnamed)
    assert 0 == len(_saved_history(fresh, 2))
    assert 1 == Counter(log["event"] for log in logs)["group_admission_prompt_unnamed"]


def test_a_history_that_skips_every_prompt_takes_a_pass_then_launches_unpicked(
    slime_host: Host, tmp_path: Path
) -> None:
    """Past a whole pass of the data source in one rollout the prompts are taken as drawn: it cannot stall."""
    refuse_all = {"prior": [0.5, 0.5], "skip_below": 1.0, "exploration": 0.0, "max_wrong_skip_share": None}
    args = history_args(tmp_path, history=refuse_all)
    data_source = slime_host.data_source(args)

    outputs, draws = run(slime_host, args, data_source, range(2))

    for rollout_id, output in enumerate(outputs):
        metrics = output.metrics
        assert 4 == len(output.samples)
        assert metrics[f"{PREFIX}prompts_skipped"] == PROMPTS  # every prompt of one pass
        assert metrics[f"{PREFIX}prompts_forced"] == metrics[f"{PREFIX}launched_group_count"] > 0
        drawn = sum(len(groups) for groups in draws.fresh[rollout_id])
        assert drawn == PROMPTS + metrics[f"{PREFIX}prompts_forced"]


def test_the_recommended_preset_names_its_history_section(slime_host: Host, tmp_path: Path) -> None:
    args = history_args(tmp_path, history="recommended")
    data_source = slime_host.data_source(args)

    run(slime_host, args, data_source, range(2))

    config = _saved_history(data_source, 1).config
    expected = SessionConfig.preset("recommended").prompt_history(SIZE, seed=args.rollout_seed)
    assert expected is not None
    assert expected.config == config


def test_without_a_history_every_drawn_prompt_is_launched_and_no_history_is_saved(
    slime_host: Host, tmp_path: Path
) -> None:
    args = history_args(tmp_path, history=None)
    data_source = slime_host.data_source(args)

    outputs, draws = run(slime_host, args, data_source, range(3))

    for rollout_id, output in enumerate(outputs):
        drawn = sum(len(groups) for groups in draws.fresh[rollout_id])
        assert drawn == output.metrics[f"{PREFIX}launched_group_count"]
        assert f"{PREFIX}prompts_skipped" not in output.metrics
    assert data_source.metadata[STATE_KEY]["2"]["history"] is None
