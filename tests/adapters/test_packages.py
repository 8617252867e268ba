"""Each host's adapter package: an ``__init__`` that only imports names, and its versions as data."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import group_admission.adapters

ADAPTERS = Path(group_admission.adapters.__file__).parent
# The hosts rebuilt as packages on the session; the others join as they are rebuilt.
HOSTS = ["ragen", "challenger"]


@pytest.mark.parametrize("host", HOSTS)
def test_init_only_imports_names(host):
    """The package's __init__ is a docstring, imports from its private modules, and __all__."""
    tree = ast.parse((ADAPTERS / host / "__init__.py").read_text(encoding="utf-8"))
    body = tree.body[1:] if isinstance(tree.body[0], ast.Expr) else tree.body

    kinds = {type(node).__name__ for node in body}
    assignments = [node for node in body if isinstance(node, ast.Assign)]

    assert kinds <= {"ImportFrom", "Assign"}
    assert ["__all__"] == [target.id for node in assignments for target in node.targets]


@pytest.mark.parametrize("host", HOSTS)
def test_exports_and_supported_versions(host):
    """__all__ lists exactly the public names, and the supported host versions are data."""
    module = importlib.import_module(f"group_admission.adapters.{host}")
    public = {name for name in vars(module) if not name.startswith("_") and name != "annotations"}

    assert set(module.__all__) == public
    assert module.SUPPORTED_VERSIONS
    assert all(isinstance(version, str) and version for version in module.SUPPORTED_VERSIONS)
