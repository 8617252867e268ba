"""Each host's adapter package: an ``__init__`` that only imports names, its exports, its versions as data."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import types
from collections.abc import Mapping
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

import group_admission.adapters

ADAPTERS = Path(group_admission.adapters.__file__).parent
DOCS = ADAPTERS.parents[2] / "docs" / "adapters"
HOSTS = ["slime", "roll", "ragen", "challenger", "trl", "verl", "twinkle", "openrlhf", "trl_async", "areal"]
# The hosts that must be installed for their adapter package to import at all.
NEEDS = {"trl": ("trl",), "trl_async": ("trl", "aiohttp"), "verl": ("verl", "transfer_queue")}
COMMIT = re.compile(r"[\w.-]+/[\w.-]+@[0-9a-f]{7,40}")


def adapter(host: str) -> types.ModuleType:
    missing = [name for name in NEEDS.get(host, ()) if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"{host} is not installed here ({', '.join(missing)}); its own lane checks it")
    return importlib.import_module(f"group_admission.adapters.{host}")


@pytest.mark.parametrize("host", HOSTS)
def test_init_only_imports_names(host: str) -> None:
    """The package's __init__: a docstring, imports, __all__, and the call that publishes the names."""
    tree = ast.parse((ADAPTERS / host / "__init__.py").read_text(encoding="utf-8"))
    body = tree.body[1:] if isinstance(tree.body[0], ast.Expr) else tree.body
    *names, last = body

    kinds = {type(node).__name__ for node in names}
    assignments = [node for node in names if isinstance(node, ast.Assign)]

    assert kinds <= {"ImportFrom", "Assign"}
    assert ["__all__"] == [target.id for node in assignments for target in node.targets]
    assert "_publish(__name__)" == ast.unparse(last)


@pytest.mark.parametrize("host", HOSTS)
def test_exports_are_exactly_all(host: str) -> None:
    """__all__ lists exactly the public names."""
    module = adapter(host)
    public = {name for name in vars(module) if not name.startswith("_") and name != "annotations"}

    assert set(module.__all__) == public


@pytest.mark.parametrize("host", HOSTS)
def test_exports_say_their_public_module(host: str) -> None:
    """Reprs and docs name the adapter package (or the root), never a private module."""
    module = adapter(host)
    homes = {
        name: value.__module__
        for name in module.__all__
        if isinstance(value := getattr(module, name), (type, types.FunctionType))
    }

    assert homes
    assert {
        name: home for name, home in homes.items() if home not in (module.__name__, "group_admission")
    } == {}


@pytest.mark.parametrize("host", HOSTS)
def test_supported_versions_are_one_shape(host: str) -> None:
    """A read-only mapping from distribution to a PEP 440 specifier or an ``owner/repo@commit`` pin."""
    versions = adapter(host).SUPPORTED_VERSIONS

    assert isinstance(versions, Mapping)
    assert versions
    for distribution, wanted in versions.items():
        assert isinstance(distribution, str)
        assert distribution
        assert COMMIT.fullmatch(wanted) or SpecifierSet(wanted), wanted
    with pytest.raises(TypeError):
        versions["other"] = ">=1"  # type: ignore[index]


@pytest.mark.parametrize("host", HOSTS)
def test_the_docs_page_shows_the_supported_versions(host: str) -> None:
    """docs/adapters/<host>.md spells out SUPPORTED_VERSIONS."""
    versions = adapter(host).SUPPORTED_VERSIONS
    page = (DOCS / f"{host}.md").read_text(encoding="utf-8")

    for distribution, wanted in versions.items():
        assert f'"{distribution}": "{wanted}"' in page
