"""
The OpenRLHF adapter's fixtures: a double of OpenRLHF's generator module, and the real one where installed.

The tests marked by the ``host`` fixture run against ``samples_generator_double`` here, and
also against the real ``openrlhf==0.11.2`` module in ``.venv-openrlhf`` (``.ci/openrlhf``),
loaded as a private copy whose ``ray`` is the in-process ``FakeRay`` (OpenRLHF's own test
technique). The real-Ray tests skip without OpenRLHF. OpenRLHF's GPU-only imports (vLLM,
DeepSpeed, flash-attn) and the packages the lane does not install are stood in by the
packages under ``stubs/``, put on the path (and Ray workers' ``PYTHONPATH``) only where
vLLM is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from adapters.openrlhf import samples_generator_double
from adapters.openrlhf.scripted_engine import FakeRay
from group_admission.adapters.openrlhf import SETTINGS_ENV, reset

STUBS = Path(__file__).parent / "stubs"
OPENRLHF_INSTALLED = importlib.util.find_spec("openrlhf") is not None
SKIP_REASON = "needs openrlhf==0.11.2 (run .ci/openrlhf)"

if OPENRLHF_INSTALLED and importlib.util.find_spec("vllm") is None:
    sys.path.insert(0, str(STUBS))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(STUBS), os.environ.get("PYTHONPATH")]))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def real_generator_module() -> ModuleType:
    """A private copy of OpenRLHF's ``samples_generator`` whose ``ray`` is a fresh :class:`FakeRay`."""
    import openrlhf.trainer.ppo_utils.samples_generator as real

    spec = importlib.util.spec_from_file_location("_openrlhf_samples_generator_copy", real.__file__)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.ray = FakeRay()
    module.tqdm = _NoBar
    return module


class _NoBar:
    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def set_postfix(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def update(self, *_args: Any, **_kwargs: Any) -> None:
        pass


@pytest.fixture(params=["double", "openrlhf"])
def host(request: pytest.FixtureRequest) -> ModuleType:
    """OpenRLHF's generator module: the double, or the real 0.11.2 module with the in-process ray."""
    if request.param == "double":
        return samples_generator_double
    if not OPENRLHF_INSTALLED:
        pytest.skip(SKIP_REASON)
    return real_generator_module()


@pytest.fixture(autouse=True)
def fresh_sessions(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no session and no settings in the environment."""
    monkeypatch.delenv(SETTINGS_ENV, raising=False)
    reset()
    yield
    reset()
