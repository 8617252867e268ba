"""The install helpers of .ci/run, the host lanes and cookbook/run_demo.sh (.ci/lib.sh), on scratch venvs."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
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


@pytest.fixture
def recording(tmp_path: Path) -> tuple[Path, Path]:
    """A project whose ``python3`` makes venvs whose ``python`` logs every call and installs nothing."""
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\nnumpy==2.4.6\n")
    (tmp_path / "nodeps.txt").write_text("openrlhf==0.11.2\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    log = tmp_path / "calls.log"
    logger = f'#!/bin/sh\nif [ "$1" = -I ]; then cat >/dev/null; fi\necho "$*" >>{log}\n'
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python3 = bin_dir / "python3"
    python3.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo "Python 3.11.7"; exit 0; fi\n'
        f'mkdir -p "$3/bin"\nprintf %s {shlex.quote(logger)} >"$3/bin/python"\nchmod +x "$3/bin/python"\n'
    )
    python3.chmod(0o755)
    return tmp_path, log


def ensure(project: Path, *options: str) -> subprocess.CompletedProcess[str]:
    path = f"{project / 'bin'}:{os.environ['PATH']}"
    return bash(f'PATH="{path}"\nensure_venv venv requirements.txt "about" {" ".join(options)}', project)


def test_ensure_venv_installs_torch_then_the_no_deps_file_then_the_rest_then_the_checkout(
    recording: tuple[Path, Path],
) -> None:
    project, log = recording
    done = ensure(project, "no-deps", "nodeps.txt", "editable")

    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == [
        "-m pip install --quiet --upgrade pip",
        "-m pip install --quiet torch==2.13.0",
        "-m pip install --quiet --no-deps -r nodeps.txt",
        "-m pip install --quiet -r requirements.txt",
        "-m pip install --quiet --no-deps -e .",
    ]
    assert "==> installing nodeps.txt into venv (without dependencies)" in done.stdout
    # pip's ERROR lines about the pins left out are announced as expected, before they come
    announced = done.stdout.index('expected below: "ERROR: ... requires ..., which is not installed"')
    assert "of nodeps.txt this venv leaves out on purpose" in done.stdout
    assert announced < done.stdout.index("==> installing the rest of requirements.txt")

    log.unlink()
    again = ensure(project, "no-deps", "nodeps.txt", "editable")
    assert "already holds requirements.txt nodeps.txt: no install" in again.stdout
    assert log.read_text().splitlines() == ["-I -"]  # only the check that it imports this checkout

    (project / "nodeps.txt").write_text("openrlhf==0.11.3\n")
    log.unlink()
    ensure(project, "no-deps", "nodeps.txt", "editable")
    assert "-m pip install --quiet --no-deps -r nodeps.txt" in log.read_text()  # a changed pin: install
    assert "expected below" not in ensure_plain(project).stdout  # only where pins were left out


def ensure_plain(project: Path) -> subprocess.CompletedProcess[str]:
    shutil.rmtree(project / "venv", ignore_errors=True)
    return ensure(project, "editable")


def test_ensure_venv_refuses_an_unknown_option(recording: tuple[Path, Path]) -> None:
    project, log = recording
    done = ensure(project, "editabel")

    assert done.returncode == 2
    assert "ensure_venv: unknown option 'editabel'" in done.stderr
    assert not log.exists()


@pytest.mark.parametrize("here", [True, False])
def test_editable_is_here_only_when_the_venv_imports_this_checkout(tmp_path: Path, here: bool) -> None:
    checkout, other = tmp_path / "checkout", tmp_path / "other-clone"
    for root in (checkout, other):
        (root / "src" / "group_admission").mkdir(parents=True)
        (root / "src" / "group_admission" / "__init__.py").write_text("")
    venv = checkout / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "group_admission.pth").write_text(str((checkout if here else other) / "src") + "\n")

    # PYTHONPATH naming this checkout must not hide an install of another clone.
    done = bash(f'PYTHONPATH="{checkout / "src"}" editable_is_here venv', checkout)

    assert (done.returncode == 0) is here
