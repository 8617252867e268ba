"""
Installing the RAGEN adapter: ``install()`` on RAGEN's trainer, the Ray worker setup hook,
reading the Hydra config, and the cookbook's example config.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import yaml

from group_admission import GroupAdmissionConfig
from group_admission.adapters._kit import InstallOnImport as _InstallOnImport
from group_admission.adapters._kit import _hosts as _host_support
from group_admission.adapters.ragen import (
    STRATEGY_NAME,
    RagenGroupAdmissionFilter,
    RagenSelection,
    install,
    is_selected,
    uninstall,
    worker_process_setup_hook,
)

from .ragen_types import Config, RayAgentTrainer, StockRolloutFilter, base_config, make_batch

COOKBOOK = Path(__file__).resolve().parents[3] / "cookbook" / "configs" / "ragen"


@pytest.fixture
def trainer_cls():
    """A fresh RayAgentTrainer double per test, so patches never leak."""
    return type("RayAgentTrainer", (RayAgentTrainer,), {})


def _selected_config(**settings):
    config = base_config(rollout_filter_strategy=STRATEGY_NAME)
    config.es_manager.train.env_groups = 4
    config.actor_rollout_ref.rollout.group_admission = settings or {"policy": {"min_reward_std": 1e-6}}
    return config


class TestInstall:
    def test_replaces_the_filter_when_selected(self, trainer_cls):
        """With rollout_filter_strategy=group_admission, init_workers ends with our filter."""
        install(trainer_cls)
        trainer = trainer_cls(_selected_config())

        trainer.init_workers()

        assert isinstance(trainer.rollout_filter, RagenGroupAdmissionFilter)
        assert 4 == trainer.rollout_filter.num_groups
        assert 1e-6 == trainer.rollout_filter.policy.config.min_reward_std

    def test_leaves_other_strategies_alone(self, trainer_cls):
        """Any other strategy keeps RAGEN's own filter object."""
        install(trainer_cls)
        trainer = trainer_cls(base_config(rollout_filter_strategy="top_k", rollout_filter_value=0.5))

        trainer.init_workers()

        assert isinstance(trainer.rollout_filter, StockRolloutFilter)
        assert trainer.gradient_analysis_rollout_filter is trainer.rollout_filter

    def test_is_idempotent(self, trainer_cls):
        """Installing twice wraps init_workers once; the original still runs once per call."""
        install(trainer_cls)
        wrapped = trainer_cls.init_workers
        install(trainer_cls)
        trainer = trainer_cls(_selected_config())

        trainer.init_workers()

        assert wrapped is trainer_cls.init_workers
        assert 1 == trainer.init_workers_calls

    def test_subclass_of_installed_class_is_not_wrapped_again(self, trainer_cls):
        """A subclass inherits the wrapper; installing on it changes nothing."""
        install(trainer_cls)
        child = type("Child", (trainer_cls,), {})

        install(child)

        assert "init_workers" not in child.__dict__

    def test_shared_gradient_analysis_filter_is_replaced_too(self, trainer_cls):
        """When the gradient-analysis filter is the main filter object, it becomes ours too."""
        install(trainer_cls)
        trainer = trainer_cls(_selected_config())

        trainer.init_workers()

        assert trainer.gradient_analysis_rollout_filter is trainer.rollout_filter

    def test_separate_gradient_analysis_filter_is_rebuilt_from_its_config(self, trainer_cls):
        """A separate analysis filter (own env_groups) is rebuilt: RAGEN's would fail on our strategy."""
        install(trainer_cls)
        config = _selected_config()
        config.trainer.gradient_analysis_env_groups = 2
        trainer = trainer_cls(config)

        trainer.init_workers()

        analysis = trainer.gradient_analysis_rollout_filter
        assert isinstance(analysis, RagenGroupAdmissionFilter)
        assert analysis is not trainer.rollout_filter
        assert 2 == analysis.num_groups

    def test_without_install_ragen_fails_on_our_strategy(self, trainer_cls):
        """The reason install() exists: RAGEN's own filter rejects the strategy name at filter time."""
        trainer = trainer_cls(_selected_config())
        trainer.init_workers()

        with pytest.raises(ValueError, match="Unknown strategy: group_admission"):
            trainer.train_step(make_batch([1, 0] * 4, group_ids=[0, 0, 1, 1, 2, 2, 3, 3]))

    def test_installed_trainer_runs_a_step(self, trainer_cls):
        """End to end: install, init_workers, one fit() step through our filter."""
        install(trainer_cls)
        trainer = trainer_cls(_selected_config())
        trainer.init_workers()

        out, metrics = trainer.train_step(
            make_batch([1, 0, 1, 1, 0, 0.5, 2, 2], group_ids=[0, 0, 1, 1, 2, 2, 3, 3])
        )

        assert [0, 0, 2, 2] == out.non_tensor_batch["group_ids"].tolist()
        assert 0.5 == float(metrics["rollout/filter_kept_ratio"])

    def test_uninstall_restores_the_original(self, trainer_cls):
        """uninstall() puts RAGEN's init_workers back and reports whether it did."""
        original = trainer_cls.init_workers
        install(trainer_cls)

        assert uninstall(trainer_cls)
        assert original is trainer_cls.init_workers
        assert not uninstall(trainer_cls)

    def test_is_selected(self):
        """Only the exact strategy name selects the adapter."""
        assert is_selected(Config(rollout_filter_strategy="group_admission"))
        assert not is_selected(Config(rollout_filter_strategy="top_p"))
        assert not is_selected(Config())


class TestInstallErrors:
    def test_missing_ragen(self, monkeypatch):
        """install() without RAGEN names the module and how to install it (PyPI's 'ragen' is unrelated)."""
        monkeypatch.setitem(sys.modules, "ragen", None)

        with pytest.raises(ImportError) as info:
            install()

        message = str(info.value)
        assert message.startswith(
            "group_admission.adapters.ragen requires RAGEN's trainer, "
            "module 'ragen.trainer.agent_trainer', for install() ("
        )
        assert message.endswith(
            "install it with: git clone https://github.com/mll-lab-nu/RAGEN && pip install -e RAGEN "
            "(the PyPI package named 'ragen' is unrelated)"
        )
        assert info.value.name.startswith("ragen")  # the module that is missing

    @pytest.mark.parametrize("target", [object(), type("NoInit", (), {})])
    def test_not_a_trainer(self, target):
        """install() and uninstall() refuse anything without init_workers."""
        for function in (install, uninstall):
            with pytest.raises(
                TypeError, match=r"^'trainer_cls' must be a trainer class with an init_workers method"
            ):
                function(target)


TRAINER_SOURCE = """
class RayAgentTrainer:
    def __init__(self, config):
        self.config = config
        self.rollout_filter = None
        self.gradient_analysis_rollout_filter = None

    def init_workers(self):
        self.rollout_filter = "stock"
        self.gradient_analysis_rollout_filter = self.rollout_filter
"""


@pytest.fixture
def fake_ragen(tmp_path, monkeypatch):
    """A throwaway ragen.trainer.agent_trainer on sys.path, with sys.modules and meta_path restored."""
    package = tmp_path / "ragen" / "trainer"
    package.mkdir(parents=True)
    (tmp_path / "ragen" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "agent_trainer.py").write_text(textwrap.dedent(TRAINER_SOURCE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    for name in ("ragen", "ragen.trainer", "ragen.trainer.agent_trainer"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield
    for name in ("ragen", "ragen.trainer", "ragen.trainer.agent_trainer"):
        sys.modules.pop(name, None)


class _FromAnotherCommit:
    """What importlib.metadata gives for a RAGEN installed from git at another commit."""

    version = "0.1.0"

    def read_text(self, name):
        if name != "direct_url.json":
            return None
        return json.dumps(
            {"url": "https://github.com/o/RAGEN", "vcs_info": {"vcs": "git", "commit_id": "f" * 40}}
        )


@pytest.mark.parametrize("explicit", [False, True])
def test_a_ragen_from_another_commit_warns_once(fake_ragen, monkeypatch, explicit):
    """install(), with RAGEN's trainer or a given class, warns once about a mismatched RAGEN, not twice."""
    monkeypatch.setattr(_host_support.metadata, "distribution", lambda _name: _FromAnotherCommit())
    monkeypatch.setattr(_host_support, "_checked", set())
    from ragen.trainer.agent_trainer import RayAgentTrainer as Stock

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patched = install(Stock if explicit else None)
        install(patched)
        uninstall(patched)

    assert 1 == len(caught)
    assert "from commit ffffffffffff" in str(caught[0].message)


class TestWorkerSetupHook:
    def test_patches_the_trainer_when_a_worker_imports_it(self, fake_ragen):
        """The hook installs lazily: the trainer module is patched as it is imported."""
        worker_process_setup_hook()
        assert "ragen.trainer.agent_trainer" not in sys.modules

        from ragen.trainer.agent_trainer import RayAgentTrainer as Loaded

        trainer = Loaded(_selected_config())
        trainer.init_workers()
        assert isinstance(trainer.rollout_filter, RagenGroupAdmissionFilter)
        assert trainer.gradient_analysis_rollout_filter is trainer.rollout_filter

    def test_patches_an_already_imported_trainer(self, fake_ragen):
        """When the module is already imported, the hook patches it at once."""
        import ragen.trainer.agent_trainer as module

        worker_process_setup_hook()

        assert getattr(module.RayAgentTrainer.init_workers, "__group_admission_wrapped__", False)
        assert not any(isinstance(finder, _InstallOnImport) for finder in sys.meta_path)

    def test_calling_it_twice_registers_one_import_hook(self, fake_ragen):
        """Ray may run the hook more than once in a process; one import hook is enough."""
        worker_process_setup_hook()
        worker_process_setup_hook()

        assert 1 == sum(isinstance(finder, _InstallOnImport) for finder in sys.meta_path)

    def test_other_imports_are_untouched(self, fake_ragen):
        """The import hook only claims RAGEN's trainer module."""
        worker_process_setup_hook()
        import ragen.trainer

        assert not hasattr(ragen.trainer.__spec__.loader, "_loader")

    def test_the_hook_path_is_importable_as_ray_loads_it(self):
        """Ray resolves 'module.function'; the documented path names this function."""
        module_name, _, function = "group_admission.adapters.ragen.worker_process_setup_hook".rpartition(".")

        assert worker_process_setup_hook is getattr(sys.modules[module_name], function)


class TestFromConfig:
    def test_reads_policy_and_ragen_selection_keys(self):
        """group_admission.selection picks the strategy; RAGEN's own keys give its parameters."""
        config = _selected_config(policy={"min_reward_range": 0.02}, selection="top_k")
        config.actor_rollout_ref.rollout.rollout_filter_value = 0.5
        config.actor_rollout_ref.rollout.rollout_filter_type = "smallest"
        config.actor_rollout_ref.rollout.rollout_filter_metric = "reward_std"

        adapter = RagenGroupAdmissionFilter.from_config(config)

        assert GroupAdmissionConfig(min_reward_range=0.02) == adapter.policy.config
        assert RagenSelection(strategy="top_k", value=0.5, filter_type="smallest") == adapter.selection

    @pytest.mark.parametrize("selection", [None, "none"])
    def test_no_selection(self, selection):
        """Without a selection every admitted group is kept."""
        adapter = RagenGroupAdmissionFilter.from_config(_selected_config(policy={}, selection=selection))

        assert adapter.selection is None

    def test_old_ratio_key_is_the_value_fallback(self):
        """Like RAGEN, rollout_filter_ratio stands in when rollout_filter_value is absent."""
        config = _selected_config(selection="top_p")
        del config.actor_rollout_ref.rollout["rollout_filter_value"]
        config.actor_rollout_ref.rollout.rollout_filter_ratio = 0.7

        assert 0.7 == RagenGroupAdmissionFilter.from_config(config).selection.value

    def test_policy_from_yaml_path(self, tmp_path):
        """group_admission.policy may be the path of a YAML file of GroupAdmissionConfig fields."""
        path = tmp_path / "policy.yaml"
        path.write_text("min_reward_std: 0.001\nmin_nontrivial_advantages: 2\n")

        adapter = RagenGroupAdmissionFilter.from_config(_selected_config(policy=str(path)))

        assert (
            GroupAdmissionConfig(min_reward_std=0.001, min_nontrivial_advantages=2) == adapter.policy.config
        )

    @pytest.mark.parametrize(
        ("settings", "rollout", "error", "message"),
        [
            (
                {"polcy": {}},
                {},
                ValueError,
                "unknown key(s) ['polcy'] in 'actor_rollout_ref.rollout.group_admission' "
                "(known: preset, policy, selection)",
            ),
            (
                {"selection": "top_q"},
                {},
                ValueError,
                "invalid RAGEN selection settings for "
                "'actor_rollout_ref.rollout.group_admission.selection=top_q': "
                "'strategy' must be one of 'top_p', 'top_k', 'top_k_abs', 'min_p' (got 'top_q')",
            ),
            (
                {"selection": "top_p"},
                {"rollout_filter_metric": "entropy"},
                ValueError,
                "invalid RAGEN selection settings for "
                "'actor_rollout_ref.rollout.group_admission.selection=top_p': "
                "'metric' must be one of 'reward', 'reward_sum', 'reward_variance' (got 'entropy')",
            ),
            (
                {"selection": "top_p"},
                {"rollout_filter_value": -1},
                ValueError,
                "invalid RAGEN selection settings for "
                "'actor_rollout_ref.rollout.group_admission.selection=top_p': "
                "'value' must be >= 0 (got -1.0)",
            ),
            (
                {"policy": {"min_reward_std": -0.1}},
                {},
                ValueError,
                "'min_reward_std' must be >= 0 (got -0.1)",
            ),
        ],
    )
    def test_bad_settings(self, settings, rollout, error, message):
        """Bad settings name the key, the requirement and the value."""
        config = _selected_config(**settings)
        for key, value in rollout.items():
            config.actor_rollout_ref.rollout[key] = value

        with pytest.raises(error) as info:
            RagenGroupAdmissionFilter.from_config(config)

        assert message == str(info.value)

    def test_settings_must_be_a_mapping(self):
        """group_admission itself must be a mapping."""
        config = _selected_config()
        config.actor_rollout_ref.rollout.group_admission = "strict"

        with pytest.raises(TypeError) as info:
            RagenGroupAdmissionFilter.from_config(config)

        assert (
            "'actor_rollout_ref.rollout.group_admission' must be a mapping with keys 'policy' "
            "and 'selection' "
            "(got 'strict')" == str(info.value)
        )


def _merge(base, overrides):
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _hydra_value(text):
    """Hydra's override grammar reads 1e-6 as a float (YAML 1.1 would not)."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return yaml.safe_load(text)


class TestCookbookConfigs:
    def test_yaml_config_builds_the_documented_filter(self):
        """The cookbook's group_admission.yaml, merged over base.yaml, builds our filter."""
        document = yaml.safe_load((COOKBOOK / "group_admission.yaml").read_text())
        document.pop("defaults")
        config = Config(_merge(dict(base_config()), document))

        adapter = RagenGroupAdmissionFilter.from_config(config)

        assert is_selected(config.actor_rollout_ref.rollout)
        assert adapter.policy.config.min_reward_std > 0
        assert (
            "group_admission.adapters.ragen.worker_process_setup_hook"
            == document["ray_kwargs"]["ray_init"]["runtime_env"]["worker_process_setup_hook"]
        )

    def test_override_lines_build_the_documented_filter(self):
        """Every Hydra override in overrides.txt applies to base.yaml and builds our filter."""
        config = base_config()
        lines = [
            line.strip()
            for line in (COOKBOOK / "overrides.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")
        ]
        for line in lines:
            key, _, value = line.removeprefix("+").partition("=")
            node = config
            *parents, leaf = key.split(".")
            for part in parents:
                node = node.setdefault(part, Config())
            node[leaf] = _hydra_value(value)
        hook = config.ray_kwargs.ray_init.runtime_env.worker_process_setup_hook

        adapter = RagenGroupAdmissionFilter.from_config(config)

        assert "group_admission.adapters.ragen.worker_process_setup_hook" == hook
        assert is_selected(config.actor_rollout_ref.rollout)
        assert adapter.selection is not None
        assert all(
            line.startswith("+") == ("group_admission." in line or "ray_kwargs" in line) for line in lines
        )


def test_module_imports_no_framework():
    """Importing the adapters loads neither torch, RAGEN, verl, Ray nor twinkle (fresh process)."""
    code = (
        "import sys, group_admission.adapters.ragen, group_admission.adapters.challenger; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'ragen', 'verl', 'ray', 'twinkle'}))"
    )

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )

    assert "[]" == result.stdout.strip()
