"""
The RAGEN rollout filter, called as RAGEN's trainer calls it.

Batches are built as RAGEN's ContextManager builds them (``ragen_types``) on verl's
``DataProto`` (the real one when importable, else the faithful double in
``verl_types``); ``RayAgentTrainer.train_step`` runs the filter section of RAGEN's
``fit()``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from group_admission import GroupAdmissionConfig, GroupAdmissionPolicy, SessionConfig
from group_admission.adapters.ragen import RagenGroupAdmissionFilter, RagenSelection

from .ragen_types import RayAgentTrainer, base_config, make_batch
from .verl_types import DataProto

BINARY = [1, 0, 1, 0, 1, 1, 1, 1, 0, 0.5, 0, 0, 0, 0, 0, 0]  # 4 groups of 4: mixed, all-1, near-dead, all-0


def _groups(size, count):
    return [g for g in range(count) for _ in range(size)]


def _trainer(adapter, **rollout):
    trainer = RayAgentTrainer(base_config(**rollout))
    trainer.rollout_filter = adapter
    return trainer


class TestFilterContract:
    def test_returns_a_dataproto_and_metrics(self):
        """filter(batch) returns (the same DataProto, changed in place, and a metrics dict)."""
        batch = make_batch(BINARY, group_ids=_groups(4, 4))
        adapter = RagenGroupAdmissionFilter({"min_reward_std": 1e-6}, num_groups=4)

        out, metrics = adapter.filter(batch)

        assert out is batch
        assert isinstance(out, DataProto)
        assert isinstance(metrics, dict)

    def test_keeps_whole_admitted_groups_in_order(self):
        """Rejected groups are dropped whole; kept rows keep their order and every column."""
        batch = make_batch(BINARY, group_ids=_groups(4, 4))
        adapter = RagenGroupAdmissionFilter({"min_reward_std": 1e-6}, num_groups=4)

        out, _ = adapter.filter(batch)

        assert [0, 0, 0, 0, 2, 2, 2, 2] == out.non_tensor_batch["group_ids"].tolist()
        assert [0, 1, 2, 3, 8, 9, 10, 11] == out.non_tensor_batch["env_ids"].tolist()
        assert [1, 0, 1, 0, 0, 0.5, 0, 0] == out.batch["original_rm_scores"].sum(-1).tolist()
        assert (8, 2) == out.non_tensor_batch["messages_list"].shape[:2]
        assert 8 == len(out)

    def test_reward_std_is_the_original_sample_std_per_row(self):
        """reward_std holds, per kept row, the sample std of its whole original group (RAGEN's rule)."""
        batch = make_batch(BINARY, group_ids=_groups(4, 4))
        adapter = RagenGroupAdmissionFilter({"min_reward_std": 1e-6}, num_groups=4)

        out, _ = adapter.filter(batch)

        expected = [np.std([1, 0, 1, 0], ddof=1)] * 4 + [np.std([0, 0.5, 0, 0], ddof=1)] * 4
        assert expected == pytest.approx(out.batch["reward_std"].tolist())

    def test_metrics_under_ragen_names(self):
        """RAGEN's metric names hold RAGEN's values: sample-std means over all and kept groups."""
        batch = make_batch(BINARY, group_ids=_groups(4, 4))
        adapter = RagenGroupAdmissionFilter({"min_reward_std": 1e-6}, num_groups=4)

        _, metrics = adapter.filter(batch)

        stds = [np.std(BINARY[i : i + 4], ddof=1) for i in range(0, 16, 4)]
        assert np.mean(stds) == pytest.approx(metrics["rollout/in_group_reward_std"].item())
        assert np.mean([stds[0], stds[2]]) == pytest.approx(
            metrics["rollout/chosen_in_group_reward_std"].item()
        )
        assert np.mean(stds) == pytest.approx(metrics["rollout/in_group_std"].item())
        assert np.mean([1, 1, 0.5, 0]) == pytest.approx(metrics["rollout/in_group_reward_max"].item())
        assert np.mean([2, 4, 0.5, 0]) == pytest.approx(metrics["rollout/in_group_reward_sum"].item())
        assert 2.0 == metrics["rollout/filter_kept_count"].item()
        assert 0.5 == metrics["rollout/filter_kept_ratio"].item()
        assert 2 == metrics["rollout/filter_zero_count"].item()
        assert [0, 1, 2, 3] == metrics["rollout/_group_ids"].tolist()
        assert [0, 2] == metrics["rollout/_selected_group_ids"].tolist()
        assert (4, 4) == tuple(metrics["rollout/_reward_matrix"].shape)
        assert stds == pytest.approx(metrics["rollout/_group_reward_std"].tolist())

    def test_admission_counts(self):
        """Our counts sit under rollout/group_admission/ and conserve."""
        batch = make_batch(BINARY, group_ids=_groups(4, 4))
        adapter = RagenGroupAdmissionFilter({"min_reward_range": 0.6}, num_groups=4)

        _, metrics = adapter.filter(batch)

        counts = {
            k.removeprefix("rollout/group_admission/"): v
            for k, v in metrics.items()
            if "group_admission" in k
        }
        assert 4 == counts["candidate_group_count"]
        assert 1 == counts["admitted_group_count"]
        assert 2 == counts["exact_dead_group_count"]
        assert 1 == counts["near_tie_group_count"]
        assert 0 == counts["selection_dropped_group_count"]
        assert 1 == counts["kept_group_count"]
        assert 0.0 == counts["empty_batch"]
        assert 1 == adapter.stats.admitted
        assert 4 == adapter.stats.candidates


class TestTrainerContract:
    def test_loss_scaling_reads_our_kept_ratio(self):
        """RAGEN's linear loss scaling multiplies advantages by our kept ratio."""
        adapter = RagenGroupAdmissionFilter({"min_reward_std": 1e-6}, num_groups=4)
        trainer = _trainer(adapter)
        trainer.config.actor_rollout_ref.actor.filter_loss_scaling = "linear"

        out, metrics = trainer.train_step(make_batch(BINARY, group_ids=_groups(4, 4)))

        assert [0.5] * 8 == out.batch["advantages"].tolist()
        assert 0.5 == float(out.meta_info["filter_kept_ratio"])
        assert "rollout/_reward_matrix" not in metrics
        assert trainer.popped["rollout/_selected_group_ids"].tolist() == [0, 2]

    def test_empty_result_is_skipped_and_counted(self):
        """A step with no admitted group returns an empty batch: RAGEN skips it, we count it."""
        adapter = RagenGroupAdmissionFilter({"min_reward_std": 1e-6}, num_groups=2)
        trainer = _trainer(adapter, rollout_filter_empty_stop_steps=2)
        dead = [1, 1, 0, 0]

        first, metrics = trainer.train_step(make_batch(dead, group_ids=[0, 0, 1, 1]))
        second, _ = trainer.train_step(make_batch(dead, group_ids=[0, 0, 1, 1]))

        assert first is None
        assert second is None
        assert 1.0 == metrics["rollout/group_admission/empty_batch"]
        assert 2 == adapter.empty_batches
        assert 0.0 == metrics["rollout/filter_kept_ratio"].item()
        assert 0.0 == metrics["rollout/chosen_in_group_reward_std"].item()
        assert trainer.early_stopped
        assert "empty_filtered_steps" == trainer.early_stop_type

    def test_empty_batch_keeps_its_columns(self):
        """The empty batch still has every key, with zero rows (len() == 0 for RAGEN)."""
        adapter = RagenGroupAdmissionFilter({"min_reward_std": 1e-6}, num_groups=2)

        out, _ = adapter.filter(make_batch([1, 1, 0, 0], group_ids=[0, 0, 1, 1]))

        assert 0 == len(out)
        assert (0,) == tuple(out.batch["reward_std"].shape)
        assert (0,) == out.non_tensor_batch["group_ids"].shape

    def test_collapse_early_stop_still_fires(self):
        """RAGEN's reward-variance collapse stop keeps reading rollout/in_group_reward_std."""
        trainer = _trainer(RagenGroupAdmissionFilter(None, num_groups=2))
        for _ in range(10):
            trainer.train_step(make_batch([1, 0, 1, 0], group_ids=[0, 0, 1, 1]))
        for _ in range(10):
            trainer.train_step(make_batch([1, 0.99, 1, 0.99], group_ids=[0, 0, 1, 1]))

        assert "reward_variance_collapse" == trainer.early_stop_type


class TestGatesOffParity:
    @pytest.mark.parametrize(
        ("rewards", "selection", "kept"),
        [
            # Group stds (sample): 4 groups of 2 with spreads 4, 3, 2, 1 -> std proportional.
            ([0, 4, 0, 3, 0, 2, 0, 1], RagenSelection(value=0.6), [0, 1]),
            ([0, 3, 0, 1, 0, 1, 0, 0], RagenSelection(value=0.9, include_zero=False), [0, 1, 2]),
            ([0, 3, 0, 1, 0, 1, 0, 0], RagenSelection(), [0, 1, 2, 3]),
            ([0, 3, 0, 1, 0, 2, 0, 0], RagenSelection(strategy="top_k", value=0.5), [0, 2]),
        ],
    )
    def test_without_gates_the_selection_is_ragens(self, rewards, selection, kept):
        """With the gates off the filter keeps exactly the groups RAGEN's selection keeps."""
        adapter = RagenGroupAdmissionFilter(None, num_groups=4, selection=selection)

        out, metrics = adapter.filter(make_batch(rewards, group_ids=_groups(2, 4)))

        assert kept == metrics["rollout/_selected_group_ids"].tolist()
        assert sorted(kept) == sorted(set(out.non_tensor_batch["group_ids"].tolist()))
        assert len(kept) / 4 == pytest.approx(metrics["rollout/filter_kept_ratio"].item())

    def test_selection_runs_on_admitted_groups_only(self):
        """Gates first: top_k then chooses among the admitted groups only."""
        # Without the gates, "smallest" would pick the dead and the near-tie groups (2, 3).
        rewards = [0, 4, 0, 3, 1, 1, 0, 0.001]
        selection = RagenSelection(strategy="top_k_abs", value=2.0, filter_type="smallest")
        adapter = RagenGroupAdmissionFilter({"min_reward_range": 0.01}, num_groups=4, selection=selection)

        _, metrics = adapter.filter(make_batch(rewards, group_ids=_groups(2, 4)))

        assert [1, 0] == metrics["rollout/_selected_group_ids"].tolist()
        assert 0 == metrics["rollout/group_admission/selection_dropped_group_count"]

    def test_selection_drops_are_counted(self):
        """Admitted groups the selection leaves out are counted separately from rejections."""
        adapter = RagenGroupAdmissionFilter(
            None, num_groups=4, selection=RagenSelection(strategy="top_k_abs", value=1.0)
        )

        _, metrics = adapter.filter(make_batch([0, 4, 0, 3, 0, 2, 0, 1], group_ids=_groups(2, 4)))

        assert 4 == metrics["rollout/group_admission/admitted_group_count"]
        assert 3 == metrics["rollout/group_admission/selection_dropped_group_count"]
        assert 1 == metrics["rollout/group_admission/kept_group_count"]

    @pytest.mark.parametrize(
        ("metric", "kept"), [("reward", [1]), ("reward_sum", [1]), ("reward_variance", [0])]
    )
    def test_selection_metric(self, metric, kept):
        """rollout_filter_metric picks the score: mean, sum or (sample) std."""
        selection = RagenSelection(strategy="top_k_abs", value=1.0, metric=metric)
        adapter = RagenGroupAdmissionFilter(None, num_groups=2, selection=selection)

        _, metrics = adapter.filter(make_batch([0, 2, 1.5, 1.6], group_ids=[0, 0, 1, 1]))

        assert kept == metrics["rollout/_selected_group_ids"].tolist()


class TestTurnLevel:
    def test_rows_merge_into_episodes(self):
        """In turn-level mode each episode counts once, with the reward of its first row."""
        # 2 groups x 2 episodes; episodes 0/1 (group 0) differ, episodes 2/3 (group 1) tie.
        episode_ids = [0, 0, 1, 2, 2, 2, 3]
        rewards = [1, 1, 0, 5, 5, 5, 5]
        batch = make_batch(rewards, group_ids=[0, 0, 0, 1, 1, 1, 1], episode_ids=episode_ids)
        adapter = RagenGroupAdmissionFilter({"min_reward_std": 1e-6}, num_groups=2)

        out, metrics = adapter.filter(batch)

        assert [0, 0, 1] == out.non_tensor_batch["episode_ids"].tolist()
        assert [[1, 0], [5, 5]] == metrics["rollout/_reward_matrix"].tolist()
        assert [np.std([1, 0], ddof=1)] * 3 == pytest.approx(out.batch["reward_std"].tolist())

    def test_interleaved_turns_use_first_seen_episode_order(self):
        """Episodes are ordered by first appearance, whatever the row order of their turns."""
        episode_ids = [0, 1, 2, 3, 0, 2]
        rewards = [1, 0, 3, 3, 1, 3]
        batch = make_batch(rewards, group_ids=[0, 0, 1, 1, 0, 1], episode_ids=episode_ids)
        adapter = RagenGroupAdmissionFilter({"min_reward_std": 1e-6}, num_groups=2)

        out, _ = adapter.filter(batch)

        assert [0, 1, 0] == out.non_tensor_batch["episode_ids"].tolist()

    def test_episodes_must_divide_into_groups(self):
        """An episode count that does not divide into num_groups is a clear error (RAGEN's rule)."""
        batch = make_batch([1, 0, 1], group_ids=[0, 0, 1], episode_ids=[0, 1, 2])
        adapter = RagenGroupAdmissionFilter(None, num_groups=2)

        with pytest.raises(
            ValueError, match=r"^Number of episodes \(3\) must be divisible by num_groups \(2\)"
        ):
            adapter.filter(batch)


class TestDataProblems:
    def test_non_finite_reward_rejects_its_group_as_external(self):
        """A NaN or inf reward rejects its group as external instead of crashing the step."""
        rewards = [1, 0, float("nan"), 1, 1, float("inf")]
        adapter = RagenGroupAdmissionFilter(None, num_groups=3)

        out, metrics = adapter.filter(make_batch(rewards, group_ids=_groups(2, 3)))

        assert [0, 0] == out.non_tensor_batch["group_ids"].tolist()
        assert 2 == metrics["rollout/group_admission/externally_rejected_group_count"]
        assert {"non_finite_reward": 2} == adapter.stats.external_details

    @pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
    def test_integer_and_bool_scores_are_read_as_float(self, dtype):
        """Integer or bool original_rm_scores (a 0/1 verifier) are rewards, not a crash after admission."""
        batch = make_batch([1, 0, 1, 0, 1, 1, 1, 1], group_ids=_groups(4, 2), dtype=dtype)
        selection = RagenSelection(strategy="top_k_abs", value=2.0)
        adapter = RagenGroupAdmissionFilter({"min_reward_std": 1e-6}, num_groups=2, selection=selection)

        out, metrics = adapter.filter(batch)

        assert [0, 0, 0, 0] == out.non_tensor_batch["group_ids"].tolist()
        assert [np.std([1, 0, 1, 0], ddof=1)] * 4 == pytest.approx(out.batch["reward_std"].tolist())
        assert out.batch["reward_std"].is_floating_point()
        mean_std = metrics["rollout/in_group_reward_std"].item()
        assert np.std([1, 0, 1, 0], ddof=1) / 2 == pytest.approx(mean_std)
        assert [[1, 0, 1, 0], [1, 1, 1, 1]] == metrics["rollout/_reward_matrix"].tolist()

    def test_redundancy_gate_reads_assistant_turns(self):
        """With the redundancy gate on, completions come from messages_list's assistant turns."""
        same = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "move left move left"}]
        varied = [
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": f"plan {w} now"}]
            for w in "xy"
        ]
        batch = make_batch([1, 0, 1, 0], group_ids=[0, 0, 1, 1], messages=[same, same, *varied])
        adapter = RagenGroupAdmissionFilter({"max_mean_pairwise_similarity": 0.9}, num_groups=2)

        out, metrics = adapter.filter(batch)

        assert [1, 1] == out.non_tensor_batch["group_ids"].tolist()
        assert 1 == metrics["rollout/group_admission/redundant_group_count"]

    def test_conversation_without_reply_is_a_missing_completion(self):
        """A member with no assistant message makes its group external (missing_completion)."""
        silent = [{"role": "user", "content": "q"}]
        reply = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
        batch = make_batch(
            [1, 0, 1, 0], group_ids=[0, 0, 1, 1], messages=[silent, reply, reply, [*reply, *reply]]
        )
        adapter = RagenGroupAdmissionFilter({"max_mean_pairwise_similarity": 0.99}, num_groups=2)

        adapter.filter(batch)

        assert {"missing_completion": 1} == adapter.stats.external_details


reward_values = st.sampled_from([0.0, 0.25, 0.5, 1.0, 0.5001, -1.0])


class TestDecisionsEqualEvaluate:
    @given(
        shape=st.tuples(st.integers(1, 5), st.integers(1, 5)),
        data=st.data(),
        config=st.builds(
            GroupAdmissionConfig,
            min_reward_std=st.sampled_from([0.0, 1e-6, 0.2]),
            min_reward_range=st.sampled_from([0.0, 0.01, 0.5]),
            min_nontrivial_advantages=st.integers(0, 2),
        ),
    )
    def test_kept_groups_are_the_policys_admitted_groups(self, shape, data, config):
        """Each group is kept iff GroupAdmissionPolicy.evaluate admits its (float32) rewards."""
        groups, size = shape
        rewards = data.draw(st.lists(reward_values, min_size=groups * size, max_size=groups * size))
        policy = GroupAdmissionPolicy(config)
        adapter = RagenGroupAdmissionFilter(policy, num_groups=groups)

        out, metrics = adapter.filter(make_batch(rewards, group_ids=_groups(size, groups)))

        stored = np.asarray(rewards, dtype=np.float32).astype(np.float64).reshape(groups, size)
        decisions = [policy.evaluate(row.tolist()) for row in stored]
        expected = [g for g, decision in enumerate(decisions) if decision.admitted]
        assert expected == sorted(set(out.non_tensor_batch["group_ids"].tolist()))
        assert (
            sum(d.reason == "exact_dead" for d in decisions)
            == metrics["rollout/group_admission/exact_dead_group_count"]
        )
        assert (
            sum(d.reason == "near_tie" for d in decisions)
            == metrics["rollout/group_admission/near_tie_group_count"]
        )

    @given(data=st.data())
    def test_turn_level_decisions_use_episode_rewards(self, data):
        """In turn-level mode the policy sees one reward per episode (its first row's)."""
        groups, size = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
        episode_rewards = data.draw(st.lists(reward_values, min_size=groups * size, max_size=groups * size))
        turns = data.draw(st.lists(st.integers(1, 3), min_size=groups * size, max_size=groups * size))
        episode_ids = [e for e, count in enumerate(turns) for _ in range(count)]
        rows = [episode_rewards[e] for e in episode_ids]
        batch = make_batch(rows, group_ids=[e // size for e in episode_ids], episode_ids=episode_ids)
        policy = GroupAdmissionPolicy({"min_reward_std": 1e-6})

        out, _ = RagenGroupAdmissionFilter(policy, num_groups=groups).filter(batch)

        matrix = np.asarray(episode_rewards, dtype=np.float32).astype(np.float64).reshape(groups, size)
        expected = {g for g in range(groups) if policy.evaluate(matrix[g].tolist()).admitted}
        assert expected == set(out.non_tensor_batch["group_ids"].tolist())
        assert sum(turns[e] for e in range(groups * size) if e // size in expected) == len(out)


def _bad_group_ids(group_ids):
    return make_batch([1, 0, 1, 0], group_ids=group_ids)


class TestBadInput:
    @pytest.mark.parametrize(
        ("kwargs", "error", "message"),
        [
            ({"num_groups": 0}, ValueError, "'num_groups' must be >= 1 (got 0)"),
            ({"num_groups": 2.0}, TypeError, "'num_groups' must be an integer (got 2.0)"),
            ({"num_groups": True}, TypeError, "'num_groups' must be an integer (got True)"),
            (
                {"num_groups": 2, "selection": "top_p"},
                TypeError,
                "'selection' must be a RagenSelection or None (got 'top_p')",
            ),
            (
                {"num_groups": 2, "policy": {"min_std": 1}},
                ValueError,
                "unknown key(s) 'min_std' in GroupAdmissionConfig mapping (known: "
                "advantage_tolerance, gate_on, max_mean_pairwise_similarity, min_nontrivial_advantages, "
                "min_reward_range, min_reward_std, similarity_ngram_size)",
            ),
        ],
    )
    def test_constructor(self, kwargs, error, message):
        """Constructor arguments are checked by name."""
        with pytest.raises(error) as info:
            RagenGroupAdmissionFilter(**kwargs)

        assert message == str(info.value)

    @pytest.mark.parametrize(
        ("batch", "message"),
        [
            (
                make_batch([1, 0, 1]),
                "the batch has 3 rows, which do not divide into num_groups=2 groups "
                "(es_manager.train.env_groups): RAGEN groups contiguous rows, so every group must have "
                "the same number of rows",
            ),
            (
                _bad_group_ids([0, 1, 0, 1]),
                "non_tensor_batch['group_ids'] disagrees with RAGEN's positional grouping: group 0 of 2 "
                "(a contiguous block of 2 rows) holds rows with group ids [0, 1] (row 1 has 1, expected 0); "
                "RAGEN assigns rows to groups by position, so the batch must be ordered by group",
            ),
            (
                _bad_group_ids([3, 3, 3, 3]),
                "non_tensor_batch['group_ids'] disagrees with RAGEN's positional grouping: groups 0 and 1 "
                "both hold group id 3, and GRPO would merge them (it groups rows by uid = group_ids)",
            ),
            (
                DataProto.from_dict(tensors={"input_ids": torch.zeros(4, 3)}),
                "the RAGEN batch must hold batch.batch['original_rm_scores'] (the per-token scores RAGEN's "
                "ContextManager writes) (got keys ['input_ids'])",
            ),
            (
                DataProto.from_dict(tensors={"original_rm_scores": torch.zeros(4)}),
                "batch.batch['original_rm_scores'] must be a 2-D tensor (rows, tokens) (got (4,))",
            ),
        ],
    )
    def test_batch_structure(self, batch, message):
        """A batch without RAGEN's structure fails with the exact problem, never a silent mix."""
        adapter = RagenGroupAdmissionFilter(None, num_groups=2)

        with pytest.raises(ValueError) as info:
            adapter.filter(batch)

        assert message == str(info.value)

    def test_turn_level_group_ids_must_agree_per_episode_block(self):
        """In turn-level mode the check runs on the episode blocks."""
        batch = make_batch([1, 0, 1, 0], group_ids=[0, 1, 1, 1], episode_ids=[0, 1, 2, 3])

        with pytest.raises(
            ValueError, match=r"group 0 of 2 \(a block of 2 episodes\) holds rows with group ids \[0, 1\]"
        ):
            RagenGroupAdmissionFilter(None, num_groups=2).filter(batch)

    def test_redundancy_gate_without_messages(self):
        """The redundancy gate needs messages_list and says so."""
        batch = make_batch([1, 0, 1, 0], group_ids=[0, 0, 1, 1])
        del batch.non_tensor_batch["messages_list"]
        adapter = RagenGroupAdmissionFilter({"max_mean_pairwise_similarity": 0.5}, num_groups=2)

        with pytest.raises(ValueError) as info:
            adapter.filter(batch)

        assert (
            "the redundancy gate (max_mean_pairwise_similarity) needs non_tensor_batch['messages_list'] "
            "in the RAGEN batch (absent)" == str(info.value)
        )


def test_one_member_groups_follow_ragen_nan_std():
    """Groups of one row have no sample std (NaN, as in RAGEN) and no warning escapes."""
    adapter = RagenGroupAdmissionFilter(None, num_groups=2)

    out, metrics = adapter.filter(make_batch([1, 0], group_ids=[0, 1]))

    assert 2 == len(out)
    assert math.isnan(metrics["rollout/in_group_reward_std"].item())


def test_the_recommended_block_gives_the_filter_its_policy():
    block = {"preset": "recommended", "policy": {"min_reward_range": 0.5}}
    config = SessionConfig.from_mapping(block)

    built = RagenGroupAdmissionFilter.from_config(base_config(group_admission=block))
    direct = RagenGroupAdmissionFilter(config, num_groups=4)

    assert built.policy.config == direct.policy.config == config.policy
    assert direct.session.limits == config.limits
    direct.filter(make_batch(BINARY, group_ids=_groups(4, 4)))
    assert direct.last_report is not None
    assert direct.last_report.generated_groups == 4
