"""
OpenRLHF's own ``tests/test_samples_generator.py`` (in the 0.11.2 wheel), run as is and against the adapter.

``openrlhf_swap_plugin`` swaps the generator class OpenRLHF's tests load for the admission
class. Both of OpenRLHF's tests apply: the buffer test (``generate_samples``, which the
adapter leaves alone) and the dynamic-filtering test (terminal accepted groups kept, three
prompts consumed, the loader reported exhausted, nothing cancelled), with the adapter set to
OpenRLHF's rule and a budget that allows a replacement: without one the adapter draws no
replacement prompt, so it never learns that the loader is dry and reports ``exhausted=False``.
Skipped without OpenRLHF (run ``.ci/openrlhf``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import group_admission
from adapters.openrlhf.conftest import OPENRLHF_INSTALLED, SKIP_REASON
from group_admission.adapters.openrlhf import SETTINGS_ENV

pytestmark = pytest.mark.skipif(not OPENRLHF_INSTALLED, reason=SKIP_REASON)

HERE = Path(__file__).parent
RULE = {
    "policy": {"min_reward_std": 0},
    "apply_dynamic_filtering_range": True,
    "budget": {"max_extra_groups": 8},
}


def _openrlhf_test_file() -> Path:
    import openrlhf

    path = Path(openrlhf.__file__).parents[1] / "tests" / "test_samples_generator.py"
    assert path.exists(), f"the openrlhf wheel ships its tests beside the package: {path}"
    return path


def _run(tmp_path: Path, *plugin: str, settings: dict | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    source = Path(group_admission.__file__).parents[1]  # this checkout, however it is installed
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), str(source), env.get("PYTHONPATH")]))
    env.pop(SETTINGS_ENV, None)
    if settings is not None:
        env[SETTINGS_ENV] = json.dumps(settings)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # OpenRLHF's tests, not this project's pytest config
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-c",
        str(tmp_path / "pytest.ini"),
    ]
    command += [*plugin, "--rootdir", str(tmp_path), str(_openrlhf_test_file())]
    return subprocess.run(
        command, check=False, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )


def test_openrlhfs_tests_pass_as_shipped(tmp_path: Path) -> None:
    result = _run(tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_openrlhfs_tests_pass_against_the_admission_generator(tmp_path: Path) -> None:
    result = _run(tmp_path, "-p", "openrlhf_swap_plugin", settings=RULE)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    assert "group-admission swapped 2 SamplesGenerator class(es)" in result.stdout


def test_without_a_replacement_budget_the_dry_loader_goes_unnoticed(tmp_path: Path) -> None:
    """The one place OpenRLHF's test does not apply, and why: no budget, no replacement draw."""
    result = _run(tmp_path, "-p", "openrlhf_swap_plugin", settings={**RULE, "budget": {}})

    assert result.returncode != 0
    assert "1 failed, 1 passed" in result.stdout
    assert "assert False is True" in result.stdout
