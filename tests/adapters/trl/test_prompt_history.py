"""``prompt_history=``: the trainer records every judged group and resampling skips likely-dead prompts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from trl_helpers import accuracy, brevity, dead_history, grpo_config, prompt_dataset

from group_admission import (
    CheckpointError,
    GroupAdmissionPolicy,
    PromptHistory,
    PromptHistoryConfig,
    SessionConfig,
)
from group_admission._history import prompt_key, uniform_draw
from group_admission.adapters._kit import restored_history
from group_admission.adapters.trl import STATE_FILE, AdmissionGRPOTrainer
from group_admission.adapters.trl._prompt_ids import ID_COLUMN, PromptIds, as_prompt_history

GATE = {"min_reward_std": 1e-6, "gate_on": ["accuracy"]}
BUDGET = {"max_extra_groups": 6, "max_resample_rounds": 3}
#: The prompts the seeded history has seen all-correct many times: it should skip them.
SOLVED = frozenset(range(0, 64, 4)) | frozenset(range(1, 64, 4))


def seeded_history(seed: int = 0) -> PromptHistory:
    """A history (G = 4) that saw every prompt of SOLVED all-correct 20 times at step 0."""
    history = PromptHistory(PromptHistoryConfig(group_size=4, seed=seed))
    solved = GroupAdmissionPolicy({"min_reward_std": 1e-6}).evaluate([1.0] * 4)
    for prompt in sorted(SOLVED):
        for _ in range(20):
            history.observe(prompt, solved, step=0)
    return history


def make(tiny_model: str, tmp_path: Path, **kwargs: Any) -> Any:
    config = kwargs.pop("config", {})
    return AdmissionGRPOTrainer(
        model=tiny_model,
        reward_funcs=[accuracy, brevity],
        args=grpo_config(tmp_path, **config),
        train_dataset=kwargs.pop("dataset", prompt_dataset()),
        admission=GATE,
        **kwargs,
    )


def explored(history: PromptHistory, prompt: int, step: int) -> bool:
    """Whether the history keeps ``prompt`` at ``step`` (for a skipped prompt: its exploration floor)."""
    keep = history.estimate(prompt, step=step).keep_probability
    return uniform_draw(history.config.seed, prompt_key(prompt), step) < keep


class TestPromptIds:
    def test_the_row_index_travels_in_an_added_column_that_trl_never_sees(self) -> None:
        names = PromptIds(None)
        dataset = names.prepare(prompt_dataset(6))

        assert [names.of_row(dataset[i]) for i in range(6)] == list(range(6))
        assert ID_COLUMN not in names.strip([dict(dataset[2])])[0]
        assert "kind" in names.strip([dict(dataset[2])])[0]

    def test_a_column_or_a_callable_names_the_prompt(self) -> None:
        row = {"prompt": "Tom has 3 pens.", "kind": "live", "uid": "gsm8k/7"}

        assert PromptIds("uid").of_row(row) == "gsm8k/7"
        assert PromptIds(lambda r: r["prompt"]).of_row(row) == "Tom has 3 pens."
        assert PromptIds("uid").strip([row]) == [row]

    @pytest.mark.parametrize(
        ("prompt_id", "dataset", "error", "message"),
        [
            (5, None, TypeError, "'prompt_id' must be a column name, a callable or None (got 5"),
            ("uid", prompt_dataset(4), ValueError, "'prompt_id' must name a column of the train dataset"),
            (None, [{"prompt": "x"}], TypeError, "names prompts by their row index, which needs a map-style"),
        ],
    )
    def test_bad_prompt_ids(self, prompt_id: Any, dataset: Any, error: type, message: str) -> None:
        with pytest.raises(error, match=message.replace("(", r"\(")):
            PromptIds(prompt_id).prepare(dataset)

    @pytest.mark.parametrize(
        ("source", "value", "error", "message"),
        [
            ("uid", 1.5, TypeError, "'uid' must be a str or an int (got 1.5)"),
            ("uid", True, TypeError, "'uid' must be a str or an int (got True)"),
            ("uid", "a\ud800", ValueError, "'uid' must be a str of valid Unicode"),
            (lambda r: r["uid"], 2**64, ValueError, "'prompt_id(row)' must be an int in [-2**63, 2**63 - 1]"),
        ],
    )
    def test_an_id_that_is_no_prompt_id_names_the_problem(
        self, source: Any, value: Any, error: type, message: str
    ) -> None:
        with pytest.raises(error, match=re.escape(message)):
            PromptIds(source).of_row({"uid": value})

    def test_a_presets_name_builds_its_history_section_at_num_generations(self) -> None:
        history = as_prompt_history("recommended", 4)

        expected = SessionConfig.preset("recommended").prompt_history(4)
        assert expected is not None
        assert expected.config == history.config
        assert 4 == history.config.group_size

    def test_a_numpy_id_is_read_as_the_int_of_its_value(self) -> None:
        prompt_id = PromptIds("uid").of_row({"uid": np.int64(7)})

        assert 7 == prompt_id
        assert type(prompt_id) is int


@pytest.mark.slow
class TestTrainer:
    @pytest.mark.parametrize(
        ("history", "error", "message"),
        [
            (3, TypeError, "'prompt_history' must be a PromptHistory, a PromptHistoryConfig, a mapping"),
            ("zero_std", ValueError, "'history' must name a preset with a history section"),
            ({"group_size": 8}, ValueError, r"group_size == num_generations \(4\) \(got 8\)"),
            ({"skip_below": 2}, ValueError, r"'skip_below' must be in \[0, 1\]"),
        ],
    )
    def test_bad_prompt_history(
        self, tiny_model: str, tmp_path: Path, history: Any, error: type, message: str
    ) -> None:
        with pytest.raises(error, match=message):
            make(tiny_model, tmp_path, budget=BUDGET, prompt_history=history)

    def test_without_prompt_history_nothing_changes(self, tiny_model: str, tmp_path: Path) -> None:
        trainer = make(tiny_model, tmp_path, budget=BUDGET)

        assert trainer.prompt_history is None
        assert trainer._history_names() is None
        assert trainer.train_dataset.column_names == ["prompt", "kind"]

    def test_the_history_pick_skips_solved_prompts_but_at_the_exploration_floor(
        self, tiny_model: str, tmp_path: Path
    ) -> None:
        history = seeded_history()
        trainer = make(tiny_model, tmp_path, budget=BUDGET, prompt_history=history)
        order = list(trainer._admission_prompts._order)

        picker, ids = trainer._history_names()(order)
        assert picker is history
        picked = set(history.pick(ids, step=1).picked)  # step 1: the evidence of step 0 counts
        kept = {index for index, prompt in zip(order, ids, strict=True) if prompt in picked}

        rows = trainer._admission_prompts.rows([index for index in order if index in kept], 4)
        drawn = [row[ID_COLUMN] for row in rows[::4]]
        expected = [p for p in order if p not in SOLVED or explored(history, p, step=1)]
        assert drawn == expected
        floor = [p for p in drawn if p in SOLVED]
        assert 0 < len(floor) < len(SOLVED) // 4  # a few explored at ~5%, the rest skipped
        assert all(row[ID_COLUMN] == rows[4 * (i // 4)][ID_COLUMN] for i, row in enumerate(rows))

    def test_training_records_every_group_and_extra_rounds_skip_solved_prompts(
        self, tiny_model: str, tmp_path: Path
    ) -> None:
        history = seeded_history()
        trainer = make(
            tiny_model,
            tmp_path,
            dataset=prompt_dataset(dead_every=1),  # every group dead: each step resamples to the cap
            budget=BUDGET,
            prompt_history=history,
            config={"max_steps": 3},
        )
        stream, draws, judged = trainer._admission_prompts, [], []
        draw, judge_round = stream.rows, trainer._judge_round

        def spy_draw(indices: list[int], size: int) -> list[dict[str, Any]]:
            rows = draw(indices, size)
            draws.append((trainer.admission_session.step, [row[ID_COLUMN] for row in rows[::size]]))
            return rows

        def spy_judge(output: dict[str, Any], ids: list[int], tokens: int) -> Any:
            judged.extend((trainer.admission_session.step, prompt) for prompt in ids)
            return judge_round(output, ids, tokens)

        stream.rows, trainer._judge_round = spy_draw, spy_judge
        trainer.train()

        later = [(step, prompt) for step, prompts in draws if step >= 1 for prompt in prompts]
        assert len(later) == 2 * 6  # resampling ran to the cap after the seeded evidence counted
        # A solved prompt comes back only at the floor, or once the trainer saw it fail (then
        # its groups are no longer all-correct and the history is right to try it).
        for step, prompt in later:
            seen_failing = any(s < step and p == prompt for s, p in judged)
            floor = uniform_draw(history.config.seed, prompt_key(prompt), step) < history.config.exploration
            assert prompt not in SOLVED or seen_failing or floor, (step, prompt)
        groups = sum(history.estimate(p, step=99).groups for p in range(64)) - 20 * len(SOLVED)
        assert groups == trainer.admission_session.stats.candidates == 3 * (2 + 6)


def run(tiny_model: str, out: Path, resume: str | None = None) -> Any:
    trainer = make(
        tiny_model,
        out,
        budget={"max_extra_groups": 2, "max_resample_rounds": 1},
        prompt_history={"half_life": 50},
        config={"max_steps": 4, "save_strategy": "steps", "save_steps": 2},
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer


@pytest.mark.slow
def test_a_checkpoint_restores_the_history_exactly(tiny_model: str, tmp_path: Path) -> None:
    original = run(tiny_model, tmp_path / "a")
    checkpoint = tmp_path / "a" / "out" / "checkpoint-2"
    saved = json.loads((checkpoint / STATE_FILE).read_text())

    resumed = run(tiny_model, tmp_path / "b", resume=str(checkpoint))

    at_checkpoint = PromptHistory.from_dict(saved["prompt_history"])
    groups = sum(at_checkpoint.estimate(p, step=99).groups for p in range(64))
    assert groups == saved["session"]["stats"]["counts"]["candidates"] >= 4
    assert original.prompt_history.to_dict() == resumed.prompt_history.to_dict()
    assert original.prompt_history.pick(list(range(64)), step=4) == resumed.prompt_history.pick(
        list(range(64)), step=4
    )


def test_a_history_saved_under_another_config_is_refused() -> None:
    state = seeded_history().to_dict()

    assert (
        restored_history(state, PromptHistoryConfig(group_size=4), settings="the trainer's").to_dict()
        == state
    )
    with pytest.raises(CheckpointError, match=r"prompt history was saved with .* not the trainer's"):
        restored_history(state, PromptHistoryConfig(group_size=4, skip_below=0.3), settings="the trainer's")


def spy_judged(trainer: Any) -> dict[int, list[int]]:
    """The prompt ids judged at each step (with ``budget=None``: the main batch)."""
    judged: dict[int, list[int]] = {}
    judge_round = trainer._judge_round

    def spy(output: dict[str, Any], ids: list[int], tokens: int) -> Any:
        judged.setdefault(trainer.admission_session.step, []).extend(ids)
        return judge_round(output, ids, tokens)

    trainer._judge_round = spy
    return judged


def logged(trainer: Any, name: str) -> list[float]:
    return [entry[name] for entry in trainer.state.log_history if name in entry]


@pytest.mark.slow
class TestMainBatch:
    def test_the_main_batch_skips_dead_prompts_but_at_the_floor_and_counts_them(
        self, tiny_model: str, tmp_path: Path
    ) -> None:
        dead = frozenset(range(0, 64, 2))  # the rows whose groups are all-wrong
        history = dead_history(dead, live=frozenset(range(1, 64, 2)))
        trainer = make(tiny_model, tmp_path, prompt_history=history, config={"max_steps": 6})
        judged = spy_judged(trainer)
        trainer.train()

        sampler = trainer._main_sampler
        assert [len(judged[step]) for step in range(6)] == [2] * 6  # every batch whole: 2 groups
        for step in range(1, 6):  # step 0 picks before the seeded evidence counts
            for prompt in judged[step]:
                floor = uniform_draw(0, prompt_key(prompt), step) < trainer.prompt_history.config.exploration
                assert prompt not in dead or floor, (step, prompt)
        skipped = logged(trainer, "group_admission/prompts_skipped")
        assert len(skipped) == 6
        assert sum(skipped) > 0
        yielded_ahead = sum(entry[1] for entry in sampler.pending.values())
        assert sum(skipped) + yielded_ahead == sampler._position - 2 * sampler.chunk
        assert logged(trainer, "group_admission/prompts_forced") == [0] * 6
        report = trainer.prompt_history.skip_report(step=6)  # what the last step logged
        assert logged(trainer, "group_admission/history_rechecks")[-1] == report.rechecks
        assert logged(trainer, "group_admission/history_skip_below")[-1] == report.skip_below
        assert logged(trainer, "group_admission/history_wrong_skip_share")[-1] == report.wrong_skip_share
        assert logged(trainer, "group_admission/history_prompts")[-1] == len(trainer.prompt_history)

    def test_the_main_batch_of_a_step_is_picked_before_the_step_before_is_judged(
        self, tiny_model: str, tmp_path: Path
    ) -> None:
        trainer = make(tiny_model, tmp_path, prompt_history={}, config={"max_steps": 4})
        picked_at: dict[int, int] = {}
        get_sampler = trainer._get_train_sampler

        def spy_sampler(dataset: Any = None) -> Any:
            sampler = get_sampler(dataset)
            keep = sampler._scan.keep

            def spy_keep(history: Any, candidates: Any, *, step: int, pass_length: int) -> list[bool]:
                picked_at.setdefault(step, trainer.admission_session.step)
                return keep(history, candidates, step=step, pass_length=pass_length)

            sampler._scan.keep = spy_keep
            return sampler

        trainer._get_train_sampler = spy_sampler
        trainer.train()

        # The dataloader fetches a batch ahead: step s is picked while step s - 2 is the last judged.
        assert picked_at == {0: -1, 1: -1, 2: 0, 3: 1, 4: 2}


def run_main(tiny_model: str, out: Path, resume: str | None = None) -> tuple[Any, dict[int, list[int]]]:
    trainer = make(
        tiny_model,
        out,
        dataset=prompt_dataset(8),  # 4 generation batches an epoch: the run crosses two epochs
        prompt_history=dead_history(frozenset(range(0, 8, 2))),
        config={"max_steps": 6, "save_strategy": "steps", "save_steps": 3},
    )
    judged = spy_judged(trainer)
    trainer.train(resume_from_checkpoint=resume)
    return trainer, judged


@pytest.mark.slow
def test_a_resumed_run_draws_the_main_batches_of_the_uninterrupted_one(
    tiny_model: str, tmp_path: Path
) -> None:
    original, before = run_main(tiny_model, tmp_path / "a")
    checkpoint = tmp_path / "a" / "out" / "checkpoint-3"
    saved = json.loads((checkpoint / STATE_FILE).read_text())

    resumed, after = run_main(tiny_model, tmp_path / "b", resume=str(checkpoint))

    assert saved["sampler"]["chunk"] == 3
    assert sorted(after) == [3, 4, 5]
    assert [after[step] for step in (3, 4, 5)] == [before[step] for step in (3, 4, 5)]
    assert sum(logged(original, "group_admission/prompts_skipped")[3:]) > 0  # the history did skip
    assert resumed._main_sampler.state_dict() == original._main_sampler.state_dict()
    assert resumed.prompt_history.to_dict() == original.prompt_history.to_dict()


@pytest.mark.slow
def test_resampling_rounds_are_sized_by_the_picked_prompts(tiny_model: str, tmp_path: Path) -> None:
    history = dead_history(frozenset(range(0, 64, 2)), live=frozenset(range(1, 64, 2)))
    trainer = make(
        tiny_model,
        tmp_path,
        dataset=prompt_dataset(dead_every=1),  # every group dead: each step resamples
        budget=BUDGET,
        prompt_history=history,
        config={"max_steps": 2},
    )
    session, stream, events = trainer.admission_session, trainer._admission_prompts, []
    pick_prompts, rows = session.pick_prompts, stream.rows

    def spy_pick(history: Any, ids: list[int], **kwargs: Any) -> Any:
        by_rate = session.plan(num_generations=4).extra_groups  # what plan() would have asked for
        plan = pick_prompts(history, ids, **kwargs)
        events.append(("pick", session.step, list(ids), plan, by_rate))
        return plan

    def spy_rows(indices: list[int], size: int) -> list[dict[str, Any]]:
        events.append(("rows", session.step, list(indices)))
        return rows(indices, size)

    session.pick_prompts, stream.rows = spy_pick, spy_rows
    trainer.train()

    generated = [(i, event) for i, event in enumerate(events) if event[0] == "rows" and event[1] == 1]
    assert generated
    for i, (_, _, indices) in generated:
        _, _, offered, plan, by_rate = events[i - 1]
        assert indices == list(plan.generate)  # the round is the plan's prompts, in order
        assert [*plan.generate, *plan.deferred] == [p for p in offered if p not in plan.skipped]
        if i + 1 < len(events) and events[i + 1][0] == "pick":  # deferred: the front of the stream
            assert events[i + 1][2][: len(plan.deferred)] == list(plan.deferred)
    _, _, _, first, by_rate = events[generated[0][0] - 1]
    # Live prompts (p ~ 0.87 each): 3 are enough for the 2 missing groups; the batch rate asks for the cap.
    assert (len(first.generate), by_rate) == (3, 6)
    # The step logs the rate of the plan it followed: its last round's pick, not the batch rate.
    last = [event[3] for event in events if event[0] == "pick" and event[1] == 1 and event[3].generate][-1]
    rate = logged(trainer, "group_admission/effective_rate")[1]
    assert rate == pytest.approx(last.expected_informative / len(last.generate))
    assert rate > 0.5  # live prompts; the batch rate of an all-dead stream sits at its floor
