"""CHANGELOG.md tells one truth: what its unreleased section removes is gone, and described nowhere else."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"
#: A qualified public name in backticks: ``Class.attribute`` or ``module.Class.attribute``.
QUALIFIED = re.compile(r"`((?:[a-z_]+\.)*[A-Z]\w*\.\w+)`")


def _sections() -> dict[str, str]:
    """The unreleased section's subsections (``Added``, ``Removed``...) by title."""
    text = CHANGELOG.read_text()
    unreleased = text.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]
    parts = re.split(r"^### (\w+)\s*$", unreleased, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _resolves(name: str) -> bool:
    """Whether ``name`` (``Class.attr`` in the package root or ``module.Class.attr``) still exists."""
    *modules, owner, attribute = name.split(".")
    module = importlib.import_module(".".join(["group_admission", *modules]))
    return hasattr(getattr(module, owner, None), attribute)


def test_what_the_unreleased_section_removes_is_gone_and_described_nowhere_else() -> None:
    sections = _sections()
    removed = QUALIFIED.findall(sections["Removed"])
    elsewhere = "".join(text for title, text in sections.items() if title != "Removed")

    assert removed  # the table is read: GroupAdmissionDecision.from_dict at least
    for name in removed:
        assert not _resolves(name), f"{name} is listed as removed but exists"
        assert f"`{name}`" not in elsewhere, f"{name} is listed as removed and described elsewhere"
