"""
The prompt history in verl 0.9.1: picks the prompts verl's train dataloader yields, is fed every judged group,
and restores exactly from verl's own ``data.pt``.

Every test runs verl's own prompt path (``doubles.verl_trainer.TrainerRun``: verl's config,
``_build_replay_buffer``, ``_init_dataloader``, ``prepare_step``, refills, the
``StatefulDataLoader`` state) with a real TransferQueue; only the rollout is scripted.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "verl.trainer.ppo.v1.replay_buffer", reason="needs verl==0.9.1 and TransferQueue (run .ci/verl)"
)

import torch
import yaml
from omegaconf import OmegaConf, open_dict

from doubles.verl_rollout import FakeRollout, dapo_member, make_sampler
from doubles.verl_trainer import TrainerRun, verl_config, write_prompts
from group_admission import (
    CheckpointError,
    GroupAdmissionPolicy,
    PromptHistory,
    PromptHistoryConfig,
    SessionConfig,
)
from group_admission.adapters.verl import (
    PROMPT_ID_FIELD,
    AdmissionCheckpointCallback,
    AdmissionPromptSampler,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*load_extern_type.*:FutureWarning"),  # verl's own call
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning"),  # torchdata's, on torch 2.13
]

N = 4
PROMPTS = 24
TARGET = 4
SEED = 7
POLICY = {"min_reward_std": 1e-6, "gate_on": ["acc"]}
PREFIX = "group_admission/"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "adapters" / "verl.md"


def kind(row: int) -> str:
    return ("dead", "solved", "informative")[row % 3]


def rewards(row: int, step: int) -> list[Any]:
    """A third of the prompts never solved, a third always, a third half the time."""
    if kind(row) == "informative":
        return [dapo_member(float((member + step) % 2)) for member in range(N)]
    return [dapo_member(1.0 if kind(row) == "solved" else 0.0) for _ in range(N)]


def overrides(tmp_path: Path, history: Any = "recommended", *extra: str) -> list[str]:
    """The sampler's settings as Hydra overrides; ``history`` a preset's name or a mapping of fields."""
    kwargs = "+trainer.v1.sampler.sampler_kwargs"
    settings = [
        f"data.train_batch_size={TARGET}",
        f"data.seed={SEED}",
        f"actor_rollout_ref.rollout.n={N}",
        f"{kwargs}.policy.min_reward_std=1.0e-6",
        f"{kwargs}.policy.gate_on=[acc]",
        f"{kwargs}.budget.max_extra_groups=16",
        f"{kwargs}.budget.max_resample_rounds=4",
        f"{kwargs}.checkpoint_dir={tmp_path / 'checkpoints'}",
    ]
    if isinstance(history, str):
        settings.append(f"{kwargs}.history={history}")
    elif history is not None:
        settings += [f"{kwargs}.history.{name}={value}" for name, value in history.items()]
    return [*settings, *extra]


def trainer(tq: Any, tmp_path: Path, history: Any = "recommended", *extra: str) -> TrainerRun:
    config = verl_config(write_prompts(tmp_path, PROMPTS), *overrides(tmp_path, history, *extra))
    return TrainerRun(config, tq, rewards)


def steps(run: TrainerRun, numbers: range) -> list[dict[str, Any]]:
    return [run.train_step(number)[1] for number in numbers]


def by_step(run: TrainerRun) -> dict[int, list[int]]:
    """The rows dispatched at each global step, in order."""
    rows: dict[int, list[int]] = {}
    for prompt in run.agent_loop_manager.prompts:
        rows.setdefault(int(prompt["global_steps"]), []).append(int(prompt["index"]))
    return rows


def verl_order(passes: int) -> list[int]:
    """verl's own train order (create_rl_sampler: RandomSampler on a generator seeded with data.seed)."""
    generator = torch.Generator()
    generator.manual_seed(SEED)
    return [row for _ in range(passes) for row in torch.randperm(PROMPTS, generator=generator).tolist()]


def test_a_history_that_skips_nothing_yields_verls_own_order(tq, tmp_path: Path) -> None:
    """With nothing skipped, the sampler is verl's RandomSampler: the same rows in the same order."""
    plain = trainer(tq, tmp_path, None)
    steps(plain, range(1, 9))
    keep_all = trainer(tq, tmp_path, {"skip_below": 0.0})
    steps(keep_all, range(1, 9))

    dispatched = len(plain.dispatched())
    assert plain.dispatched() == keep_all.dispatched() == verl_order(dispatched // PROMPTS + 1)[:dispatched]
    assert dispatched > PROMPTS  # past an epoch boundary
    assert keep_all.replay_buffer.prompt_sampler is not None
    assert plain.replay_buffer.prompt_sampler is None


def test_the_rows_yielded_are_the_picks_of_a_history_fed_every_judged_group(tq, tmp_path: Path) -> None:
    """
    Walking verl's order: every row passed over was skipped by a reference history at that step,
    every row dispatched was kept by it, and the reference saw exactly the groups verl judged.
    """
    run = trainer(tq, tmp_path)
    metrics = steps(run, range(1, 21))
    dispatched = by_step(run)
    reference = SessionConfig.preset("recommended").prompt_history(N, seed=SEED)
    assert reference is not None
    policy = GroupAdmissionPolicy(POLICY)
    order, position = verl_order(40), 0

    for step in range(1, 21):
        skipped = 0
        for row in dispatched[step]:
            while order[position] != row:  # the rows passed over on the way to this one
                assert not reference.pick([order[position]], step=step).picked, (step, order[position])
                position, skipped = position + 1, skipped + 1
            assert reference.pick([row], step=step).picked == (row,), (step, row)
            position += 1
        assert skipped == metrics[step - 1][f"{PREFIX}prompts_skipped"]
        assert (
            0 == metrics[step - 1][f"{PREFIX}prompts_forced"] == metrics[step - 1][f"{PREFIX}prompts_unnamed"]
        )
        for row in dispatched[step]:
            acc = [member[0]["acc"] for member in rewards(row, step)]
            reference.observe(row, policy.evaluate({"acc": acc}), step=step)

    assert sum(m[f"{PREFIX}prompts_skipped"] for m in metrics) > 0
    history = run.replay_buffer.prompt_sampler.history
    assert reference.pick(list(range(PROMPTS)), step=21) == history.pick(list(range(PROMPTS)), step=21)


def test_dead_and_solved_prompts_are_dispatched_less_once_seen(tq, tmp_path: Path) -> None:
    run = trainer(tq, tmp_path)
    metrics = steps(run, range(1, 31))
    dispatched = by_step(run)

    def useless(numbers: range) -> float:
        rows = [row for number in numbers for row in dispatched[number]]
        return sum(kind(row) != "informative" for row in rows) / len(rows)

    assert useless(range(21, 31)) < useless(range(1, 7))
    last = metrics[-1]
    assert last[f"{PREFIX}history_prompts"] == PROMPTS
    assert 0 <= last[f"{PREFIX}history_rechecks_informative"] <= last[f"{PREFIX}history_rechecks"]
    assert 0.0 <= last[f"{PREFIX}history_wrong_skip_share"] <= 1.0
    assert 0.0 < last[f"{PREFIX}history_skip_below"] <= 0.1


def test_a_run_resumed_from_verls_checkpoint_dispatches_what_the_uninterrupted_run_does(
    tq, tmp_path: Path
) -> None:
    whole = trainer(tq, tmp_path / "whole")
    expected = steps(whole, range(1, 13))

    first = trainer(tq, tmp_path / "resumed")
    steps(first, range(1, 7))
    folder = tmp_path / "resumed" / "checkpoints" / "global_step_6"
    data = first.save_data(folder)  # verl's _save_checkpoint: data.pt, then the callback
    AdmissionCheckpointCallback(config=None).on_save(trainer=first, global_step=6, checkpoint_dir=str(folder))
    resumed = trainer(tq, tmp_path / "resumed")  # a new process: verl's trainer, built afresh
    resumed.load_data(data)  # verl's _load_checkpoint
    again = steps(resumed, range(7, 13))

    assert [by_step(whole)[n] for n in range(7, 13)] == [by_step(resumed)[n] for n in range(7, 13)]
    assert expected[6:] == again
    final = (
        whole.replay_buffer.prompt_sampler.state_dict(),
        resumed.replay_buffer.prompt_sampler.state_dict(),
    )
    assert final[0] == final[1]


def test_a_sampler_state_saved_under_other_history_settings_is_refused_at_the_first_fetch(
    tq, tmp_path: Path
) -> None:
    first = trainer(tq, tmp_path)
    steps(first, range(1, 3))
    data = first.save_data(tmp_path / "checkpoints" / "global_step_2")
    other = trainer(tq, tmp_path, {"half_life": 150, "skip_below": 0.3})
    other.load_data(data)  # the StatefulDataLoader applies it when it next builds its iterator

    with pytest.raises(CheckpointError, match=r"prompt history was saved with .* not the sampler's"):
        other.train_step(3)


def test_verls_own_sampler_state_is_refused_by_a_run_with_a_history(tq, tmp_path: Path) -> None:
    """A checkpoint of a run without a history holds no history to restore: refused, not guessed."""
    plain = trainer(tq, tmp_path, None)
    steps(plain, range(1, 3))
    data = plain.save_data(tmp_path / "checkpoints" / "global_step_2")
    with_history = trainer(tq, tmp_path)
    with_history.load_data(data)

    with pytest.raises(CheckpointError, match="state was saved by verl's own sampler"):
        with_history.train_step(3)


def sampler_state(tmp_path: Path, tq: Any) -> tuple[AdmissionPromptSampler, dict[str, Any]]:
    run = trainer(tq, tmp_path)
    steps(run, range(1, 3))
    sampler = run.replay_buffer.prompt_sampler
    return sampler, sampler.state_dict()


BAD_STATES: list[tuple[str, Any, str]] = [
    ("not a mapping", lambda s: [s], "must be a mapping of format"),
    ("another format", lambda s: {**s, "format": "x"}, "must be a mapping of format"),
    ("version 1 (a pass counted since the last yield)", lambda s: {**s, "version": 1}, "'version' must be 2"),
    ("version as a float", lambda s: {**s, "version": 2.0}, "'version' must be 2"),
    ("no history", lambda s: {k: v for k, v in s.items() if k != "history"}, r"misses \['history'\]"),
    ("a negative position", lambda s: {**s, "position": -1}, "'position' must be an integer >= 0"),
    ("a step that is a bool", lambda s: {**s, "step": True}, "'step' must be an integer >= 0"),
    (
        "another dataset length",
        lambda s: {**s, "length": 5},
        "a train dataset of 5 prompts; this one holds 24",
    ),
    ("a position past the pass", lambda s: {**s, "position": 25}, "'position' must be <= 24"),
    ("more yielded than an epoch", lambda s: {**s, "yielded": 25}, "'yielded' must be <= 24"),
    ("a negative count looked at", lambda s: {**s, "looked": -1}, "'looked' must be an integer >= 0"),
    ("a damaged history", lambda s: {**s, "history": {**s["history"], "version": 7}}, "version"),
]


@pytest.mark.parametrize(("change", "match"), [c[1:] for c in BAD_STATES], ids=[c[0] for c in BAD_STATES])
def test_a_bad_sampler_state_is_refused_and_changes_nothing(
    tq, tmp_path: Path, change: Any, match: str
) -> None:
    sampler, state = sampler_state(tmp_path, tq)

    with pytest.raises(CheckpointError, match=match):
        sampler.load_state_dict(change(state))

    assert state == sampler.state_dict()


def test_a_history_that_skips_everything_refuses_one_pass_a_step_then_verls_order() -> None:
    dead = GroupAdmissionPolicy({"min_reward_std": 1e-6}).evaluate([0.0] * N)
    history = PromptHistory(PromptHistoryConfig(group_size=N, exploration=0.0, max_wrong_skip_share=None))
    for row in range(PROMPTS):
        for _ in range(20):
            history.observe(row, dead, step=0)
    sampler = AdmissionPromptSampler(range(PROMPTS), OmegaConf.create({"seed": SEED}), history)
    rows = iter(sampler)

    sampler.step = 2
    first = [next(rows) for _ in range(3)]
    sampler.step = 3
    second = [next(rows) for _ in range(2)]

    assert first == verl_order(2)[PROMPTS : PROMPTS + 3]  # a whole pass refused, then as they come
    assert second == verl_order(3)[2 * PROMPTS + 3 : 2 * PROMPTS + 5]  # the next step refuses a pass again
    assert sampler.take_counts() == (2 * PROMPTS, 5)
    assert sampler.state_dict()["looked"] == PROMPTS + 2


def test_the_sampler_state_is_plain_data_that_restores_exactly(tq, tmp_path: Path) -> None:
    sampler, state = sampler_state(tmp_path, tq)
    again = json.loads(json.dumps(state))
    fresh = AdmissionPromptSampler(
        range(PROMPTS), OmegaConf.create({"seed": SEED}), PromptHistory(sampler.history.config)
    )

    fresh.load_state_dict(again)

    assert state == fresh.state_dict()
    assert [next(iter(fresh)) for _ in range(1)] == [next(iter(sampler))]


SETUP_ERRORS: list[tuple[str, tuple[str, ...], type[Exception], str]] = [
    (
        "dataloader workers",
        ("data.dataloader_num_workers=2",),
        ValueError,
        "'data.dataloader_num_workers' must be 0",
    ),
    (
        "a group size that is not rollout.n",
        ("+trainer.v1.sampler.sampler_kwargs.num_generations=3",),
        ValueError,
        r"'num_generations' must be actor_rollout_ref.rollout.n \(4\)",
    ),
]


@pytest.mark.parametrize(
    ("extra", "error", "match"), [c[1:] for c in SETUP_ERRORS], ids=[c[0] for c in SETUP_ERRORS]
)
def test_a_setup_the_sampler_cannot_run_in_fails_when_verl_builds_its_dataloader(
    tq, tmp_path: Path, extra: tuple[str, ...], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        trainer(tq, tmp_path, "recommended", *extra)


def test_a_history_needs_verls_trainer_to_install_the_sampler(tq) -> None:
    rollout = FakeRollout(tq, lambda index: [dapo_member(1.0)] * N)

    with pytest.raises(
        ValueError, match=r"'history' in trainer\.v1\.sampler\.sampler_kwargs needs verl's PPOTrainer"
    ):
        make_sampler(rollout.refill, history="recommended")


def test_every_trajectory_carries_its_prompts_row_index(tq, tmp_path: Path) -> None:
    run = trainer(tq, tmp_path)
    run.train_step(1)

    assert all(prompt[PROMPT_ID_FIELD] == int(prompt["index"]) for prompt in run.agent_loop_manager.prompts)


def docs_blocks(language: str) -> str:
    """The ```language block of docs/adapters/verl.md's prompt-history section."""
    section = DOCS.read_text(encoding="utf-8").split("## Prompt history", 1)[1].split("\n## ", 1)[0]
    block = re.search(rf"```{language}\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return block.group(1)


def test_the_docs_lines_install_the_prompt_sampler(tq, tmp_path: Path) -> None:
    """The two override lines and the YAML fragment the docs give turn the same sampler on."""
    lines = [line.strip().rstrip("\\").strip() for line in docs_blocks("bash").splitlines()]
    from_overrides = trainer(tq, tmp_path / "overrides", None, *[line for line in lines if line])
    plain = verl_config(write_prompts(tmp_path / "yaml", PROMPTS), *overrides(tmp_path / "yaml", None))
    with open_dict(plain):
        config = OmegaConf.merge(plain, OmegaConf.create(yaml.safe_load(docs_blocks("yaml"))))
    from_yaml = TrainerRun(config, tq, rewards)

    recommended = SessionConfig.preset("recommended").prompt_history(N, seed=SEED)
    assert recommended is not None
    for run in (from_overrides, from_yaml):
        assert run.replay_buffer.prompt_sampler is not None
        assert recommended.config == run.replay_buffer.prompt_sampler.history.config
        assert run.train_dataloader.sampler is run.replay_buffer.prompt_sampler
