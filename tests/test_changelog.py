"""
CHANGELOG.md tells one truth, one line per change.

What its unreleased section removes is gone and described nowhere else; every unreleased
entry is one short line that names the symbol and the docs page explaining it (the
reasoning lives on that page, not in the CHANGELOG), and the page exists.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = ROOT / "CHANGELOG.md"
#: A qualified public name in backticks: ``Class.attribute`` or ``module.Class.attribute``.
QUALIFIED = re.compile(r"`((?:[a-z_]+\.)*[A-Z]\w*\.\w+)`")
#: The longest entry: one line that reads at a glance (structlog's entries are shorter still).
MAX_ENTRY = 300
#: A docs page an entry cites, with an optional anchor: ``docs/session.md#streams``.
DOCS_PAGE = re.compile(r"\b(docs/[\w/]+\.md)(?:#([\w-]+))?")


def _unreleased() -> str:
    """The text between ``## [Unreleased]`` and the latest release's heading."""
    return CHANGELOG.read_text(encoding="utf-8").split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]


def _sections() -> dict[str, str]:
    """The unreleased section's subsections (``Added``, ``Removed``...) by title."""
    unreleased = _unreleased()
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


def test_every_unreleased_entry_is_one_short_line() -> None:
    """A bullet that wraps, or a paragraph between bullets, is a design note: it belongs in the docs."""
    lines = [line for line in _unreleased().splitlines() if line.strip()]
    entries = [line for line in lines if line.startswith("- ")]

    assert len(entries) > 100  # the section is read
    assert [] == [line for line in lines if not line.startswith(("- ", "### "))]
    assert [] == [entry for entry in entries if len(entry) > MAX_ENTRY]
    assert [] == [entry for entry in entries if "`" not in entry]  # each names what changed


def test_the_subsections_are_keep_a_changelogs_in_their_order() -> None:
    assert ["Added", "Changed", "Deprecated", "Removed", "Fixed"] == list(_sections())


def _anchors(page: Path) -> set[str]:
    """The GitHub anchors of a page's headings (lower case, punctuation dropped, spaces as ``-``)."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_every_docs_page_an_entry_cites_exists() -> None:
    cited = set(DOCS_PAGE.findall(_unreleased()))

    assert len({page for page, _ in cited}) > 10
    assert [] == sorted(page for page, _ in cited if not (ROOT / page).is_file())
    assert [] == sorted(
        (page, anchor) for page, anchor in cited if anchor and anchor not in _anchors(ROOT / page)
    )
