"""
The ROLL adapter against ROLL's own code, loaded from ROLL's source when ``ROLL_SRC`` names it.

ROLL is never installed: ``.ci/roll-contracts`` puts ``ROLL_SRC`` on ``PYTHONPATH`` (so that the
adapter's rollout loop subclasses ROLL's own; the doubles-based tests need it off, so they run
in a process of their own) and installs what ROLL's modules import. Real here:
``DataProto`` (``from_dict``, row indexing, ``concat``), ``safe_import_class``, ROLL's
``query_filter`` and ``UserDefinedRolloutLoop``, ``RewardFilterConfig``, ``reduce_metrics``, the
agentic ``GroupFilter`` and the ``GroupQueue`` that calls a group filter. Checked against
alibaba/ROLL 8eb27cc2dc34c4d1310b169d9b86d339004d811a.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from group_admission.adapters import roll as roll_adapter

LOOP_PATH = "group_admission.adapters.roll.AdmissionRolloutLoop"
FILTER_PATH = "group_admission.adapters.roll.AdmissionGroupFilter"
STD = {"policy": {"min_reward_std": 1e-6}, "max_rejection_ratio": None}
GOOD, DEAD = [1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]
MODULES = {
    "protocol": "roll.distributed.scheduler.protocol",
    "imports": "roll.utils.import_utils",
    "loop": "roll.distributed.scheduler.user_defined_rollout_loop",
    "rlvr_config": "roll.pipeline.rlvr.rlvr_config",
    "functionals": "roll.utils.functionals",
    "scheduler": "roll.distributed.scheduler.rollout_scheduler",
    "agentic": "roll.pipeline.agentic.agentic_pipeline",
}


@pytest.fixture(scope="module")
def roll() -> types.SimpleNamespace:
    """
    ROLL's real modules, imported from ``ROLL_SRC``, which must be on ``PYTHONPATH``.

    The adapter picks its loop's base class when it is first imported, before any fixture.
    ROLL's logger writes under ``$ROLL_LOG_DIR`` (default ``./output/logs``): the lane sets it.
    """
    source = os.environ.get("ROLL_SRC")
    if not source:
        pytest.skip("ROLL_SRC is not set: point it at a ROLL source tree (bash .ci/roll-contracts)")
    if not (Path(source) / "roll" / "distributed" / "scheduler" / "protocol.py").is_file():
        pytest.fail(f"ROLL_SRC={source!r} holds no roll/distributed/scheduler/protocol.py")
    if not roll_adapter.ROLL_IMPORTABLE:
        pytest.fail("ROLL was not importable when the adapter loaded: put ROLL_SRC on PYTHONPATH too")
    modules = {name: importlib.import_module(path) for name, path in MODULES.items()}
    return types.SimpleNamespace(**modules)


@pytest.fixture(autouse=True)
def _fresh_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(roll_adapter.AGENTIC_SETTINGS_ENV, raising=False)
    roll_adapter.reset()
    yield
    roll_adapter.reset()


# -- builders: ROLL's own DataProto, filled the way ROLL fills it --------------------------
def responses(roll: Any, rewards: list[float], *, step: int = 0) -> list[Any]:
    """One prompt's rewarded responses as the rollout loop holds them: ``req[[idx]]`` per row."""
    import numpy as np
    import torch

    rows = len(rewards)
    input_ids = torch.tensor([[5, 6, 10 + i, 20 + i] for i in range(rows)])
    response_mask = torch.tensor([[0, 0, 1, 1]] * rows)
    reward = torch.tensor(rewards, dtype=torch.float16)
    req = roll.protocol.DataProto.from_dict(
        {
            "input_ids": input_ids,
            "attention_mask": torch.ones_like(input_ids),
            "response_mask": response_mask,
            "response_level_rewards": reward,
            "scores": reward.clone(),
        },
        non_tensors={"domain": np.array(["math_rule"] * rows, dtype=object)},
        meta_info={"global_step": step, "metrics": {"reward/mean@mean": float(np.mean(rewards))}},
    )
    return [req[[idx]] for idx in range(rows)]


def pipeline(roll: Any, settings: Any = STD, filter_type: str = "no_filter", **filter_args: Any) -> Any:
    args = {**filter_args, roll_adapter.RLVR_SETTINGS_KEY: settings}
    filter_config = roll.rlvr_config.RewardFilterConfig(type=filter_type, filter_args=args)
    reward = types.SimpleNamespace(query_filter_config=filter_config)  # the field ROLL reads
    return types.SimpleNamespace(rewards={"math_rule": reward})


def trajectory(roll: Any, score: float, *, env_id: int = 0, drop_flag: bool = False) -> Any:
    """A ``TrajEnvManager.formulate_rollouts`` rollout: one row, the episode score at its last token."""
    import numpy as np
    import torch

    input_ids = torch.tensor([[1, 2, 40 + env_id, 50 + env_id, 0]])
    response_mask = torch.tensor([[False, False, True, True, False]])
    scores = torch.zeros((1, 5))
    scores[0, 3] = score
    return roll.protocol.DataProto.from_dict(
        {
            "input_ids": input_ids,
            "attention_mask": (input_ids != 0).long(),
            "response_mask": response_mask,
            "scores": scores,
        },
        non_tensors={
            "episode_scores": np.array([score], dtype=object),
            "env_ids": np.array([env_id], dtype=object),
            "tags": np.array(["SimpleSokoban"], dtype=object),
        },
        meta_info={"metrics": {"env/SimpleSokoban/success": float(score > 0)}, "drop_flag": drop_flag},
    )


def agentic_configs(settings: str | None) -> tuple[Any, Any]:
    env_manager = types.SimpleNamespace(group_size=2, group_filter_cls=FILTER_PATH, system_envs={})
    if settings is not None:
        env_manager.system_envs[roll_adapter.AGENTIC_SETTINGS_ENV] = settings
    return types.SimpleNamespace(train_env_manager=env_manager, system_envs={}), env_manager


# -- RLVR ----------------------------------------------------------------------------------
def test_rolls_safe_import_class_loads_our_loop_as_a_subclass_of_its_own(roll: Any) -> None:
    loop_cls = roll.imports.safe_import_class(LOOP_PATH)

    assert loop_cls is roll_adapter.AdmissionRolloutLoop
    assert issubclass(loop_cls, roll.loop.UserDefinedRolloutLoop)
    assert isinstance(loop_cls(), roll.loop.UserDefinedRolloutLoop)  # ROLL builds it with no arguments


@pytest.mark.parametrize(
    ("rewards", "theirs", "ours"),
    [(GOOD, True, True), (DEAD, False, False), ([0.0] * 4, False, False), ([1.0], True, False)],
    ids=["informative", "all_correct", "all_wrong", "one_response"],
)
def test_query_filter_on_rolls_dataprotos_against_rolls_std_filter(
    roll: Any, rewards: list[float], theirs: bool, ours: bool
) -> None:
    config = pipeline(roll, filter_type="std_filter", std_threshold=0.0)
    data_list = responses(roll, rewards)

    assert theirs is roll.loop.query_filter(data_list, config)
    assert ours is roll_adapter.query_filter(data_list, config)
    # ROLL keeps a one-response prompt (std undefined); we reject it as a tie.


def test_kept_prompts_carry_the_counts_into_rolls_own_metric_reduction(roll: Any) -> None:
    config = pipeline(roll)
    committed: list[Any] = []
    for rewards in (DEAD, GOOD, [float("nan")] * 4, GOOD):
        data_list = responses(roll, rewards)
        if roll_adapter.query_filter(data_list, config):
            committed += data_list

    batch = roll.protocol.DataProto.concat(committed)
    metrics = roll.functionals.reduce_metrics(batch.meta_info["metrics"])

    assert 8 == len(batch)
    assert {
        "group_admission/candidate_group_count@sum": 4.0,
        "group_admission/admitted_group_count@sum": 2.0,
        "group_admission/exact_dead_group_count@sum": 1.0,
        "group_admission/externally_rejected_group_count@sum": 1.0,
    }.items() <= {k: float(v) for k, v in metrics.items()}.items()
    # Rows of one prompt share meta_info in ROLL: only one row per kept prompt carries the counts.
    carried = ["group_admission/candidate_group_count@sum" in r.meta_info["metrics"] for r in committed]
    assert [True, False, False, False, True, False, False, False] == carried


def test_the_drop_budget_holds_on_rolls_objects(roll: Any) -> None:
    config = pipeline(roll, {"policy": {"min_reward_std": 1e-6}, "max_rejection_ratio": 0.5})

    kept = [roll_adapter.query_filter(responses(roll, DEAD, step=1), config) for _ in range(4)]
    stats = roll_adapter.admission_stats("math_rule")

    assert [True, False, True, False] == kept
    assert (4, 4, 2) == (stats.candidates, stats.exact_dead, stats.fallback_admitted)


class Context:
    """
    The ``RolloutContext`` calls ROLL's default loop makes, for one prompt.

    Two prompt tokens, each response one token then EOS (2), ``rewards`` its response-level rewards.
    """

    def __init__(self, roll: Any, config: Any, rewards: list[float], *, is_val: bool = False) -> None:
        self.roll, self.rewards = roll, rewards
        self.pipeline_config, self.is_val, self.prompt_id = config, is_val, 7
        self.is_num_return_sequences_expand = False
        self.sequence_length, self.prompt_length = 6, 2
        self.meta_info = {"generation_config": {"num_return_sequences": len(rewards)}, "global_step": 3}

    def get_request_data(self, meta_info: dict[str, Any]) -> tuple[Any, str]:
        import copy

        import numpy as np
        import torch

        request = self.roll.protocol.DataProto.from_dict(
            {
                "input_ids": torch.tensor([[5, 6]]),
                "attention_mask": torch.ones((1, 2), dtype=torch.long),
                "position_ids": torch.tensor([[0, 1]]),
            },
            non_tensors={"domain": np.array(["math_rule"], dtype=object)},
            meta_info=copy.deepcopy(meta_info),
        )
        return request, "math_rule"

    @contextlib.asynccontextmanager
    async def do_generate_and_reward(self, max_concurrency: int) -> Any:
        yield

    async def generate(self, req: Any, domain: str) -> Any:
        count = req.meta_info["generation_config"]["num_return_sequences"]
        meta = {
            "finish_reasons": ["stop"] * count,
            "output_token_ids": [[10 + i, 2] for i in range(count)],
            "eos_token_id": 2,
            "pad_token_id": 0,
        }
        return self.roll.protocol.DataProto(meta_info=meta)

    async def compute_rewards(self, req: Any, domain: str) -> Any:
        import torch

        reward = torch.tensor(self.rewards[: len(req)], dtype=torch.float16)
        return self.roll.protocol.DataProto.from_dict(
            {"response_level_rewards": reward}, meta_info={"metrics": {}}
        )


@pytest.mark.parametrize(
    ("rewards", "is_val", "kept"),
    [(GOOD, False, True), (DEAD, False, False), (DEAD, True, True)],
    ids=["informative", "all_correct", "validation"],
)
def test_rolls_own_rollout_loop_runs_under_ours(
    roll: Any, rewards: list[float], is_val: bool, kept: bool
) -> None:
    loop = roll.imports.safe_import_class(LOOP_PATH)()

    out = asyncio.run(loop.process_new_prompt(Context(roll, pipeline(roll), rewards, is_val=is_val)))
    stats = roll_adapter.admission_stats("math_rule")

    assert kept is (out is not None)
    assert (0 if is_val else 1) == stats.candidates
    if out is not None:
        assert len(rewards) == len(out)
        got = [float(r.batch["response_level_rewards"][0]) for r in out]
        assert rewards == got
        if not is_val:
            assert 1 == out[0].meta_info["metrics"]["group_admission/candidate_group_count@sum"]


# -- agentic -------------------------------------------------------------------------------
def queue(roll: Any, group_filter: Any) -> Any:
    """ROLL's own ``GroupQueue`` (group size 2), which calls ``group_filter.filter`` on full groups."""
    from tqdm import tqdm

    return roll.scheduler.GroupQueue(
        group_id=0,
        progress_bar=tqdm(disable=True),
        group_size=2,
        group_size_redundancy=0,
        max_traj_per_env=None,
        async_generation_ratio=0,
        group_filter=group_filter,
    )


def fill(group_queue: Any, groups: list[list[Any]]) -> tuple[list[tuple[Any, ...]], int]:
    """Put each group into a fresh episode: the queued groups' scores, and the empty episodes."""
    for group in groups:
        episode = group_queue.next_episode_id
        group_queue.advance_group(create_step=0)
        for rollout in group:
            group_queue.put(episode, 0, rollout)
    queued = [group_queue.groups[e].rollouts for e in sorted(group_queue.groups)]
    scores = [
        tuple(None if r is None else r.non_tensor_batch["episode_scores"][0] for r in g) for g in queued
    ]
    return [s for s in scores if s], len([s for s in scores if not s])


def test_rolls_default_filter_keeps_every_group_and_ours_drops_the_dead_ones(roll: Any) -> None:
    config, env_manager = agentic_configs("policy: {min_reward_std: 1.0e-6}\nmax_rejection_ratio: null")
    ours_cls = roll.imports.safe_import_class(env_manager.group_filter_cls)
    ours = ours_cls(config, env_manager, "train")
    theirs = roll.agentic.GroupFilter(config, env_manager, "train")
    scores = [(1.0, 1.0), (1.0, 0.0), (0.0, 0.0), (0.0, 1.0)]

    def groups() -> list[list[Any]]:
        return [[trajectory(roll, s, env_id=i) for i, s in enumerate(pair)] for pair in scores]

    theirs_queue, ours_queue = queue(roll, theirs), queue(roll, ours)
    assert (scores, 0) == fill(theirs_queue, groups())
    assert 0 == theirs_queue.group_filter_count
    # ROLL replaces each dropped episode with a new, empty one.
    assert ([(1.0, 0.0), (0.0, 1.0)], 2) == fill(ours_queue, groups())
    assert 2 == ours_queue.group_filter_count
    assert (4, 2, 2) == (ours.stats.candidates, ours.stats.admitted, ours.stats.exact_dead)


def test_kept_groups_carry_the_counts_into_rolls_batch_metrics(roll: Any) -> None:
    config, env_manager = agentic_configs("policy: {min_reward_std: 1.0e-6}\nmax_rejection_ratio: null")
    group_filter = roll_adapter.AdmissionGroupFilter(config, env_manager, "train")
    kept: list[Any] = []
    for pair in [(1.0, 1.0), (1.0, 0.0), (0.0, 0.0), (0.0, 1.0)]:
        group = [trajectory(roll, s, env_id=i) for i, s in enumerate(pair)]
        if not group_filter.filter(group_id=0, episode_id=0, group=group):
            kept += group

    metrics = roll.functionals.reduce_metrics(roll.protocol.DataProto.concat(kept).meta_info["metrics"])

    assert {
        "group_admission/candidate_group_count@sum": 4.0,
        "group_admission/admitted_group_count@sum": 2.0,
        "group_admission/exact_dead_group_count@sum": 2.0,
    }.items() <= {k: float(v) for k, v in metrics.items()}.items()
    assert 0.5 == pytest.approx(float(metrics["env/SimpleSokoban/success"]))


def test_placeholder_and_missing_trajectories_in_rolls_queue(roll: Any) -> None:
    config, env_manager = agentic_configs("max_rejection_ratio: 0.0")
    group_filter = roll_adapter.AdmissionGroupFilter(config, env_manager, "train")
    group_queue = queue(roll, group_filter)

    kept = fill(
        group_queue,
        [[None, trajectory(roll, 1.0)], [trajectory(roll, 0.0, drop_flag=True), trajectory(roll, 1.0)]],
    )

    # A missing trajectory is dropped whatever the guard; a drop_flag one is guarded (limit 0).
    assert ([(0.0, 1.0)], 1) == kept
    assert 1 == group_queue.group_filter_count
    stats = group_filter.stats
    assert (2, 1) == (stats.external, stats.fallback_admitted)
    assert {"missing_trajectory", "drop_flag"} <= set(stats.external_details)
