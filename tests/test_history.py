"""PromptHistory: estimates, deterministic picks, GRESO's rule, JSON state and merging."""

from __future__ import annotations

import base64
import json
import math
import re
import zlib
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from group_admission import (
    CheckpointError,
    GroupAdmissionDecision,
    GroupAdmissionPolicy,
    PromptHistory,
    PromptHistoryConfig,
    informative_probability,
)
from group_admission._history_state import HistoryParts

POLICY = GroupAdmissionPolicy({"min_reward_std": 1e-6})


def _decision(successes: int, size: int = 8) -> GroupAdmissionDecision:
    return POLICY.evaluate([1.0] * successes + [0.0] * (size - successes))


def _history(**fields: Any) -> PromptHistory:
    return PromptHistory(PromptHistoryConfig(**{"group_size": 8, **fields}))


def _feed(history: PromptHistory, steps: int, outcomes: dict[int, int], *, start: int = 0) -> None:
    """Observe each prompt of ``outcomes`` once per step, with that many successes of 8."""
    for step in range(start, start + steps):
        for prompt, successes in outcomes.items():
            history.observe(prompt, _decision(successes), step=step)


def _column(state: dict[str, Any], part: str, name: str, change: Any) -> None:
    """Decode one column of a version-2 state (independently of the library), change it, write it back."""
    dtypes = {"int_ids": "<u8", "admitted": "u1" if part == "pending" else "<f8"}
    ints = ("step", "groups", "easy", "hard", "rank", "sequence")
    dtype = dtypes.get(name, "<i8" if name in ints else "<f8")
    values = np.frombuffer(zlib.decompress(base64.b64decode(state[part][name])), dtype=dtype)
    changed = np.asarray(change(values.copy())).astype(dtype)
    state[part][name] = base64.b64encode(zlib.compress(changed.tobytes())).decode()


class TestInformativeProbability:
    def test_a_certain_pass_rate_gives_the_binary_formula(self) -> None:
        p, size = 0.3, 8
        exact = 1 - p**size - (1 - p) ** size

        assert math.isclose(exact, informative_probability(3e6, 7e6, size), rel_tol=1e-5)

    def test_uncertainty_about_the_rate_lowers_it(self) -> None:
        # Beta(1, 1): P(all pass) = P(all fail) = 1 / (G + 1).
        assert math.isclose(1 - 2 / 9, informative_probability(1.0, 1.0, 8))

    @given(st.floats(0.01, 100), st.floats(0.01, 100), st.integers(1, 32))
    def test_is_a_probability(self, alpha: float, beta: float, size: int) -> None:
        value = informative_probability(alpha, beta, size)

        assert 0.0 <= value <= 1.0
        if size == 1:
            assert 0.0 == value

    @pytest.mark.parametrize(
        ("arguments", "error", "message"),
        [
            ((-1, 0.5, 8), ValueError, "'alpha' must be a finite number > 0 (got -1)"),
            ((0.5, math.nan, 8), ValueError, "'beta' must be a finite number > 0 (got nan)"),
            ((0.5, math.inf, 8), ValueError, "'beta' must be a finite number > 0 (got inf)"),
            (("1", 0.5, 8), TypeError, "'alpha' must be a real number (got '1')"),
            ((0.5, 0.5, 0), ValueError, "'group_size' must be >= 1 (got 0)"),
            ((0.5, 0.5, True), TypeError, "'group_size' must be an integer (got True)"),
            ((0.5, 0.5, 8.0), TypeError, "'group_size' must be an integer (got 8.0)"),
        ],
    )
    def test_bad_arguments_are_refused(
        self, arguments: tuple[Any, ...], error: type[Exception], message: str
    ) -> None:
        with pytest.raises(error, match=re.escape(message)):
            informative_probability(*arguments)

    @pytest.mark.parametrize(("alpha", "beta"), [(0.5, 0.5), (3.0, 1.5), (0.02, 40.0)])
    def test_large_groups_take_the_closed_form_which_continues_the_product(
        self, alpha: float, beta: float
    ) -> None:
        size = 300  # above the product's 256 members
        all_pass = all_fail = 1.0
        for i in range(size):
            all_pass *= (alpha + i) / (alpha + beta + i)
            all_fail *= (beta + i) / (alpha + beta + i)

        assert math.isclose(1 - all_pass - all_fail, informative_probability(alpha, beta, size), rel_tol=1e-9)

    def test_an_absurd_group_size_costs_no_more_than_a_large_one(self) -> None:
        # A product over 10**15 members would never return; the closed form answers at once.
        value = informative_probability(0.5, 0.5, 10**15)

        assert 0.999 < value < 1.0
        history = PromptHistory(PromptHistoryConfig(group_size=10**15))
        history.observe(0, _decision(4), step=0)
        assert len(history.pick(list(range(50)), step=1).picked) == 50


class TestConfig:
    @pytest.mark.parametrize(
        ("fields", "error", "message"),
        [
            ({"group_size": 0}, ValueError, "'group_size' must be >= 1"),
            ({"group_size": 8, "skip_below": 1.5}, ValueError, "'skip_below' must be in"),
            ({"group_size": 8, "exploration": -0.1}, ValueError, "'exploration' must be in"),
            ({"group_size": 8, "mode": "bandit"}, ValueError, "'mode' must be one of"),
            ({"group_size": 8, "evidence": "votes"}, ValueError, "'evidence' must be one of"),
            ({"group_size": 8, "prior": (0.0, 1.0)}, ValueError, "'prior' must hold two finite numbers > 0"),
            ({"group_size": 8, "prior": "flat"}, TypeError, "'prior' must be a pair of numbers"),
            ({"group_size": 8, "reward_range": (1.0, 0.0)}, ValueError, "finite low < high"),
            ({"group_size": 8, "reward_range": (-1e308, 1e308)}, ValueError, "a finite width high - low"),
            ({"group_size": 8, "half_life": 0}, ValueError, "'half_life' must be None or a finite"),
            ({"group_size": 8, "half_life": "long"}, TypeError, "'half_life' must be None or a number"),
            ({"group_size": 8, "seed": -1}, ValueError, "'seed' must be >= 0"),
            ({"group_size": 8, "max_wrong_skip_share": 0}, ValueError, "'max_wrong_skip_share' must be in"),
            ({"group_size": 8, "max_wrong_skip_share": 1.5}, ValueError, "'max_wrong_skip_share' must be in"),
            ({"group_size": 8, "max_wrong_skip_share": "low"}, TypeError, "'max_wrong_skip_share' must be"),
            ({"group_size": 8, "colour": 1}, ValueError, "unknown key"),
        ],
    )
    def test_bad_fields_name_the_field(
        self, fields: dict[str, Any], error: type[Exception], message: str
    ) -> None:
        with pytest.raises(error, match=message):
            PromptHistoryConfig.from_mapping(fields)

    def test_group_size_is_required(self) -> None:
        # group_size has no default, so None is no config here, and no message offers it.
        for config in (None, "x"):
            with pytest.raises(TypeError) as refused:
                PromptHistory(config)  # type: ignore[arg-type]
            assert "None" not in str(refused.value).replace("(got None)", "")
            assert str(refused.value).startswith("'config' must be a PromptHistoryConfig or a mapping")
        with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'group_size'"):
            PromptHistory({})

    def test_round_trips_through_a_plain_dict(self) -> None:
        config = PromptHistoryConfig(group_size=4, prior=[0.5, 2], reward_range=[-1, 1], half_life=30)

        assert config == PromptHistoryConfig.from_mapping(json.loads(json.dumps(config.to_dict())))
        assert (0.5, 2.0) == config.prior


class TestObserveAndEstimate:
    def test_evidence_counts_from_the_next_step(self) -> None:
        history = _history(prior=(1.0, 1.0))
        history.observe("p", _decision(0), step=3)

        assert 0 == history.estimate("p", step=3).groups
        assert 1 == history.estimate("p", step=4).groups
        assert math.isclose(1 / 10, history.estimate("p", step=4).pass_rate)

    def test_external_rejections_say_nothing_about_difficulty(self) -> None:
        history = _history()
        failed = POLICY.evaluate([1.0, 0.0], external_reasons=["rollout_failed"])
        history.observe("p", failed, step=0)
        history.observe("q", POLICY.evaluate([math.nan, 1.0]), step=0)

        assert 0 == len(history)
        assert 0 == history.estimate("p", step=1).groups

    def test_graded_rewards_are_scaled_into_the_reward_range(self) -> None:
        history = _history(prior=(1.0, 1.0), reward_range=(-1.0, 1.0))
        history.observe(7, POLICY.evaluate([1.0, 1.0, 0.0, 0.0]), step=0)  # mean 0.5 -> rate 0.75

        estimate = history.estimate(7, step=1)
        assert math.isclose((1 + 3) / (2 + 4), estimate.pass_rate)

    def test_admission_evidence_estimates_the_verdicts_directly(self) -> None:
        history = _history(evidence="admissions", prior=(1.0, 1.0))
        for step in range(3):
            history.observe("p", _decision(0), step=step)

        assert math.isclose(1 / 5, history.estimate("p", step=3).informative_probability)

    def test_forgetting_halves_evidence_each_half_life(self) -> None:
        history = _history(prior=(1.0, 1.0), half_life=10)
        history.observe("p", _decision(0), step=0)

        # Eight failures count as four after one half-life.
        assert math.isclose(1 / (2 + 4), history.estimate("p", step=10).pass_rate)

    def test_observe_batch_matches_observe(self) -> None:
        rewards = np.array([[1.0] * 8, [0.0] * 8, [1.0, 0.0] * 4])
        one, many = _history(), _history()
        for prompt, row in zip("abc", rewards, strict=True):
            one.observe(prompt, POLICY.evaluate(row), step=0)
        many.observe_batch(list("abc"), POLICY.evaluate_batch(rewards), step=0)

        assert one.to_dict() == many.to_dict()

    @pytest.mark.parametrize(
        ("call", "error", "message"),
        [
            (
                lambda h: h.observe(True, _decision(1), step=0),
                TypeError,
                re.escape("'prompt_id' must be a str or an int (got True)"),
            ),
            (lambda h: h.observe("p", "admitted", step=0), TypeError, "'decision' must be a Group"),
            (lambda h: h.observe("p", _decision(1), step=-1), ValueError, "'step' must be >= 0"),
            (lambda h: h.observe("p", _decision(1), step=1.0), TypeError, "'step' must be an integer"),
            (
                lambda h: h.observe_batch("ab", [_decision(1)] * 2, step=0),
                TypeError,
                "'prompt_ids' must be a seq",
            ),
            (
                lambda h: h.observe_batch(["a"], [_decision(1)] * 2, step=0),
                ValueError,
                "one prompt per group",
            ),
            (lambda h: h.observe_batch(["a"], [1], step=0), TypeError, "'result' must be"),
            (lambda h: h.pick([1.5], step=0), TypeError, re.escape("'prompt_ids[0]' must be a str or an")),
        ],
    )
    def test_bad_input_names_the_argument(self, call: Any, error: type[Exception], message: str) -> None:
        with pytest.raises(error, match=message):
            call(_history())

    def test_rank_must_be_a_non_negative_integer(self) -> None:
        with pytest.raises(ValueError, match="'rank' must be >= 0"):
            PromptHistory({"group_size": 8}, rank=-1)
        with pytest.raises(TypeError, match="'rank' must be an integer"):
            PromptHistory({"group_size": 8}, rank="0")  # type: ignore[arg-type]


class TestPromptIds:
    def test_picks_hold_canonical_ids_and_are_json_safe(self) -> None:
        history = _history(prior=(0.5, 0.5), skip_below=0.5, exploration=0.5)
        history.observe_batch(np.arange(6), [_decision(0)] * 6, step=0)
        history.observe(np.int64(7), _decision(0), step=0)
        picks = history.pick(np.array([7, 1, 2, 3, 4, 5, 6, 8]), step=1)

        assert json.loads(json.dumps(picks.to_dict())) == picks.to_dict()
        assert all(type(prompt) is int for prompt in (*picks.picked, *picks.skipped))
        assert picks.skipped  # the draws ran: a skipped prompt was hashed
        assert 7 == history.estimate(np.int64(7), step=1).prompt_id
        assert type(history.estimate(np.int64(7), step=1).prompt_id) is int

    def test_seven_and_the_string_seven_are_two_prompts(self) -> None:
        history = _history(prior=(1.0, 1.0))
        history.observe(7, _decision(0), step=0)
        history.observe("7", _decision(8), step=0)

        assert history.estimate(7, step=1).pass_rate < 0.2 < 0.8 < history.estimate("7", step=1).pass_rate
        assert 2 == len(history)

    @given(st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1), st.text()), max_size=20))
    def test_any_prompt_id_round_trips_through_the_json_state(self, prompts: list[Any]) -> None:
        history = _history(prior=(0.5, 0.5), exploration=0.5)
        for index, prompt in enumerate(prompts):
            history.observe(prompt, _decision(index % 9), step=index % 3)
        history.pick(prompts, step=2)  # folds steps 0 and 1; step 2 stays pending
        restored = PromptHistory.from_dict(json.loads(json.dumps(history.to_dict())))

        assert restored.to_dict() == history.to_dict()
        assert restored.pick(prompts, step=5) == history.pick(prompts, step=5)


class TestPick:
    def test_unknown_prompts_are_all_picked(self) -> None:
        picks = _history().pick(list(range(50)), step=0)

        assert tuple(range(50)) == picks.picked
        assert () == picks.skipped
        assert 50 == len(picks.informative_probabilities)

    def test_dead_prompts_are_skipped_and_live_ones_kept(self) -> None:
        history = _history(prior=(0.5, 0.5), exploration=0.0)
        _feed(history, 6, {"dead": 0, "solved": 8, "live": 4})

        picks = history.pick(["dead", "live", "solved"], step=6)
        assert ("live",) == picks.picked
        assert ("dead", "solved") == picks.skipped

    def test_exploration_keeps_a_share_of_skipped_prompts(self) -> None:
        history = _history(prior=(0.5, 0.5), exploration=0.05)
        _feed(history, 6, dict.fromkeys(range(400), 0))

        kept = sum(len(history.pick(list(range(400)), step=step).picked) for step in range(6, 16))
        assert 0.03 < kept / 4000 < 0.07

    def test_picks_are_a_function_of_seed_prompt_and_step(self) -> None:
        fields = {"prior": (0.5, 0.5), "exploration": 0.5}
        first, second, reseeded = (
            _history(seed=1, **fields),
            _history(seed=1, **fields),
            _history(seed=2, **fields),
        )
        for history in (first, second, reseeded):
            _feed(history, 6, dict.fromkeys(range(200), 0))
        prompts = list(range(200))

        assert first.pick(prompts, step=5) == second.pick(prompts, step=5)
        assert first.pick(prompts, step=5) == first.pick(prompts, step=5)
        assert first.pick(prompts, step=5) != reseeded.pick(prompts, step=5)
        assert first.pick(prompts, step=5) != first.pick(prompts, step=6)

    @given(st.lists(st.one_of(st.integers(0, 50), st.text(max_size=3)), max_size=30), st.integers(0, 20))
    def test_picks_partition_the_candidates_in_order(self, prompts: list[Any], step: int) -> None:
        history = _history(prior=(0.5, 0.5), exploration=0.3)
        _feed(history, 1, dict.fromkeys(prompts[::2], 0))

        picks = history.pick(prompts, step=step + 1)
        assert len(prompts) == len(picks.picked) + len(picks.skipped)
        assert [p for p in prompts if p in picks.picked or p in picks.skipped] == prompts
        assert all(0.0 <= q <= 1.0 for q in picks.informative_probabilities)

    def test_a_fitted_prior_replaces_jeffreys_once_the_pool_is_seen(self) -> None:
        # In a pool where most prompts are unsolvable, one all-wrong group is damning.
        polarised, middling = _history(), _history()
        _feed(polarised, 1, {prompt: 0 if prompt < 60 else 8 for prompt in range(80)})
        _feed(middling, 1, dict.fromkeys(range(80), 4))
        polarised.observe("new", _decision(0), step=1)
        middling.observe("new", _decision(0), step=1)

        assert polarised.estimate("new", step=2).informative_probability < 0.1
        assert middling.estimate("new", step=2).informative_probability > 0.3


class TestWrongSkipBound:
    """The share of skipped prompts that would have been informative, measured on re-checks, bounded."""

    @staticmethod
    def _run(history: PromptHistory, informative: bool, steps: int = 40) -> None:
        """
        Prompts that look dead for 6 steps, then every re-check of them is informative (or not).

        The first 6 steps observe every prompt, picked or not: from the second on, each is a
        re-check that stayed dead.
        """
        prompts = list(range(400))
        _feed(history, 6, dict.fromkeys(prompts, 0))
        for step in range(6, 6 + steps):
            for prompt in history.pick(prompts, step=step).picked:
                history.observe(prompt, _decision(4 if informative else 0), step=step)

    def test_re_checks_that_turn_informative_shrink_the_threshold(self) -> None:
        history = _history(prior=(0.5, 0.5), exploration=0.2, max_wrong_skip_share=0.1)
        self._run(history, informative=True, steps=3)
        report = history.skip_report(step=9)
        assert report.rechecks > 300  # the dead re-checks of the first steps, then the live ones
        assert report.rechecks_informative > 30
        assert report.wrong_skip_share is not None
        assert report.wrong_skip_share > 0.1  # above the bound: the threshold shrinks
        assert report.skip_below == pytest.approx(0.1 * 0.1 / report.wrong_skip_share)

    def test_re_checks_that_stay_dead_keep_the_threshold(self) -> None:
        history = _history(prior=(0.5, 0.5), exploration=0.2, max_wrong_skip_share=0.1)
        self._run(history, informative=False, steps=3)
        report = history.skip_report(step=9)
        assert report.rechecks > 300
        assert report.rechecks_informative == 0.0
        assert report.skip_below == 0.1
        assert len(history.pick(list(range(400)), step=9).skipped) > 250

    def test_without_a_bound_the_re_checks_are_measured_and_nothing_shrinks(self) -> None:
        history = _history(prior=(0.5, 0.5), exploration=0.2, max_wrong_skip_share=None)
        self._run(history, informative=True, steps=3)
        report = history.skip_report(step=9)
        assert report.rechecks > 30
        assert report.wrong_skip_share is None
        assert report.skip_below == 0.1

    def test_nothing_is_re_checked_before_anything_is_skipped(self) -> None:
        history = _history()
        _feed(history, 3, {"live": 4})
        report = history.skip_report(step=3)
        assert (report.rechecks, report.rechecks_informative) == (0.0, 0.0)
        assert report.wrong_skip_share == pytest.approx(0.1)

    @given(informative=st.booleans(), steps=st.integers(1, 6), exploration=st.floats(0.05, 1.0))
    def test_the_measured_share_is_a_share_and_the_threshold_never_grows(
        self, informative: bool, steps: int, exploration: float
    ) -> None:
        history = _history(prior=(0.5, 0.5), exploration=exploration)
        self._run(history, informative=informative, steps=steps)
        report = history.skip_report(step=6 + steps)
        assert 0.0 <= report.rechecks_informative <= report.rechecks
        assert 0.0 < (report.wrong_skip_share or 0.0) <= 1.0
        assert 0.0 < report.skip_below <= history.config.skip_below
        restored = PromptHistory.from_dict(json.loads(json.dumps(history.to_dict())))
        assert restored.skip_report(step=6 + steps) == report

    def test_a_bad_step_is_refused(self) -> None:
        with pytest.raises(ValueError, match=r"'step' must be >= 0 \(got -1\)"):
            _history().skip_report(step=-1)


class TestGreso:
    def test_keep_probability_is_p_to_the_streak_with_a_floor(self) -> None:
        history = _history(mode="greso", greso_p_easy=0.5, greso_p_hard=0.5)
        history.observe("easy", _decision(8), step=0)
        history.observe("hard", _decision(0), step=0)
        history.observe("hard", _decision(0), step=1)
        history.observe("live", _decision(3), step=1)

        estimates = {prompt: history.estimate(prompt, step=2) for prompt in ("easy", "hard", "live")}
        easy, hard = history.greso_keep_bases  # read after the estimates folded the evidence
        assert math.isclose(easy, estimates["easy"].keep_probability)
        assert math.isclose(hard**2, estimates["hard"].keep_probability)
        assert 1.0 == estimates["live"].keep_probability

    def test_a_solvable_group_ends_the_hard_streak(self) -> None:
        history = _history(mode="greso")
        _feed(history, 3, {"p": 0})
        history.observe("p", _decision(2), step=3)

        assert 1.0 == history.estimate("p", step=4).keep_probability

    def test_keep_bases_move_towards_the_target_share(self) -> None:
        # Every group all-wrong: far above the target share, so p_hard falls each step.
        history = _history(mode="greso", greso_p_easy=0.5, greso_p_hard=0.5)
        _feed(history, 5, dict.fromkeys(range(10), 0))
        history.pick([0], step=5)

        easy, hard = history.greso_keep_bases
        assert math.isclose(0.45, hard)
        assert math.isclose(0.55, easy)

    def test_the_floor_keeps_one_percent(self) -> None:
        history = _history(mode="greso", greso_p_hard=0.05)
        _feed(history, 20, {"p": 0})

        assert 0.01 == history.estimate("p", step=20).keep_probability


class TestState:
    def _trained(self, **fields: Any) -> PromptHistory:
        history = _history(half_life=20, **fields)
        rng = np.random.default_rng(3)
        rates = rng.beta(0.3, 0.3, 60)
        for step in range(8):
            picks = history.pick(list(range(60)), step=step)
            rows = (rng.random((len(picks.picked), 8)) < rates[list(picks.picked), None]).astype(float)
            history.observe_batch(picks.picked, POLICY.evaluate_batch(rows), step=step)
        return history

    @pytest.mark.parametrize("mode", ["posterior", "greso"])
    def test_json_round_trip_replays_picks_exactly(self, mode: str) -> None:
        history = self._trained(mode=mode)
        restored = PromptHistory.from_dict(json.loads(json.dumps(history.to_dict())))

        assert history.to_dict() == restored.to_dict()
        for step in (8, 9, 30):
            assert history.pick(list(range(60)), step=step) == restored.pick(list(range(60)), step=step)
            assert history.estimate(5, step=step) == restored.estimate(5, step=step)

    @pytest.mark.parametrize(
        ("edit", "message"),
        [
            (lambda d: d.pop("prompts"), "missing key"),
            (lambda d: d.update(extra=1), "unknown key"),
            (lambda d: d.update(format="other"), "not a version-3 (or version-1, version-2) prompt history"),
            (lambda d: d.update(version=True), "not a version-3 (or version-1, version-2) prompt history"),
            (lambda d: d.update(version=2.0), "(got 'group-admission/prompt-history' version 2.0)"),
            (lambda d: d["config"].update(group_size=0), "'config'"),
            (lambda d: _column(d, "prompts", "successes", lambda c: c - 1e9), "must be finite numbers >= 0"),
            (lambda d: _column(d, "prompts", "int_ids", lambda c: np.r_[c[:1], 0, c[2:]]), "prompt once"),
            (lambda d: _column(d, "prompts", "groups", lambda c: c * 0), "contradictory counts"),
            (lambda d: _column(d, "prompts", "groups", lambda c: c + 1), "must equal the groups the records"),
            (lambda d: d["prompts"].update(count=3), "'prompts.int_ids' must be 3 values"),
            (lambda d: d["prompts"].update(failures=d["prompts"]["failures"][:-8]), "deflated and base64"),
            (lambda d: _column(d, "pending", "sequence", lambda c: c + 10**6), "numbered at or past"),
            (lambda d: _column(d, "pending", "sequence", lambda c: c * 0), "each observation once"),
            (lambda d: _column(d, "pending", "successes", lambda c: c * 0.0), None),
            (lambda d: d.update(pool=[1.0]), "'pool' must be a list of 8"),
            (lambda d: d.update(rank=True), "'rank' must be an integer"),
        ],
    )
    def test_a_damaged_state_is_refused(self, edit: Any, message: str | None) -> None:
        data = json.loads(json.dumps(self._trained().to_dict()))
        edit(data)
        if message is None:  # successes zeroed: refused only where failures are zero too
            data["pending"]["failures"] = data["pending"]["successes"]
            message = "has no samples"

        with pytest.raises(CheckpointError, match=re.escape(message)):
            PromptHistory.from_dict(data)

    @pytest.mark.parametrize(
        ("edit", "message"),
        [
            (
                lambda d: d["prompts"].update(count=1),
                "'prompts.count' must be >= the string ids (2) (got 1)",
            ),
            (
                lambda d: _column(d, "prompts", "int_ids", lambda c: np.r_[c[:1], 0, c[2:]]),
                "'prompts.int_ids' must be sorted, each prompt once (got 1 before 1)",
            ),
            (
                lambda d: d["prompts"].update(str_ids=["b", "a"]),
                "'prompts.str_ids' must be sorted, each prompt once (got 'b' before 'a')",
            ),
            (
                lambda d: _column(d, "pending", "admitted", lambda c: c * 0 + 2),
                "'pending.admitted' must hold 0 or 1 per observation (got 2)",
            ),
            (
                lambda d: _column(d, "pending", "rank", lambda c: c * 0 - 1),
                "'pending.rank' must hold integers >= 0 (got -1)",
            ),
            (
                lambda d: _column(d, "pending", "failures", lambda c: c * 0 - 1),
                "'pending.failures' must hold finite numbers >= 0 (got -1.0)",
            ),
            (
                lambda d: _column(d, "pending", "sequence", lambda c: c * 0),
                "'pending (rank, sequence)' must be sorted, each observation once (got (0, 0) before (0, 0))",
            ),
        ],
    )
    def test_a_damaged_field_is_named_with_its_value(self, edit: Any, message: str) -> None:
        """The restore messages read 'field' must be <requirement> (got <value>)."""
        history = _history()
        for step, prompt in enumerate((1, 2, 3, "a", "b")):
            history.observe(prompt, _decision(4), step=step)
        history.pick([1], step=9)  # folds the five into 'prompts'
        history.observe(1, _decision(4), step=9)
        history.observe(2, _decision(4), step=9)
        data = json.loads(json.dumps(history.to_dict()))
        edit(data)

        with pytest.raises(CheckpointError, match=re.escape(message)):
            PromptHistory.from_dict(data)

    def test_a_non_mapping_is_refused(self) -> None:
        with pytest.raises(CheckpointError, match="must be a mapping"):
            PromptHistory.from_dict([])  # type: ignore[arg-type]

    def test_a_restore_sets_exactly_the_fields_a_history_has(self) -> None:
        """Every field is configuration or restored by the one hook: a renamed field fails here."""
        history = self._trained()
        fields = set(vars(history))
        restored = PromptHistory.from_dict(json.loads(json.dumps(history.to_dict())))

        assert fields == {"_config", "_rank", "_lock"} | {f"_{f.name}" for f in attrs.fields(HistoryParts)}
        assert fields == set(vars(restored))


class TestMerge:
    def _observe_split(self, histories: list[PromptHistory], step: int) -> None:
        rng = np.random.default_rng(step)
        for prompt in range(40):
            histories[prompt % len(histories)].observe(prompt, _decision(int(rng.integers(0, 9))), step=step)

    def test_merged_ranks_equal_one_history_that_saw_everything(self) -> None:
        config = PromptHistoryConfig(group_size=8, half_life=10)
        ranks = [PromptHistory(config, rank=rank) for rank in range(3)]
        for step in range(4):
            self._observe_split(ranks, step)
            states = [history.to_dict() for history in ranks]
            for rank, history in enumerate(ranks):
                history.merge(*(state for other, state in enumerate(states) if other != rank))
            picks = [history.pick(list(range(40)), step=step + 1) for history in ranks]
            assert picks[0] == picks[1] == picks[2]

        single = PromptHistory(config, rank=0)
        for step in range(4):
            self._observe_split([single, single, single], step)
        assert single.pick(list(range(40)), step=4) == ranks[2].pick(list(range(40)), step=4)
        assert single.to_dict()["prompts"] == ranks[2].to_dict()["prompts"]

    def test_merging_twice_changes_nothing(self) -> None:
        config = PromptHistoryConfig(group_size=8)
        first, second = PromptHistory(config, rank=0), PromptHistory(config, rank=1)
        self._observe_split([first, second], 0)
        first.merge(second)
        once = first.to_dict()
        first.merge(second, second.to_dict())

        assert once == first.to_dict()

    @given(
        st.lists(
            st.tuples(st.sampled_from([0, 1, 2, "a", "b"]), st.integers(0, 8), st.integers(0, 2)), max_size=30
        ),
        st.permutations([0, 1, 2]),
    )
    def test_merges_are_order_free_and_idempotent(self, groups: list[Any], order: list[int]) -> None:
        config = PromptHistoryConfig(group_size=8, half_life=4)
        ranks = [PromptHistory(config, rank=rank) for rank in range(3)]
        for index, (prompt, successes, rank) in enumerate(groups):
            ranks[rank].observe(prompt, _decision(successes), step=index % 2)
        states = [history.to_dict() for history in ranks]
        merged = []
        for rank in order:
            history = PromptHistory.from_dict(states[rank])
            history.merge(*(states[other] for other in order if other != rank))
            history.merge(*states)  # again, and itself: nothing changes
            merged.append(history)

        picks = [history.pick([0, 1, 2, "a", "b", "c"], step=3) for history in merged]
        assert picks[0] == picks[1] == picks[2]
        assert all(h.to_dict()["prompts"] == merged[0].to_dict()["prompts"] for h in merged)
        assert all(h.to_dict()["folded"] == merged[0].to_dict()["folded"] for h in merged)

    def test_refuses_another_config_or_diverged_evidence(self) -> None:
        first, other = _history(), _history(seed=9)
        with pytest.raises(ValueError, match="different config"):
            first.merge(other)
        ahead = _history()
        ahead.observe("p", _decision(0), step=0)
        ahead.pick(["p"], step=1)
        with pytest.raises(ValueError, match="folded different evidence"):
            first.merge(ahead)

    def test_refuses_two_histories_claiming_one_rank(self) -> None:
        first, second = _history(), _history()
        first.observe("p", _decision(0), step=0)
        second.observe("p", _decision(8), step=0)

        with pytest.raises(ValueError, match="different observations as rank 0"):
            first.merge(second)
