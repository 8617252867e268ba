"""
The install paths the README documents for today (issue 28): the library into an environment of
one's own, from a clone or from a wheel built once from it. Each installs into a fresh venv
with the README's commands, then imports the package and runs the command line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def run(command: list[str | Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``command`` as a fresh shell would: no PYTHONPATH pointing at a checkout."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert 0 == done.returncode, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """What a clone holds that an install reads (building in the checkout would leave build/ there)."""
    target = tmp_path / "group-admission"
    shutil.copytree(ROOT / "src", target / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, target / name)
    return target


def fresh_venv(tmp_path: Path) -> Path:
    """A new venv with nothing but pip; returns its bin folder."""
    run([sys.executable, "-m", "venv", tmp_path / "venv"], tmp_path)
    return tmp_path / "venv" / "bin"


def check_installed(bin_dir: Path, tmp_path: Path) -> None:
    """The installed package, not the checkout, imports without torch, and its command runs."""
    probe = "import sys, group_admission; print(group_admission.__file__); print('torch' in sys.modules)"
    where, torch_loaded = run([bin_dir / "python", "-c", probe], tmp_path).stdout.split()
    assert Path(where).is_relative_to(tmp_path / "venv")
    assert "False" == torch_loaded
    explained = run(
        [bin_dir / "group-admission", "explain", ROOT / "docs" / "examples" / "policy.yaml"], tmp_path
    )
    assert explained.stdout.startswith("Policy:")


def test_pip_install_from_a_clone(clone: Path, tmp_path: Path) -> None:
    bin_dir = fresh_venv(tmp_path)

    run([bin_dir / "pip", "install", "--quiet", f"{clone}[yaml]"], tmp_path)

    check_installed(bin_dir, tmp_path)


def test_a_wheel_built_once_installs_anywhere(clone: Path, tmp_path: Path) -> None:
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", "dist", "."], clone)
    (wheel,) = (clone / "dist").glob("group_admission-*-py3-none-any.whl")
    bin_dir = fresh_venv(tmp_path)

    run([bin_dir / "pip", "install", "--quiet", f"{wheel}[yaml]"], tmp_path)

    check_installed(bin_dir, tmp_path)
