"""AdmissionSession: the one admission loop every integration runs."""

from __future__ import annotations

import copy
import json
import pickle
import threading
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from group_admission import (
    AdmissionSession,
    AdmissionStats,
    CheckpointError,
    ConsecutiveFailedGroupsError,
    DropLimits,
    GroupAdmissionPolicy,
    SamplingBudgetConfig,
    StepLifecycleError,
)
from group_admission._plan_call import PlanCall
from group_admission._session_state import SessionParts
from group_admission._step_book import StepBook

GATE = {"min_reward_std": 1e-6}
LIVE, DEAD = [0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]


def budget(**overrides: Any) -> SamplingBudgetConfig:
    fields: dict[str, Any] = {"max_extra_groups": 8, "max_resample_rounds": 3, **overrides}
    return SamplingBudgetConfig(**fields)


def test_judge_keeps_admitted_groups_and_counts_every_decision() -> None:
    session = AdmissionSession(GATE)
    assert session.judge(LIVE).keep
    verdict = session.judge(DEAD)
    assert not verdict.keep
    assert verdict.decision.reason == "exact_dead"
    assert not verdict.fallback_admitted
    assert (session.stats.candidates, session.stats.admitted, session.stats.exact_dead) == (2, 1, 1)


def test_a_step_plans_resampling_until_the_target_is_met() -> None:
    session = AdmissionSession(GATE, budget=budget())
    session.begin_step(target_groups=4)
    verdicts = session.judge_batch([LIVE, DEAD, DEAD, LIVE])
    assert verdicts.keep.tolist() == [True, False, False, True]
    plan = session.plan(num_generations=4)
    # Half the round was admitted: two more admitted groups need four groups.
    assert (plan.remaining_target_groups, plan.extra_groups, plan.exhausted) == (2, 4, False)
    session.judge_batch([LIVE, LIVE, LIVE, DEAD])
    assert session.plan(num_generations=4).limited_by == ("target_met",)
    report = session.end_step()
    assert (report.admitted_groups, report.trained_groups, report.surplus_groups) == (5, 4, 1)
    assert (report.generated_groups, report.generated_samples, report.sampling_rounds) == (8, 32, 2)
    assert not report.exhausted
    assert report.short_groups == 0


def test_without_a_budget_a_short_step_is_exhausted_at_once() -> None:
    session = AdmissionSession(GATE)
    session.begin_step(target_groups=2)
    session.judge_batch([LIVE, DEAD])
    plan = session.plan(num_generations=4)
    assert plan.exhausted
    assert plan.extra_groups == 0
    report = session.end_step()
    assert report.exhausted
    assert report.short_groups == 1


def test_an_all_dead_stream_ends_within_the_caps() -> None:
    session = AdmissionSession(GATE, budget=budget(max_extra_groups=6, max_resample_rounds=10))
    session.begin_step(target_groups=4)
    rounds = 0
    session.judge_batch([DEAD] * 4)
    while (plan := session.plan(num_generations=4)).extra_groups:
        rounds += 1
        session.judge_batch([DEAD] * plan.extra_groups)
    report = session.end_step()
    assert report.exhausted
    assert report.generated_groups <= 4 + 6
    assert "extra_group_budget" in plan.limited_by
    assert rounds >= 1


def test_groups_of_different_sizes_count_their_own_samples() -> None:
    session = AdmissionSession(GATE, budget=budget())
    session.begin_step(target_groups=3)
    session.judge([0.0, 1.0])
    session.judge([0.0, 1.0, 1.0, 0.0, 1.0])
    session.plan()
    state = session.budget_state
    assert state is not None
    assert (state.generated_groups, state.generated_samples, state.sampling_rounds) == (2, 7, 1)


def test_one_round_leaves_room_for_a_second_when_one_resample_round_is_allowed() -> None:
    session = AdmissionSession(GATE, budget=budget(max_resample_rounds=1))
    session.begin_step(target_groups=4)
    session.judge_batch([LIVE, DEAD])
    session.judge([0.0, 1.0])  # groups of another size in the same hand-off: still one round
    session.plan(num_generations=4)
    assert session.can_launch()
    session.judge_batch([DEAD, DEAD])
    session.plan(num_generations=4)
    assert not session.can_launch()


def test_can_launch_counts_groups_in_flight_and_the_round_in_progress() -> None:
    session = AdmissionSession(GATE, budget=budget(max_extra_groups=2))
    session.begin_step(target_groups=2)
    assert session.can_launch(4)
    assert not session.can_launch(5)
    session.judge(DEAD)
    assert session.can_launch(3)
    assert not session.can_launch(3, in_flight=1)


@pytest.mark.parametrize("call", ["plan", "can_launch", "end_step"])
def test_step_calls_before_begin_step_are_refused(call: str) -> None:
    with pytest.raises(StepLifecycleError, match=rf"call begin_step\(target_groups\) before {call}\(\)"):
        getattr(AdmissionSession(), call)()


def test_begin_step_on_an_open_step_is_refused_and_keeps_that_step() -> None:
    session = AdmissionSession(GATE, budget=budget())
    session.begin_step(target_groups=2)
    session.judge(LIVE)
    with pytest.raises(
        StepLifecycleError, match=r"begin_step\(\) while step 0 is open: call end_step\(\) first"
    ):
        session.begin_step(target_groups=5)

    report = session.end_step()
    assert (0, 2, 1) == (report.step, report.target_groups, report.admitted_groups)
    session.begin_step(target_groups=5)
    assert (1, 5) == (session.step, session.target_groups)


@pytest.mark.parametrize("where", ["before the first step", "between two steps"])
def test_groups_judged_outside_a_step_count_in_the_lifetime_and_in_no_step(where: str) -> None:
    session = AdmissionSession(GATE, budget=budget())
    if where == "between two steps":
        session.begin_step(target_groups=1)
        session.judge(LIVE)
        session.end_step()
    lifetime = session.stats.candidates
    session.judge_batch([LIVE, LIVE, LIVE])
    session.judge(LIVE)
    session.record_fallback(0)
    session.begin_step(target_groups=2)
    plan = session.plan(num_generations=4)
    session.judge_batch([LIVE, DEAD])
    report = session.end_step()

    assert lifetime + 6 == session.stats.candidates
    # The step sees only its own groups: its first plan is the target, its report its two groups.
    assert (2, 2, ()) == (plan.remaining_target_groups, plan.extra_groups, plan.limited_by)
    assert (1, 1, 2, 1) == (
        report.admitted_groups,
        report.kept_groups,
        report.generated_groups,
        report.sampling_rounds,
    )
    assert 2 == session.step_stats.candidates


def test_a_fallback_recorded_outside_a_step_counts_in_the_lifetime_only() -> None:
    session = AdmissionSession(GATE)
    session.judge(DEAD)
    session.record_fallback(1)

    assert (1, 0) == (session.stats.fallback_admitted, session.step_stats.fallback_admitted)


def test_every_field_of_a_session_is_configuration_or_restored_by_the_one_hook() -> None:
    """A renamed field fails here instead of becoming a new attribute on restore."""
    session = _session()
    _run(session, [("begin", 2), ("judge", LIVE), ("plan", 2)])
    fields = set(vars(session))
    restored = _session()
    restored.load_state_dict(json.loads(json.dumps(session.state_dict())))

    configuration = {"_policy", "_controller", "_limits", "_host", "_lock", "_loss_scale"}
    assert fields == configuration | {f"_{field.name}" for field in attrs.fields(SessionParts)}
    assert fields == set(vars(restored))
    assert {f.name for f in attrs.fields(StepBook)} >= {"index", "open", "target", "state", "round"}


def test_a_ratio_limit_forces_gate_rejections_through_but_never_unusable_data() -> None:
    session = AdmissionSession(GATE, limits={"max_rejection_ratio": 0.5})
    outcomes = [session.judge(DEAD) for _ in range(4)]
    # Counting the group at hand: (0 + 1) / 1 > 0.5 keeps the first, (0 + 1) / 2 drops the second...
    assert [v.keep for v in outcomes] == [True, False, True, False]
    assert [v.fallback_admitted for v in outcomes] == [True, False, True, False]
    external = session.judge([1.0, None, 0.0])
    assert not external.keep
    assert external.decision.reason == "external"
    assert session.stats.fallback_admitted == 2


def test_step_scoped_limits_start_afresh_each_step_and_run_scope_does_not() -> None:
    for scope, expected in (("step", [False, False]), ("run", [False, True])):
        session = AdmissionSession(GATE, limits={"max_rejected_groups": 1, "scope": scope})
        kept = []
        for step in range(2):
            session.begin_step(target_groups=1)
            kept.append(session.judge(DEAD).keep)
            assert session.end_step().step == step
        assert kept == expected, scope


def test_forceable_external_reasons_may_be_kept_by_a_limit() -> None:
    session = AdmissionSession(limits={"max_rejected_groups": 0, "forceable_external": ["drop_flag"]})
    assert session.judge(LIVE, external_reasons=["drop_flag"]).fallback_admitted
    assert not session.judge(LIVE, external_reasons=["drop_flag", "stale"]).keep


def test_a_streak_of_dropped_external_groups_stops_the_run() -> None:
    session = AdmissionSession(GATE, limits={"max_consecutive_failed_groups": 3}, host="slime")
    session.judge([None, 1.0])
    session.judge([None, 1.0])
    session.judge(LIVE)  # any other outcome ends the streak
    session.judge([None, 1.0])
    session.judge([1.0, float("nan")])
    with pytest.raises(ConsecutiveFailedGroupsError, match=r"3 consecutive groups .* the slime rollout"):
        session.judge([1.0, None])
    assert session.stats.external == 5  # the group that broke the streak is counted too


@given(
    rows=st.lists(
        st.sampled_from([LIVE, DEAD, [0.0, 0.0, 0.0, 1e-9], [1.0, None, 0.0, 1.0]]), min_size=1, max_size=12
    ),
    ratio=st.sampled_from([None, 0.0, 0.3, 0.5, 1.0]),
    cap=st.sampled_from([None, 0, 2]),
)
@settings(max_examples=60, deadline=None)
def test_judge_batch_applies_limits_exactly_as_judge_does(
    rows: list[list[Any]], ratio: Any, cap: Any
) -> None:
    limits = {"max_rejection_ratio": ratio, "max_rejected_groups": cap}
    one, many = AdmissionSession(GATE, limits=limits), AdmissionSession(GATE, limits=limits)
    singles = [one.judge(row) for row in rows]
    batch = many.judge_batch(rows)
    assert batch.keep.tolist() == [v.keep for v in singles]
    assert batch.fallback_admitted.tolist() == [v.fallback_admitted for v in singles]
    assert one.stats == many.stats


def test_batch_without_limits_tracks_the_trailing_external_streak() -> None:
    session = AdmissionSession(GATE)
    session.judge_batch([LIVE, [None, 1.0, 0.0, 1.0], [1.0, None, 1.0, 0.0]])
    assert session.consecutive_failures == 2


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("judge"), st.sampled_from([LIVE, DEAD, [0.0, 1.0], [None, 1.0]])),
        st.tuples(st.just("begin"), st.integers(0, 6)),
        st.tuples(st.just("plan"), st.integers(1, 4)),
        st.tuples(st.just("end"), st.just(0)),
    ),
    max_size=25,
)


def _run(session: AdmissionSession, ops: list[tuple[str, Any]]) -> list[Any]:
    seen: list[Any] = []
    for op, value in ops:
        try:
            if op == "judge":
                verdict = session.judge(value, generated_tokens=3)
                seen.append((verdict.keep, verdict.fallback_admitted))
            elif op == "begin":
                session.begin_step(value)
            elif op == "plan":
                seen.append(session.plan(value).to_dict())
            else:
                seen.append(session.end_step().to_dict())
        except StepLifecycleError:
            seen.append("lifecycle")
    return seen


def _session() -> AdmissionSession:
    return AdmissionSession(
        GATE,
        budget=budget(max_total_tokens=60, mode="confidence"),
        limits=DropLimits(max_rejection_ratio=0.6),
    )


@given(before=OPS, after=OPS)
@settings(max_examples=80, deadline=None)
def test_a_restored_session_gives_identical_later_verdicts_and_plans(
    before: list[tuple[str, Any]], after: list[tuple[str, Any]]
) -> None:
    original = _session()
    _run(original, before)
    restored = _session()
    restored.load_state_dict(json.loads(json.dumps(original.state_dict())))
    assert restored.state_dict() == original.state_dict()
    assert _run(restored, after) == _run(original, after)
    assert restored.stats == original.stats


def test_a_state_saved_under_other_settings_is_refused() -> None:
    saved = AdmissionSession(GATE).state_dict()
    target = AdmissionSession({"min_reward_std": 0.1})
    with pytest.raises(CheckpointError, match="saved under a different policy configuration"):
        target.load_state_dict(saved)
    assert target.state_dict()["config"]["policy"]["min_reward_std"] == 0.1


def _call(**fields: Any) -> dict[str, Any]:
    """A planning call as a state holds it: every field, ``fields`` changed."""
    return {**PlanCall(kind="round", judged=0).to_dict(), **fields}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s.pop("stats"), "missing key(s) ['stats']"),
        (lambda s: s.update(version=99), "not a version-2 session state"),
        (lambda s: s["stats"]["counts"].update(admitted=5), "counts do not conserve"),
        (lambda s: s["step"].update(index="x"), "'step.index' must be an integer >= -1"),
        (lambda s: s.update(windows=[[0, 1, 2]]), "dropped more groups (2) than it judged (1)"),
        (lambda s: s["budget"].pop("generated_groups"), "missing key(s) ['generated_groups']"),
        (lambda s: s["round"].update(samples=0), "fewer samples than groups"),
        (lambda s: s["step"].update(last_call=[1]), "'step.last_call' must be a mapping"),
        (lambda s: s["step"].update(last_call=_call(kind="wave")), "'kind' must be one of"),
        (
            lambda s: s["step"].update(last_call=_call(judged=2)),
            "'step.last_call.judged' (2) exceeds the step's judged groups (1)",
        ),
        (
            lambda s: s["step"].update(last_call=_call(kind="stream", race=0.5)),
            "'race' must be a finite number >= 1",
        ),
        (
            lambda s: s["step"].update(last_call=_call(race=2)),
            "'step.last_call.race' must be a float (got 2)",
        ),
        (
            lambda s: s["step"].update(last_call={**_call(), "x": 1}),
            "'step.last_call' must have exactly the keys",
        ),
        (
            lambda s: s["step"].update(last_call={"kind": "round", "judged": 0}),
            "'step.last_call' must have exactly",
        ),
    ],
)
def test_a_damaged_state_is_refused_and_the_session_is_left_unchanged(mutate: Any, message: str) -> None:
    source = AdmissionSession(GATE, limits={"max_rejection_ratio": 0.5})
    source.begin_step(3)
    source.judge(LIVE)
    state = copy.deepcopy(source.state_dict())
    mutate(state)
    target = AdmissionSession(GATE, limits={"max_rejection_ratio": 0.5})
    before = target.state_dict()
    with pytest.raises(CheckpointError, match=__import__("re").escape(message)):
        target.load_state_dict(state)
    assert target.state_dict() == before


def test_threads_sharing_a_session_keep_counts_conserved() -> None:
    session = AdmissionSession(GATE, limits={"max_rejection_ratio": 0.5})

    def work() -> None:
        for index in range(300):
            session.judge(LIVE if index % 3 else DEAD)
            session.judge_batch(np.array([LIVE, DEAD]))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = session.stats
    assert stats.candidates == 4 * 300 * 3
    stats.check_conservation()
    assert stats.rejected - stats.fallback_admitted <= 0.5 * stats.candidates + 1


def test_stats_pickle_and_deepcopy_exactly() -> None:
    session = AdmissionSession(GATE)
    session.judge_batch([LIVE, DEAD, [None, 1.0, 1.0, 1.0]])
    stats = session.stats
    assert pickle.loads(pickle.dumps(stats)) == stats
    assert copy.deepcopy(stats) == stats


def test_session_accepts_a_ready_policy_and_names_bad_arguments() -> None:
    policy = GroupAdmissionPolicy(GATE)
    assert AdmissionSession(policy).policy is policy
    with pytest.raises(TypeError, match="'policy' must be a GroupAdmissionPolicy"):
        AdmissionSession(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'budget' must be a SamplingBudgetController"):
        AdmissionSession(budget="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"'max_rejection_ratio' must be in \[0, 1\] \(got 1.5\)"):
        AdmissionSession(limits={"max_rejection_ratio": 1.5})
    with pytest.raises(TypeError, match="'step' must be an int, a str or None"):
        AdmissionSession().judge(LIVE, step=1.5)  # type: ignore[arg-type]
    assert isinstance(AdmissionSession().stats, AdmissionStats)


def test_host_fallbacks_are_counted_within_the_step_rejections() -> None:
    session = AdmissionSession(GATE)
    session.begin_step(2)
    session.judge_batch([DEAD, DEAD, LIVE])
    session.record_fallback(2)
    assert (session.stats.fallback_admitted, session.step_stats.fallback_admitted) == (2, 2)
    with pytest.raises(ValueError, match="would make fallback_admitted exceed the rejected groups"):
        session.record_fallback(1)
    assert session.stats.fallback_admitted == 2


def test_difference_reports_the_counts_added_since_a_snapshot() -> None:
    session = AdmissionSession(GATE)
    session.judge(LIVE)
    snapshot = session.stats
    session.judge_batch([DEAD, [None, 1.0, 1.0, 1.0]])
    delta = session.stats.difference(snapshot)
    assert (delta.candidates, delta.admitted, delta.exact_dead, delta.external) == (2, 0, 1, 1)
    assert delta.external_details == {"missing_reward": 1}
    with pytest.raises(ValueError, match="not an earlier snapshot"):
        snapshot.difference(session.stats)


# -- the report describes the last plan the host followed ------------------------------
def _short_stream(session: AdmissionSession, *, plan_after: bool) -> Any:
    """A streaming step whose dataloader runs out: 3 groups launched, 2 admitted, target 4."""
    session.begin_step(target_groups=4)
    session.stream_plan(0, num_generations=4)
    for rewards in (LIVE, LIVE, DEAD):
        session.judge(rewards)
    return session.stream_plan(0, num_generations=4) if plan_after else None


@pytest.mark.parametrize("plan_after", [True, False])
def test_a_short_streaming_step_with_room_left_is_not_exhausted(plan_after: bool) -> None:
    """With the default max_resample_rounds=0 the round planner would say the rounds are spent."""
    session = AdmissionSession(GATE, budget=SamplingBudgetConfig(max_extra_groups=8))
    last = _short_stream(session, plan_after=plan_after)

    report = session.end_step()

    assert 2 == report.short_groups
    assert not report.exhausted
    assert "resample_round_budget" not in report.limited_by
    if last is not None:
        assert last.launch > 0
        assert (last.exhausted, last.limited_by) == (report.exhausted, report.limited_by)


def test_a_streaming_step_the_caps_stopped_is_exhausted_by_the_stream_plan() -> None:
    session = AdmissionSession(GATE, budget=SamplingBudgetConfig(max_extra_groups=1))
    session.begin_step(target_groups=2)
    last = session.stream_plan(0, num_generations=4)
    session.judge_batch([LIVE] + [DEAD] * (last.launch - 1))
    while not (last := session.stream_plan(0, num_generations=4)).done:
        session.judge_batch([DEAD] * last.launch)

    report = session.end_step()

    assert last.exhausted
    assert report.exhausted
    assert last.limited_by == report.limited_by == ("extra_group_budget",)


def _token_capped_rounds(session: AdmissionSession) -> Any:
    """Rounds planned with an upper bound of 700 tokens per group, where 100 were observed."""
    session.begin_step(target_groups=4)
    session.judge_batch([LIVE, DEAD, DEAD, DEAD], generated_tokens=400)
    return session.plan(num_generations=4, estimated_tokens_per_group=700)


def test_a_step_the_hard_token_cap_stopped_is_exhausted_as_its_last_plan_said() -> None:
    session = AdmissionSession(GATE, budget=budget(max_total_tokens=1000))
    last = _token_capped_rounds(session)

    report = session.end_step()

    assert last.exhausted
    assert ("token_budget",) == last.limited_by
    assert report.exhausted
    assert ("token_budget",) == report.limited_by


def test_after_the_last_plan_the_report_replans_with_the_hosts_arguments() -> None:
    """Groups judged after the last plan: the same planner, the same token bound, the final counts."""
    session = AdmissionSession(GATE, budget=budget(max_total_tokens=1100))
    session.begin_step(target_groups=4)
    session.judge_batch([LIVE, DEAD, DEAD, DEAD], generated_tokens=400)
    assert 1 == session.plan(num_generations=4, estimated_tokens_per_group=700).extra_groups
    session.judge(DEAD, generated_tokens=100)  # 500 used: 600 left, under the 700 bound

    report = session.end_step()

    assert report.exhausted
    assert ("token_budget",) == report.limited_by


def test_the_last_planning_call_survives_a_checkpoint() -> None:
    original = AdmissionSession(GATE, budget=budget(max_total_tokens=1000))
    _token_capped_rounds(original)
    restored = AdmissionSession(GATE, budget=budget(max_total_tokens=1000))
    restored.load_state_dict(json.loads(json.dumps(original.state_dict())))

    assert restored.state_dict() == original.state_dict()
    assert restored.end_step() == original.end_step()
    streaming = AdmissionSession(GATE, budget=SamplingBudgetConfig(max_extra_groups=8))
    _short_stream(streaming, plan_after=False)
    twin = AdmissionSession(GATE, budget=SamplingBudgetConfig(max_extra_groups=8))
    twin.load_state_dict(json.loads(json.dumps(streaming.state_dict())))
    assert twin.end_step() == streaming.end_step()
