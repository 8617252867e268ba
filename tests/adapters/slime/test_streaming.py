"""
``streaming_rollout`` on slime's rollout machinery: launches, aborts, the buffer, caps, exhaustion.

Every test runs on the doubles (fast lane) and, when ``SLIME_SRC`` names slime's tree and
its imports are installed (``.ci/slime-contracts``), on slime's real code, with the same
scripted engine on a virtual clock (see ``stream_hosts``).
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from adapters.slime import scripted_engine
from adapters.slime.scripted_engine import GroupScript, Script, bernoulli_script
from adapters.slime.stream_hosts import Host, make_args, real_slime
from group_admission import AdmissionSession, BudgetExhaustedError, ConsecutiveFailedGroupsError
from group_admission.adapters import slime as slime_adapter

PREFIX = "rollout/group_admission/"


def samples(group: list[Any]) -> Iterator[Any]:
    for member in group:
        yield from member if isinstance(member, list) else (member,)


class Spy:
    """Records every ``get_samples`` call of a data source: the group indices it handed out, by rollout."""

    def __init__(self, data_source: Any) -> None:
        self.calls: list[tuple[int, list[int]]] = []
        self.rollout = 0
        self._get = data_source.get_samples
        data_source.get_samples = self.get_samples

    def get_samples(self, count: int) -> list[list[Any]]:
        groups = self._get(count)
        self.calls.append((self.rollout, [group[0].group_index for group in groups]))
        return groups

    def launched(self, rollout: int) -> list[list[int]]:
        return [indices for r, indices in self.calls if r == rollout]


def run(host: Host, args: Any, script: Script, rollouts: int) -> tuple[list[Any], Spy, Any]:
    engine = host.install_engine(script, args.n_samples_per_prompt)
    data_source = host.data_source(args)
    spy = Spy(data_source)
    outputs = []
    for rollout_id in range(rollouts):
        spy.rollout = rollout_id
        outputs.append(host.streaming(args, rollout_id, data_source))
    return outputs, spy, engine


def streaming(**settings: Any) -> dict[str, Any]:
    return {"budget": {"max_extra_groups": 8}, **settings}


def test_every_rollout_returns_exactly_the_batch_and_launches_no_more_than_the_caps(slime_host: Host) -> None:
    args = make_args(rollout_batch_size=4, group_admission_streaming=streaming(confidence=0.99))

    outputs, spy, _ = run(slime_host, args, bernoulli_script(size=4, pass_rate=0.4), rollouts=6)

    assert [4] * 6 == [len(output.samples) for output in outputs]
    for rollout_id, output in enumerate(outputs):
        launched = sum(len(call) for call in spy.launched(rollout_id))
        assert launched <= 4 + 8
        assert output.metrics[f"{PREFIX}generated_groups"] <= launched
        assert all(len(group) == 4 for group in output.samples)
        metrics = output.metrics
        assert 4 + metrics[f"{PREFIX}surplus_group_count"] == metrics[f"{PREFIX}admitted_group_count"]
    # The first plan launches the target (no rate known yet); later ones size for the rate.
    assert [4] == [len(call) for call in spy.launched(0)][:1]
    assert any(len(spy.launched(r)[0]) > 4 for r in range(1, 6))


def test_the_first_rollout_launches_the_target_and_tops_up_as_the_plan_says(slime_host: Host) -> None:
    # The first two groups are dead and finish first; every other group is informative.
    def script(rollout_id: int, position: int) -> GroupScript:
        rewards = (1.0, 1.0) if position < 2 else (1.0, 0.0)
        return GroupScript(lengths=(10 + position, 3), rewards=rewards)

    args = make_args(rollout_batch_size=3, n_samples_per_prompt=2, group_admission_streaming=streaming())
    plan = AdmissionSession({"min_reward_std": 1e-6}, budget={"max_extra_groups": 8})
    plan.begin_step(3)
    first = plan.stream_plan(0, num_generations=2, confidence=0.99).launch
    plan.judge([1.0, 1.0])
    top_up = plan.stream_plan(first - 1, num_generations=2, confidence=0.99).launch

    outputs, spy, engine = run(slime_host, args, script, rollouts=1)

    assert (3, 6) == (first, top_up)  # the target with no rate yet; then the 0.99 bound at rate 3/4
    assert [[0, 1, 2], [3, 4, 5, 6, 7, 8]] == spy.launched(0)
    # Group 1 (dead, at 11) leaves 7 in flight, enough; group 2 finishes at 12, groups 3 and 4
    # at 23 and 24 (launched at 10): the target; the other four are aborted.
    assert [[2, 3, 4]] == [[group[0].group_index for group in outputs[0].samples]]
    metrics = outputs[0].metrics
    assert (2, 4, 1) == (
        metrics[f"{PREFIX}exact_dead_group_count"],
        metrics[f"{PREFIX}aborted_group_count"],
        engine.aborts[0],
    )


def test_once_the_target_is_met_every_running_request_is_aborted_through_slime(slime_host: Host) -> None:
    def script(rollout_id: int, position: int) -> GroupScript:
        return GroupScript(lengths=(5, 5) if position < 2 else (50, 60), rewards=(1.0, 0.0))

    args = make_args(
        rollout_batch_size=2, n_samples_per_prompt=2, group_admission_streaming=streaming(race=3)
    )

    outputs, spy, engine = run(slime_host, args, script, rollouts=2)

    assert [6] == [len(call) for call in spy.launched(0)]  # racing 3 x 2 admitted groups, rate 1
    assert (1, 8) == (engine.aborts[0], engine.aborted_requests[0])  # 4 groups x 2 requests
    assert 2 * 10 + 8 * 5 == engine.tokens[0]  # an aborted request keeps the 5 tokens it decoded
    assert 4 == outputs[0].metrics[f"{PREFIX}aborted_group_count"]
    # Without --partial-rollout the aborted groups are lost, as in slime's default loop.
    assert 0 == outputs[0].metrics[f"{PREFIX}carried_out_group_count"]
    assert 0 == outputs[1].metrics[f"{PREFIX}carried_in_group_count"]


def test_with_partial_rollout_carried_groups_resume_first_and_report_their_age(slime_host: Host) -> None:
    args = make_args(rollout_batch_size=4, partial_rollout=True, group_admission_streaming=streaming(race=2))

    outputs, spy, _ = run(slime_host, args, bernoulli_script(size=4, pass_rate=0.5, length=(5, 80)), 5)

    carried = [output.metrics[f"{PREFIX}carried_out_group_count"] for output in outputs]
    assert [0, *carried[:-1]] == [output.metrics[f"{PREFIX}carried_in_group_count"] for output in outputs]
    assert sum(carried) > 0
    for rollout_id in range(1, 5):
        if carried[rollout_id - 1]:
            first, *later = spy.launched(rollout_id)
            assert carried[rollout_id - 1] == len(first)  # the whole buffer, before any fresh group
            assert all(max(first) < min(call) for call in later)
    metrics = [output.metrics for output in outputs if output.metrics[f"{PREFIX}resumed_group_count"]]
    assert metrics
    for m in metrics:
        assert m[f"{PREFIX}resumed_max_age"] >= 1
        assert 0 < m[f"{PREFIX}resumed_share"] <= 1
        assert m[f"{PREFIX}resumed_share"] == m[f"{PREFIX}resumed_group_count"] / 4
    assert max(m[f"{PREFIX}max_weight_versions"] for m in metrics) >= 2


@pytest.mark.parametrize("mask", [True, False], ids=["masked", "not masked"])
def test_resumed_samples_follow_mask_offpolicy_in_partial_rollout(slime_host: Host, mask: bool) -> None:
    args = make_args(
        rollout_batch_size=4,
        partial_rollout=True,
        mask_offpolicy_in_partial_rollout=mask,
        group_admission_streaming=streaming(race=2),
    )

    outputs, _, _ = run(slime_host, args, bernoulli_script(size=4, pass_rate=0.5, length=(5, 80)), 5)

    resumed = [
        sample
        for rollout_id, output in enumerate(outputs)
        for group in output.samples
        for sample in samples(group)
        if sample.metadata.get("start_rollout_id", rollout_id) < rollout_id
    ]
    assert resumed
    for sample in resumed:
        assert len(sample.loss_mask) == sample.response_length
        # slime masks the tokens decoded before the update, whatever the sample's status.
        assert (0 in sample.loss_mask) is mask
        assert sorted(sample.loss_mask) == sample.loss_mask


def test_a_group_that_finishes_while_slime_drains_the_abort_is_judged_in_the_next_rollout(
    slime_host: Host,
) -> None:
    # Group 2 is still rewarding (slow reward model) when the target is met; slime's abort
    # waits for it, and --partial-rollout hands it back complete.
    def script(rollout_id: int, position: int) -> GroupScript:
        if rollout_id == 0 and position == 2:
            return GroupScript(lengths=(2, 2), rewards=(1.0, 0.0), reward_delay=50)
        return GroupScript(lengths=(3 + position, 4), rewards=(1.0, 0.0))

    args = make_args(
        rollout_batch_size=2,
        n_samples_per_prompt=2,
        partial_rollout=True,
        group_admission_streaming=streaming(race=1.5),
    )

    outputs, spy, engine = run(slime_host, args, script, rollouts=2)

    assert [[0, 1, 2]] == spy.launched(0)[:1]
    assert 1 == outputs[0].metrics[f"{PREFIX}carried_out_group_count"]
    assert [2] == spy.launched(1)[0]
    assert 2 in [group[0].group_index for group in outputs[1].samples]
    # It produced its tokens in rollout 0: rollout 1 counts none for it.
    assert 2 not in engine.started[1]


def test_a_failure_streak_stops_the_run_and_leaves_slime_clean(slime_host: Host) -> None:
    def script(rollout_id: int, position: int) -> GroupScript:
        return GroupScript(lengths=(5 + position % 3, 5), rewards=(1.0, 0.0), failed=True)

    args = make_args(
        rollout_batch_size=4,
        n_samples_per_prompt=2,
        group_admission={"max_consecutive_failed_groups": 3},
        group_admission_streaming=streaming(),
    )
    engine = slime_host.install_engine(script, 2)
    data_source = slime_host.data_source(args)

    with pytest.raises(ConsecutiveFailedGroupsError, match="3 consecutive groups were rejected as external"):
        slime_host.streaming(args, 0, data_source)

    assert 1 == engine.aborts[0]  # the groups still running were aborted
    assert 0 == engine.running
    # The session's step was closed and slime's state reset: the next rollout runs.
    with pytest.raises(ConsecutiveFailedGroupsError):
        slime_host.streaming(args, 1, data_source)


def test_failed_groups_are_never_kept_nor_used_to_fill_a_short_rollout(slime_host: Host) -> None:
    def script(rollout_id: int, position: int) -> GroupScript:
        failed = position % 2 == 0
        return GroupScript(lengths=(5, 6), rewards=(1.0, 0.0) if position % 3 else (0.0, 0.0), failed=failed)

    args = make_args(rollout_batch_size=4, n_samples_per_prompt=2, group_admission_streaming=streaming())

    outputs, _, _ = run(slime_host, args, script, rollouts=3)

    for output in outputs:
        assert 4 == len(output.samples)
        for group in output.samples:
            assert all(s.status.value == "completed" for s in samples(group))
        assert output.metrics[f"{PREFIX}externally_rejected_group_count"] > 0


def dead(rollout_id: int, position: int) -> GroupScript:
    return GroupScript(lengths=(4 + position % 5, 4), rewards=(1.0, 1.0))


def test_an_all_dead_stream_stops_at_the_cap_and_trains_short_with_a_log_line(slime_host: Host) -> None:
    args = make_args(rollout_batch_size=4, n_samples_per_prompt=2, group_admission_streaming=streaming())

    with structlog.testing.capture_logs() as logs:
        outputs, spy, _ = run(slime_host, args, dead, rollouts=2)

    for rollout_id, output in enumerate(outputs):
        assert 4 + 8 == sum(len(call) for call in spy.launched(rollout_id))  # the cap, exactly
        assert 4 == len(output.samples)
        assert all(s.remove_sample for group in output.samples for s in samples(group))
        metrics = output.metrics
        assert (4, 1, 12) == (
            metrics[f"{PREFIX}padded_group_count"],
            metrics[f"{PREFIX}exhausted"],
            metrics[f"{PREFIX}exact_dead_group_count"],
        )
        assert 1 == metrics[f"{PREFIX}limited_by/extra_group_budget"]
        assert 12 == metrics["rollout/dynamic_filter/drop_exact_dead"]
    short = [log for log in logs if log["event"] == "group_admission_streaming_short"]
    assert [(0, 4, 4)] * 2 == [(log["kept"], log["target"], log["padded_without_gradient"]) for log in short]


def test_a_short_rollout_pads_with_rejected_groups_and_keeps_the_admitted_ones_trainable(
    slime_host: Host,
) -> None:
    def script(rollout_id: int, position: int) -> GroupScript:
        return GroupScript(lengths=(5 + position, 5), rewards=(1.0, 0.0) if position == 1 else (0.0, 0.0))

    args = make_args(
        rollout_batch_size=3,
        n_samples_per_prompt=2,
        group_admission_streaming={"budget": {"max_extra_groups": 2}},
    )

    outputs, _, _ = run(slime_host, args, script, rollouts=1)

    groups = outputs[0].samples
    assert [0, 1, 2] == [group[0].group_index for group in groups]  # slime's order: by sample index
    assert [True, False, True] == [group[0].remove_sample for group in groups]
    assert 2 == outputs[0].metrics[f"{PREFIX}padded_group_count"]


@pytest.mark.parametrize(("mode", "scale"), [({}, 1 / 3), ({"loss_scale": "kept"}, 1.0)])
def test_a_short_rollout_reports_the_loss_scale_of_slimes_per_sample_mean(
    slime_host: Host, mode: dict[str, Any], scale: float
) -> None:
    # One group of three is informative: slime's loss over the padded batch is 1/3 of the kept mean.
    def script(rollout_id: int, position: int) -> GroupScript:
        return GroupScript(lengths=(5 + position, 5), rewards=(1.0, 0.0) if position == 1 else (0.0, 0.0))

    args = make_args(
        rollout_batch_size=3,
        n_samples_per_prompt=2,
        group_admission_streaming={"budget": {"max_extra_groups": 2}, **mode},
    )

    outputs, _, _ = run(slime_host, args, script, rollouts=1)

    assert 1 == outputs[0].metrics[f"{PREFIX}trained_groups"]
    assert scale == pytest.approx(outputs[0].metrics[f"{PREFIX}loss_scale"])


def test_on_exhausted_raise_stops_the_run_naming_the_caps(slime_host: Host) -> None:
    args = make_args(
        rollout_batch_size=4,
        n_samples_per_prompt=2,
        group_admission_streaming=streaming(on_exhausted="raise"),
    )
    slime_host.install_engine(dead, 2)

    with pytest.raises(
        BudgetExhaustedError,
        match=r"kept 0 of 4 target groups after 12 generated groups in 1 round\(s\) \(rejections: "
        r"exact_dead x12; binding caps: extra_group_budget\)\. The rollout cannot fill the batch: "
        r"on_exhausted is 'raise'",
    ):
        slime_host.streaming(args, 0, slime_host.data_source(args))


def test_with_nothing_to_fill_the_places_the_rollout_raises_even_when_training_short(
    slime_host: Host,
) -> None:
    def script(rollout_id: int, position: int) -> GroupScript:
        return GroupScript(lengths=(5, 5), rewards=(1.0, 0.0), failed=True)

    args = make_args(rollout_batch_size=2, n_samples_per_prompt=2, group_admission_streaming=streaming())
    slime_host.install_engine(script, 2)

    with pytest.raises(
        BudgetExhaustedError, match=r"only 0 finished group\(s\) with usable rewards can fill the 2 missing"
    ):
        slime_host.streaming(args, 0, slime_host.data_source(args))


def test_the_sample_cap_holds(slime_host: Host) -> None:
    args = make_args(
        rollout_batch_size=4,
        n_samples_per_prompt=2,
        group_admission_streaming={"budget": {"max_extra_groups": 100, "max_total_samples": 14}},
    )

    outputs, spy, _ = run(slime_host, args, dead, rollouts=1)

    assert 7 == sum(len(call) for call in spy.launched(0))
    assert 1 == outputs[0].metrics[f"{PREFIX}limited_by/sample_budget"]


def test_slimes_post_rollout_hooks_see_the_batch_and_every_finished_group(slime_host: Host) -> None:
    args = make_args(
        rollout_batch_size=3,
        n_samples_per_prompt=2,
        rollout_sample_filter_path=f"{scripted_engine.__name__}.sample_filter",
        rollout_all_samples_process_path=f"{scripted_engine.__name__}.all_samples",
        group_admission_streaming=streaming(),
    )
    scripted_engine.HOOK_CALLS.clear()

    outputs, _, _ = run(slime_host, args, bernoulli_script(size=2, pass_rate=0.5), rollouts=1)

    calls = scripted_engine.HOOK_CALLS
    assert ["sample_filter", "all_samples"] == [name for name, _, _ in calls]
    assert outputs[0].samples == calls[0][1]
    assert len(calls[1][1]) == outputs[0].metrics[f"{PREFIX}candidate_group_count"]
    assert callable(calls[1][2])  # slime passes the bound get_samples


def test_evaluation_is_slimes_own(slime_host: Host) -> None:
    args = make_args()
    slime_host.install_engine(dead, 4)

    output = slime_adapter.streaming_rollout(args, 0, slime_host.data_source(args), evaluation=True)

    assert "RolloutFnEvalOutput" == type(output).__name__


def test_a_dynamic_filter_path_is_refused_because_it_would_be_ignored(slime_host: Host) -> None:
    args = make_args(dynamic_sampling_filter_path="group_admission.adapters.slime.admission_filter")
    slime_host.install_engine(dead, 4)

    with pytest.raises(
        ValueError, match="'--dynamic-sampling-filter-path' must be unset with streaming_rollout"
    ):
        slime_adapter.streaming_rollout(args, 0, slime_host.data_source(args))


def test_the_signature_is_slimes_rollout_function_signature() -> None:
    # slime's contract (test_default_rollout_signature_is_stable) pins its default to this.
    parameters = inspect.signature(slime_adapter.streaming_rollout).parameters

    assert ("args", "rollout_id", "data_source", "evaluation") == tuple(parameters)
    assert parameters["evaluation"].default is False


def test_slimes_rollout_contract_accepts_the_signature(slime_host: Host) -> None:
    if slime_host.name != "slime":
        pytest.skip("slime's rollout contract runs only on slime's real tree")
    slime = real_slime()
    assert not isinstance(slime, str)
    folder = slime.root / "tests" / "plugin_contracts"
    slime_host.monkeypatch.syspath_prepend(str(folder))  # the contract imports its _shared helpers
    contract = folder / "test_plugin_rollout_contracts.py"
    spec = importlib.util.spec_from_file_location("slime_rollout_contract", contract)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    module.assert_rollout_function_signature_matches_default(slime_adapter.streaming_rollout)
    with pytest.raises(AssertionError):  # the check can fail
        module.assert_rollout_function_signature_matches_default(lambda args, rollout_id, data_source: None)


@pytest.mark.parametrize(
    ("settings", "confidence"),
    [
        ({"budget": {"max_extra_groups": 8, "confidence": 0.7}}, 0.7),  # the budget's, as OpenRLHF reads it
        ({"budget": {"max_extra_groups": 8}, "confidence": 0.7}, 0.7),
        ({"budget": {"max_extra_groups": 8}}, 0.99),  # the documented default
        ({}, 0.99),
    ],
)
def test_the_plan_follows_the_confidence_given_in_either_place(
    slime_host: Host, settings: dict[str, Any], confidence: float
) -> None:
    # The first two groups are dead and finish first; every other group is informative.
    def script(rollout_id: int, position: int) -> GroupScript:
        rewards = (1.0, 1.0) if position < 2 else (1.0, 0.0)
        return GroupScript(lengths=(10 + position, 3), rewards=rewards)

    args = make_args(rollout_batch_size=3, n_samples_per_prompt=2, group_admission_streaming=settings)
    budget = {"max_extra_groups": 6, "confidence": confidence}
    plan = AdmissionSession({"min_reward_std": 1e-6}, budget=budget)
    plan.begin_step(3)
    first = plan.stream_plan(0, num_generations=2).launch
    plan.judge([1.0, 1.0])
    top_up = plan.stream_plan(first - 1, num_generations=2).launch

    _, spy, _ = run(slime_host, args, script, rollouts=1)

    assert (3, 6 if confidence == 0.99 else 2) == (first, top_up)  # so the cases differ
    assert [first, top_up] == [len(call) for call in spy.launched(0)][:2]
