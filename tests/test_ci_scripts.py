"""The install helpers of .ci/run, .ci/verl and cookbook/run_demo.sh (.ci/lib.sh), on a scratch venv."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with .ci/lib.sh sourced, in ``cwd``."""
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", f". {ROOT / '.ci' / 'lib.sh'}\n{script}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with a requirements file, a pyproject.toml and a venv whose python runs."""
    (tmp_path / "requirements.txt").write_text("numpy==2.4.6\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    return tmp_path


def current(project: Path) -> bool:
    return bash("venv_is_current venv requirements.txt", project).returncode == 0


def test_a_venv_is_current_only_after_a_complete_install_of_the_same_files(project: Path) -> None:
    assert not current(project)  # never marked: install

    assert bash("mark_venv_current venv requirements.txt", project).returncode == 0
    assert current(project)  # the second run skips pip

    (project / "requirements.txt").write_text("numpy==2.4.7\n")
    assert not current(project)  # a changed pin: install again
    bash("mark_venv_current venv requirements.txt", project)
    (project / "pyproject.toml").write_text("[project]\nname = 'y'\n")
    assert not current(project)  # the editable install reads pyproject.toml too
    bash("mark_venv_current venv requirements.txt", project)
    os.remove(project / "venv" / "bin" / "python")
    assert not current(project)  # a venv without its python is rebuilt


def test_a_phase_says_what_starts_and_how_long_it_took(project: Path) -> None:
    done = bash('phase "ruff check (lint)" true', project)
    assert done.returncode == 0
    assert done.stdout.splitlines()[0] == "==> ruff check (lint)"
    assert done.stdout.splitlines()[1].startswith("    ruff check: ")
    assert done.stdout.rstrip().endswith("s")


def test_a_failing_phase_stops_the_script_with_its_status(project: Path) -> None:
    done = bash('phase "tests" false\necho never', project)
    assert done.returncode == 1
    assert "never" not in done.stdout
