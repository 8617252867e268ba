"""The layers of src/: no import cycles, and what each layer may import (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import group_admission

SRC = Path(group_admission.__file__).parent
PACKAGE = "group_admission"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> list[str]:
    base = module if is_package else module.rsplit(".", 1)[0]
    for _ in range(node.level - 1):
        base = base.rsplit(".", 1)[0]
    target = node.module if node.level == 0 else ".".join(filter(None, (base, node.module)))
    if target is None:
        return []
    # `from . import x` imports the submodule x.
    return [f"{target}.{alias.name}" for alias in node.names] + [target]


def _imports() -> dict[str, set[str]]:
    """Every import of every module in src/, TYPE_CHECKING blocks and function bodies included."""
    modules = {_module_name(path): path for path in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                found.update(_resolve(module, node, path.name == "__init__.py"))
        graph[module] = {name for name in found if name in modules and name != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            # A package's __init__ importing its own submodules is how packages work, not a cycle.
            if nxt == node.rsplit(".", 1)[0] and node.startswith(nxt + "."):
                continue
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_src_has_no_import_cycles() -> None:
    assert _cycles(_imports()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_the_core_imports_no_adapter_simulator_or_exporter() -> None:
    graph = _imports()
    outer = ("group_admission.adapters", "group_admission.simulation", "group_admission.prometheus")
    # The CLI (_cli and its _cli_* modules) is the outermost layer: it drives the simulator.
    core = [
        m
        for m in graph
        if m.count(".") == 1 and not m.startswith(outer) and not m.startswith("group_admission._cli")
    ]
    assert core
    for module in core:
        assert not [name for name in graph[module] if name.startswith(outer)], module


def test_the_core_and_the_package_root_never_import_the_research_tooling() -> None:
    """simulation/ and the CLI stay in the package behind one boundary (docs/architecture.md)."""
    graph = _imports()
    tooling = ("group_admission.simulation", "group_admission._cli")
    core = [
        m
        for m in graph
        if not m.startswith((*tooling, "group_admission.adapters", "group_admission.prometheus"))
    ]
    assert "group_admission" in core
    assert "group_admission._session" in core
    for module in core:
        assert not [name for name in graph[module] if name.startswith(tooling)], module


def test_the_boundary_check_sees_an_import_of_the_tooling() -> None:
    graph = _imports()
    assert any(name.startswith("group_admission.simulation") for name in graph["group_admission._cli"])


def test_the_simulator_imports_no_adapter() -> None:
    graph = _imports()
    for module, imported in graph.items():
        if module.startswith("group_admission.simulation"):
            assert not [n for n in imported if n.startswith("group_admission.adapters")], module


def test_the_architecture_page_names_every_module_of_the_package() -> None:
    page = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = [
        path.relative_to(SRC).as_posix()
        for path in SRC.rglob("*.py")
        if "adapters" not in path.parts[len(SRC.parts) :] and "simulation" not in path.parts
    ]
    missing = [name for name in named if f"`{name}`" not in page and f"`{name.split('/')[0]}/`" not in page]
    assert not missing
