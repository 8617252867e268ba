"""A gate is one row (``_checks``): a check added to the table is seen by every path that runs it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from group_admission import (
    AdmissionStats,
    BatchAdmissionResult,
    GroupAdmissionConfig,
    GroupAdmissionPolicy,
    RejectionReason,
    _checks,
    group_admission_metrics,
)
from group_admission._checks import Bound, Check, CheckTable, GateCheck
from group_admission._explain import explain_policy
from group_admission._judge import STATISTICS, BatchStatistics
from strategies import configs, reward_matrices

SHIPPED = _checks.TABLE


@attrs.frozen(kw_only=True)
class MeanCapConfig(GroupAdmissionConfig):
    """The shipped thresholds plus the test-local check's."""

    max_reward_mean: float | None = None


#: A reward check that exists only in this file: a group whose mean reward is above a cap.
MEAN_CAP = GateCheck(
    name="reward_mean_above_threshold",
    bit=32,
    family="reward",
    reason=RejectionReason.NEAR_TIE,
    field="max_reward_mean",
    statistic="mean",
    bound=Bound(minimum=False, tolerant=True),
    gate="mean gate",
    rejects="whose mean reward is above {threshold}: too easy to teach.",
)
STD, SIMILARITY = "reward_std_below_threshold", "mean_pairwise_similarity_above_threshold"


@contextlib.contextmanager
def table_with(*checks: GateCheck) -> Iterator[CheckTable]:
    """The shipped table with ``checks`` added, for the duration of the block."""
    table = SHIPPED
    for check in checks:
        table = table.adding(check)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_checks, "TABLE", table)
        yield table


@pytest.fixture
def mean_cap() -> Iterator[CheckTable]:
    with table_with(MEAN_CAP) as table:
        yield table


GROUPS = [[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]


def _decisions(config: GroupAdmissionConfig, groups: list[list[float]], texts: Any = None) -> tuple[Any, Any]:
    policy = GroupAdmissionPolicy(config)
    scalar = [policy.evaluate(group, texts and texts[row]) for row, group in enumerate(groups)]
    return scalar, policy.evaluate_batch(groups, texts)


class TestAddedRow:
    """The test-local ``MEAN_CAP`` row, added in one place, is run, named, counted and explained."""

    def test_the_scalar_path_runs_it(self, mean_cap: CheckTable) -> None:
        scalar, _ = _decisions(MeanCapConfig(max_reward_mean=0.7), GROUPS)

        assert [("near_tie", (MEAN_CAP.name,)), (None, ()), ("exact_dead", (MEAN_CAP.name,)), (None, ())] == [
            (decision.primary_rejection_reason, decision.failed_checks) for decision in scalar
        ]
        assert [True, False, True, False] == [decision.reward_rejected for decision in scalar]

    def test_the_batch_path_runs_it_with_its_own_bit(self, mean_cap: CheckTable) -> None:
        """A batch result's flags are read with the table that wrote them (here, inside the fixture)."""
        scalar, batch = _decisions(MeanCapConfig(max_reward_mean=0.7), GROUPS)

        assert [MEAN_CAP.bit, 0, MEAN_CAP.bit, 0] == batch.check_flags.tolist()
        assert [decision.to_dict() for decision in scalar] == [decision.to_dict() for decision in batch]

    def test_bits_are_append_only_and_failed_checks_follow_the_rows(self, mean_cap: CheckTable) -> None:
        """The new row's bit (32) is above the similarity check's (8), yet it is listed before it."""
        config = MeanCapConfig(min_reward_std=0.6, max_reward_mean=0.7, max_mean_pairwise_similarity=0.5)
        texts = [["same words here"] * 4]
        scalar, batch = _decisions(config, [GROUPS[0]], texts)

        assert {**SHIPPED.bits, MEAN_CAP.name: 32} == mean_cap.bits
        assert (STD, MEAN_CAP.name, SIMILARITY) == scalar[0].failed_checks == batch.decision(0).failed_checks
        assert 1 | 32 | 8 == int(batch.check_flags[0])

    def test_the_primary_reason_is_the_rows(self) -> None:
        """A row's reason names its rejection, whatever it is; identical rewards stay exact_dead."""
        with table_with(attrs.evolve(MEAN_CAP, reason=RejectionReason.REDUNDANT)):
            scalar, batch = _decisions(MeanCapConfig(max_reward_mean=0.7), GROUPS)

        assert ["redundant", None, "exact_dead", None] == [d.primary_rejection_reason for d in scalar]
        assert ["redundant", None, "exact_dead", None] == batch.primary_reasons.tolist()

    def test_the_explainer_and_the_config_read_it(self, mean_cap: CheckTable) -> None:
        on, off = MeanCapConfig(max_reward_mean=0.7), MeanCapConfig()

        assert "  - mean gate: rejects a group whose mean reward is above 0.7: too easy to teach." in (
            explain_policy(on)
        )
        assert "  - mean gate: off (max_reward_mean is None)." in explain_policy(off)
        assert (on.reward_gate_enabled, off.reward_gate_enabled) == (True, False)

    def test_the_counts_read_it_and_conserve(self, mean_cap: CheckTable) -> None:
        scalar, batch = _decisions(MeanCapConfig(max_reward_mean=0.7), GROUPS)
        counted = group_admission_metrics(batch)
        stats = AdmissionStats()
        stats.add_many(scalar)

        assert counted == group_admission_metrics(scalar)
        assert (2, 1, 1) == (
            counted["reward_rejected_group_count"],
            counted["near_tie_group_count"],
            counted["exact_dead_group_count"],
        )
        assert stats == AdmissionStats.from_dict(stats.to_dict())

    def test_the_strategies_draw_it(self, mean_cap: CheckTable) -> None:
        drawn = find(configs(config_class=MeanCapConfig), lambda config: config.max_reward_mean is not None)

        assert isinstance(drawn, MeanCapConfig)

    @given(data=st.data())
    def test_batch_equals_scalar_with_it_drawn(self, data: st.DataObject) -> None:
        with table_with(MEAN_CAP):
            config = data.draw(configs(config_class=MeanCapConfig))
            rewards = data.draw(reward_matrices(groups=8, members=6))
            policy = GroupAdmissionPolicy(config)
            batch = [decision.to_dict() for decision in policy.evaluate_batch(rewards)]
            scalar = [policy.evaluate(row.tolist()).to_dict() for row in rewards]

        assert scalar == batch


class TestShippedTable:
    def test_the_bits_of_the_shipped_checks_never_move(self) -> None:
        """The public bits (``BatchAdmissionResult.CHECK_BITS``); a new check takes a new bit."""
        assert (
            {
                "reward_std_below_threshold": 1,
                "reward_range_below_threshold": 2,
                "insufficient_nontrivial_advantages": 4,
                "mean_pairwise_similarity_above_threshold": 8,
                "mean_outside_dynamic_filtering_range": 16,
            }
            == BatchAdmissionResult.CHECK_BITS
            == SHIPPED.bits
        )

    def test_every_gate_row_names_a_config_field_and_a_statistic_the_gates_compute(self) -> None:
        fields = attrs.fields_dict(GroupAdmissionConfig)

        assert all(check.field in fields for check in (*SHIPPED.reward, SHIPPED.similarity))
        assert all(check.statistic in STATISTICS for check in (*SHIPPED.reward, MEAN_CAP))
        assert set(STATISTICS) <= set(BatchStatistics._fields)

    def test_the_counts_bound_each_familys_reasons(self) -> None:
        reward, similarity = SHIPPED.reasons_only_of("reward"), SHIPPED.reasons_only_of("similarity")

        assert ((RejectionReason.NEAR_TIE,), (RejectionReason.REDUNDANT,)) == (reward, similarity)

    def test_the_strategies_draw_every_row(self) -> None:
        for check in (*SHIPPED.reward, SHIPPED.similarity):
            default = getattr(GroupAdmissionConfig(), check.field)

            find(configs(similarity=True), lambda config, c=check, d=default: getattr(config, c.field) != d)

    def test_a_table_of_eight_checks_decides_as_primary_reason_does(self) -> None:
        """With bits up to 128 a batch row's case needs 16 bits; the batch path still agrees."""
        extra = [attrs.evolve(MEAN_CAP, name=f"mean_above_{bit}", bit=bit) for bit in (32, 64, 128)]
        with table_with(*extra) as table:
            scalar, batch = _decisions(MeanCapConfig(max_reward_mean=0.7, min_reward_std=0.6), GROUPS)
            decoded = [decision.to_dict() for decision in batch]  # decoded by the same table

        assert np.dtype(np.uint16) == table.case_dtype
        assert [decision.to_dict() for decision in scalar] == decoded
        assert 1 | 32 | 64 | 128 == int(batch.check_flags[0])


def _row(**changes: Any) -> Check:
    return attrs.evolve(MEAN_CAP, **changes)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (lambda: SHIPPED.adding(_row(name=STD)), "distinct names and bits"),
        (lambda: SHIPPED.adding(_row(bit=8)), "distinct names and bits"),
        (lambda: SHIPPED.adding(_row(bit=48)), "must have a bit that is a power of two below 256 (got 48)"),
        (lambda: SHIPPED.adding(_row(bit=256)), "must have a bit that is a power of two below 256 (got 256)"),
        (lambda: SHIPPED.adding(_row(bit=0)), "must have a bit that is a power of two below 256 (got 0)"),
        (lambda: SHIPPED.adding(_row(reason=RejectionReason.EXTERNAL)), "must not give 'external'"),
        (lambda: SHIPPED.adding(_row(family="similarity")), "of family 'reward'"),
        (lambda: attrs.evolve(SHIPPED, similarity=_row(bit=64)), "of family 'reward'"),
    ],
)
def test_a_table_refuses_ambiguous_rows(table: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        table()
