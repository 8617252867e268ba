"""
The research half (cookbook/, benchmarks/) held to src's standard (issue 30 §3).

Recipes and benchmarks run by name, without path edits; test doubles stay under tests/; both
GRPO harnesses share one statistics module and one pool runner; mypy covers both folders;
no function there runs over 60 lines; every command the docs give runs a module that exists.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESEARCH = ("cookbook", "benchmarks")
SOURCES = sorted(path for folder in RESEARCH for path in (ROOT / folder).rglob("*.py"))
#: ``python -m cookbook.x`` / ``python -m benchmarks.x`` wherever a reader or a script finds one.
COMMAND = re.compile(r"python[\w./-]* -m ((?:cookbook|benchmarks)(?:\.\w+)+)")


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _imported(path: Path) -> set[str]:
    """The top-level names ``path`` imports (absolute imports)."""
    names: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _is_pytest_module(path: Path) -> bool:
    """Test functions and no ``__main__`` block: a module only pytest runs."""
    text = path.read_text(encoding="utf-8")
    return "\ndef test_" in text and "__main__" not in text


def test_no_module_outside_tests_edits_sys_path() -> None:
    edits = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in [*SOURCES, *(ROOT / "src").rglob("*.py")]
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", "") == "sys"
    ]

    assert edits == []


def test_test_doubles_are_imported_only_under_tests_or_by_pytest_modules() -> None:
    """The names tests/ puts on pytest's path (adapters, doubles, ...) are not the root's packages."""
    doubles = {
        entry.stem for entry in (ROOT / "tests").iterdir() if entry.suffix == ".py" or entry.is_dir()
    } - {"conftest", "cookbook", "__pycache__"}
    found = {
        str(path.relative_to(ROOT)): sorted(_imported(path) & doubles)
        for path in [*SOURCES, *(ROOT / "src").rglob("*.py")]
        if _imported(path) & doubles
    }

    assert "adapters" in doubles  # the check reads tests/
    assert found == {"benchmarks/bench_slime_streaming.py": ["adapters"]}
    assert all(_is_pytest_module(ROOT / name) for name in found)


def test_no_function_in_the_cookbook_or_the_benchmarks_runs_over_60_lines() -> None:
    long = {
        f"{path.relative_to(ROOT)}:{node.name}": (node.end_lineno or node.lineno) - node.lineno + 1
        for path in SOURCES
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 > 60
    }

    assert long == {}


def test_both_harnesses_share_one_t_quantile_and_one_pool_runner() -> None:
    """Only cookbook/stats.py tabulates Student's t; only cookbook/pool.py starts worker pools."""
    quantiles = [
        str(path.relative_to(ROOT))
        for path in SOURCES
        if re.search(r"12\.706|\bdef t(?:95|_quantile)\b", path.read_text())
    ]
    pools = [str(path.relative_to(ROOT)) for path in SOURCES if ".Pool(" in path.read_text()]
    assert quantiles == ["cookbook/stats.py"]
    assert pools == ["cookbook/pool.py"]
    for path in ("grpo_gsm8k/ablation_report.py", "learning_bench/report.py"):
        assert "from cookbook.stats import" in (ROOT / "cookbook" / path).read_text()
    for path in ("grpo_gsm8k/ablation.py", "learning_bench/learning_bench.py"):
        assert "from cookbook.pool import" in (ROOT / "cookbook" / path).read_text()


def test_mypy_and_the_docstring_rules_cover_the_cookbook_and_the_benchmarks() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    ignored = config["tool"]["ruff"]["lint"]["per-file-ignores"]

    assert {"cookbook", "benchmarks"} <= set(config["tool"]["mypy"]["files"])
    assert config["tool"]["mypy"]["strict"] is True
    for folder in RESEARCH:
        assert not {"D", "ANN"} & set(ignored.get(f"{folder}/**", []))
    assert "mypy" in (ROOT / ".ci" / "run").read_text()


def _commands() -> dict[str, set[str]]:
    """Every ``python -m`` module of the research folders a page, script or docstring names."""
    texts = [*ROOT.glob("*.md"), *(ROOT / "docs").rglob("*.md"), *(ROOT / ".ci").iterdir(), *SOURCES]
    texts += [*(ROOT / "cookbook").rglob("*.sh")]
    found: dict[str, set[str]] = {}
    for path in texts:
        if path.is_file() and path.name != "CHANGELOG.md":
            for module in COMMAND.findall(path.read_text(encoding="utf-8")):
                found.setdefault(module, set()).add(str(path.relative_to(ROOT)))
    return found


COMMANDS = _commands()


def test_the_docs_run_the_recipes_and_benchmarks_by_name() -> None:
    named = {"cookbook.learning_bench", "cookbook.grpo_gsm8k.train", "benchmarks.bench_planning"}

    assert named <= set(COMMANDS)


@pytest.mark.parametrize("module", sorted(COMMANDS))
def test_every_module_the_docs_run_exists_and_runs_as_main(module: str) -> None:
    spec = importlib.util.find_spec(module)
    assert spec is not None, f"{module} (named in {sorted(COMMANDS[module])}) does not exist"
    if spec.submodule_search_locations:  # a package: its __main__ runs
        spec = importlib.util.find_spec(f"{module}.__main__")
        assert spec is not None, f"{module} has no __main__.py"
    assert spec.origin is not None
    assert 'if __name__ == "__main__":' in Path(spec.origin).read_text(encoding="utf-8")
