"""The package's shape, as tests/adapters/test_packages.py checks the rebuilt adapters' packages."""

from __future__ import annotations

import ast
from pathlib import Path

import group_admission.adapters.twinkle as twinkle_adapter


def test_init_only_imports_names_and_all_lists_them():
    tree = ast.parse(Path(twinkle_adapter.__file__).read_text(encoding="utf-8"))
    body = tree.body[1:] if isinstance(tree.body[0], ast.Expr) else tree.body
    public = {name for name in vars(twinkle_adapter) if not name.startswith("_") and name != "annotations"}

    assert {type(node).__name__ for node in body} <= {"ImportFrom", "Assign"}
    assert set(twinkle_adapter.__all__) == public


def test_supported_versions_are_requirement_strings():
    from packaging.requirements import Requirement

    assert twinkle_adapter.SUPPORTED_VERSIONS
    for line in twinkle_adapter.SUPPORTED_VERSIONS:
        requirement = Requirement(line)
        assert requirement.name == "twinkle-kit"
        assert "0.5.1" in requirement.specifier
