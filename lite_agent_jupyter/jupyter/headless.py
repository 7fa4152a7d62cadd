"""Which notebook a headless kernel runs: ``jupyter nbconvert --execute``, papermill, nbclient.

Neither tool tells its kernel the notebook's path (checked in nbclient 0.11, nbconvert 7.17,
papermill 2.7): nbclient passes only the kernel's working folder (``resources["metadata"]
["path"]``, nbconvert's notebook folder; papermill's ``--cwd``, else the folder it was run
from), papermill keeps ``input_path`` in the notebook's metadata, which the kernel never sees,
and only jupyter-server sets ``JPY_SESSION_NAME``. Every headless run therefore used the
namespace ``console`` of its folder, and one notebook's "start afresh" cell deleted the
sessions of another.

What such a kernel does know: that it is headless (its execute requests say
``allow_stdin: false``: nobody can answer a prompt), the sources of the cells it ran (IPython's
raw input history: nbclient sends each code cell's source as it is), its working folder, and
the process that started it (``JPY_PARENT_PID``, set by jupyter_client), whose command line
names the notebook for both command-line tools (``jupyter nbconvert --execute a.ipynb``,
``papermill a.ipynb out.ipynb``). The notebook is the one, among the notebooks named on that
command line and the ``.ipynb`` files of the working folder, whose code cells hold the cells
run so far, in order (papermill's injected ``# Parameters`` cell is not in the file: it may be
missing). When several match: the one named on the command line; then an output is dropped for
the notebook it was made from (papermill's records its ``input_path``; nbconvert's is
``<name>.nbconvert.ipynb``). Still several, or none: no notebook is known (namespace
``console``, as before); ``%agent info`` says so.

Knows the notebook file format and the two tools' conventions, not IPython.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024
"""A candidate larger than this is not read (a notebook of many plots is a few MB)."""

MAX_CANDIDATES = 200
"""``.ipynb`` files of the working folder read at most (sorted by name)."""

NBCONVERT_OUTPUT = ".nbconvert.ipynb"
"""The suffix of ``jupyter nbconvert --execute --to notebook``'s output."""

PAPERMILL_PARAMETERS = "# Parameters"
"""The first line of the cell papermill injects (Python kernels): not in the input file."""


def _source(cell: Mapping[str, Any]) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        source = "".join(str(part) for part in source)
    return str(source).strip()


def read_notebook(path: Path) -> dict[str, Any] | None:
    """The notebook's JSON, or ``None`` if it is not a readable notebook of sane size."""
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return None
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("cells"), list) else None


def code_cells(notebook: Mapping[str, Any]) -> list[str]:
    """The non-empty code cells' sources, stripped, in order (what nbclient runs)."""
    cells = notebook.get("cells") or []
    sources = (_source(c) for c in cells if isinstance(c, dict) and c.get("cell_type") == "code")
    return [s for s in sources if s]


def holds_run(cells: Sequence[str], ran: Sequence[str]) -> bool:
    """True if the cells ``ran`` (stripped sources, in order) are code cells of the notebook,
    in that order; a papermill ``# Parameters`` cell that is not in it may be skipped."""
    if not ran:
        return False
    at = 0
    for source in ran:
        try:
            at = cells.index(source, at) + 1
        except ValueError:
            if not source.startswith(PAPERMILL_PARAMETERS):
                return False
    return True


def parent_notebooks(environ: Mapping[str, str], cwd: Path) -> list[Path]:
    """The existing ``.ipynb`` files named on the command line of the process that started
    this kernel (``JPY_PARENT_PID``), resolved against that process's folder, the shell's
    (``PWD``, which a ``chdir`` such as papermill's ``--cwd`` leaves as it was) and ours.
    Linux only (``/proc``); elsewhere, none."""
    pid = environ.get("JPY_PARENT_PID", "")
    if not pid.isdigit() or pid == "0":
        return []
    proc = Path("/proc") / pid
    try:
        args = proc.joinpath("cmdline").read_bytes().split(b"\0")
    except OSError:
        return []
    bases: list[Path] = []
    for folder in (_readlink(proc / "cwd"), environ.get("PWD"), str(cwd)):
        if folder and Path(folder) not in bases:
            bases.append(Path(folder))
    found: list[Path] = []
    for raw in args:
        arg = os.fsdecode(raw)
        if not arg.endswith(".ipynb"):
            continue
        for base in bases:
            path = (base / arg).absolute()
            if path.is_file() and path not in found:
                found.append(path)
                break
    return found


def _readlink(path: Path) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def folder_notebooks(folder: Path) -> list[Path]:
    """The ``.ipynb`` files of ``folder`` (not its subfolders), sorted, at most
    :data:`MAX_CANDIDATES`."""
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".ipynb"))
    except OSError:
        return []
    return [(folder / name).absolute() for name in names[:MAX_CANDIDATES]]


def _outputs_dropped(matches: dict[Path, dict[str, Any]]) -> list[Path]:
    """``matches`` without the outputs of another match: papermill's (its metadata names
    the input) and nbconvert's (``<name>.nbconvert.ipynb`` beside ``<name>.ipynb``)."""
    kept = []
    for path, notebook in matches.items():
        others = {p for p in matches if p != path}
        papermill = (notebook.get("metadata") or {}).get("papermill") or {}
        made_from = papermill.get("input_path") if isinstance(papermill, dict) else None
        if isinstance(made_from, str) and any(Path(made_from).name == o.name for o in others):
            continue
        if path.name.endswith(NBCONVERT_OUTPUT):
            source = path.with_name(path.name[: -len(NBCONVERT_OUTPUT)] + ".ipynb")
            if source in others:
                continue
        kept.append(path)
    return kept


def find_notebook(
    ran: Iterable[str], cwd: Path, environ: Mapping[str, str]
) -> tuple[Path | None, list[Path]]:
    """The notebook a headless kernel runs, given the cells it ran (raw sources, in order),
    its working folder and its environment: ``(path, [])``, or ``(None, candidates)`` where
    ``candidates`` are the notebooks that matched (several: ambiguous; none: unknown)."""
    run = [source.strip() for source in ran if source.strip()]
    named = parent_notebooks(environ, cwd)
    matches: dict[Path, dict[str, Any]] = {}
    for path in [*named, *folder_notebooks(cwd)]:
        if path in matches:
            continue
        notebook = read_notebook(path)
        if notebook is not None and holds_run(code_cells(notebook), run):
            matches[path] = notebook
    named_matches = [p for p in matches if p in named]
    if len(named_matches) == 1:
        return named_matches[0], []
    pool = {p: matches[p] for p in named_matches} if named_matches else matches
    kept = _outputs_dropped(pool)
    if len(kept) == 1:
        return kept[0], []
    return None, kept
