"""Installing the adapter: the class swap, the Ray hooks, the settings variable, versions, a light import."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from adapters.openrlhf import samples_generator_double
from adapters.openrlhf.conftest import OPENRLHF_INSTALLED
from group_admission import GroupAdmissionConfig
from group_admission.adapters._kit import InstallOnImport
from group_admission.adapters._kit import _hosts as _host_support
from group_admission.adapters.openrlhf import (
    SETTINGS_ENV,
    SETUP_HOOK,
    AdmissionGeneratorMixin,
    OpenRLHFAdmissionSettings,
    _install,
    install,
    runtime_env_hook,
    uninstall,
    worker_process_setup_hook,
)
from group_admission.adapters.openrlhf._settings import current_settings

GENERATOR = _install.GENERATOR_MODULE
SYNC, ASYNC = _install.TRAINER_MODULES


def _copy_of_double() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_double_copy", samples_generator_double.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trainer(name: str, generator: Any) -> ModuleType:
    module = ModuleType(name)
    module.SamplesGenerator = generator
    return module


def test_install_swaps_the_class_in_the_generator_and_trainer_modules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both trainers' already-imported name is rebound; a trainer importing later gets the new class."""
    module = _copy_of_double()
    base = module.SamplesGenerator
    monkeypatch.setitem(sys.modules, SYNC, _trainer(SYNC, base))
    monkeypatch.setitem(sys.modules, ASYNC, _trainer(ASYNC, base))

    made = install(module)

    assert module.SamplesGenerator is made
    assert made.__bases__ == (AdmissionGeneratorMixin, base)
    assert sys.modules[SYNC].SamplesGenerator is made
    assert sys.modules[ASYNC].SamplesGenerator is made
    assert install(module) is made  # idempotent
    assert made.__bases__ == (AdmissionGeneratorMixin, base)

    assert uninstall(module) is True
    assert module.SamplesGenerator is base
    assert sys.modules[SYNC].SamplesGenerator is base
    assert uninstall(module) is False


def test_a_trainer_module_holding_another_class_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _copy_of_double()
    other = type("UserGenerator", (), {})
    monkeypatch.setitem(sys.modules, SYNC, _trainer(SYNC, other))

    install(module)

    assert sys.modules[SYNC].SamplesGenerator is other


def _fake_openrlhf(root: Path) -> None:
    """A minimal ``openrlhf`` tree on disk, for the import-time install without OpenRLHF."""
    package = root / "openrlhf" / "trainer" / "ppo_utils"
    package.mkdir(parents=True)
    for folder in (root / "openrlhf", root / "openrlhf" / "trainer", package):
        (folder / "__init__.py").write_text("")
    (package / "samples_generator.py").write_text(
        "from adapters.openrlhf.samples_generator_double import SamplesGenerator as _Base, "
        "_collect_prompt_batch, ray\n\n\nclass SamplesGenerator(_Base):\n    pass\n"
    )
    (root / "openrlhf" / "trainer" / "ppo_trainer.py").write_text(
        "from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator\n"
    )


def _openrlhf_modules() -> list[str]:
    return [name for name in sys.modules if name == "openrlhf" or name.startswith("openrlhf.")]


def _forget_openrlhf_modules() -> None:
    """Drop the modules the test imported (monkeypatch then puts back the ones it removed)."""
    for name in _openrlhf_modules():
        del sys.modules[name]


def test_the_worker_hook_installs_when_openrlhf_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """In a fresh worker the hook imports nothing; importing the trainer brings in the admission class."""
    request.addfinalizer(_forget_openrlhf_modules)
    for name in _openrlhf_modules():
        monkeypatch.delitem(sys.modules, name)
    if not OPENRLHF_INSTALLED:
        _fake_openrlhf(tmp_path)
        monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))

    worker_process_setup_hook()
    worker_process_setup_hook()  # a second call adds no second finder

    assert GENERATOR not in sys.modules
    assert sum(isinstance(f, InstallOnImport) for f in sys.meta_path) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        trainer = importlib.import_module(SYNC)
    assert issubclass(trainer.SamplesGenerator, AdmissionGeneratorMixin)
    assert sys.modules[GENERATOR].SamplesGenerator is trainer.SamplesGenerator

    worker_process_setup_hook()  # now the module is loaded: installing again changes nothing
    assert sys.modules[GENERATOR].SamplesGenerator is trainer.SamplesGenerator


@pytest.mark.skipif(OPENRLHF_INSTALLED, reason="OpenRLHF is installed here; the hint is for hosts without it")
def test_without_openrlhf_install_names_the_pip_line() -> None:
    with pytest.raises(ImportError, match=r"requires OpenRLHF's .*pip install 'openrlhf\[vllm\]==0.11.2'"):
        install()


def test_the_runtime_env_hook_adds_the_setup_hook_and_passes_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenRLHF's runtime env is kept; the settings file reaches the workers as an absolute path."""
    monkeypatch.chdir(tmp_path)
    Path("admission.json").write_text(json.dumps({"budget": {"max_extra_groups": 4}}))
    monkeypatch.setenv(SETTINGS_ENV, "admission.json")
    openrlhf_env = {"env_vars": {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN"}}

    env = runtime_env_hook(openrlhf_env)

    assert env["worker_process_setup_hook"] == SETUP_HOOK
    assert env["env_vars"] == {
        "TOKENIZERS_PARALLELISM": "true",
        "NCCL_DEBUG": "WARN",
        SETTINGS_ENV: str(tmp_path / "admission.json"),
    }
    assert openrlhf_env == {"env_vars": {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN"}}
    assert runtime_env_hook(env) == env


def test_the_runtime_env_hook_without_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert runtime_env_hook(None) == {"worker_process_setup_hook": SETUP_HOOK}
    inline = json.dumps({"on_exhausted": "raise"})
    monkeypatch.setenv(SETTINGS_ENV, inline)
    assert runtime_env_hook({})["env_vars"] == {SETTINGS_ENV: inline}


def test_the_hook_paths_name_real_functions() -> None:
    module_name, _, function = SETUP_HOOK.rpartition(".")

    assert getattr(importlib.import_module(module_name), function) is worker_process_setup_hook


def test_settings_defaults_and_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy defaults to a zero-spread gate, and given fields go over it; JSON, a file or YAML."""
    assert OpenRLHFAdmissionSettings().policy == GroupAdmissionConfig(min_reward_std=1e-6)
    merged = OpenRLHFAdmissionSettings.from_mapping({"policy": {"gate_on": ["acc"]}})
    assert merged.policy == GroupAdmissionConfig(min_reward_std=1e-6, gate_on=["acc"])
    assert merged.components == ("acc",)
    assert OpenRLHFAdmissionSettings().components == ("scores",)
    assert (
        OpenRLHFAdmissionSettings.from_mapping({"policy": {"min_reward_std": 0}}).policy
        == GroupAdmissionConfig()
    )

    pytest.importorskip("yaml")
    yaml_file = tmp_path / "admission.yaml"
    yaml_file.write_text("budget:\n  max_extra_groups: 8\non_exhausted: raise\n")
    json_file = tmp_path / "admission.json"
    json_file.write_text(json.dumps({"budget": {"max_extra_groups": 8}, "on_exhausted": "raise"}))
    expected = OpenRLHFAdmissionSettings.from_mapping(
        {"budget": {"max_extra_groups": 8}, "on_exhausted": "raise"}
    )
    for value in (str(yaml_file), str(json_file), json_file.read_text(), f"  {json_file.read_text()}  "):
        assert OpenRLHFAdmissionSettings.from_env(value) == expected
    assert OpenRLHFAdmissionSettings.from_env("") == OpenRLHFAdmissionSettings()

    monkeypatch.setenv(SETTINGS_ENV, str(json_file))
    assert current_settings() == expected


@pytest.mark.parametrize(
    ("installed", "warns"),
    [("0.11.2", False), ("0.11.5.post1", False), ("0.11.1", True), ("0.12.0", True), ("0.12.0rc1", True)],
)
def test_versions_outside_the_supported_range_warn(
    installed: str, warns: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """install() checks the installed OpenRLHF against SUPPORTED_VERSIONS, once per process."""
    monkeypatch.setattr(_host_support.metadata, "distribution", lambda _name: _Installed(installed))
    monkeypatch.setattr(_host_support, "_checked", set())

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        install(_copy_of_double())
        install(_copy_of_double())

    assert len(caught) == int(warns)
    assert all("openrlhf >=0.11.2,<0.12" in str(w.message) for w in caught)


class _Installed:
    """What importlib.metadata gives for an openrlhf release installed from PyPI (no direct_url)."""

    def __init__(self, version: str) -> None:
        self.version = version

    def read_text(self, _name: str) -> None:
        return None


def test_importing_the_adapter_imports_no_framework() -> None:
    """Ray imports the hook in every worker: it must stay light (no OpenRLHF, Ray, torch or vLLM)."""
    code = textwrap.dedent(
        """
        import sys
        import group_admission.adapters.openrlhf
        print(sorted(m for m in ("openrlhf", "ray", "torch", "vllm") if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "[]"
