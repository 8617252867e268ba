"""
The twinkle Challenger adapter: the group hand-off hook, the sampling budget and the mixin,
called as twinkle's env-lease Challenger calls them (doubles in ``twinkle_types``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from group_admission import (
    AdmissionStats,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    SamplingBudgetConfig,
    SessionConfig,
)
from group_admission.adapters.challenger import (
    ChallengerAdmission,
    GroupAdmissionChallengerMixin,
    last_assistant_text,
    with_group_admission,
)

from .twinkle_types import AgenticChallenger, Challenger, PRChallenger, scripted, trajectory

STRICT = {"min_reward_std": 1e-6, "min_reward_range": 0.02}
LOOSE_BUDGET = {"max_extra_groups": 1000, "max_resample_rounds": 1000}


def group(*rewards, text=None):
    return [trajectory(r, text or f"answer {i} {r}") for i, r in enumerate(rewards)]


class TestHandOffHook:
    @pytest.mark.parametrize(
        ("rewards", "reason"),
        [
            ((1.0, 1.0, 1.0), "exact_dead"),
            ((0.500, 0.505, 0.510), "near_tie"),
            ((None, 1.0, 0.0), "external"),
        ],
    )
    def test_rejections_counted_under_primary_reason(self, rewards, reason):
        """Each rejected group adds one to its primary reason in the Challenger's Counter."""
        reasons: Counter[str] = Counter()

        kept = ChallengerAdmission(STRICT).admitted_groups([group(*rewards), group(0.0, 1.0, 1.0)], reasons)

        assert Counter({reason: 1}) == reasons
        assert 1 == len(kept)

    def test_returns_the_admitted_groups_themselves_in_order(self):
        """The admitted groups come back as the same trajectory objects, in their order."""
        groups = [group(0.0, 1.0), group(1.0, 1.0), group(1.0, 0.0)]

        kept = ChallengerAdmission(STRICT).admitted_groups(groups, Counter())

        assert [groups[0], groups[2]] == kept
        assert all(a is b for a, b in zip(kept[0], groups[0], strict=True))

    def test_redundant_group(self):
        """With the redundancy gate on, near-identical last assistant texts reject the group."""
        same = [trajectory(r, "the answer is x = 4 because 2 + 2 = 4") for r in (0.0, 1.0, 1.0)]
        reasons: Counter[str] = Counter()

        ChallengerAdmission({"max_mean_pairwise_similarity": 0.8}).admitted_groups([same], reasons)

        assert Counter({"redundant": 1}) == reasons

    def test_missing_reward_is_external_not_zero(self):
        """A None or absent reward rejects the group as external; the pull request read it as 0.0."""
        missing = [trajectory(None), trajectory(1.0)]
        absent = [trajectory(0.0, with_reward=False), trajectory(1.0)]
        admission = ChallengerAdmission(None)
        reasons: Counter[str] = Counter()

        kept = admission.admitted_groups([missing, absent], reasons)

        assert [] == kept
        assert Counter({"external": 2}) == reasons
        assert {"missing_reward": 2} == admission.stats.external_details
        # The pull request's hook admits both: None or absent becomes 0.0, which differs from 1.0.
        pr_reasons: Counter[str] = Counter()
        pr = PRChallenger(envs=[0], group_admission_policy=GroupAdmissionPolicy())
        assert 2 == len(pr._admitted_groups([missing, absent], pr_reasons))

    @pytest.mark.parametrize("bad", ["1.0", [1.0], {"score": 1.0}])
    def test_non_numeric_reward_is_external(self, bad):
        """A reward that is not a number rejects its group as external, with a named reason."""
        admission = ChallengerAdmission(None)
        reasons: Counter[str] = Counter()

        admission.admitted_groups([[trajectory(bad), trajectory(1.0)]], reasons)

        assert Counter({"external": 1}) == reasons
        assert 1 == admission.stats.external_details["non_numeric_reward"]

    def test_non_finite_reward_is_external(self):
        """NaN and inf rewards reject the group as external (never a crash mid-batch)."""
        reasons: Counter[str] = Counter()

        ChallengerAdmission(None).admitted_groups(
            [group(float("nan"), 1.0), group(float("inf"), 0.0)], reasons
        )

        assert Counter({"external": 2}) == reasons

    def test_numeric_types_are_accepted(self):
        """bool, int and numpy rewards are numbers."""
        import numpy as np

        kept = ChallengerAdmission(STRICT).admitted_groups(
            [[trajectory(True), trajectory(np.float32(0.0))]], Counter()
        )

        assert 1 == len(kept)

    def test_completions_read_only_with_redundancy_gate(self):
        """Messages are not even read unless the redundancy gate is on."""

        class Spy(dict):
            reads = 0

            def get(self, key, default=None):
                if key == "messages":
                    Spy.reads += 1
                return super().get(key, default)

        members = [Spy(trajectory(r)) for r in (0.0, 1.0)]
        ChallengerAdmission(STRICT).admitted_groups([members], Counter())
        assert 0 == Spy.reads

        ChallengerAdmission({"max_mean_pairwise_similarity": 0.9}).admitted_groups([members], Counter())
        assert 2 == Spy.reads

    def test_reply_missing_is_a_missing_completion(self):
        """A trajectory without any assistant message counts as a missing completion (external)."""
        silent = {"messages": [{"role": "user", "content": "task"}], "rewards": 1.0}
        admission = ChallengerAdmission({"max_mean_pairwise_similarity": 0.9})
        reasons: Counter[str] = Counter()

        admission.admitted_groups([[silent, trajectory(0.0)]], reasons)

        assert Counter({"external": 1}) == reasons
        assert {"missing_completion": 1} == admission.stats.external_details

    def test_challenger_spread_check_counts_as_exact_dead(self):
        """The Challenger's own spread check still applies; a group it fails counts as exact_dead."""
        admission = ChallengerAdmission(None)  # gates off: the policy admits the tie
        reasons: Counter[str] = Counter()

        kept = admission.admitted_groups(
            [group(1.0, 1.0), group(0.0, 1.0)], reasons, spread_check=Challenger._has_spread
        )

        assert 1 == len(kept)
        assert Counter({"exact_dead": 1}) == reasons
        assert 1 == admission.stats.exact_dead
        assert admission.stats.candidates == admission.stats.admitted + admission.stats.rejected
        # What the session writes it can read back, the host's amended decision included.
        assert AdmissionStats.from_dict(admission.stats.to_dict()) == admission.stats

    def test_any_mutable_mapping_counts(self):
        """A plain dict works as the reason tally too."""
        reasons: dict[str, int] = {"exact_dead": 2}

        ChallengerAdmission(STRICT).admitted_groups([group(1.0, 1.0)], reasons)

        assert {"exact_dead": 3} == reasons

    def test_threads_share_one_hook(self):
        """Jobs finish on worker threads; concurrent hand-offs keep the counts exact."""
        admission = ChallengerAdmission(STRICT, budget=LOOSE_BUDGET)
        admission.begin_batch(1000)
        reasons: Counter[str] = Counter()
        lock = threading.Lock()

        def hand_off():
            local: Counter[str] = Counter()
            for _ in range(50):
                admission.admitted_groups([group(0.0, 1.0), group(1.0, 1.0)], local)
            with lock:
                reasons.update(local)

        threads = [threading.Thread(target=hand_off) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert Counter({"exact_dead": 200}) == reasons
        assert 200 == admission.stats.admitted
        assert 400 == admission.state.generated_groups
        assert 800 == admission.state.generated_samples


def test_last_assistant_text():
    """The last assistant message's text; parts are joined; no assistant message is None."""
    conversation = {
        "messages": [
            {"role": "assistant", "content": "first"},
            {"role": "tool", "content": "out"},
            {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        ]
    }

    assert "ab" == last_assistant_text(conversation)
    assert "" == last_assistant_text({"messages": [{"role": "assistant"}]})
    assert last_assistant_text({"messages": [{"role": "user", "content": "q"}]}) is None
    assert last_assistant_text({}) is None


rewards_lists = st.lists(
    st.one_of(st.sampled_from([0.0, 1.0, 0.5, 0.51]), st.floats(-3, 3, allow_nan=False)),
    min_size=1,
    max_size=6,
)


class TestDecisionsEqualEvaluate:
    @given(
        groups=st.lists(rewards_lists, min_size=1, max_size=6),
        config=st.builds(
            GroupAdmissionConfig,
            min_reward_std=st.sampled_from([0.0, 1e-6, 0.3]),
            min_reward_range=st.sampled_from([0.0, 0.02, 1.0]),
            min_nontrivial_advantages=st.integers(0, 3),
        ),
    )
    def test_same_decisions_as_evaluate(self, groups, config):
        """The hook admits exactly the groups evaluate() admits, and counts its primary reasons."""
        policy = GroupAdmissionPolicy(config)
        reasons: Counter[str] = Counter()

        kept = ChallengerAdmission(policy).admitted_groups([group(*g) for g in groups], reasons)

        decisions = [policy.evaluate(g) for g in groups]
        assert [g for g, d in zip(groups, decisions, strict=True) if d.admitted] == [
            [member["rewards"] for member in k] for k in kept
        ]
        assert Counter(d.primary_rejection_reason for d in decisions if not d.admitted) == reasons


class TestBudget:
    def test_sample_cap_exhausts_and_says_why(self):
        """Once no group of the batch's size fits in the sample cap, the plan is exhausted."""
        admission = ChallengerAdmission(STRICT, budget={**LOOSE_BUDGET, "max_total_samples": 8})
        admission.begin_batch(4)

        admission.admitted_groups([group(1.0, 1.0, 1.0, 1.0)], Counter())
        assert not admission.exhausted
        admission.admitted_groups([group(0.0, 1.0, 1.0, 1.0)], Counter())

        assert admission.exhausted
        assert ("sample_budget",) == admission.plan.limited_by
        assert 8 == admission.state.generated_samples
        assert 3 == admission.plan.remaining_target_groups

    def test_token_cap(self):
        """Tokens come from tokens_of; the cap binds on the observed tokens per group."""
        admission = ChallengerAdmission(
            STRICT,
            budget={**LOOSE_BUDGET, "max_total_tokens": 250},
            tokens_of=lambda t: len(t["messages"]) * 50,
        )
        admission.begin_batch(3)

        admission.admitted_groups([group(0.0, 1.0)], Counter())

        assert admission.exhausted
        assert ("token_budget",) == admission.plan.limited_by
        assert 200 == admission.state.generated_tokens

    def test_extra_group_cap(self):
        """max_extra_groups bounds the groups generated beyond the target."""
        admission = ChallengerAdmission(STRICT, budget={"max_extra_groups": 1, "max_resample_rounds": 100})
        admission.begin_batch(2)

        admission.admitted_groups([group(1.0, 1.0), group(1.0, 1.0), group(0.0, 1.0)], Counter())

        assert admission.exhausted
        assert ("extra_group_budget",) == admission.plan.limited_by

    def test_target_met_plan_and_room(self):
        """Target met: the plan says so, and a spent cap still leaves no room (for a short side)."""
        admission = ChallengerAdmission(STRICT, budget={**LOOSE_BUDGET, "max_total_samples": 4})
        admission.begin_batch(2)

        admission.admitted_groups([group(0.0, 1.0), group(1.0, 0.0)], Counter())

        assert ("target_met",) == admission.plan.limited_by
        assert not admission.plan.exhausted
        assert admission.exhausted
        assert not admission.end_batch(complete=True)
        assert not admission.stopped_by_budget

    def test_room_left_after_target_met(self):
        """With room in the caps, a met target is neither exhausted nor stopped."""
        admission = ChallengerAdmission(STRICT, budget={**LOOSE_BUDGET, "max_total_samples": 100})
        admission.begin_batch(1)

        admission.admitted_groups([group(0.0, 1.0), group(1.0, 0.0)], Counter())

        assert not admission.exhausted

    def test_end_batch_reports_a_short_batch(self):
        """A short batch with the budget spent is reported as stopped by the budget."""
        admission = ChallengerAdmission(STRICT, budget={**LOOSE_BUDGET, "max_total_samples": 2})
        admission.begin_batch(3)
        admission.admitted_groups([group(1.0, 1.0)], Counter())

        assert admission.end_batch(complete=False)
        assert admission.stopped_by_budget

    def test_the_next_batch_keeps_the_report_of_the_step_it_ends(self):
        """begin_batch ends the batch before's step (end_batch leaves it open): its report is kept."""
        admission = ChallengerAdmission(STRICT, budget=LOOSE_BUDGET)
        assert admission.last_report is None
        admission.begin_batch(3)
        admission.admitted_groups([group(0.0, 1.0), group(1.0, 1.0)], Counter())
        admission.end_batch(complete=False)
        assert admission.last_report is None  # the step stays open: state and plan stay readable

        admission.begin_batch(2)

        report = admission.last_report
        assert (report.target_groups, report.generated_groups, report.kept_groups) == (3, 2, 1)
        assert report.short_groups == 2

    def test_the_report_counts_every_handed_off_groups_tokens(self):
        """tokens_of counts each trajectory: rejected groups' tokens are decoded tokens too."""
        admission = ChallengerAdmission(
            STRICT, budget=LOOSE_BUDGET, tokens_of=lambda t: 10 * len(t["messages"])
        )
        admission.begin_batch(3)
        admission.admitted_groups([group(0.0, 1.0), group(1.0, 1.0, 1.0)], Counter())
        admission.end_batch(complete=False)
        admission.begin_batch(1)

        report = admission.last_report
        assert (report.generated_tokens, report.decoded_tokens) == (100, 100)  # 5 trajectories of 2 messages

    def test_begin_batch_resets_counts_and_keeps_the_rate(self):
        """Each batch starts with fresh counters and the previous batch's effective-rate estimate."""
        admission = ChallengerAdmission(STRICT, budget={**LOOSE_BUDGET, "max_total_samples": 4})
        admission.begin_batch(5)
        admission.admitted_groups([group(0.0, 1.0), group(1.0, 1.0)], Counter())
        assert admission.exhausted

        admission.begin_batch(5)

        assert not admission.exhausted
        assert admission.plan is None
        assert 0 == admission.state.generated_samples
        assert 0.5 == admission.state.effective_rate_ema

    def test_one_round_per_hand_off_whatever_the_group_sizes(self):
        """A hand-off is one observed round, even with groups of different sizes; an empty one is none."""
        admission = ChallengerAdmission(None, budget=LOOSE_BUDGET)
        admission.begin_batch(10)

        admission.admitted_groups([group(0.0, 1.0), group(0.0, 1.0, 2.0)], Counter())
        admission.admitted_groups([], Counter())

        assert 1 == admission.state.sampling_rounds
        assert 5 == admission.state.generated_samples
        assert 2 == admission.state.generated_groups

    def test_both_sides_of_one_hand_off_are_one_round(self):
        """Calls inside hand_off() (the mixin wraps each _complete) fold into one round at its end."""
        admission = ChallengerAdmission(STRICT, budget=LOOSE_BUDGET)
        admission.begin_batch(10)

        with admission.hand_off():
            admission.admitted_groups([group(0.0, 1.0, 1.0), group(1.0, 1.0, 1.0)], Counter())
            admission.admitted_groups([group(0.0, 1.0), group(1.0, 0.0), group(0.5, 0.5)], Counter())
            assert 0 == admission.state.sampling_rounds  # folded when the hand-off ends

        assert 1 == admission.state.sampling_rounds
        assert 5 == admission.state.generated_groups
        assert 12 == admission.state.generated_samples
        assert 3 == admission.state.admitted_groups

    def test_one_resample_round_leaves_room_for_a_second_hand_off(self):
        """max_resample_rounds=1: the first hand-off is the first round, so one more fits, not two."""
        admission = ChallengerAdmission(STRICT, budget={"max_extra_groups": 100, "max_resample_rounds": 1})
        admission.begin_batch(4)

        admission.admitted_groups([group(0.0, 1.0), group(1.0, 1.0, 1.0)], Counter())

        assert not admission.exhausted
        assert 1 == admission.state.sampling_rounds
        assert not admission.plan.exhausted

        admission.admitted_groups([group(1.0, 1.0)], Counter())

        assert admission.exhausted
        assert 2 == admission.state.sampling_rounds
        assert ("resample_round_budget",) == admission.plan.limited_by
        assert admission.end_batch(complete=False)

    def test_no_budget_never_exhausts(self):
        """Without a budget the hook keeps no state and never reports exhaustion."""
        admission = ChallengerAdmission(STRICT)

        admission.admitted_groups([group(1.0, 1.0)] * 50, Counter())

        assert admission.state is None
        assert not admission.exhausted


def _units(*specs):
    """Units of (proposing rewards, solver rewards or None)."""
    return [([group(*c)], [] if s is None else [group(*s)]) for c, s in specs]


class TestMixin:
    def test_agentic_challenger_takes_the_policy_without_leaking_it(self):
        """AgenticChallenger would pass an unknown keyword to its rollout; the mixin takes it out."""
        cls = with_group_admission(AgenticChallenger)
        policy = GroupAdmissionPolicy(STRICT)

        challenger = cls("backend", envs=[0], group_admission_policy=policy, temperature=0.7)

        assert {"temperature": 0.7} == challenger.rollout_kwargs
        assert policy is challenger.group_admission_policy
        assert policy is challenger.group_admission.policy

    def test_forwarded_to_a_base_that_names_it(self):
        """twinkle#288's base names group_admission_policy: the mixin forwards it."""
        received = {}

        class Recording(PRChallenger):
            def __init__(self, *, group_admission_policy=None, **kwargs):
                received["policy"] = group_admission_policy
                super().__init__(group_admission_policy=group_admission_policy, **kwargs)

        challenger = with_group_admission(Recording)(envs=[0], group_admission_policy=STRICT)

        assert received["policy"] is challenger.group_admission.policy

    def test_pr_base_uses_our_hook(self):
        """With twinkle#288's base, its _complete calls our _admitted_groups (None is external now)."""
        cls = with_group_admission(scripted(PRChallenger))
        challenger = cls(
            envs=[0], num_challenger_rollouts=2, num_solver_rollouts=2, group_admission_policy=STRICT
        )
        challenger.units = _units(((None, 1.0), (1.0, 1.0)), ((0.0, 1.0), (0.0, 1.0)))

        batch = next(challenger(batch_size=4, solver_ratio=0.5))

        assert [[0.0, 1.0]] == [[m["rewards"] for m in g] for g in batch.challenger]
        assert "dropped 2 groups: exact_dead=1, external=1" == challenger.log[0]
        assert 4 == challenger.group_admission.stats.candidates

    def test_published_base_filters_in_complete(self):
        """With the published base (no hook), the mixin judges the groups in _complete."""
        cls = with_group_admission(scripted(AgenticChallenger))
        challenger = cls("backend", envs=[0], num_challenger_rollouts=3, group_admission_policy=STRICT)
        challenger.units = _units(((0.50, 0.505, 0.51), None), ((0.0, 1.0, 1.0), None))

        batch = next(challenger(batch_size=3, solver_ratio=0.0))

        assert [[0.0, 1.0, 1.0]] == [[m["rewards"] for m in g] for g in batch.challenger]
        assert 1 == challenger.group_admission.stats.near_tie
        assert 2 == challenger.launched

    def test_without_policy_or_budget_behaviour_is_unchanged(self):
        """No policy and no budget: exactly the base Challenger's batches."""
        units = _units(((1.0, 1.0), (0.0, 1.0)), ((None, 1.0), None), ((0.0, 1.0), (1.0, 0.0)))
        plain = scripted(PRChallenger)(envs=[0], num_challenger_rollouts=2, num_solver_rollouts=2)
        plain.units = list(units)
        mixed = with_group_admission(scripted(PRChallenger))(
            envs=[0], num_challenger_rollouts=2, num_solver_rollouts=2
        )
        mixed.units = list(units)

        assert list(plain(batch_size=4)) == list(mixed(batch_size=4))
        assert mixed.group_admission is None

    def test_budget_stops_the_challenger_cleanly(self):
        """An exhausted budget stops launching: the batch drains and the caller sees why."""
        cls = with_group_admission(scripted(AgenticChallenger))
        budget = SamplingBudgetConfig(max_extra_groups=100, max_resample_rounds=100, max_total_samples=6)
        challenger = cls(
            "backend",
            envs=[0],
            num_challenger_rollouts=2,
            group_admission_policy=STRICT,
            sampling_budget=budget,
        )
        challenger.units = _units(*[((1.0, 1.0), None)] * 20)

        batches = list(challenger(batch_size=4, solver_ratio=0.0))

        assert [] == batches  # nothing admitted: the iteration ends instead of spinning
        assert 3 == challenger.launched
        assert challenger.group_admission.stopped_by_budget
        assert ("sample_budget",) == challenger.group_admission.plan.limited_by

    def test_partial_batch_when_budget_runs_out(self):
        """A budget that runs out mid-batch hands over the admitted groups it has."""
        cls = with_group_admission(scripted(AgenticChallenger))
        budget = {"max_extra_groups": 100, "max_resample_rounds": 100, "max_total_samples": 6}
        challenger = cls(
            "backend",
            envs=[0],
            num_challenger_rollouts=2,
            group_admission_policy=STRICT,
            sampling_budget=budget,
        )
        challenger.units = _units(
            ((0.0, 1.0), None), ((1.0, 1.0), None), ((1.0, 1.0), None), ((0.0, 1.0), None)
        )

        batch = next(challenger(batch_size=6, solver_ratio=0.0))

        assert 1 == len(batch.challenger)
        assert challenger.group_admission.stopped_by_budget
        assert 1 == len(challenger.units)

    def test_a_failed_batch_leaves_no_step_in_the_way_of_the_next(self):
        """A rollout raising mid-batch: the next begin_batch ends the abandoned step and starts its own."""

        class Failing(with_group_admission(scripted(AgenticChallenger))):
            def _launch(self):
                if self.units and self.units[0] == "boom":
                    self.units.pop(0)
                    raise RuntimeError("rollout failed")
                return super()._launch()

        challenger = Failing(
            "backend",
            envs=[0],
            num_challenger_rollouts=2,
            group_admission_policy=STRICT,
            sampling_budget=LOOSE_BUDGET,
        )
        challenger.units = [*_units(((1.0, 1.0), None)), "boom", *_units(((0.0, 1.0), None))]
        batches = challenger(batch_size=2, solver_ratio=0.0)
        with pytest.raises(RuntimeError, match="rollout failed"):
            next(batches)
        assert challenger.group_admission.session.step_open  # the Challenger never ends a batch itself

        batch = next(challenger(batch_size=2, solver_ratio=0.0))

        assert [[0.0, 1.0]] == [[m["rewards"] for m in g] for g in batch.challenger]
        state = challenger.group_admission.state
        assert (1, 1, 1) == (state.sampling_rounds, state.generated_groups, state.admitted_groups)
        assert 2 == challenger.group_admission.stats.candidates  # the failed batch's group stays counted

    def test_budget_without_policy_keeps_legacy_admission(self):
        """A budget alone uses the default policy plus the Challenger's own spread check."""
        cls = with_group_admission(scripted(AgenticChallenger))
        challenger = cls("backend", envs=[0], num_challenger_rollouts=2, sampling_budget=LOOSE_BUDGET)
        challenger.units = _units(((1.0, 1.0), None), ((0.0, 1.0), None))

        batch = next(challenger(batch_size=2, solver_ratio=0.0))

        assert [[0.0, 1.0]] == [[m["rewards"] for m in g] for g in batch.challenger]
        assert 1 == challenger.group_admission.stats.exact_dead
        assert challenger.group_admission.policy.config == GroupAdmissionConfig()
        assert not challenger.group_admission.stopped_by_budget

    @pytest.mark.parametrize("base", [PRChallenger, Challenger], ids=["twinkle#288", "without-hook"])
    def test_one_hand_off_of_both_sides_and_sizes_is_one_round(self, base):
        """Each _complete (both sides, groups of 3 and 2) is one round: max_resample_rounds=1 allows two."""
        cls = with_group_admission(scripted(base))
        challenger = cls(
            envs=[0],
            num_challenger_rollouts=3,
            num_solver_rollouts=2,
            group_admission_policy=STRICT,
            sampling_budget={"max_extra_groups": 100, "max_resample_rounds": 1},
        )
        unit = ([group(0.0, 1.0, 1.0), group(1.0, 1.0, 1.0)], [group(1.0, 1.0), group(0.0, 1.0)])
        challenger.units = [unit, unit, unit]

        batch = next(challenger(batch_size=12, solver_ratio=0.5))

        state = challenger.group_admission.state
        assert 2 == challenger.launched
        assert 2 == state.sampling_rounds
        assert 8 == state.generated_groups
        assert 2 * (3 + 3 + 2 + 2) == state.generated_samples
        assert 4 == state.admitted_groups
        assert 2 == len(batch.challenger)
        assert 2 == len(batch.solver)
        assert challenger.group_admission.exhausted
        assert 1 == len(challenger.units)

    def test_mixin_class_statement(self):
        """The mixin also works as an explicit first base."""

        class Mine(GroupAdmissionChallengerMixin, AgenticChallenger):
            pass

        assert isinstance(
            Mine("b", envs=[0], group_admission_policy=STRICT).group_admission, ChallengerAdmission
        )

    def test_with_group_admission_names_the_class(self):
        """The helper's subclass is named after the Challenger class."""
        cls = with_group_admission(AgenticChallenger)

        assert "AgenticChallengerWithGroupAdmission" == cls.__name__
        assert issubclass(cls, AgenticChallenger)


class TestBadInput:
    @pytest.mark.parametrize(
        ("kwargs", "error", "message"),
        [
            (
                {"policy": "strict"},
                TypeError,
                "'group_admission_policy' must be a GroupAdmissionPolicy, a GroupAdmissionConfig, "
                "a mapping or "
                "None (got 'strict')",
            ),
            (
                {"budget": 10},
                TypeError,
                "'budget' must be a SamplingBudgetController, a SamplingBudgetConfig, a mapping or None "
                "(got 10)",
            ),
            (
                {"tokens_of": "len"},
                TypeError,
                "'tokens_of' must be a callable tokens_of(trajectory) -> int (got 'len')",
            ),
            (
                {"budget": {"max_total_tokens": 100, "max_resample_rounds": 5}},
                ValueError,
                "'tokens_of' is required when the budget caps tokens (max_total_tokens=100)",
            ),
            (
                {"budget": {"max_total_samples": 100}},
                ValueError,
                "'max_resample_rounds' must be >= 1 for the Challenger (got 0): every hand-off after "
                "the first is a resample round, so 0 would stop the batch after one unit; use a large "
                "value to cap only "
                "samples, tokens and extra groups",
            ),
            (
                {"budget": {"max_total_sample": 100}},
                ValueError,
                "unknown key(s) 'max_total_sample' in SamplingBudgetConfig mapping (known: "
                "confidence, effective_rate_ema_alpha, max_extra_groups, max_extra_groups_per_round, "
                "max_resample_rounds, max_total_samples, max_total_tokens, min_effective_rate, mode)",
            ),
        ],
    )
    def test_constructor(self, kwargs, error, message):
        """Constructor arguments are checked by name."""
        with pytest.raises(error) as info:
            ChallengerAdmission(**kwargs)

        assert message == str(info.value)

    @pytest.mark.parametrize(
        ("groups", "reasons", "error", "message"),
        [
            (
                "abc",
                Counter(),
                TypeError,
                "'groups' must be a list of groups (lists of trajectory dicts) (got 'abc')",
            ),
            (
                [{"rewards": 1.0}],
                Counter(),
                TypeError,
                "'groups' entry 0 must be a list of trajectory dicts (got {'rewards': 1.0} of type dict)",
            ),
            (
                [[trajectory(1.0)], []],
                Counter(),
                ValueError,
                "'groups' entry 1 must hold at least one trajectory (got an empty group)",
            ),
            ([[1.0, 0.0]], Counter(), TypeError, "'groups' entry 0 must hold trajectory dicts (got 1.0)"),
            (
                [],
                ["external"],
                TypeError,
                "'rejection_reasons' must be a Counter of reason names (got ['external'] of type list)",
            ),
        ],
    )
    def test_admitted_groups(self, groups, reasons, error, message):
        """Structural mistakes in the hand-off are errors naming the argument."""
        with pytest.raises(error) as info:
            ChallengerAdmission(STRICT).admitted_groups(groups, reasons)

        assert message == str(info.value)

    @pytest.mark.parametrize(
        ("target", "error", "message"),
        [
            (-1, ValueError, "'target_groups' must be >= 0 (got -1)"),
            (1.5, TypeError, "'target_groups' must be an integer (got 1.5)"),
            (True, TypeError, "'target_groups' must be an integer (got True)"),
        ],
    )
    def test_begin_batch(self, target, error, message):
        """The batch target is a count: a bool or a float is a TypeError, as for every count."""
        with pytest.raises(error) as info:
            ChallengerAdmission(STRICT, budget=LOOSE_BUDGET).begin_batch(target)

        assert message == str(info.value)

    def test_budget_needs_begin_batch(self):
        """With a budget, a hand-off before begin_batch is a usage error, not a silent zero target."""
        with pytest.raises(RuntimeError) as info:
            ChallengerAdmission(STRICT, budget=LOOSE_BUDGET).admitted_groups([group(0.0, 1.0)], Counter())

        assert (
            "call begin_batch(target_groups) before admitted_groups() when a sampling budget is set"
            == str(info.value)
        )

    def test_with_group_admission_needs_a_class(self):
        """with_group_admission names its argument when it is not a class."""
        with pytest.raises(TypeError) as info:
            with_group_admission("AgenticChallenger")

        assert "'challenger_cls' must be a Challenger class (got 'AgenticChallenger')" == str(info.value)


def test_trajectories_may_be_any_mapping():
    """Trajectories are read as mappings; twinkle's are TypedDicts (plain dicts)."""

    class Frozen(Mapping):
        def __init__(self, data):
            self._data = data

        def __getitem__(self, key):
            return self._data[key]

        def __iter__(self):
            return iter(self._data)

        def __len__(self):
            return len(self._data)

    kept = ChallengerAdmission(STRICT).admitted_groups(
        [[Frozen(trajectory(0.0)), Frozen(trajectory(1.0))]], Counter()
    )

    assert 1 == len(kept)


def test_the_recommended_block_builds_the_hand_off_session():
    block = {"preset": "recommended", "limits": {"max_consecutive_failed_groups": 3}}
    config = SessionConfig.from_mapping(block)

    hook = ChallengerAdmission(block)

    assert hook.policy.config == config.policy
    assert hook.session.limits == config.limits
    assert hook.controller is None  # the preset does not resample
    kept = hook.admitted_groups([group(1.0, 0.0), group(1.0, 1.0)], Counter())
    assert len(kept) == 1
    assert hook.stats.candidates == 2
