"""
One version story (docs/architecture.md, "Rules").

0.1.0 is released; the unreleased work is the next release, 0.2.0, which the package calls
0.2.0.dev0 until it is released. Every ``versionadded``/``versionchanged``/``deprecated``
names a released version or the next one, and every deprecation warns until the one
removal release it states, which comes after the next release.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from group_admission import (
    GroupAdmissionPolicy,
    SamplingBudgetConfig,
    SamplingBudgetController,
)
from group_admission._validation import DEPRECATIONS_REMOVED_IN
from group_admission.adapters import slime as slime_adapter
from group_admission.adapters.roll import RollAgenticSettings

ROOT = Path(__file__).parents[1]
SRC = ROOT / "src" / "group_admission"
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
PYPROJECT = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
VERSION = PYPROJECT.group(1) if PYPROJECT else ""
RELEASED = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", CHANGELOG, re.MULTILINE)
HEADINGS = re.findall(r"^## \[([^\]]+)\]", CHANGELOG, re.MULTILINE)
#: The release the unreleased work becomes: the package version without its ``.devN``.
NEXT = VERSION.split(".dev")[0]
DIRECTIVE = re.compile(r"\.\. (versionadded|versionchanged|deprecated):: (\S+)")
#: How a removal is stated: "removed in 0.3.0", "goes in 0.3.0", "until 0.3.0".
REMOVAL = re.compile(r"\b(?:removed in|goes in|until)\s+(\d+\.\d+(?:\.\d+)?)\b")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _texts() -> dict[str, str]:
    """Every source module, docs page and the CHANGELOG's unreleased section, by path."""
    texts = {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in sorted(SRC.rglob("*.py"))
    }
    texts |= {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
        for path in (ROOT / "docs").rglob("*.md")
    }
    texts["README.md"] = (ROOT / "README.md").read_text(encoding="utf-8")
    texts["CHANGELOG.md [Unreleased]"] = CHANGELOG.split("\n## [", 2)[1]
    return texts


def test_the_package_version_is_the_next_release_in_development() -> None:
    """``--version`` (pyproject) says the unreleased work is 0.2.0, above every release in the CHANGELOG."""
    assert re.fullmatch(r"\d+\.\d+\.\d+\.dev\d+", VERSION), VERSION
    assert ["Unreleased", *RELEASED] == HEADINGS
    assert RELEASED
    assert _key(NEXT) > max(map(_key, RELEASED))


def test_every_version_directive_names_a_released_version_or_the_next() -> None:
    allowed = {*RELEASED, NEXT}
    found = [
        (path, kind, version)
        for path, text in _texts().items()
        for kind, version in DIRECTIVE.findall(text)
        if version not in allowed
    ]

    assert [] == found


def test_no_deprecation_outlives_its_stated_removal() -> None:
    """One removal release, after the next release; every removal stated anywhere names it."""
    stated = {(path, version) for path, text in _texts().items() for version in REMOVAL.findall(text)}

    assert _key(DEPRECATIONS_REMOVED_IN) > _key(NEXT)
    assert stated
    assert [] == [(path, version) for path, version in sorted(stated) if version != DEPRECATIONS_REMOVED_IN]


def test_every_deprecated_directive_states_the_removal() -> None:
    for path, text in _texts().items():
        for block in re.findall(r"\.\. deprecated:: \S+\n((?:\s+\S.*\n)+)", text):
            assert f"removed in {DEPRECATIONS_REMOVED_IN}" in " ".join(block.split()), (path, block)


def _legacy_observe() -> None:
    controller = SamplingBudgetController(SamplingBudgetConfig())
    controller.observe_round(
        controller.new_state(), [GroupAdmissionPolicy().evaluate([0, 1])], num_generations=2
    )


def _trl_last_step_report() -> None:
    from types import SimpleNamespace

    from group_admission.adapters.trl import AdmissionGRPOTrainer

    # The property as a trainer runs it, on a stand-in: a trainer needs a model to build.
    AdmissionGRPOTrainer.last_step_report.fget(SimpleNamespace(last_report=None))


#: Every deprecated use, called as a user calls it.
SHIMS: dict[str, Callable[[], Any]] = {
    "GroupAdmissionDecision.reasons": lambda: GroupAdmissionPolicy().evaluate([0, 1]).reasons,
    "BatchAdmissionResult.reasons()": lambda: GroupAdmissionPolicy().evaluate_batch([[0, 1]]).reasons(),
    "observe_round(state, decisions_or_stats)": _legacy_observe,
    "RollAgenticSettings(max_drop_ratio=)": lambda: RollAgenticSettings(max_drop_ratio=0.25),
    "RollAgenticSettings.max_drop_ratio": lambda: RollAgenticSettings().max_drop_ratio,
    "adapters.slime.ConsecutiveFailedGroupsError": lambda: slime_adapter.ConsecutiveFailedGroupsError,
    "AdmissionGRPOTrainer.last_step_report": _trl_last_step_report,
}


@pytest.mark.parametrize("use", sorted(SHIMS))
def test_a_deprecated_use_warns_at_the_callers_line_naming_the_removal(use: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SHIMS[use]()

    deprecations = [warning for warning in caught if warning.category is DeprecationWarning]
    assert 1 == len(deprecations)
    assert f"is deprecated and will be removed in {DEPRECATIONS_REMOVED_IN}: " in str(deprecations[0].message)
    assert __file__ == deprecations[0].filename


def test_every_deprecation_in_src_is_a_shim_called_above() -> None:
    """A new deprecation is one more call of ``deprecated()``, which this file must exercise."""
    calls = [
        node
        for path in SRC.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "deprecated"
    ]
    warns = [
        path.name
        for path in SRC.rglob("*.py")
        if "DeprecationWarning," in path.read_text(encoding="utf-8") and path.name != "_validation.py"
    ]

    assert len(SHIMS) == len(calls)
    assert [] == warns


def _warned_name(use: str) -> str:
    """The name a deprecated use's warning gives, bare: ``observe_round``, ``max_drop_ratio``..."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SHIMS[use]()
    message = next(str(warning.message) for warning in caught if warning.category is DeprecationWarning)
    return re.sub(r"^'?([\w.]+).*$", r"\1", message.split(" is deprecated", 1)[0])


def test_the_changelog_deprecates_every_warned_name_until_the_one_removal_release() -> None:
    """Every name a shim warns about has a ``### Deprecated`` entry stating DEPRECATIONS_REMOVED_IN."""
    section = CHANGELOG.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]
    deprecated_section = section.split("### Deprecated", 1)[1].split("\n### ", 1)[0]
    entries = [line for line in deprecated_section.splitlines() if line.startswith("- ")]
    names = {_warned_name(use) for use in SHIMS}

    assert [] == sorted(name for name in names if not any(name in entry for entry in entries))
    assert [] == [entry for entry in entries if not any(name in entry for name in names)]
    assert [] == [entry for entry in entries if REMOVAL.findall(entry) != [DEPRECATIONS_REMOVED_IN]]
