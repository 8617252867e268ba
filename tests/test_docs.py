"""Every ```python block of the docs runs (blocks of one page share a namespace, in order)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *ROOT.joinpath("docs").rglob("*.md")])
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_python_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for number, block in enumerate(BLOCK.findall(page.read_text()), start=1):
        code = compile(block, f"{page.relative_to(ROOT)} block {number}", "exec")
        exec(code, namespace)


def test_the_quickstart_runs(capsys: pytest.CaptureFixture[str]) -> None:
    import runpy

    runpy.run_path(str(ROOT / "cookbook" / "quickstart.py"), run_name="__main__")

    out = capsys.readouterr().out
    assert "round 0:" in out
    assert "admitted" in out
    assert "generated" in out
