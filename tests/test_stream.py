"""``AdmissionStream``: judging groups as they finish, windows that bound cost, staleness, checkpoints."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from group_admission import (
    AdmissionStream,
    BudgetExhaustedError,
    CheckpointError,
    ConsecutiveFailedGroupsError,
    SamplingBudgetConfig,
    SessionConfig,
    StreamLedger,
    StreamSettings,
)

LIVE, DEAD = [1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]
GATED = {"policy": {"min_reward_std": 1e-6}}


def stream(extra: int = 2, window: int = 2, **settings: Any) -> AdmissionStream:
    config = {**GATED, "budget": {"max_extra_groups": extra}}
    return AdmissionStream(config, stream={"window_groups": window, **settings})


# A finished group as the stream sees it: live, dead, or a data problem (a missing or non-finite reward).
groups = st.lists(st.sampled_from(["live", "dead", "none", "nan", "external"]), max_size=60)
ROWS = {"live": LIVE, "dead": DEAD, "none": [1.0, None, 0.0, 1.0], "nan": [math.nan, 0.0, 1.0, 1.0]}


def feed(s: AdmissionStream, kinds: list[str]) -> list[Any]:
    """Judge each group; a ``BudgetExhaustedError`` is recorded in place of its verdict."""
    out: list[Any] = []
    for kind in kinds:
        rows = LIVE if kind == "external" else ROWS[kind]
        reasons = ["worker_failed"] if kind == "external" else ()
        try:
            out.append(s.judge(rows, external_reasons=reasons, generated_tokens=10))
        except BudgetExhaustedError as exc:
            out.append(exc)
    return out


@given(groups, st.integers(0, 4), st.integers(1, 4), st.sampled_from(["train", "raise"]))
def test_counts_conserve_and_what_is_kept_is_what_trains(
    kinds: list[str], extra: int, window: int, action: str
) -> None:
    s = stream(extra, window, on_exhausted=action)
    verdicts = feed(s, kinds)
    stats = s.stats

    assert stats.candidates == len(kinds)
    assert stats.admitted + stats.rejected == stats.candidates
    assert stats.external == sum(kind != "live" and kind != "dead" for kind in kinds)
    kept = [v for v in verdicts if not isinstance(v, Exception) and v.keep]
    assert len(kept) == s.trained_groups() == stats.admitted + stats.fallback_admitted
    assert s.tokens.generated == 10 * len(kinds)
    assert all(
        not v.fallback_admitted for v in verdicts if not isinstance(v, Exception) and v.decision.admitted
    )


@given(groups, st.integers(0, 4), st.integers(1, 4))
def test_a_window_keeps_its_target_within_its_cap(kinds: list[str], extra: int, window: int) -> None:
    """on_exhausted=train: each window kept its target, generating at most target + extra usable groups."""
    s = stream(extra, window)
    verdicts = feed(s, kinds)
    reports = [v.report for v in verdicts if v.report is not None]
    cap = window + s.config.budget.max_extra_groups
    externals: dict[int, int] = {}
    for v in verdicts:
        externals[v.window] = externals.get(v.window, 0) + (v.decision.reason == "external")

    assert len(reports) == s.window
    for report in reports:
        assert report.kept_groups == report.target_groups == window
        assert not report.exhausted
        assert report.generated_groups - externals.get(report.step, 0) <= cap


@given(st.lists(st.sampled_from(["live", "dead"]), max_size=40), st.integers(0, 3), st.integers(1, 3))
def test_raise_stops_at_the_cap_and_the_stream_goes_on(kinds: list[str], extra: int, window: int) -> None:
    s = stream(extra, window, on_exhausted="raise")
    verdicts = feed(s, kinds)
    errors = [v for v in verdicts if isinstance(v, Exception)]

    assert s.ledger.exhausted_windows == len(errors)
    assert s.stats.fallback_admitted == 0
    for error in errors:
        assert "max_extra_groups" in str(error)
    reports = [v.report for v in verdicts if not isinstance(v, Exception) and v.report is not None]
    for report in reports:
        assert report.generated_groups <= window + s.config.budget.max_extra_groups


def test_an_all_dead_stream_raises_instead_of_refilling_forever() -> None:
    s = stream(extra=3, window=2, on_exhausted="raise")
    for _ in range(3):
        s.judge(DEAD)
    with pytest.raises(BudgetExhaustedError, match="window 0 kept 0 of 2 groups after 4 generated groups"):
        s.judge(DEAD)

    assert s.last_report is not None
    assert s.ledger.exhausted_windows == 1
    assert s.window == 1


def test_train_keeps_dead_groups_once_the_window_cannot_afford_them() -> None:
    s = stream(extra=1, window=2)
    first, second, third = s.judge(DEAD), s.judge(DEAD), s.judge(DEAD)

    assert (first.keep, second.keep, third.keep) == (False, True, True)
    assert second.fallback_admitted
    assert third.fallback_admitted
    assert third.report is not None
    assert third.report.generated_groups == 3
    assert s.stats.fallback_admitted == 2


def test_a_budget_left_at_its_defaults_is_the_targets() -> None:
    """The default budget allows no extra group: a stream would keep every dead group, so it scales."""
    assert stream(extra=0, window=3).config.budget == SamplingBudgetConfig.for_target(3)
    assert stream(extra=1, window=3).config.budget.max_extra_groups == 1


def test_an_external_group_is_never_kept_by_an_exhausted_window() -> None:
    s = stream(extra=1, window=1)
    s.judge(DEAD)  # the one rejection the window can afford
    verdict = s.judge([None, None, None, None])

    assert not verdict.keep
    assert verdict.decision.reason == "external"
    assert s.stats.external == 1
    assert s.stats.fallback_admitted == 0
    assert s.window == 0


def test_a_stream_of_failed_groups_stops_with_the_drop_limits() -> None:
    config = {**GATED, "budget": {"max_extra_groups": 100}, "limits": {"max_consecutive_failed_groups": 3}}
    s = AdmissionStream(config, stream={"window_groups": 2})
    s.judge([None] * 4)
    s.judge([None] * 4)
    with pytest.raises(ConsecutiveFailedGroupsError):
        s.judge([None] * 4)
    assert s.stats.external == 3


def test_staleness_drops_count_as_stale_not_as_rejections() -> None:
    s = stream(extra=4, window=4, max_staleness=1)
    fresh = s.judge(LIVE, versions=[3, 4], current_version=4)
    stale = s.judge(LIVE, generated_tokens=9, versions=[1, 2], current_version=4)
    dead = s.judge(DEAD, versions=[3], current_version=4)

    assert fresh.keep
    assert (fresh.version_span, fresh.staleness) == (1, 1)
    assert not stale.keep
    assert stale.stale
    assert stale.decision is None  # never judged: not a rejection
    assert dead.decision is not None
    assert dead.decision.reason == "exact_dead"
    assert s.stats.candidates == 2
    assert s.stats.rejected == 1
    assert s.ledger.arrived_stale == 1
    assert s.tokens.aborted == 9  # its tokens are still counted
    assert s.trained_groups() == 1
    metrics = s.metrics()
    assert metrics["group_admission/stale_groups"] == 1
    assert metrics["group_admission/version_span_max"] == 1
    assert metrics["group_admission/version_span_mean"] == pytest.approx(2 / 3)


def test_the_hosts_own_stale_drops_are_counted() -> None:
    s = stream(extra=4, window=4)
    s.judge(LIVE)
    s.judge(LIVE)
    s.drop_stale(2)

    assert s.ledger.dropped_stale == 2
    assert s.trained_groups() == 0
    with pytest.raises(ValueError, match="'groups' must be <= the 0 groups sent to training"):
        s.drop_stale()


def test_every_decoded_token_and_the_loss_scale_of_each_window() -> None:
    s = AdmissionStream(
        {**GATED, "budget": {"max_extra_groups": 4}, "loss_scale": "linear"}, stream={"window_groups": 1}
    )
    s.judge(DEAD, generated_tokens=30)
    s.charge(7, kind="aborted")
    verdict = s.judge(LIVE, generated_tokens=20)

    assert verdict.report is not None
    assert verdict.report.decoded_tokens == 57
    assert s.loss_scale == verdict.report.loss_scale == 0.5
    assert s.metrics()["group_admission/total/decoded_tokens"] == 57


def test_pick_skips_prompts_the_history_predicts_dead_and_counts_them() -> None:
    s = AdmissionStream.from_mapping(
        {"preset": "recommended", "stream": {"window_groups": 1}}, group_size=4, seed=1
    )
    for _ in range(6):
        s.judge(DEAD, prompt_id="dead")
        s.judge(LIVE, prompt_id="live")
    picks = s.pick(["dead"] * 20 + ["live"])

    assert "live" in picks.picked
    assert s.ledger.skipped_prompts == len(picks.skipped) > 0
    assert AdmissionStream(GATED).pick([1, 2]).picked == (1, 2)  # no history: every prompt


def test_skips_in_a_row_are_bounded_so_the_stream_moves_on() -> None:
    block = {"preset": "recommended", "stream": {"window_groups": 1, "max_skips_in_a_row": 3}}
    s = AdmissionStream.from_mapping(block, group_size=4, seed=1)
    for _ in range(100):  # a dead prompt's skip is drawn per window: judge until one skips it
        s.judge(DEAD, prompt_id="dead")
        if s.pick(["dead"]).skipped:
            break
    picks = s.pick(["dead"] * 5)  # one skipped already: room for two more

    assert (len(picks.skipped), len(picks.picked), len(picks.informative_probabilities)) == (2, 3, 3)
    assert s.ledger.skips_in_a_row == 3
    assert s.pick(["dead"]).picked == ("dead",)
    s.judge(DEAD, prompt_id="dead")
    assert s.ledger.skips_in_a_row == 0


def test_one_block_builds_the_stream_and_the_recommended_preset_works() -> None:
    s = AdmissionStream.from_mapping({"preset": "recommended", "stream": {"window_groups": 3}})

    recommended = SessionConfig.preset("recommended")
    assert s.config.policy == recommended.policy
    assert s.config.history == recommended.history
    assert s.config.budget == SamplingBudgetConfig.for_target(3)  # the preset sets no budget
    assert s.settings == StreamSettings(window_groups=3)
    assert s.settings.max_skips_in_a_row == 64
    assert s.session.target_groups == 3


def _play(s: AdmissionStream, seed: int, start: int, stop: int) -> list[tuple[bool, bool, int]]:
    """Groups ``start`` to ``stop`` of a fixed stream: live, dead, a missing reward; versions that age."""
    kinds = ["live", "dead", "dead", "none", "live", "dead", "live"]
    out = []
    for i in range(start, stop):
        rows = ROWS[kinds[(i * 7 + seed) % len(kinds)]]
        v = s.judge(rows, prompt_id=i % 3, generated_tokens=i, versions=[i // 5], current_version=i // 4)
        out.append((v.keep, v.stale, v.window))
    return out


@given(st.integers(0, 19), st.integers(0, 6))
def test_a_checkpoint_restores_exactly(cut: int, seed: int) -> None:
    block = {"preset": "recommended", "stream": {"window_groups": 2, "max_staleness": 1}}
    whole = AdmissionStream.from_mapping(block, group_size=4)
    expected = _play(whole, seed, 0, 20)
    first = AdmissionStream.from_mapping(block, group_size=4)
    played = _play(first, seed, 0, cut)
    saved = json.loads(json.dumps(first.state_dict()))
    second = AdmissionStream.from_mapping(block, group_size=4)
    second.load_state_dict(saved)

    assert second.state_dict() == saved
    played += _play(second, seed, cut, 20)
    assert played == expected
    assert second.state_dict() == whole.state_dict()


def _saved() -> dict[str, Any]:
    s = stream(window=1)
    s.judge(LIVE, versions=[0, 2])
    s.judge(DEAD)
    return json.loads(json.dumps(s.state_dict()))


def _edit(path: str, value: Any) -> dict[str, Any]:
    state = _saved()
    *parents, last = path.split(".")
    node = state
    for key in parents:
        node = node[key]
    node[last] = value
    return state


REFUSED = [
    ("not a state", [], "must be a mapping"),
    ("another format", {**_saved(), "format": "x"}, "not a version-1 stream state"),
    ("another setting", _edit("settings.window_groups", 5), "different settings"),
    ("another config", _edit("config.loss_scale", "kept"), "different config"),
    ("a broken session", _edit("session.version", 99), "'session'"),
    ("a ledger key missing", _edit("ledger", {"dropped_stale": 0}), "'ledger' must map exactly"),
    ("a skip run longer than allowed", _edit("ledger.skips_in_a_row", 65), "'ledger.skips_in_a_row'"),
    ("a negative count", _edit("ledger.dropped_stale", -1), "'ledger.dropped_stale' must be a non-negative"),
    ("more stale than kept", _edit("ledger.dropped_stale", 5), "exceeds the groups kept"),
    ("spans without groups", _edit("ledger.versioned_groups", 0), "contradict"),
    ("a history it never had", _edit("history", {"format": "x"}), "'history' must be null"),
    ("no last report", _edit("last_report", None), "'last_report' must be the report of window 0"),
    (
        "a count made a float",
        _edit("last_report.kept_groups", 7.0),
        "'last_report.kept_groups' must be of type int",
    ),
    ("a report of another window", _edit("last_report.step", 3), "'last_report' must be the written report"),
]


@pytest.mark.parametrize(("case", "state", "message"), REFUSED, ids=[case for case, _, _ in REFUSED])
def test_a_checkpoint_is_refused_and_nothing_changes(case: str, state: Any, message: str) -> None:
    s = stream(window=1)
    s.judge(LIVE)
    before = s.state_dict()

    with pytest.raises(CheckpointError, match=message):
        s.load_state_dict(state)
    assert s.state_dict() == before


BAD = [
    (lambda: StreamSettings(window_groups=0), ValueError, "'window_groups' must be >= 1"),
    (lambda: StreamSettings(window_groups=1.5), TypeError, "'window_groups' must be an integer"),
    (lambda: StreamSettings(max_staleness=-1), ValueError, "'max_staleness' must be >= 0"),
    (lambda: StreamSettings(max_skips_in_a_row=-1), ValueError, "'max_skips_in_a_row' must be >= 0"),
    (lambda: StreamSettings(on_exhausted="stop"), ValueError, "'on_exhausted' must be one of"),
    (lambda: StreamSettings.from_mapping({"window": 2}), ValueError, "unknown key\\(s\\) 'window'"),
    (lambda: AdmissionStream(stream=3), TypeError, "'stream' must be a StreamSettings, a mapping or None"),
    (lambda: AdmissionStream(config=[1]), TypeError, "'config' must be a SessionConfig"),
    (lambda: AdmissionStream({"preset": "best"}), ValueError, "'preset' must be one of"),
    (lambda: AdmissionStream(group_size=0), ValueError, "'group_size' must be >= 1"),
    (lambda: AdmissionStream.from_mapping([]), TypeError, "'block' must be a mapping"),
    (lambda: AdmissionStream().judge(LIVE, versions=3), TypeError, "'versions' must be a sequence"),
    (lambda: AdmissionStream().judge(LIVE, versions=[]), ValueError, "'versions' must hold at least one"),
    (lambda: AdmissionStream().judge(LIVE, versions=[-1]), ValueError, "'versions' must be >= 0"),
    (lambda: AdmissionStream().judge(LIVE, versions=[2], current_version=1), ValueError, "'current_version'"),
    (lambda: AdmissionStream().judge(LIVE, current_version="1"), TypeError, "'current_version' must be an"),
    (lambda: AdmissionStream().judge(LIVE, prompt_id=1.5), TypeError, "prompt"),
    (
        lambda: AdmissionStream().judge(LIVE, generated_tokens=-1),
        ValueError,
        "'generated_tokens' must be >= 0",
    ),
    (lambda: AdmissionStream().drop_stale(0), ValueError, "'groups' must be >= 1"),
    (lambda: AdmissionStream().charge(1, kind="lost"), ValueError, "'kind' must be one of"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD)
def test_bad_input_names_the_field(call: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_a_bad_judge_call_counts_nothing() -> None:
    s = stream()
    with pytest.raises(ValueError):
        s.judge(LIVE, versions=[-1])
    assert s.stats.candidates == 0
    assert s.state_dict() == stream().state_dict()


def test_the_ledger_adds_and_keeps_the_largest_span() -> None:
    ledger = StreamLedger().add(version_span_max=3, versioned_groups=1, version_span_total=3)
    assert ledger.add(version_span_max=2).version_span_max == 3
    assert StreamLedger.from_dict(ledger.to_dict()) == ledger
