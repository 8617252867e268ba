"""Bad data in ROLL's DataProtos: each row is rejected as external with a named detail, never raised."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from adapters.roll import roll_types
from group_admission.adapters import roll as roll_adapter
from group_admission.adapters.roll import _loop

STD = {"policy": {"min_reward_std": 1e-6}, "max_rejection_ratio": None}
AGENTIC = "policy: {min_reward_std: 1.0e-6}\nmax_rejection_ratio: null"
GOOD = [1.0, 0.0, 1.0, 0.0]


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    roll_adapter.reset()
    yield
    roll_adapter.reset()


class Proto:
    """The parts of a DataProto the readers use, holding whatever a broken pipeline might put there."""

    def __init__(self, rows: int = 2, batch: Any = None, non_tensor_batch: Any = None, **meta: Any) -> None:
        self.batch = {} if batch is None else batch
        self.non_tensor_batch = {"domain": np.array(["math_rule"] * rows, dtype=object)}
        self.non_tensor_batch.update(non_tensor_batch or {})
        self.meta_info = {"metrics": {}, **meta}
        self._rows = rows

    def __len__(self) -> int:
        return self._rows


def without(data: Any, part: str) -> Any:
    """``data`` with ``batch`` or ``non_tensor_batch`` set to None, as ROLL before its BatchProxy allowed."""
    data.__class__ = type(f"Without_{part}", (type(data),), {part: None})
    return data


def tensorless(data: Any) -> Any:
    """``data`` whose BatchProxy wraps no TensorDict (ROLL from v0.3 on)."""
    data._batch = None
    return data


def objects(*values: Any) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def rlvr_config(*domains: str) -> Any:
    reward = roll_types.RewardConfig(roll_types.RewardFilterConfig("no_filter", {"group_admission": STD}))  # type: ignore[arg-type]
    return roll_types.RLVRConfig(rewards=dict.fromkeys(domains or ("math_rule",), reward))


def rewards(*values: Any) -> Proto:
    return Proto(len(values), batch={"response_level_rewards": objects(*values)})


RLVR: list[tuple[str, Callable[[], list[Any]], str]] = [
    ("batch None", lambda: [without(roll_types.rlvr_responses(GOOD), "batch")], "missing_batch"),
    (
        "non_tensor_batch None",
        lambda: [without(roll_types.rlvr_responses(GOOD), "non_tensor_batch")],
        "missing_non_tensor_batch",
    ),
    (
        "a BatchProxy over no tensors",
        lambda: [tensorless(roll_types.rlvr_responses(GOOD))],
        "missing_response_level_rewards",
    ),
    ("a huge int reward", lambda: [rewards(10**400, 0.0)], "non_finite_reward"),
    ("a huge negative int reward", lambda: [rewards(-(10**400), 0.0)], "non_finite_reward"),
    ("a None among the rewards", lambda: [rewards(None, 1.0)], "missing_reward"),
    ("a text reward", lambda: [rewards("1.0", 0.0)], "non_numeric_reward"),
    ("a list reward", lambda: [rewards([1.0], 0.0)], "non_scalar_reward"),
    (
        "rewards that are one number",
        lambda: [Proto(2, batch={"response_level_rewards": 5})],
        "malformed_response_level_rewards",
    ),
    (
        "rewards of another shape",
        lambda: [Proto(2, batch={"response_level_rewards": np.zeros((2, 2))})],
        "malformed_response_level_rewards",
    ),
    ("a member that is not a DataProto", lambda: [rewards(1.0, 0.0), 3], "malformed_response"),
    ("an empty DataProto", lambda: [Proto(0)], "malformed_response"),
]


@pytest.mark.parametrize(("build", "detail"), [c[1:] for c in RLVR], ids=[c[0] for c in RLVR])
def test_query_filter_rejects_bad_responses_as_external(build: Callable[[], list[Any]], detail: str) -> None:
    config = rlvr_config()

    kept = roll_adapter.query_filter(build(), config)

    assert kept is False
    assert detail in roll_adapter.admission_stats().external_details


def test_the_rollout_loop_rejects_a_dataproto_without_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    roll_types.install(monkeypatch)
    spec = importlib.util.spec_from_file_location("group_admission.adapters.roll._loop_bad", _loop.__file__)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)

    async def damaged(self: Any, context: Any) -> list[Any]:
        return [without(roll_types.rlvr_responses(GOOD), "batch")]

    monkeypatch.setattr(roll_types.UserDefinedRolloutLoop, "process_new_prompt", damaged)
    config = rlvr_config()
    context = roll_types.RolloutContext(0, config, lambda _: roll_types.rlvr_responses(GOOD))
    context.domain = "math_rule"

    assert asyncio.run(module.AdmissionRolloutLoop().process_new_prompt(context)) is None
    assert {"missing_batch": 1, "missing_reward": 1} == roll_adapter.admission_stats().external_details


def test_responses_that_name_no_domain_use_the_only_domain_and_refuse_to_guess_among_several() -> None:
    one, two = rlvr_config(), rlvr_config("math_rule", "code")

    assert (
        roll_adapter.query_filter([without(roll_types.rlvr_responses(GOOD), "non_tensor_batch")], one)
        is False
    )
    with pytest.raises(
        ValueError, match=r"^'data_list' must hold DataProtos with a non_tensor_batch 'domain'"
    ):
        roll_adapter.query_filter([without(roll_types.rlvr_responses(GOOD), "non_tensor_batch")], two)


def trajectory(score: Any = 1.0, **parts: Any) -> Proto:
    """One agentic trajectory: ``episode_scores``, or with ``scores=`` token-level scores only."""
    if "scores" in parts:
        return Proto(1, batch={"scores": parts.pop("scores")})
    return Proto(1, non_tensor_batch={"episode_scores": objects(score)})


AGENTIC_CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("batch None", lambda: without(roll_types.traj_rollout(1.0), "batch"), "missing_batch"),
    (
        "non_tensor_batch None",
        lambda: without(roll_types.traj_rollout(1.0), "non_tensor_batch"),
        "missing_non_tensor_batch",
    ),
    ("token scores holding None", lambda: trajectory(scores=objects(0.0, None, 1.0)), "missing_token_score"),
    ("token scores holding text", lambda: trajectory(scores=objects(0.0, "1")), "non_numeric_reward"),
    ("a huge int token score", lambda: trajectory(scores=objects(0.0, 10**400)), "non_finite_reward"),
    ("a huge int episode score", lambda: trajectory(10**400), "non_finite_reward"),
    ("a None episode score", lambda: trajectory(None), "missing_reward"),
    (
        "episode scores that are one number",
        lambda: Proto(1, non_tensor_batch={"episode_scores": 5}),
        "malformed_episode_scores",
    ),
    ("no episode scores and no token scores", lambda: Proto(1), "missing_scores"),
    ("token scores None", lambda: trajectory(scores=None), "malformed_scores"),
    ("an empty trajectory", lambda: Proto(0), "malformed_trajectory"),
]


@pytest.mark.parametrize(
    ("build", "detail"), [c[1:] for c in AGENTIC_CASES], ids=[c[0] for c in AGENTIC_CASES]
)
def test_the_group_filter_rejects_bad_trajectories_as_external(build: Callable[[], Any], detail: str) -> None:
    env_manager = roll_types.EnvManagerConfig(system_envs={roll_adapter.AGENTIC_SETTINGS_ENV: AGENTIC})
    group_filter = roll_adapter.AdmissionGroupFilter(roll_types.AgenticConfig(), env_manager, "train")

    dropped = group_filter.filter(group_id=0, episode_id=0, group=[build(), trajectory(0.0)])

    assert dropped is True
    assert detail in group_filter.stats.external_details


def test_the_tables_cover_every_reader() -> None:
    assert len(RLVR) >= 10
    assert len(AGENTIC_CASES) >= 10
