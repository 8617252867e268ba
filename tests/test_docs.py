"""
The README and every page under docs/ run as a reader runs them. The convention, for anyone
who adds or edits a code block:

- A ```python (or ```py) block runs ALONE: a fresh interpreter, from a scratch copy of the
  repository root (what it writes lands there). A block that builds on an earlier one says
  so, visibly, on its first line: ``# continues: NAME`` (free words may follow, e.g.
  ``# continues: loop (uses session, rng)``), and the earlier block names itself on its first
  line: ``# example: NAME``. The named blocks (and what they continue) run first, in the
  same interpreter.
- A ```bash block runs too, from the repository root, in a fresh shell as a reader opens one:
  the test environment is not on PATH until the README's activation block (``<!-- docs-test:
  activation -->``, ``source .venv/bin/activate``) has run, and it runs first, before every
  bash block, transcript and ``output of`` command, as a reader runs it once per shell.
  ``.venv`` is the test's own environment. ``# example:`` / ``# continues:`` work the same way.
- A ```text or ```console block whose first line starts with ``$ `` is a transcript: each
  ``$ command`` runs from the repository root and must print (stdout and stderr) the lines
  under it. A ```yaml block must parse. Other blocks are prose and do not run.
- Directives go in an HTML comment on the line just above the opening fence (the page does
  not show them):

  ``<!-- docs-test: skip: REASON -->`` the block is too expensive or needs what a test
  machine lacks (a GPU, the hub, a host): REASON says so and names the test or lane that
  runs it instead (``tests/cookbook/test_smoke.py::test_name``, ``.ci/verl``); every path
  it names must exist. A bash block that installs, clones, trains or runs a lane (``pip
  install``, ``.ci/...``, ``train.py``...) fails until it is declared so.
  ``<!-- docs-test: output -->`` this text block is what the runnable block above prints (stdout).
  ``<!-- docs-test: output of: COMMAND -->`` this text block is what COMMAND prints.
  ``<!-- docs-test: file: PATH -->`` this block is the whole file PATH (an example that ships).
  ``<!-- docs-test: excerpt: PATH -->`` this block appears verbatim in PATH. A shown file or
  excerpt is compared, not run (the file is what runs, where it is tested).
  ``<!-- docs-test: activation -->`` the README's one block that activates ``.venv`` (above).

  In expected output a line ``...`` stands for any lines; trailing spaces do not count.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *ROOT.joinpath("docs").rglob("*.md")])
RUNNABLE = {"python": "python", "py": "python", "bash": "bash", "sh": "bash"}
DIRECTIVE = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
EXAMPLE = re.compile(r"^# example: ([\w-]+)\s*$")
CONTINUES = re.compile(r"^# continues: ([\w-]+(?:, [\w-]+)*)\b")
#: A path a skip reason points at: a test file (optionally ::test_name) or a lane script.
POINTER = re.compile(r"(?:tests|\.ci|cookbook|benchmarks|docs)/[\w./-]*\w(?:::\w+)?")
#: Written by the generated scripts after each block, to split a chain's output per block.
SENTINEL = "----- docs-test: end of block -----"
#: Not mirrored into the scratch root: outputs and caches a reader's run creates afresh.
NOT_MIRRORED = {".git", "runs", "outputs", ".cache", ".pytest_cache", ".hypothesis"}
TIMEOUT = 280  # seconds per block, under pytest-timeout's 300
#: Commands that install, clone, train or run a lane: never run here, they must be declared skipped.
HEAVY = re.compile(
    r"\.ci/|run_demo\.sh|\brun\.sh|pip install|git clone|train\.py|ablation\.py"
    r"|cookbook\.\w+\.(?:train|ablation)\b|cookbook\.learning_bench"
)


@dataclass(frozen=True)
class Block:
    """One fenced block of a page, with its directive and its example/continues header."""

    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    directive: str = ""
    name: str = ""
    continues: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> str:
        if self.lang in RUNNABLE:
            return RUNNABLE[self.lang]
        if self.lang in ("text", "console") and self.text.startswith("$ "):
            return "transcript"
        return self.lang or "plain"

    @property
    def skipped(self) -> str:
        return self.directive[len("skip:") :].strip() if self.directive.startswith("skip:") else ""


def parse(page: Path) -> list[Block]:
    """The fenced blocks of a page, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = re.match(r"^```(\S*)\s*$", lines[index])
        if not opening:
            index += 1
            continue
        end = next(j for j in range(index + 1, len(lines)) if lines[j].rstrip() == "```")
        body = lines[index + 1 : end]
        above = DIRECTIVE.match(lines[index - 1]) if index else None
        name, continues = "", ()
        for first in body[:2]:  # the header: "# example: NAME" and/or "# continues: NAME, ..."
            if match := EXAMPLE.match(first):
                name = match.group(1)
            elif match := CONTINUES.match(first):
                continues = tuple(match.group(1).split(", "))
        blocks.append(
            Block(
                page=page,
                line=index + 1,
                lang=opening.group(1),
                text="\n".join(body) + "\n",
                directive=above.group(1) if above else "",
                name=name,
                continues=continues,
            )
        )
        index = end + 1
    return blocks


BLOCKS = [block for page in PAGES for block in parse(page)]
#: What a reader runs once in each new shell before any other command (the README says so).
ACTIVATIONS = [block for block in BLOCKS if block.directive == "activation"]
ACTIVATE = ACTIVATIONS[0].text if len(ACTIVATIONS) == 1 else "false  # no single activation block\n"


def _ids(blocks: list[Block]) -> list[str]:
    return [block.where for block in blocks]


def chain(block: Block) -> list[Block]:
    """The blocks to run for ``block``: what it continues (recursively, in page order), then itself."""
    page = [b for b in BLOCKS if b.page == block.page]
    named = {b.name: b for b in page if b.name}
    todo, seen = list(block.continues), {block.where: block}
    while todo:
        name = todo.pop()
        earlier = named.get(name)
        missing = f"{block.where} continues {name!r}: no earlier block starts with '# example: {name}'"
        assert earlier is not None, missing
        assert earlier.line < block.line, missing
        if earlier.where not in seen:
            seen[earlier.where] = earlier
            todo.extend(earlier.continues)
    return sorted(seen.values(), key=lambda b: b.line)


#: The environment the tests run in: the reader's ``.venv`` (what the README's command 1 installs).
VENV = Path(sys.prefix)
VENV_BIN = Path(sys.executable).parent


def scratch_root(tmp_path: Path) -> Path:
    """A scratch repository root: every top-level entry linked, so what a block writes lands here."""
    root = tmp_path / "repo"
    root.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in NOT_MIRRORED and entry.name != ".venv":
            (root / entry.name).symlink_to(entry)
    if (VENV / "bin" / "activate").is_file():
        (root / ".venv").symlink_to(VENV)
    else:  # not run from a venv: an activate script that does what a venv's does
        (root / ".venv" / "bin").mkdir(parents=True)
        (root / ".venv" / "bin" / "activate").write_text(f'export PATH="{VENV_BIN}:$PATH"\n')
    return root


def environment() -> dict[str, str]:
    """
    A fresh shell: the test environment off PATH until a block activates it, offline.

    This checkout's src comes first on PYTHONPATH, so the code under test is what runs
    even where ``.venv`` was installed from another checkout.
    """
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    ours = {str(VENV_BIN), str(VENV / "bin")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p not in ours)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MPLBACKEND="Agg")
    return env


# Runs each block in one namespace, with tracebacks that point at the page's own lines.
PYTHON_RUNNER = f"""
import json, sys
namespace = {{"__name__": "__main__"}}
for where, line, source in json.load(open(sys.argv[1])):
    exec(compile("\\n" * line + source, where.rsplit(":", 1)[0], "exec"), namespace)
    print({SENTINEL!r}, flush=True)
"""


def shell(command: list[str], cwd: Path, *, merge: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in ``cwd`` as the reader's shell would; ``merge`` puts stderr into stdout."""
    return subprocess.run(
        command,
        cwd=cwd,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge else subprocess.PIPE,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def run(blocks: list[Block], tmp_path: Path) -> str:
    """Run a chain of blocks from a scratch root; return what the last one printed on stdout."""
    cwd = scratch_root(tmp_path)
    if blocks[-1].kind == "python":
        script = tmp_path / "blocks.json"
        script.write_text(json.dumps([(b.where, b.line, b.text) for b in blocks]))
        command = [sys.executable, "-c", PYTHON_RUNNER, str(script)]
    else:
        if heavy := HEAVY.search("".join(b.text for b in blocks)):
            pytest.fail(
                f"{blocks[-1].where} runs {heavy.group(0)!r}: declare it <!-- docs-test: skip: ... -->"
            )
        script = "".join(f"{b.text}echo '{SENTINEL}'\n" for b in blocks)
        command = ["bash", "-eo", "pipefail", "-c", ACTIVATE + script]
    done = shell(command, cwd)
    if done.returncode:
        pytest.fail(
            f"{blocks[-1].where} failed (exit {done.returncode}) after {[b.where for b in blocks[:-1]]}\n"
            f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-5000:]}"
        )
    return done.stdout.split(SENTINEL + "\n")[-2]


def matches(actual: str, expected: str) -> bool:
    """Whether the output has the expected lines; an expected line ``...`` matches any lines."""
    pattern = "".join(
        r"(?:.*\n)*?" if line.strip() == "..." else re.escape(line.rstrip()) + r"[ \t]*\n"
        for line in expected.strip("\n").split("\n")
    )
    text = "\n".join(line.rstrip() for line in actual.strip("\n").split("\n")) + "\n"
    return re.fullmatch(pattern, text) is not None


def expected_output(block: Block) -> Block | None:
    """The ``output`` block that follows ``block`` (before the next runnable one), if any."""
    later = [b for b in BLOCKS if b.page == block.page and b.line > block.line]
    for other in later:
        if other.kind in ("python", "bash"):
            return None
        if other.directive == "output":
            return other
    return None


#: Shown files are checked against the file (the file itself is what runs), not run again.
RUN = [
    b
    for b in BLOCKS
    if b.kind in ("python", "bash") and not b.skipped and not b.directive.startswith(("file:", "excerpt:"))
]


@pytest.mark.parametrize("block", RUN, ids=_ids(RUN))
def test_block_runs_as_a_reader_runs_it(block: Block, tmp_path: Path) -> None:
    printed = run(chain(block), tmp_path)
    if (expected := expected_output(block)) is not None:
        assert matches(printed, expected.text), (
            f"{block.where} printed\n{printed}\nbut {expected.where} shows\n{expected.text}"
        )


TRANSCRIPTS = [b for b in BLOCKS if b.kind == "transcript"]


@pytest.mark.parametrize("block", TRANSCRIPTS, ids=_ids(TRANSCRIPTS))
def test_transcript_prints_what_it_shows(block: Block, tmp_path: Path) -> None:
    cwd = scratch_root(tmp_path)
    for part in re.split(r"^\$ ", block.text, flags=re.MULTILINE)[1:]:
        command, _, expected = part.partition("\n")
        done = shell(["bash", "-c", ACTIVATE + command], cwd, merge=True)
        assert matches(done.stdout, expected), f"{block.where}: `{command}` printed\n{done.stdout}"


OUTPUTS_OF = [b for b in BLOCKS if b.directive.startswith("output of:")]


@pytest.mark.parametrize("block", OUTPUTS_OF, ids=_ids(OUTPUTS_OF))
def test_output_of_a_command_is_what_it_prints(block: Block, tmp_path: Path) -> None:
    command = block.directive[len("output of:") :].strip()
    done = shell(["bash", "-c", ACTIVATE + command], scratch_root(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert matches(done.stdout, block.text), f"{block.where}: `{command}` printed\n{done.stdout}"


FILES = [b for b in BLOCKS if b.directive.startswith(("file:", "excerpt:"))]


@pytest.mark.parametrize("block", FILES, ids=_ids(FILES))
def test_a_shown_file_is_the_file(block: Block) -> None:
    kind, _, path = block.directive.partition(":")
    content = (ROOT / path.strip()).read_text(encoding="utf-8")
    if kind == "file":
        assert block.text == content, f"{block.where} differs from {path.strip()}"
    else:
        assert block.text in content, f"{block.where} is not an excerpt of {path.strip()}"


YAML = [b for b in BLOCKS if b.kind == "yaml"]


@pytest.mark.parametrize("block", YAML, ids=_ids(YAML))
def test_yaml_blocks_parse(block: Block) -> None:
    yaml = pytest.importorskip("yaml")
    assert isinstance(yaml.safe_load(block.text), dict), block.where


def test_every_skip_says_why_and_points_at_what_runs_it() -> None:
    skips = [b for b in BLOCKS if b.directive.startswith("skip")]
    assert skips, "the README's own commands are declared skipped"
    for block in skips:
        assert block.kind in ("python", "bash"), f"{block.where}: only runnable blocks are skipped"
        assert len(block.skipped.split()) >= 3, f"{block.where}: say why it is skipped and what runs it"
        for pointer in POINTER.findall(block.skipped):
            path, _, test = pointer.partition("::")
            assert (ROOT / path).exists(), f"{block.where} points at {path}, which does not exist"
            if test:
                assert re.search(rf"def {test}\b", (ROOT / path).read_text()), f"{block.where}: no {pointer}"


def test_the_readme_says_once_how_to_activate_the_environment_where_a_reader_first_needs_it() -> None:
    readme = [b for b in BLOCKS if b.page == ROOT / "README.md"]
    assert [b.page for b in ACTIVATIONS] == [ROOT / "README.md"], "one activation block, in the README"
    (activation,) = ACTIVATIONS
    assert activation.kind == "bash"
    assert activation.text.strip() == "source .venv/bin/activate"
    # Right after the commands that create .venv, before any command that needs it.
    before = [b for b in readme if b.line < activation.line and b.kind in ("python", "bash")]
    assert before, "the command that creates .venv comes first"
    assert all("run_demo.sh" in b.text or ".ci/" in b.text for b in before), [b.where for b in before]


def test_a_fresh_shell_finds_the_tools_only_after_activation(tmp_path: Path) -> None:
    cwd = scratch_root(tmp_path)
    probe = "command -v group-admission python || true"
    before = shell(["bash", "-c", probe], cwd).stdout.split()
    after = shell(["bash", "-c", ACTIVATE + probe], cwd).stdout.split()

    ours = (VENV / "bin").resolve()  # the folder: the venv's python is a link to the base interpreter
    assert not any(Path(p).parent.resolve() == ours for p in before), before
    assert [Path(p).parent.resolve() == ours for p in after] == [True, True], after


def test_directives_and_headers_are_well_formed() -> None:
    known = ("skip:", "output of:", "file:", "excerpt:")
    for block in BLOCKS:
        if block.directive == "activation":
            continue
        assert not block.directive or block.directive == "output" or block.directive.startswith(known), (
            f"{block.where}: unknown directive {block.directive!r} (see tests/test_docs.py)"
        )
        if block.directive == "output":
            above = [b for b in BLOCKS if b.page == block.page and b.line < block.line]
            runnable = [b for b in above if b.kind in ("python", "bash")]
            assert runnable, f"{block.where}: the output of what? no runnable block above it"
            assert expected_output(runnable[-1]) == block, f"{block.where}: a runnable block comes between"
        if block.name or block.continues:
            assert block.kind in ("python", "bash"), f"{block.where}: only runnable blocks are named"
            chain(block)  # every name it continues exists earlier on the page
    for page in PAGES:
        names = [b.name for b in BLOCKS if b.page == page and b.name]
        assert len(names) == len(set(names)), f"{page}: an example name is used twice: {names}"
    for page in PAGES:  # a directive that is not right above a fence would be silently ignored
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            if DIRECTIVE.match(line):
                assert any(b.page == page and b.line == number + 1 for b in BLOCKS), (
                    f"{page.relative_to(ROOT)}:{number}: a docs-test directive must be just above a fence"
                )


def test_expected_output_matches_line_by_line_with_ellipsis() -> None:
    assert matches("a  \nb\nc\n", "a\nb\nc")  # trailing spaces do not count
    assert matches("a\nb\nc\nd\n", "a\n...\nd\n")
    assert matches("a\nd\n", "a\n  ...\nd")  # "..." may stand for no line
    assert not matches("a\nb\n", "a\n")  # every printed line is shown
    assert not matches("a\nb (x)\n", "a\nb (y)\n")
    assert not matches("a.b\n", "a*b\n")  # the expected text is literal


def test_the_quickstart_runs(capsys: pytest.CaptureFixture[str]) -> None:
    import runpy

    runpy.run_path(str(ROOT / "cookbook" / "quickstart.py"), run_name="__main__")

    out = capsys.readouterr().out
    assert "round 0:" in out
    assert "admitted" in out
    assert "generated" in out
