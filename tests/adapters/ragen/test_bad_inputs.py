"""
Bad inputs to the RAGEN adapter's readers of host objects: the batch, its columns, the config.

A structural problem (the batch or config is not RAGEN's) raises, naming the field, the
requirement and the value; a data problem inside a well-formed batch rejects its group as
``external`` and is counted, never raised.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from group_admission.adapters.ragen import RagenGroupAdmissionFilter, RagenSelection, select_groups

from .ragen_types import base_config, make_batch

SIMILAR = {"max_mean_pairwise_similarity": 0.9}


def _filter(batch: Any, policy: Any = None, groups: int = 2) -> Any:
    return RagenGroupAdmissionFilter(policy, num_groups=groups).filter(batch)


def _with(column: str, value: Any, rewards: tuple[float, ...] = (1, 0, 1, 0)) -> Any:
    batch = make_batch(list(rewards), group_ids=[0, 0, 1, 1])
    batch.non_tensor_batch[column] = value
    return batch


def _scores(value: Any) -> Any:
    return SimpleNamespace(batch={"original_rm_scores": value}, non_tensor_batch={}, meta_info={})


def _config(**changes: Any) -> Any:
    config = base_config(rollout_filter_strategy="group_admission")
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = config
        for part in parents:
            node = node[part]
        node[leaf] = value
    return config


CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    (
        "no tensors at all",
        lambda: _filter(SimpleNamespace(non_tensor_batch={})),
        ValueError,
        "the RAGEN batch must hold batch.batch['original_rm_scores'] (the per-token scores RAGEN's "
        "ContextManager writes) (got keys [])",
    ),
    (
        # A plain dict raised KeyError when the kept rows were masked, after judging.
        "batch.batch a plain dict",
        lambda: _filter(_scores(torch.tensor([[1.0], [0.0], [1.0], [0.0]]))),
        TypeError,
        "'batch.batch' must be a TensorDict, as in a verl DataProto (got a dict with keys "
        "['original_rm_scores'])",
    ),
    (
        "the batch a plain dict",
        lambda: _filter({"original_rm_scores": torch.zeros(4, 1)}),
        TypeError,
        "'batch' must be a verl DataProto (got a dict with keys ['original_rm_scores'])",
    ),
    (
        "scores as numpy",
        lambda: _filter(_scores(np.zeros((4, 3)))),
        TypeError,
        "batch.batch['original_rm_scores'] must be a torch tensor (rows, tokens) (got array([[0., 0., "
        "0.],\n       [0., 0., 0.],\n       [0., 0., 0.],\n       [0., 0.... of type ndarray)",
    ),
    (
        "3-D scores",
        lambda: _filter(_scores(torch.zeros(4, 3, 2))),
        ValueError,
        "batch.batch['original_rm_scores'] must be a 2-D tensor (rows, tokens) (got (4, 3, 2))",
    ),
    (
        "group_ids too short",
        lambda: _filter(_with("group_ids", np.array([0, 0, 1]))),
        ValueError,
        "non_tensor_batch['group_ids'] must have one entry per row (4) (got 3)",
    ),
    (
        "group_ids a scalar",
        lambda: _filter(_with("group_ids", 7)),
        ValueError,
        "non_tensor_batch['group_ids'] must have one entry per row (4) (got 7)",
    ),
    (
        "group_ids of lists",
        lambda: _filter(_with("group_ids", np.array([[0, 1]] * 4))),
        TypeError,
        "non_tensor_batch['group_ids'] must hold one id per row (row 0 has [0, 1] of type list)",
    ),
    (
        "episode_ids too long",
        lambda: _filter(_with("episode_ids", np.arange(5))),
        ValueError,
        "non_tensor_batch['episode_ids'] must have one entry per row (4) (got 5)",
    ),
    (
        "messages_list too short",
        lambda: _filter(_with("messages_list", np.array([[{"role": "assistant"}]] * 3)), SIMILAR),
        ValueError,
        "non_tensor_batch['messages_list'] must have one entry per row (4) (got 3)",
    ),
    (
        "env_groups a string",
        lambda: RagenGroupAdmissionFilter.from_config(_config(es_manager__train__env_groups="8")),
        TypeError,
        "'es_manager.train.env_groups' must be an integer (got '8')",
    ),
    (
        "env_groups zero",
        lambda: RagenGroupAdmissionFilter.from_config(_config(es_manager__train__env_groups=0)),
        ValueError,
        "'es_manager.train.env_groups' must be >= 1 (got 0)",
    ),
    (
        "policy settings a number",
        lambda: RagenGroupAdmissionFilter.from_config(
            _config(actor_rollout_ref__rollout__group_admission={"policy": 5})
        ),
        TypeError,
        "'config' must be a GroupAdmissionConfig, a mapping or None (got 5)",
    ),
    (
        "filter_loss_scaling unknown",
        lambda: RagenGroupAdmissionFilter.from_config(
            _config(actor_rollout_ref__actor__filter_loss_scaling="log")
        ),
        ValueError,
        "'actor_rollout_ref.actor.filter_loss_scaling' must be one of 'none', 'linear', 'sqrt' (got 'log')",
    ),
    (
        "selection not a RagenSelection",
        lambda: select_groups(torch, torch.tensor([1.0]), "top_p"),
        TypeError,
        "'selection' must be a RagenSelection (got 'top_p')",
    ),
    (
        "scores per member, not per group",
        lambda: select_groups(torch, torch.ones(2, 3), RagenSelection()),
        ValueError,
        "'scores' must hold one score per group (1-D) (got shape (2, 3))",
    ),
    (
        "candidates of another length",
        lambda: select_groups(torch, torch.ones(3), RagenSelection(), candidates=torch.ones(2, dtype=bool)),
        ValueError,
        "'candidates' must hold one flag per group (3) (got shape (2,))",
    ),
    (
        "selection metric unknown to RAGEN's reward filter",
        lambda: RagenSelection(metric="length"),
        ValueError,
        "'metric' must be one of 'reward', 'reward_sum', 'reward_variance' (got 'length')",
    ),
]


@pytest.mark.parametrize(("name", "call", "error", "message"), CASES, ids=[case[0] for case in CASES])
def test_bad_input(name, call, error, message):
    """Each bad host object fails with one message naming the field, requirement and value."""
    with pytest.raises(error) as info:
        call()

    assert message == str(info.value), name


# Data problems inside a well-formed batch: (rewards, column overrides, the external detail).
DATA_CASES = [
    ((1, 0, float("nan"), 1), {}, "non_finite_reward"),
    ((1, 0, 1, float("-inf")), {}, "non_finite_reward"),
    (
        (1, 0, 1, 0),
        {"messages_list": np.array(["no", "turns", "at", "all"], dtype=object)},
        "missing_completion",
    ),
    (
        (1, 0, 1, 0),
        {"messages_list": np.array([[{"role": "user", "content": "q"}]] * 4, dtype=object)},
        "missing_completion",
    ),
]


@pytest.mark.parametrize(("rewards", "columns", "detail"), DATA_CASES)
def test_data_problems_are_counted_not_raised(rewards, columns, detail):
    """A bad value inside a RAGEN batch rejects its group as external, with the detail counted."""
    batch = make_batch(list(rewards), group_ids=[0, 0, 1, 1])
    batch.non_tensor_batch.update(columns)
    adapter = RagenGroupAdmissionFilter(SIMILAR if columns else None, num_groups=2)

    _, metrics = adapter.filter(batch)

    assert metrics["rollout/group_admission/externally_rejected_group_count"] >= 1
    assert detail in adapter.stats.external_details
