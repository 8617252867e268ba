"""
A pytest plugin that runs OpenRLHF's own ``tests/test_samples_generator.py`` against the admission generator.

OpenRLHF's tests load ``openrlhf/trainer/ppo_utils/samples_generator.py`` by path with
``importlib.util.spec_from_file_location`` (after stubbing ``ray``, ``vllm``...). This plugin
wraps that function so that, once such a module has run, :func:`group_admission.adapters.
openrlhf.install` swaps its ``SamplesGenerator`` for the admission class, exactly as the
worker hook does in OpenRLHF's Ray workers. The session fails if no module was swapped, so a
changed OpenRLHF test cannot pass without exercising the adapter.
"""

from __future__ import annotations

import importlib.util
from pathlib import PurePath
from typing import Any

import pytest

from group_admission.adapters.openrlhf import AdmissionGeneratorMixin, install

_TARGET = PurePath("openrlhf", "trainer", "ppo_utils", "samples_generator.py").parts
_original = importlib.util.spec_from_file_location
swapped: list[str] = []


def _spec_from_file_location(name: str, location: Any = None, *args: Any, **kwargs: Any) -> Any:
    spec = _original(name, location, *args, **kwargs)
    if spec is not None and location is not None and PurePath(location).parts[-4:] == _TARGET:
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            cls = install(module)
            assert issubclass(module.SamplesGenerator, AdmissionGeneratorMixin)
            swapped.append(f"{module.__name__}.SamplesGenerator -> {cls.__name__}")

        spec.loader.exec_module = exec_module
    return spec


def pytest_configure(config: pytest.Config) -> None:
    importlib.util.spec_from_file_location = _spec_from_file_location


def pytest_unconfigure(config: pytest.Config) -> None:
    importlib.util.spec_from_file_location = _original


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    print(f"\ngroup-admission swapped {len(swapped)} SamplesGenerator class(es)")
    if not swapped:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
