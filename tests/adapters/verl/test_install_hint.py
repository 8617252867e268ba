"""Without verl, importing the adapter fails with the pip line that installs it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest


def _verl_importable() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("verl", "transfer_queue"))


@pytest.mark.skipif(_verl_importable(), reason="verl is installed here; the hint is for hosts without it")
def test_import_without_verl_names_the_pip_line() -> None:
    """The ImportError names the adapter and the exact install command."""
    with pytest.raises(ImportError, match=r"pip install 'group-admission\[verl\]'") as caught:
        import group_admission.adapters.verl  # noqa: F401

    assert "group_admission.adapters.verl requires verl" in str(caught.value)


def test_group_admission_does_not_import_verl() -> None:
    """import group_admission (and its adapters package) leaves verl and ray unimported."""
    code = textwrap.dedent(
        """
        import sys
        import group_admission, group_admission.adapters
        print(sorted(m for m in ("verl", "ray", "transfer_queue", "torch") if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert "[]" == out.stdout.strip()
