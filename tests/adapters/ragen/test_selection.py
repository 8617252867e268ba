"""
Parity of RAGEN's selection (``group_admission._host_rules.ragen``) with RAGEN's
``RolloutFilter._select_top_groups``.

Two tables: hand-worked vectors, one per code path of RAGEN@20daedc's
``ragen/trainer/rollout_filter.py`` (the issue's examples among them), run through the
adapter's torch entry point, and ``ragen_selection_golden.json``: 560 drawn cases (160 of
them with NaN and infinite scores) whose expected selections were produced by running
RAGEN's own method (``ragen_golden_gen.py``, torch 2.13.0), checked against the numpy host
rule that the adapter and the simulator share. Property tests hold the host rule's sort,
top-k tie order and ``searchsorted`` to torch's own CPU kernels.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from group_admission._host_rules.ragen import _torch_searchsorted, _torch_sort, _torch_topk, select_top_groups
from group_admission.adapters.ragen import SUPPORTED_VERSIONS, RagenSelection, select_groups

NAN, INF = float("nan"), float("inf")
GOLDEN = json.loads(Path(__file__).with_name("ragen_selection_golden.json").read_text(encoding="utf-8"))


def _select(scores, candidates=None, **params):
    chosen = select_groups(
        torch,
        torch.tensor(scores, dtype=torch.float32),
        RagenSelection(**params),
        candidates=None if candidates is None else torch.tensor(candidates),
    )
    assert chosen.dtype == torch.long
    return chosen.tolist()


# (scores, params, expected kept groups in RAGEN's order, the code path it pins)
HAND_TABLE = [
    # The examples. threshold = 0.6 * 10 - 0.01 = 5.99: 4 + 3 reaches it.
    ([4.0, 3.0, 2.0, 1.0], {"value": 0.6}, [0, 1]),
    # Zero group excluded first; threshold = 0.9 * 5 - 0.01 = 4.49 needs 3 + 1 + 1.
    ([3.0, 1.0, 1.0, 0.0], {"value": 0.9, "include_zero": False}, [0, 1, 2]),
    # value >= 1 keeps every group, zeros included ...
    ([4.0, 2.0, 0.0, 0.0], {"value": 1.0}, [0, 1, 2, 3]),
    # ... unless include_zero is false: then it only drops the zero groups.
    ([4.0, 2.0, 0.0, 0.0], {"value": 1.0, "include_zero": False}, [0, 1]),
    # All-zero mass: the threshold is <= 0, the walk stops at once and keeps nothing.
    ([0.0, 0.0, 0.0], {"value": 0.9}, []),
    # All groups zero and excluded: empty before any strategy runs.
    ([0.0, 0.0], {"strategy": "top_k", "value": 0.5, "include_zero": False}, []),
    # Linear smallest: ascending walk 1, 2, 3 reaches 0.5 * 10 - 0.01 = 4.99.
    ([4.0, 3.0, 2.0, 1.0], {"value": 0.5, "filter_type": "smallest"}, [3, 2, 1]),
    # Negative scores (reward-mean metric): the walk stops at the first score <= 0.
    ([-1.0, 2.0, 3.0], {"value": 0.9, "metric": "reward"}, [2, 1]),
    # A mass that sums to zero gives a negative threshold: nothing is taken.
    ([1.0, -1.0], {"value": 0.9, "metric": "reward"}, []),
    # Softmax over tied logits is uniform: 1/3 < 0.6 <= 2/3, so two groups.
    ([1.0, 1.0, 1.0], {"value": 0.6, "top_p_prob_mode": "softmax"}, [0, 1]),
    # Softmax on candidates only, zeros excluded.
    ([10.0, 1.0, 0.0, 0.0], {"value": 0.9, "top_p_prob_mode": "softmax", "include_zero": False}, [0]),
    # top_k keeps int(value * num_groups) groups, best first.
    ([0.5, 2.0, 1.0, 0.1], {"strategy": "top_k", "value": 0.5}, [1, 2]),
    ([0.5, 2.0, 1.0, 0.1], {"strategy": "top_k", "value": 0.5, "filter_type": "smallest"}, [3, 0]),
    # top_k never keeps fewer than one group ...
    ([0.5, 2.0, 1.0, 0.1], {"strategy": "top_k", "value": 0.1}, [1]),
    # ... and counts the fraction over every group, capped by the candidates left.
    ([0.0, 0.0, 0.0, 5.0], {"strategy": "top_k", "value": 0.75, "include_zero": False}, [3]),
    ([0.5, 2.0, 1.0, 0.1], {"strategy": "top_k_abs", "value": 3.0}, [1, 2, 0]),
    ([0.5, 2.0, 1.0, 0.1], {"strategy": "top_k_abs", "value": 100.0}, [1, 2, 0, 3]),
    # min_p largest keeps scores >= max * value (here >= 2).
    ([4.0, 3.0, 2.0, 1.0], {"strategy": "min_p", "value": 0.5}, [0, 1, 2]),
    # min_p smallest keeps scores <= min / value (here <= 2).
    ([4.0, 3.0, 2.0, 1.0], {"strategy": "min_p", "value": 0.5, "filter_type": "smallest"}, [2, 3]),
    # Groups of one sample: every std is NaN, so is the softmax and its cumulative sum;
    # torch.searchsorted passes every NaN, so RAGEN keeps every group.
    ([NAN, NAN, NAN], {"value": 0.9, "top_p_prob_mode": "softmax"}, [0, 1, 2]),
    # One infinite score: softmax gives NaN everywhere (inf - inf), and again all are kept.
    ([INF, 1.0, 0.5], {"value": 0.5, "top_p_prob_mode": "softmax"}, [0, 1, 2]),
    # A NaN sum makes the linear threshold NaN: the walk takes every group, then keeps none.
    ([NAN, 1.0, 0.5], {"value": 0.5}, []),
    # NaN is not > 1e-10: with include_zero false a one-sample group is never a candidate.
    ([NAN, 1.0, 0.5], {"value": 0.5, "top_p_prob_mode": "softmax", "include_zero": False}, [1]),
]


class TestHandTable:
    @pytest.mark.parametrize(("scores", "params", "expected"), HAND_TABLE)
    def test_matches_ragen(self, scores, params, expected):
        """Each RAGEN code path keeps the groups worked out from its source."""
        assert expected == _select(scores, **params)


class TestGoldenTable:
    def test_golden_pins_ragen_commit(self):
        """The golden cases were produced from the RAGEN commit the adapter mirrors."""
        assert GOLDEN["ragen_commit"].startswith("20daedc")
        assert len(GOLDEN["cases"]) == 560
        assert sum(not np.isfinite(case["scores"]).all() for case in GOLDEN["cases"]) >= 130
        assert {"ragen": f"mll-lab-nu/RAGEN@{GOLDEN['ragen_commit']}"} == SUPPORTED_VERSIONS

    @pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: f"{c['strategy']}-{len(c['scores'])}")
    def test_matches_ragen_output(self, case):
        """Every drawn case keeps exactly what RAGEN's own method kept, in its order."""
        params = {key: case[key] for key in ("strategy", "value", "filter_type", "include_zero")}
        params.update(top_p_prob_mode=case["top_p_prob_mode"], selection_eps=case["selection_eps"])

        assert case["expected"] == select_top_groups(case["scores"], RagenSelection(**params)).tolist()


# Binary-reward stds and integers: the ties RAGEN meets; NaN is a one-member group's std.
tied_scores = st.lists(
    st.sampled_from([0.0, 0.35355338, 0.46291006, 0.5175492, 1.0, 2.0, -1.0, float("nan")]),
    min_size=1,
    max_size=300,
)


class TestTorchTieOrder:
    @given(scores=tied_scores, descending=st.booleans())
    def test_sort_is_torch_sort(self, scores, descending):
        """Tied and NaN scores come out in torch.sort's CPU order, past its 16-element insertion sort."""
        values = np.asarray(scores, dtype=np.float32)

        expected = torch.sort(torch.tensor(values), descending=descending).indices.tolist()

        assert expected == _torch_sort(values, descending=descending).tolist()

    @given(scores=tied_scores, data=st.data())
    def test_topk_is_torch_topk(self, scores, data):
        """Tied and NaN scores come out in torch.topk's CPU order (nth_element or partial_sort)."""
        values = np.asarray(scores, dtype=np.float32)
        k = data.draw(st.integers(1, len(scores)))

        assert torch.topk(torch.tensor(values), k).indices.tolist() == _torch_topk(values, k).tolist()

    @given(
        values=st.lists(st.sampled_from([0.1, 0.25, 0.5, 0.9, 1.0, NAN]), max_size=40),
        value=st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0, 2.0]),
    )
    def test_searchsorted_is_torch_searchsorted(self, values, value):
        """A cumulative sum with NaN entries is searched as torch does: NaN passes as smaller."""
        cumulative = np.asarray(sorted(values, key=lambda v: (v != v, v)), dtype=np.float32)
        expected = torch.searchsorted(torch.tensor(cumulative), value).item()

        assert expected == _torch_searchsorted(cumulative, np.float32(value))

    def test_large_tied_batches_keep_torchs_choice(self):
        """With 40 tied groups and top_k, the kept groups are the ones torch's topk keeps."""
        scores = torch.tensor([0.46291006, 0.5175492] * 20)
        selection = RagenSelection(strategy="top_k_abs", value=7.0)

        assert torch.topk(scores, 7).indices.tolist() == select_groups(torch, scores, selection).tolist()


score_lists = st.lists(
    st.floats(min_value=-2, max_value=2, width=32, allow_nan=False).filter(lambda x: abs(x) > 1e-6),
    min_size=1,
    max_size=12,
)
selections = st.builds(
    RagenSelection,
    strategy=st.sampled_from(["top_p", "top_k", "top_k_abs", "min_p"]),
    value=st.sampled_from([0.0, 0.2, 0.5, 0.9, 1.0, 3.0]),
    filter_type=st.sampled_from(["largest", "smallest"]),
    top_p_prob_mode=st.sampled_from(["linear", "softmax"]),
    include_zero=st.just(False),
)


class TestCandidates:
    @given(scores=score_lists, selection=selections, data=st.data())
    def test_rejected_groups_behave_like_excluded_zero_groups(self, scores, selection, data):
        """Non-candidates are removed exactly as RAGEN removes zero groups (include_zero=False)."""
        candidates = data.draw(st.lists(st.booleans(), min_size=len(scores), max_size=len(scores)))
        zeroed = [score if keep else 0.0 for score, keep in zip(scores, candidates, strict=True)]

        expected = select_groups(torch, torch.tensor(zeroed), selection).tolist()

        assert (
            expected
            == select_groups(
                torch, torch.tensor(scores), selection, candidates=torch.tensor(candidates)
            ).tolist()
        )

    @given(scores=score_lists, selection=selections, data=st.data())
    def test_only_candidates_are_selected(self, scores, selection, data):
        """A selection never contains a group that was not a candidate, nor a repeat."""
        candidates = data.draw(st.lists(st.booleans(), min_size=len(scores), max_size=len(scores)))

        chosen = select_groups(torch, torch.tensor(scores), selection, candidates=torch.tensor(candidates))

        assert len(set(chosen.tolist())) == chosen.numel()
        assert all(candidates[i] for i in chosen.tolist())

    def test_all_candidates_equals_no_mask(self):
        """An all-true candidate mask is the same as RAGEN's unrestricted selection."""
        scores = torch.tensor([0.3, 0.0, 0.9, 0.4])
        selection = RagenSelection(value=0.7)

        assert (
            select_groups(torch, scores, selection).tolist()
            == select_groups(torch, scores, selection, candidates=torch.ones(4, dtype=torch.bool)).tolist()
        )

    def test_no_candidates_selects_nothing_for_every_strategy(self):
        """With every group rejected, no strategy (not even top_k's at-least-one) keeps a group."""
        for strategy in ("top_p", "top_k", "top_k_abs", "min_p"):
            assert [] == _select([1.0, 2.0], candidates=[False, False], strategy=strategy, value=0.5)


class TestRagenSelectionConfig:
    def test_defaults_are_ragen_base_yaml(self):
        """The defaults are RAGEN's base.yaml selection defaults, which keep everything."""
        selection = RagenSelection()

        assert {
            "strategy": "top_p",
            "value": 1.0,
            "filter_type": "largest",
            "include_zero": True,
            "top_p_prob_mode": "linear",
            "selection_eps": 0.01,
            "metric": "reward_variance",
        } == selection.to_dict()
        assert selection.keeps_all

    @pytest.mark.parametrize(
        ("params", "keeps_all"),
        [
            ({"value": 0.9}, False),
            ({"value": 1.5}, True),
            ({"value": 1.0, "include_zero": False}, False),
            ({"strategy": "top_k", "value": 1.0}, False),
        ],
    )
    def test_keeps_all(self, params, keeps_all):
        """Only top_p with value >= 1 and zeros included is RAGEN's no-filter setting."""
        assert keeps_all == RagenSelection(**params).keeps_all

    @pytest.mark.parametrize(("alias", "metric"), [("reward_std", "reward_variance"), ("REWARD", "reward")])
    def test_metric_aliases(self, alias, metric):
        """Metric names are lower-cased and reward_std means reward_variance, as in RAGEN."""
        assert metric == RagenSelection(metric=alias).metric

    @pytest.mark.parametrize(
        ("params", "error", "message"),
        [
            (
                {"strategy": "top_q"},
                ValueError,
                "'strategy' must be one of 'top_p', 'top_k', 'top_k_abs', 'min_p' (got 'top_q')",
            ),
            ({"value": -0.1}, ValueError, "'value' must be >= 0 (got -0.1)"),
            ({"value": float("nan")}, ValueError, "'value' must be finite (got nan)"),
            ({"value": "0.5"}, TypeError, "'value' must be a real number (got '0.5')"),
            (
                {"filter_type": "std"},
                ValueError,
                "'filter_type' must be one of 'largest', 'smallest' (got 'std')",
            ),
            ({"include_zero": "yes"}, TypeError, "'include_zero' must be a bool (got 'yes')"),
            (
                {"top_p_prob_mode": "nucleus"},
                ValueError,
                "'top_p_prob_mode' must be one of 'linear', 'softmax' (got 'nucleus')",
            ),
            ({"selection_eps": -1.0}, ValueError, "'selection_eps' must be >= 0 (got -1.0)"),
            (
                {"metric": "entropy"},
                ValueError,
                "'metric' must be one of 'reward', 'reward_sum', 'reward_variance' (got 'entropy')",
            ),
        ],
    )
    def test_bad_input(self, params, error, message):
        """Every bad parameter is named, with the requirement and the value."""
        with pytest.raises(error) as info:
            RagenSelection(**params)

        assert message == str(info.value)
