"""The ROLL agentic adapter: AdmissionGroupFilter as ROLL's GroupQueue builds and calls it."""

from __future__ import annotations

import inspect
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from hypothesis import given
from hypothesis import strategies as st

import group_admission
from adapters.roll import roll_types
from group_admission import GroupAdmissionPolicy, SessionConfig
from group_admission.adapters import roll as roll_adapter
from group_admission.adapters.roll._hooks import read_trajectories
from strategies import configs, floats

FILTER_PATH = "group_admission.adapters.roll.AdmissionGroupFilter"
ENV = roll_adapter.AGENTIC_SETTINGS_ENV
STD = "policy: {min_reward_std: 1.0e-6}\nmax_rejection_ratio: null"


@pytest.fixture(autouse=True)
def _no_process_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)


def make_filter(settings: str | None = STD, mode: str = "train", *, where: str = "env_manager") -> Any:
    env_manager = roll_types.EnvManagerConfig(group_size=4, group_filter_cls=FILTER_PATH)
    config = roll_types.AgenticConfig(train_env_manager=env_manager)
    if settings is not None:
        owner = env_manager if where == "env_manager" else config
        owner.system_envs[ENV] = settings
    return roll_types.make_group_filter(config, env_manager, mode)


def trajectories(*scores: float) -> list[roll_types.DataProto]:
    return [roll_types.traj_rollout(s, env_id=i) for i, s in enumerate(scores)]


def drops(group_filter: Any, group: list[Any]) -> bool:
    return group_filter.filter(group_id=0, episode_id=0, group=group)


# -- contract ------------------------------------------------------------------------------
class TestContract:
    def test_constructor_and_filter_have_rolls_signatures(self) -> None:
        init = tuple(inspect.signature(roll_adapter.AdmissionGroupFilter.__init__).parameters)
        method = tuple(inspect.signature(roll_adapter.AdmissionGroupFilter.filter).parameters)
        theirs = tuple(inspect.signature(roll_types.GroupFilter.filter).parameters)

        assert ("self", "config", "env_manager_config", "mode") == init
        assert theirs == method

    def test_true_drops_the_group_and_starts_a_new_episode(self) -> None:
        queue = roll_types.GroupQueue(group_id=3, group_size=4, group_filter=make_filter())
        queue.advance_group(create_step=0)
        queue.advance_group(create_step=0)

        for rollout in trajectories(1.0, 1.0, 1.0, 1.0):
            queue.put(0, 0, rollout)
        for rollout in trajectories(1.0, 0.0, 1.0, 0.0):
            queue.put(1, 0, rollout)

        assert 1 == queue.group_filter_count
        assert [1] == [group.episode_id for group in queue.completed]
        assert [1, 2] == sorted(queue.groups)

    def test_filter_returns_a_bool(self) -> None:
        result = drops(make_filter(), trajectories(1.0, 0.0))

        assert result is False


# -- semantics -----------------------------------------------------------------------------
def step_group(*step_rewards: list[float]) -> list[roll_types.DataProto]:
    return [roll_types.step_rollout(r, env_id=i) for i, r in enumerate(step_rewards)]


def without_episode_scores(group: list[roll_types.DataProto]) -> list[roll_types.DataProto]:
    for data in group:
        del data._non_tensor_batch["episode_scores"]
    return group


SEMANTICS = [
    ("informative", trajectories(1.0, 0.0, 1.0, 0.0), False),
    ("all succeed", trajectories(1.0, 1.0, 1.0, 1.0), True),
    ("all fail", trajectories(0.0, 0.0, 0.0, 0.0), True),
    ("a missing trajectory", [None, *trajectories(1.0, 0.0, 1.0)], True),
    ("a drop_flag placeholder", [roll_types.placeholder_rollout(), *trajectories(1.0, 0.0, 1.0)], True),
    ("scores summed when episode_scores is absent", without_episode_scores(trajectories(1.0, 0.0)), False),
    ("ties on summed scores", without_episode_scores(trajectories(0.5, 0.5)), True),
    ("multi-step trajectories: episode score once each", step_group([0.5, 0.5], [1.0, 0.0]), True),
    ("multi-step trajectories that differ", step_group([1.0, 0.5], [0.0, 0.0]), False),
    ("non-finite score", trajectories(math.nan, 1.0), True),
    ("empty group", [], True),
]


@pytest.mark.parametrize(("group", "dropped"), [c[1:] for c in SEMANTICS], ids=[c[0] for c in SEMANTICS])
def test_semantics(group: list[Any], dropped: bool) -> None:
    assert dropped == drops(make_filter(), group)


def test_external_details_name_the_problem() -> None:
    group_filter = make_filter()
    drops(group_filter, [None, *trajectories(1.0, 0.0)])
    drops(group_filter, [roll_types.placeholder_rollout(), *trajectories(1.0, 0.0)])
    drops(group_filter, [object(), *trajectories(1.0, 0.0)])

    assert {"missing_trajectory": 1, "missing_reward": 2, "drop_flag": 1, "malformed_trajectory": 1} == (
        group_filter.stats.external_details
    )


def test_rows_of_one_trajectory_that_disagree_are_external() -> None:
    group = step_group([1.0, 0.0], [0.0, 0.0])
    group[0]._non_tensor_batch["episode_scores"][1] = 7.0

    assert drops(make_filter(), group) is True


class TestModes:
    def test_validation_is_never_filtered_or_counted_by_default(self) -> None:
        group_filter = make_filter(mode="val")

        assert drops(group_filter, trajectories(1.0, 1.0)) is False
        assert 0 == group_filter.stats.candidates

    def test_validation_is_filtered_when_configured(self) -> None:
        group_filter = make_filter(f"{STD}\nmodes: [train, val]", mode="val")

        assert drops(group_filter, trajectories(1.0, 1.0)) is True


# -- the drop-ratio guard ------------------------------------------------------------------
class TestGuard:
    def test_default_guard_keeps_the_cumulative_drop_ratio_at_most_one_half(self) -> None:
        group_filter = make_filter("policy: {min_reward_std: 1.0e-6}")

        dropped = [drops(group_filter, trajectories(1.0, 1.0)) for _ in range(6)]
        stats = group_filter.stats

        assert [False, True, False, True, False, True] == dropped
        assert (6, 6, 3) == (stats.candidates, stats.exact_dead, stats.fallback_admitted)

    @given(flags=st.lists(st.booleans(), min_size=1, max_size=40))
    def test_drop_flag_groups_are_guarded_exactly_like_rolls_own_filter(self, flags: list[bool]) -> None:
        ours = make_filter(None)
        theirs = roll_types.DropFlagGroupFilter(
            roll_types.AgenticConfig(), roll_types.EnvManagerConfig(), "train"
        )
        groups = [
            [
                roll_types.placeholder_rollout() if flag else roll_types.traj_rollout(1.0),
                roll_types.traj_rollout(0.0),
            ]
            for flag in flags
        ]

        assert [theirs.filter(0, i, g) for i, g in enumerate(groups)] == [drops(ours, g) for g in groups]

    def test_missing_trajectories_are_dropped_whatever_the_guard(self) -> None:
        group_filter = make_filter("max_rejection_ratio: 0.0")

        assert drops(group_filter, [None, *trajectories(1.0, 0.0)]) is True
        assert drops(group_filter, [roll_types.placeholder_rollout(), *trajectories(1.0, 0.0)]) is False


# -- metrics and failures ------------------------------------------------------------------
def test_counts_reach_rolls_batch_metrics_once_per_judged_group() -> None:
    group_filter = make_filter()
    batch: list[roll_types.DataProto] = []
    for scores in ((1.0, 1.0), (1.0, 0.0), (0.0, 0.0), (0.0, 1.0)):
        group = trajectories(*scores)
        if not drops(group_filter, group):
            batch += group

    metrics = roll_types.agentic_batch_metrics(batch)

    assert {
        "group_admission/candidate_group_count@sum": 4.0,
        "group_admission/admitted_group_count@sum": 2.0,
        "group_admission/exact_dead_group_count@sum": 2.0,
        "group_admission/cumulative_effective_group_rate": 0.5,
        "env/SimpleSokoban/success": 0.5,
    }.items() <= metrics.items()
    assert "group_admission/candidate_group_count@sum" not in batch[1].meta_info["metrics"]


def test_every_judged_trajectorys_response_tokens_reach_the_batch_metrics() -> None:
    group_filter = make_filter()
    batch: list[roll_types.DataProto] = []
    decoded = 0
    for scores in ((1.0, 1.0), (1.0, 0.0), (0.0, 0.0), (0.0, 1.0)):
        group = trajectories(*scores)
        decoded += sum(int(t.batch["response_mask"].sum()) for t in group)
        if not drops(group_filter, group):
            batch += group

    metrics = roll_types.agentic_batch_metrics(batch)

    assert decoded > 0
    assert decoded == metrics["group_admission/decoded_tokens@sum"]  # the dropped groups' too


def test_consecutive_missing_trajectories_stop_the_run() -> None:
    group_filter = make_filter(f"{STD}\nmax_consecutive_failed_groups: 2")
    drops(group_filter, [None, *trajectories(1.0)])

    with pytest.raises(
        group_admission.ConsecutiveFailedGroupsError, match=r"^2 consecutive .*the ROLL agentic rollout"
    ):
        drops(group_filter, [None, *trajectories(1.0)])


# -- equivalence with the policy -----------------------------------------------------------
@given(
    config=configs(),
    scores=st.lists(st.one_of(floats, st.sampled_from([0.0, 1.0, math.nan])), min_size=1, max_size=8),
)
def test_decisions_equal_the_policy_on_the_same_rewards(config: Any, scores: list[float]) -> None:
    settings = yaml.safe_dump(
        {"policy": config.to_dict(), "max_rejection_ratio": None, "max_consecutive_failed_groups": None}
    )
    group_filter = make_filter(settings)
    group = trajectories(*scores)

    dropped = drops(group_filter, group)
    expected = GroupAdmissionPolicy(config).evaluate(scores, rollout_ids=range(len(scores)), group_key=(0, 0))
    read = read_trajectories(group, texts=group_filter.admission.texts)
    read.group_key = (0, 0)
    decision = read.evaluate(group_filter.admission.session.policy)

    assert expected.to_dict() == decision.to_dict()
    assert expected.admitted is not dropped


# -- settings ------------------------------------------------------------------------------
class TestSettingsSources:
    def test_a_yaml_file_named_in_the_process_environment(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = tmp_path / "admission.yaml"
        path.write_text("policy:\n  min_reward_std: 1.0e-6\nmax_rejection_ratio: 0.25\n")
        monkeypatch.setenv(ENV, str(path))

        group_filter = make_filter(None)

        assert (1e-6, 0.25) == (
            group_filter.settings.policy.min_reward_std,
            group_filter.settings.max_rejection_ratio,
        )

    def test_the_old_name_max_drop_ratio_still_works_with_a_deprecation_warning(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(ENV, "max_drop_ratio: 0.25")

        with pytest.warns(DeprecationWarning, match="'max_drop_ratio' is deprecated"):
            group_filter = make_filter(None)
        with pytest.warns(DeprecationWarning, match="read 'max_rejection_ratio'"):
            old = group_filter.settings.max_drop_ratio
        with pytest.warns(DeprecationWarning, match="'max_drop_ratio' is deprecated"):
            built = roll_adapter.RollAgenticSettings(max_drop_ratio=0.25)

        assert 0.25 == group_filter.settings.max_rejection_ratio == old == built.max_rejection_ratio
        assert 0.25 == group_filter.settings.limits.max_rejection_ratio

    def test_both_names_of_the_ratio_at_once_are_refused(self) -> None:
        with (
            pytest.warns(DeprecationWarning, match="'max_drop_ratio' is deprecated"),
            pytest.raises(
                ValueError,
                match=r"'max_rejection_ratio' must be given alone: 'max_drop_ratio' is its deprecated name "
                r"\(got both: 0.5 and 0.25\)",
            ),
        ):
            roll_adapter.RollAgenticSettings(max_drop_ratio=0.25, max_rejection_ratio=0.5)

    def test_env_manager_system_envs_win_over_the_pipeline_and_the_process(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(ENV, "max_rejection_ratio: 0.1")
        env_manager = roll_types.EnvManagerConfig(system_envs={ENV: "max_rejection_ratio: 0.3"})
        config = roll_types.AgenticConfig(system_envs={ENV: "max_rejection_ratio: 0.2"})

        ratios = [
            roll_adapter.AdmissionGroupFilter(config, env_manager, "train").settings.max_rejection_ratio,
            roll_adapter.AdmissionGroupFilter(
                config, roll_types.EnvManagerConfig(), "train"
            ).settings.max_rejection_ratio,
            roll_adapter.AdmissionGroupFilter(
                roll_types.AgenticConfig(), roll_types.EnvManagerConfig(), "train"
            ).settings.max_rejection_ratio,
        ]

        assert [0.3, 0.2, 0.1] == ratios

    def test_no_settings_means_defaults(self) -> None:
        assert roll_adapter.RollAgenticSettings() == make_filter(None).settings

    def test_inline_yaml_reads_1e_6_as_a_number(self) -> None:
        assert 1e-6 == make_filter("policy: {min_reward_std: 1e-6}").settings.policy.min_reward_std


BAD = [
    (
        "bogus: 1",
        ValueError,
        "unknown key(s) 'bogus' in 'GROUP_ADMISSION_ROLL_CONFIG' for RollAgenticSettings "
        "(known: max_consecutive_failed_groups, max_rejection_ratio, modes, policy)",
    ),
    (
        "[1, 2]",
        ValueError,
        "'GROUP_ADMISSION_ROLL_CONFIG' must hold a mapping of settings, inline or in a file "
        "(got [1, 2] of type list)",
    ),
    ("policy: {min_reward_std: 1e-6x}", TypeError, "'min_reward_std' must be a real number (got '1e-6x')"),
    (
        "max_rejection_ratio: 2",
        ValueError,
        "'max_rejection_ratio' must be in [0, 1] (got 2)",
    ),
    (
        "modes: [train, eval]",
        ValueError,
        "'modes' has unknown scheduler mode name(s) ['eval'] (known: train, val)",
    ),
    ("modes: 3", TypeError, "'modes' must be a list of scheduler mode names (got 3)"),
    (
        "policy: [1]",
        TypeError,
        "'policy' must be a mapping of GroupAdmissionConfig fields (got [1] of type list)",
    ),
    (
        "key: [unclosed",
        ValueError,
        "'GROUP_ADMISSION_ROLL_CONFIG' must hold valid inline JSON or YAML, or a file path (got neither",
    ),
    (
        "/no/such/admission.yaml",
        FileNotFoundError,
        "[Errno 2] No such file or directory: '/no/such/admission.yaml'",
    ),
]


@pytest.mark.parametrize(("value", "error", "message"), BAD, ids=[v for v, _, _ in BAD])
def test_bad_settings_fail_when_roll_builds_the_filter(
    value: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as raised:
        make_filter(value)

    assert str(raised.value).startswith(message)


def test_a_non_string_setting_is_refused() -> None:
    env_manager = roll_types.EnvManagerConfig(system_envs={ENV: {"policy": {}}})  # type: ignore[dict-item]

    with pytest.raises(
        TypeError, match=r"^'GROUP_ADMISSION_ROLL_CONFIG' must be a YAML file path or inline YAML \(got"
    ):
        roll_adapter.AdmissionGroupFilter(roll_types.AgenticConfig(), env_manager, "train")


def test_scores_tensor_of_another_dtype_reads_the_same() -> None:
    group = without_episode_scores(trajectories(1.0, 0.0))
    for data in group:
        data._batch["scores"] = data._batch["scores"].to(torch.float16)  # type: ignore[index]

    assert drops(make_filter(), group) is False


ROOT = Path(__file__).resolve().parents[3]


def test_cookbook_agentic_config_enables_the_filter_with_valid_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snippet = yaml.safe_load((ROOT / "cookbook/configs/roll/agentic_group_admission.yaml").read_text())
    monkeypatch.chdir(ROOT)  # ROLL's driver resolves the relative path from where it runs
    env_manager = roll_types.EnvManagerConfig(**snippet["train_env_manager"])
    config = roll_types.AgenticConfig(train_env_manager=env_manager, system_envs=snippet["system_envs"])

    group_filter = roll_types.make_group_filter(config, env_manager, "train")

    assert isinstance(group_filter, roll_adapter.AdmissionGroupFilter)
    assert (1e-6, 0.5, ("train",)) == (
        group_filter.settings.policy.min_reward_std,
        group_filter.settings.max_rejection_ratio,
        group_filter.settings.modes,
    )


def test_importing_the_adapter_imports_neither_roll_nor_torch() -> None:
    code = (
        "import sys, group_admission.adapters.roll\n"
        "print(sorted(m for m in ('roll', 'torch', 'tensordict') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert "[]" == out.stdout.strip()


def test_the_docs_name_the_commit_the_doubles_mirror() -> None:
    page = (ROOT / "docs" / "adapters" / "roll.md").read_text()

    assert roll_types.UPSTREAM_COMMIT in page
    assert f"alibaba/ROLL@{roll_types.UPSTREAM_COMMIT}" == roll_adapter.SUPPORTED_VERSIONS["roll"]


def test_the_recommended_block_builds_the_filters_session() -> None:
    group_filter = make_filter("preset: recommended\nmax_rejection_ratio: null")

    assert not drops(group_filter, trajectories(1.0, 0.0, 1.0, 0.0))
    assert drops(group_filter, trajectories(1.0, 1.0, 1.0, 1.0))
    assert group_filter.policy.config == SessionConfig.preset("recommended").policy
    assert group_filter.stats.candidates == 2
