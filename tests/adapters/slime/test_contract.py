"""The slime adapter as slime loads and calls it: signatures, return types, real types when importable."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import yaml

from adapters.slime import slime_types
from group_admission.adapters import slime as slime_adapter
from group_admission.adapters.slime import SlimeAdmissionSettings

FILTER_PATH = "group_admission.adapters.slime.admission_filter"
PROCESS_PATH = "group_admission.adapters.slime.record_all_samples"
LOG_PATH = "group_admission.adapters.slime.log_rollout_metrics"


pytestmark = pytest.mark.usefixtures("fresh_slime_state")


def group(*rewards: object) -> list[slime_types.Sample]:
    return [slime_types.make_sample(i, reward=r) for i, r in enumerate(rewards)]


class TestFilterContract:
    def test_first_two_parameters_are_args_and_samples_and_kwargs_are_accepted(self) -> None:
        parameters = inspect.signature(slime_adapter.admission_filter).parameters

        assert ("args", "samples") == tuple(parameters)[:2]
        assert inspect.Parameter.VAR_KEYWORD == list(parameters.values())[-1].kind

    def test_filter_is_synchronous_because_slime_never_awaits_it(self) -> None:
        assert not inspect.iscoroutinefunction(slime_adapter.admission_filter)

    def test_passes_slimes_plugin_contract_check_with_slime_importable(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        slime_types.install(monkeypatch)

        slime_types.check_dynamic_filter_path(FILTER_PATH)

    def test_returns_slimes_own_class_when_slime_is_importable(self, monkeypatch: pytest.MonkeyPatch) -> None:
        slime_types.install(monkeypatch)

        output = slime_adapter.admission_filter(slime_types.make_args(), group(1.0, 1.0))

        assert slime_types.DynamicFilterOutput is type(output)
        # slime's loop wraps anything else as keep=<output>, which would keep every group.
        assert output == slime_types.call_dynamic_filter(
            slime_adapter.admission_filter, slime_types.make_args(), group(1.0, 1.0)
        )

    def test_stand_in_has_slimes_fields_when_slime_is_missing(self) -> None:
        output = slime_adapter.admission_filter(slime_types.make_args(), group(1.0, 0.0))

        assert slime_adapter.DynamicFilterOutput is type(output)
        expected = [(f.name, f.default) for f in dataclasses.fields(slime_types.DynamicFilterOutput)]
        assert expected == [(f.name, f.default) for f in dataclasses.fields(output)]

    def test_filter_accepts_extra_keyword_arguments(self) -> None:
        output = slime_adapter.admission_filter(slime_types.make_args(), group(1.0, 0.0), rollout_id=3)

        assert output.keep is True


class TestVersionDetection:
    def test_slime_v030_gets_a_strict_drop_and_one_warning(self, monkeypatch: pytest.MonkeyPatch) -> None:
        slime_types.install(monkeypatch, version="v0.3.0")
        args = slime_types.make_args(group_admission={"policy": {"min_reward_std": 1e-6}})

        with pytest.warns(
            RuntimeWarning, match=r"no DynamicFilterOutput.keep_when_insufficient \(added in v0.3.1\)"
        ):
            first = slime_adapter.admission_filter(args, group(1.0, 1.0))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            second = slime_adapter.admission_filter(args, group(0.0, 0.0))

        assert slime_types.DynamicFilterOutputV030(keep=False, reason="exact_dead") == first
        assert slime_types.DynamicFilterOutputV030 is type(second)

    def test_no_warning_on_v030_when_the_fallback_is_turned_off(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        slime_types.install(monkeypatch, version="v0.3.0")
        args = slime_types.make_args(
            group_admission={"policy": {"min_reward_std": 1e-6}, "keep_when_insufficient": False}
        )

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            output = slime_adapter.admission_filter(args, group(1.0, 1.0))

        assert slime_types.DynamicFilterOutputV030(keep=False, reason="exact_dead") == output

    def test_head_slime_carries_keep_when_insufficient(self, monkeypatch: pytest.MonkeyPatch) -> None:
        slime_types.install(monkeypatch)
        args = slime_types.make_args(group_admission={"policy": {"min_reward_std": 1e-6}})

        output = slime_adapter.admission_filter(args, group(1.0, 1.0))

        assert (
            slime_types.DynamicFilterOutput(keep=False, reason="exact_dead", keep_when_insufficient=True)
            == output
        )


class TestHookContracts:
    def test_process_hook_passes_slimes_contract_check(self) -> None:
        slime_types.check_rollout_all_samples_process_path(PROCESS_PATH)

    def test_process_hook_parameters_match_slimes_call(self) -> None:
        parameters = tuple(inspect.signature(slime_adapter.record_all_samples).parameters)

        assert ("args", "all_groups", "data_source") == parameters

    def test_log_hook_parameters_match_slimes_call_and_leave_default_logging_on(self) -> None:
        parameters = tuple(inspect.signature(slime_adapter.log_rollout_metrics).parameters)
        args = slime_types.make_args(custom_rollout_log_function_path=LOG_PATH)

        logged = slime_types.log_rollout_data(0, args, [], {"rollout/dynamic_filter/drop_x": 1}, 1.0)

        assert ("rollout_id", "args", "samples", "rollout_extra_metrics", "rollout_time") == parameters
        assert {"rollout/dynamic_filter/drop_x": 1} == logged

    @pytest.mark.parametrize("recorded", [False, True], ids=["no-rollout-recorded", "rollout-recorded"])
    def test_log_hook_records_the_rollout_it_logged_as_slimes_contract_requires(self, recorded: bool) -> None:
        args = type("Args", (), {})()  # slime's contract test passes a bare object
        if recorded:
            slime_adapter.record_all_samples(args, [group(1.0, 0.0)], object())

        logged = slime_adapter.log_rollout_metrics(
            3, args, [slime_types.Sample(index=0)], {"reward": 1.0}, 0.5
        )

        assert logged is False
        assert 3 == args.logged_rollout_id


def test_importing_the_adapter_imports_neither_slime_nor_torch() -> None:
    code = textwrap.dedent(
        """
        import sys
        import group_admission.adapters.slime as adapter
        print(sorted(m for m in ("slime", "torch") if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert "[]" == out.stdout.strip()


COOKBOOK = Path(__file__).resolve().parents[3] / "cookbook" / "configs" / "slime"


class TestCookbook:
    def test_custom_config_file_holds_valid_settings(self) -> None:
        data = yaml.safe_load((COOKBOOK / "group_admission.yaml").read_text())

        settings = SlimeAdmissionSettings.from_mapping(data["group_admission"])

        assert (1e-6, 0.02, True, 8) == (
            settings.policy.min_reward_std,
            settings.policy.min_reward_range,
            settings.keep_when_insufficient,
            settings.max_consecutive_failed_groups,
        )

    def test_cli_snippet_names_loadable_hooks_and_over_samples(self) -> None:
        script = (
            f'source "{COOKBOOK / "group_admission_args.sh"}"; printf "%s\\n" "${{GROUP_ADMISSION_ARGS[@]}}"'
        )
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split(
            "\n"
        )
        flags = dict(zip(out[0::2], out[1::2], strict=False))

        slime_types.check_dynamic_filter_path(flags["--dynamic-sampling-filter-path"])
        slime_types.check_rollout_all_samples_process_path(flags["--rollout-all-samples-process-path"])
        assert slime_adapter.log_rollout_metrics is slime_types.load_function(
            flags["--custom-rollout-log-function-path"]
        )
        assert Path(flags["--custom-config-path"]).is_file()
        assert int(flags["--over-sampling-batch-size"]) > int(flags["--rollout-batch-size"])


def test_the_docs_name_the_commit_the_doubles_mirror() -> None:
    page = (COOKBOOK.parents[2] / "docs" / "adapters" / "slime.md").read_text()

    assert slime_types.UPSTREAM_COMMIT in page
