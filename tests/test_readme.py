"""The README and every page of ``docs/`` stay true: each code block is run or checked, and
no link points at a missing file or heading.

How a fenced block is tested depends on its language, and for Python on the HTML comment
``<!-- test: KIND -->`` on the line before its fence (invisible when rendered):

- ``python`` with ``script``: run as a script in an empty folder (a subprocess);
- ``python`` with ``agent``: run with top-level ``await`` in a namespace whose ``agent`` is a
  scripted agent that already has two prompts which wrote files (checkpoints to restore);
- ``python`` with ``cassette``: run with ``ANTHROPIC_*`` pointing at the fake Messages API;
- ``python`` with ``protocol``: the ``Checkpointer`` protocol as shown, compared with the real one;
- ``python`` with ``compile``: for code that needs what a test cannot have (a remote database,
  your own backend module): it must compile and every name it imports must exist;
- ``ipython``: run line by line in a real IPython shell with the extension loaded (``%agent
  SUB`` must be a subcommand, ``%config`` a real setting, ``%%agent`` flags real ones);
- ``bash``: each command's script or file exists (and a ``pip install`` extra is declared);
- ``text`` or no language: shown output or a folder tree, not run.

A block of any other language, or a Python block without a kind, fails the test: a new
block is tested from the day it is written.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib
import inspect
import io
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer
from payloads import elements

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
KINDS = {"script", "agent", "cassette", "protocol", "compile"}

_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_TAG = re.compile(r"^\s*<!--\s*test:\s*(\w+).*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    kind: str | None
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a page, dedented to their fence."""
    found: list[Block] = []
    lines = page.read_text().split("\n")
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, lang = fence.group(1), fence.group(2)
        tag = _TAG.match(lines[i - 1]) if i else None
        start, i = i, i + 1
        body: list[str] = []
        while not re.match(rf"^{indent}```\s*$", lines[i]):
            body.append(lines[i][len(indent) :])
            i += 1
        found.append(
            Block(page, start + 1, lang, tag.group(1) if tag else None, "\n".join(body) + "\n")
        )
        i += 1
    return found


ALL_BLOCKS = [b for page in PAGES for b in blocks(page)]


def of(lang: str, kind: str | None = None) -> list[Any]:
    return [pytest.param(b, id=b.where) for b in ALL_BLOCKS if b.lang == lang and b.kind == kind]


def test_every_block_has_a_known_test() -> None:
    untested = [
        b.where
        for b in ALL_BLOCKS
        if b.lang not in {"python", "ipython", "bash", "text", ""}
        or (b.lang == "python" and b.kind not in KINDS)
    ]
    assert not untested, f"blocks with no test kind (see this module's docstring): {untested}"
    assert len(ALL_BLOCKS) >= 20, "the pages lost their code blocks?"


# -- Python


def _compile(block: Block) -> Any:
    return compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def _imports_resolve(block: Block) -> None:
    for node in ast.walk(ast.parse(block.code)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lite"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{block.where}: {node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("lite"):
                    importlib.import_module(alias.name)


async def _run(block: Block, namespace: dict[str, Any]) -> str:
    """Run a block with top-level await; returns what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = eval(_compile(block), namespace)  # our own documentation
        if inspect.iscoroutine(result):
            await result
    return out.getvalue()


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


@pytest.mark.parametrize("block", of("python", "compile"))
def test_compile_only_blocks_compile_and_import(block: Block) -> None:
    _compile(block)
    _imports_resolve(block)


@pytest.mark.parametrize("block", of("python", "script"))
def test_script_blocks_run(block: Block, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(block.code)
    run = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={"LITE_AGENT_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, f"{block.where}\n{run.stderr}"


def test_readme_example_runs(tmp_path: Path) -> None:
    match = re.search(r"```python\n(import asyncio.*?)```", README.read_text(), re.S)
    assert match, "the README lost its SDK example"
    script = tmp_path / "example.py"
    script.write_text(match.group(1))
    run = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={"LITE_AGENT_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "Done: hello.py prints hi. | You asked for hello.py, and I wrote it." in run.stdout
    assert (tmp_path / "hello.py").read_text() == "print('hi')\n"
    assert "TurnFinished" in run.stdout


def _shape(footer: str) -> str:
    """A footer with its numbers, session id and checkpoint id as placeholders."""
    footer = re.sub(r"session [0-9a-f]{8}", "session ID", footer)
    footer = re.sub(r"restore \d+-[a-z2-7]{4}", "restore ID", footer)
    return re.sub(r"\d[\d,]*(\.\d+)?", "N", footer)


def test_the_readme_footer_is_a_real_footer(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    """#30: the README showed ``$0.0107 this cell`` while a real footer said ``USD``: the
    example has the shape of the footer a real turn gets (the real client, the fake API)."""
    from lite_agent_jupyter import create_lite_agent
    from lite_agent_jupyter.jupyter import render
    from lite_agent_jupyter.providers import anthropic

    (example,) = [
        b.code.strip() for b in blocks(README) if b.lang == "text" and "tokens in" in b.code
    ]
    fake_anthropic.script("Hello.")
    workdir = tmp_path / "work"
    workdir.mkdir()

    async def footer() -> str:
        model = anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url)
        async with create_lite_agent(
            model=model,
            model_name="claude-sonnet-4-6",
            workdir=workdir,
            storage=tmp_path / "store",
        ) as agent:
            result = await agent.send("Create hello.py")
            (checkpoint,) = await agent.list_checkpoints()
            view = render.TurnView()
            view.finish(result, "claude-sonnet-4-6", checkpoint=checkpoint)
            return "".join(elements(view.html().rsplit("<sub>", 1)[1]).text)  # as shown

    real = asyncio.run(footer())
    assert _shape(example) == _shape(real), (example, real)


@pytest.mark.parametrize("block", of("python", "agent"))
def test_agent_blocks_run(block: Block, tmp_path: Path) -> None:
    from lite_agent_jupyter import create_lite_agent
    from lite_agent_jupyter.providers import call, reply, scripted

    workdir = tmp_path / "work"
    workdir.mkdir()

    async def main() -> str:
        model = scripted(
            [
                reply("Writing a.", [call("write_file", path="a.txt", content="one\n")]),
                "Wrote a.txt.",
                reply("Writing b.", [call("write_file", path="b.txt", content="two\n")]),
                "Wrote b.txt.",
                *[f"Summary {n}: a.txt and b.txt were written." for n in range(4)],
            ]
        )
        async with create_lite_agent(
            model=model, workdir=workdir, storage=tmp_path / "store", approvals="allow"
        ) as agent:
            await agent.send("Write a.txt")
            await agent.send("Write b.txt")
            with _cwd(workdir):
                return await _run(block, {"agent": agent})

    printed = asyncio.run(main())
    assert printed.strip(), f"{block.where} printed nothing"


@pytest.mark.parametrize("block", of("python", "cassette"))
def test_cassette_blocks_run(
    block: Block, tmp_path: Path, anthropic_env: FakeAnthropicServer
) -> None:
    anthropic_env.script("Recorded answer.")
    (tmp_path / "lesson").mkdir()
    with _cwd(tmp_path):
        asyncio.run(_run(block, {}))
    cassettes = list(tmp_path.glob("*.cassette.jsonl"))
    assert cassettes, f"{block.where} recorded no cassette"
    assert len(anthropic_env.message_requests) == 1, "the replay called the live API"


@pytest.mark.parametrize("block", of("python", "protocol"))
def test_protocol_block_matches_the_protocol(block: Block) -> None:
    from typing import Protocol

    from lite_agent_jupyter.checkpoint import protocol

    namespace: dict[str, Any] = {"Protocol": Protocol}
    exec(_compile(block), namespace)  # our own documentation
    shown, real = namespace["Checkpointer"], protocol.Checkpointer
    methods = [n for n, v in vars(shown).items() if inspect.iscoroutinefunction(v)]
    assert methods, block.where
    for name in methods:
        params = list(inspect.signature(getattr(shown, name)).parameters)
        assert params == list(inspect.signature(getattr(real, name)).parameters), name
    required = {n for n, v in vars(real).items() if inspect.iscoroutinefunction(v) and n[0] != "_"}
    assert required <= set(methods), f"the page misses {required - set(methods)}"


# -- IPython


@pytest.fixture(scope="module")
def shell() -> Iterator[Any]:
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "lite_agent_jupyter")
    yield ip
    InteractiveShell.clear_instance()


def _help(shell: Any, line: str, *, cell: bool = False) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        if cell:
            shell.run_cell_magic("agent", line, "(help only)")
        else:
            shell.run_line_magic("agent", line)
    return out.getvalue()


@pytest.mark.parametrize("block", of("ipython"))
def test_ipython_blocks_use_real_magics_and_settings(block: Block, shell: Any) -> None:
    magics = shell.magics_manager.registry["LiteAgentMagics"]
    traits = set(magics.trait_names())
    subcommands = _help(shell, "help")
    lines = block.code.strip().split("\n")
    for number, line in enumerate(lines):
        words = line.split()
        if line.startswith("%load_ext "):
            importlib.import_module(words[1])
        elif line.startswith("%config LiteAgentMagics."):
            name, _, value = line.removeprefix("%config LiteAgentMagics.").partition("=")
            assert name.strip() in traits, f"{block.where}: no setting {name.strip()}"
            ast.literal_eval(value.strip())
        elif line.startswith("%agent "):
            assert re.search(rf"^\s+{re.escape(words[1])}\s", subcommands, re.M), (
                f"{block.where}: no subcommand {words[1]}"
            )
            for flag in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
                assert flag in _help(shell, f"{words[1]} -h"), f"{block.where}: {line}"
        elif line.startswith("%%agent"):
            assert number == 0, f"{block.where}: %%agent must start its cell"
            cell_help = _help(shell, "-h", cell=True)
            assert "--session" in cell_help, cell_help
            for flag in (w for w in words[1:] if w.startswith("--")):
                assert re.search(rf"{re.escape(flag)}\b", cell_help), (
                    f"{block.where}: no %%agent flag {flag}"
                )
        else:
            assert lines[0].startswith("%%agent") or not line.strip(), f"{block.where}: {line}"


def _subcommands(shell: Any) -> set[str]:
    return set(re.findall(r"^  (\w+)  ", _help(shell, "help"), re.M))


def _flags(text: str) -> list[str]:
    return re.findall(r"(?<![\w-])--[a-z][\w-]*", text)


def test_the_commands_table_has_every_subcommand(shell: Any) -> None:
    """docs/notebook.md's table of ``%agent`` commands names every registered subcommand,
    and every option it shows is one the subcommand takes."""
    page = (DOCS / "notebook.md").read_text()
    table = page[page.index("| command | what |") :].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `(\w+)([^`]*)`", table, re.M)
    listed = {name for name, _ in rows}
    subcommands = _subcommands(shell)
    assert subcommands <= listed, f"docs/notebook.md misses {sorted(subcommands - listed)}"
    assert listed <= subcommands, f"no such subcommands: {sorted(listed - subcommands)}"
    for name, usage in rows:
        options = _help(shell, f"{name} -h")
        for flag in _flags(usage):
            assert flag in options, f"%agent {name} has no {flag}"


def test_inline_magics_are_real(shell: Any) -> None:
    """Every ``%agent ...``, ``%%agent ...`` and ``%config LiteAgentMagics....`` written in the
    prose of the README and docs names a real subcommand, option or setting."""
    subcommands = _subcommands(shell) | {"help", "SUB", "SUBCOMMAND"}
    traits = set(shell.magics_manager.registry["LiteAgentMagics"].trait_names())
    cell_help = _help(shell, "-h", cell=True)
    wrong = []
    for page in PAGES:
        prose = re.sub(r"^\s*```.*?^\s*```", "", page.read_text(), flags=re.S | re.M)
        for span in re.findall(r"`([^`\n]+)`", prose):
            words = span.split()
            where = f"{page.relative_to(ROOT)}: `{span}`"
            if words[0] == "%agent" and len(words) > 1:
                if words[1] not in subcommands:
                    wrong.append(where)
                elif words[1] in _subcommands(shell):
                    options = _help(shell, f"{words[1]} -h")
                    wrong += [where for flag in _flags(span) if flag not in options]
            elif words[0] == "%%agent":
                wrong += [where for flag in _flags(span) if flag not in cell_help]
            elif span.startswith("%config LiteAgentMagics.") and "<" not in span:
                name = re.split(r"[\s=]", span.removeprefix("%config LiteAgentMagics."))[0]
                if name not in traits:
                    wrong.append(where)
    assert not wrong, wrong


def test_every_setting_is_documented(shell: Any) -> None:
    magics = type(shell.magics_manager.registry["LiteAgentMagics"])
    text = "\n".join(page.read_text() for page in PAGES)
    missing = [
        name
        for name in magics.class_traits(config=True)
        if f"`{name}`" not in text and f"LiteAgentMagics.{name}" not in text
    ]
    assert not missing, f"settings no page documents: {missing}"


# -- shell commands


@pytest.mark.parametrize("block", of("bash"))
def test_bash_commands_exist(block: Block) -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for line in block.code.strip().split("\n"):
        words = shlex.split(line, comments=True)
        if words[0].startswith("./") or words[0].startswith("scripts/"):
            assert (ROOT / words[0]).is_file(), f"{block.where}: {words[0]}"
        elif words[0] == ".venv/bin/python":
            assert (ROOT / words[1]).is_file(), f"{block.where}: {words[1]}"
        elif words[:2] == ["pip", "install"]:
            extra = re.fullmatch(r"lite_agent_jupyter\[(\w+)\]", words[2])
            assert extra and extra.group(1) in extras, f"{block.where}: {words[2]}"
        else:
            raise AssertionError(f"{block.where}: a command this test cannot check: {line}")


# -- links


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link text kept, lower case, punctuation dropped except
    ``-`` and ``_``, each space a ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    in_code = False
    for line in page.read_text().split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
        heading = re.match(r"^#{1,6} (.*)$", line)
        if heading and not in_code:
            base = slug(heading.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def test_slug_follows_github() -> None:
    assert slug("`%agent` commands (`%agent help`, `%agent SUB -h`)") == (
        "agent-commands-agent-help-agent-sub--h"
    )
    assert slug("Settings: `sessions=False`") == "settings-sessionsfalse"
    assert slug("Teaching and demos: record once, replay offline") == (
        "teaching-and-demos-record-once-replay-offline"
    )


def links(page: Path) -> Iterator[tuple[int, str]]:
    in_code = False
    for number, line in enumerate(page.read_text().split("\n"), 1):
        if _FENCE.match(line):
            in_code = not in_code
        if in_code:
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", line)):
            yield number, target


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_point_at_files_and_headings_that_exist(page: Path) -> None:
    broken = []
    for number, target in links(page):
        if re.match(r"^[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{number}: {target} (no such file)")
        elif anchor and anchor not in anchors(file):
            broken.append(f"{number}: {target} (no such heading)")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_the_index_links_every_page() -> None:
    linked = {target.partition("#")[0] for _, target in links(DOCS / "index.md")}
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert pages <= linked, f"docs/index.md misses {pages - linked}"
    readme = {target.partition("#")[0] for _, target in links(README)}
    assert "docs/index.md" in readme


def test_readme_is_a_front_door() -> None:
    assert len(README.read_text().split("\n")) <= 250
