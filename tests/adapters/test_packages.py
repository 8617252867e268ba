"""
Each host's adapter package: the contract docs/adapters/writing.md's checklist mirrors.

An ``__init__`` that only imports names and publishes them, exports defined by the adapter,
imports of ``group_admission``, the kit and the host rules only, versions as data, a docs page.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
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
#: What an adapter may import of this package, besides its own modules.
ALLOWED = ("group_admission", "group_admission.adapters._kit", "group_admission._host_rules")
#: Names an adapter exports that another module defines: the RAGEN filter's ``selection``
#: argument is RAGEN's rule's own value type, which the simulator shares.
FOREIGN_EXPORTS = {"ragen": {"RagenSelection"}}


def imported_modules(path: Path, package: str) -> list[str]:
    """Every module ``path`` imports (relative imports resolved against ``package``), nested ones too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            # ``from ... import _session`` imports a private module; ``from ... import X`` a name.
            found += (
                [module]
                if node.module
                else [
                    f"{module}.{alias.name}" if alias.name.startswith("_") else module for alias in node.names
                ]
            )
    return found


def private_imports(host: str) -> list[str]:
    """The imports of ``group_admission`` modules that an adapter may not make, as ``file: module``."""
    own = f"group_admission.adapters.{host}"
    bad = []
    for path in sorted((ADAPTERS / host).rglob("*.py")):
        package = ".".join([own, *path.relative_to(ADAPTERS / host).parent.parts])
        for module in imported_modules(path, package):
            allowed = (
                module in ALLOWED
                or module.startswith(("group_admission._host_rules.", f"{own}."))
                or module == own
            )
            if module.split(".")[0] == "group_admission" and not allowed:
                bad.append(f"{path.name}: {module}")
    return bad


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
    assert [target.id for node in assignments for target in node.targets] in (
        ["__all__"],
        ["__all__", "__getattr__"],  # names 0.1.0 exported that live elsewhere now (they warn)
    )
    assert "_publish(__name__)" == ast.unparse(last)


def test_hosts_are_every_adapter_package_and_the_package_docstring_names_them() -> None:
    packages = {path.name for path in ADAPTERS.iterdir() if (path / "__init__.py").is_file()}

    assert packages - {"_kit"} == set(HOSTS)
    for host in HOSTS:
        assert f".{host}``" in group_admission.adapters.__doc__, host


@pytest.mark.parametrize("host", HOSTS)
def test_imports_only_the_root_the_kit_and_the_host_rules(host: str) -> None:
    """``group_admission``, ``adapters._kit``, ``_host_rules`` and its own modules: no private core module."""
    assert private_imports(host) == []


def test_the_import_rule_sees_a_private_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "__init__.py").write_text(
        "from ..._session import AdmissionSession\nfrom .._kit import chunk\n"
    )
    (tmp_path / "fake" / "_x.py").write_text(
        "from ... import _budget, parse_yaml\ndef f():\n    from group_admission._loading import parse_yaml\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ADAPTERS", tmp_path)

    assert private_imports("fake") == [
        "__init__.py: group_admission._session",
        "_x.py: group_admission._budget",
        "_x.py: group_admission._loading",
    ]


@pytest.mark.parametrize("host", HOSTS)
def test_exports_only_names_it_defines(host: str) -> None:
    """No adapter re-exports the root's names, the kit's or the host rules' (one documented exception)."""
    tree = ast.parse((ADAPTERS / host / "__init__.py").read_text(encoding="utf-8"))
    foreign = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level != 1 and node.module != "__future__"
        for alias in node.names
    }

    assert {name for name in foreign if not name.startswith("_")} == FOREIGN_EXPORTS.get(host, set())


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
