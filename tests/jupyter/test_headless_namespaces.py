"""#30 defect 7: headless runs (``jupyter nbconvert --execute``, ``papermill``) of two
notebooks in one folder keep their sessions apart.

Neither tool tells its kernel which notebook it runs (no ``JPY_SESSION_NAME``), so every run
used the namespace ``console`` and one notebook's "start afresh" cell deleted the other's
sessions. Here both tools run as real processes, their kernels talk to the fake Messages API
server, and the two notebooks' first cells (the setup and the "start afresh" cell, where the
agent is first built) are the same: only the tool's command line tells them apart.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply
from process_helpers import kernel_env

from lite_agent_jupyter.jupyter.headless import find_notebook, holds_run

AFRESH = """\
from lite_agent_jupyter.jupyter import current_facade
facade = current_facade()
for session in facade.list_sessions():
    facade.delete_session(session.id)"""

RUN_TIMEOUT = 300


def _notebook(path: Path, name: str) -> Path:
    cells = [
        "%load_ext lite_agent_jupyter",
        AFRESH,
        f"%%agent\nSay hello from {name}",
        "%agent info",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(notebook, path)
    return path


def _run(command: str, cwd: Path, fake: FakeAnthropicServer) -> None:
    """``command`` in a shell started in ``cwd`` (which sets ``PWD``, as a terminal does)."""
    bin_dir = Path(sys.executable).parent
    env = kernel_env(fake.client_env())
    done = subprocess.run(
        ["bash", "-c", f"cd {shlex.quote(str(cwd))} && {command}"],
        env={**env, "PATH": f"{bin_dir}:{env['PATH']}"},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def _sessions(folder: Path, namespace: str) -> set[str]:
    return {p.stem for p in (folder / ".lite_agent" / namespace / "sessions").glob("[!.]*.jsonl")}


def _info(executed: Path) -> str:
    cell = nbformat.read(executed, as_version=4).cells[3]
    return "".join(o.get("text", "") for o in cell.outputs)


TOOLS = {
    # tool: (command for a notebook, run from, its executed copy)
    "nbconvert": (
        "jupyter nbconvert --execute --to notebook nbs/{name}.ipynb",
        ".",
        "nbs/{name}.nbconvert.ipynb",
    ),
    "papermill": (
        "papermill --cwd nbs nbs/{name}.ipynb nbs/{name}-out.ipynb",
        ".",
        "nbs/{name}-out.ipynb",
    ),
}


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_headless_run_never_touches_another_notebooks_sessions(
    tool: str, tmp_path: Path, fake_anthropic: FakeAnthropicServer
) -> None:
    command, run_from, executed = TOOLS[tool]
    folder = tmp_path / "nbs"
    folder.mkdir()
    for name in ("a", "b"):
        _notebook(folder / f"{name}.ipynb", name)
    fake_anthropic.script(FakeReply("hello from b"), FakeReply("hello from a"))

    _run(command.format(name="b"), tmp_path / run_from, fake_anthropic)
    kept = _sessions(folder, "b")
    assert len(kept) == 1
    _run(command.format(name="a"), tmp_path / run_from, fake_anthropic)

    assert _sessions(folder, "b") == kept  # a's "start afresh" cell left b's session alone
    assert len(_sessions(folder, "a")) == 1
    assert not (folder / ".lite_agent" / "console").exists()
    assert not (tmp_path / ".lite_agent").exists()
    info = _info(tmp_path / executed.format(name="a"))
    assert "headless run" in info and str(folder / "a.ipynb") in info
    prompts = [r.body["messages"][-1]["content"] for r in fake_anthropic.message_requests]
    assert "Say hello from a" in json.dumps(prompts[1]) and len(prompts) == 2


def test_the_notebook_is_found_by_its_cells_without_a_command_line(tmp_path: Path) -> None:
    """The Python APIs (nbclient, ``papermill.execute_notebook`` in a script): no notebook on
    the parent's command line, the cells run so far decide; copies made by the tools (an
    nbconvert output, a papermill output naming its input) give way to their notebook."""
    _notebook(tmp_path / "a.ipynb", "a")
    _notebook(tmp_path / "b.ipynb", "b")
    ran_a = ["%load_ext lite_agent_jupyter", AFRESH, "%%agent\nSay hello from a"]
    no_parent: dict[str, str] = {}
    assert find_notebook(ran_a, tmp_path, no_parent) == (tmp_path / "a.ipynb", [])
    # the first two cells alone are in both: no guess
    assert find_notebook(ran_a[:2], tmp_path, no_parent) == (
        None,
        [tmp_path / "a.ipynb", tmp_path / "b.ipynb"],
    )
    (tmp_path / "a.nbconvert.ipynb").write_bytes((tmp_path / "a.ipynb").read_bytes())
    output = json.loads((tmp_path / "a.ipynb").read_text())
    output["metadata"]["papermill"] = {"input_path": "a.ipynb", "output_path": "a-out.ipynb"}
    (tmp_path / "a-out.ipynb").write_text(json.dumps(output))
    assert find_notebook(ran_a, tmp_path, no_parent) == (tmp_path / "a.ipynb", [])
    # papermill's injected parameters cell is not in the file
    assert holds_run(["x = 1", "y = 2"], ["x = 1", "# Parameters\nx = 3", "y = 2"])
    assert not holds_run(["x = 1", "y = 2"], ["y = 2", "x = 1"])
    assert find_notebook(["print('typed in a console')"], tmp_path, no_parent) == (None, [])
