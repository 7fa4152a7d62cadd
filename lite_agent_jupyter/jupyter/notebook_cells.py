"""The notebook tools (``notebook_tools = True``): the agent reads, edits, inserts, deletes
and runs cells of the notebook it lives in, through the page, never through the file.

Why the page: a write to the open ``.ipynb`` makes JupyterLab reload the document and lose
the person's unsaved work and outputs. The package's front-end extension
(``labextension/static/remoteEntry.js``) registers the comm target :data:`TARGET` on the
kernel connection of each notebook panel; :class:`NotebookChannel` opens a comm to it, and
every tool call is one request on it, applied by the page to the notebook's shared model (the
edit shows at once, Ctrl-Z undoes it, the document is dirty until the person saves it).

Threads: requests are sent from the agent's loop thread (a comm send goes through ipykernel's
IOPub thread, which takes messages from any thread); the answers come back as ``comm_msg``
on the shell channel, which ipykernel >= 7.4 dispatches while the ``%%agent`` cell awaits
(on the main thread, or a subshell's under JupyterLab's "comms over subshells"), as it does
for the approval buttons (``approval.py``). Each request waits on a
``concurrent.futures.Future``, settled by whichever thread gets the answer.

``execute_cell`` runs the cell's source (as the page holds it) in the kernel through
``run_cell``'s machinery, on the main thread while the ``%%agent`` cell waits, then writes the
outputs into the cell. It cannot ask the page to execute the cell: that execute request would
queue behind the running ``%%agent`` cell, which waits for it.

Where no page with the extension answers (nbclient, terminal IPython, VS Code, a server
without the extension), the tools are not offered and :meth:`NotebookChannel.why_not` says why.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import difflib
import threading
import uuid
from collections.abc import Callable
from typing import Any

from ..errors import ToolError
from ..tools import Tool, ToolContext
from .kernel_state import DEFAULT_LIMIT
from .kernel_tools import _run, on_main

TARGET = "lite_agent_jupyter.notebook"
"""The comm target the front-end extension registers (the same string in remoteEntry.js)."""

TIMEOUT = 10.0
"""Seconds a request waits for the page before the tool fails."""

NOTICE_TIMEOUT = 3.0
"""Seconds the start of a prompt waits for the page to say which cells the person changed
(no answer: no news, the prompt goes on)."""

SOURCE_CHARS = 4000
"""Characters of a cell's source ``read_notebook`` returns before cutting it (with a note)."""

CHANGED = "cell changed since you read it: read it again"


class NotebookChannel:
    """The kernel's end of the channel to the page (one per kernel)."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        """The ipykernel kernel (``None``: terminal IPython, no channel at all)."""
        self._lock = threading.Lock()
        self._comm: Any = None
        self._pending: dict[str, concurrent.futures.Future[Any]] = {}
        self.client: str | None = None
        """The page view that answers (its own random id); ``None``: none answered yet."""
        self._session: str | None = None
        self.path = ""
        self.seen: dict[str, str] = {}
        """Cell id -> the source the agent last read or wrote there (the stale check)."""
        self.told: dict[str, str | None] = {}
        """Cell id -> the source (``None``: deleted) a note already named as changed."""
        self._seen_session: str | None = None

    @property
    def connected(self) -> bool:
        return self.client is not None

    def why_not(self) -> str:
        """One line: why the notebook tools are not offered (``""``: they are)."""
        if self.kernel is None:
            return "no Jupyter front end here (terminal IPython): use propose_cell"
        if self._comm is None:
            return "the channel to the page is not open yet (%load_ext lite_agent_jupyter)"
        if self.client is None:
            return (
                "no page with the lite-agent-jupyter extension answered (nbclient, nbconvert, "
                "VS Code, or a Jupyter server without it): propose_cell instead"
            )
        return ""

    # -- the comm ----------------------------------------------------------------------

    def probe(self) -> None:
        """Open the comm (or ask again): a page with the extension answers "hello", handled
        between cells or while a cell awaits. Call on the main thread."""
        if self.kernel is None:
            return
        if self._comm is None:
            from comm import create_comm

            comm = create_comm(target_name=TARGET, data={"op": "hello"})
            comm.on_msg(self._on_msg)
            comm.on_close(self._on_close)
            self._comm = comm
        else:
            self._comm.send({"op": "hello"})

    def _on_msg(self, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data") or {}
        if data.get("op") == "hello":
            with self._lock:
                if self.client is None:
                    self.client = str(data.get("client"))
                    self._session = msg.get("header", {}).get("session")
                    self.path = str(data.get("path") or "")
            return
        with self._lock:
            future = self._pending.pop(str(data.get("id")), None)
        if future is not None and not future.done():
            future.set_result(data)

    def _on_close(self, msg: dict[str, Any]) -> None:
        """A client closed the comm. Another view of the kernel that lacks the target (a
        console on the same kernel) closes every comm it is offered: keep the comm for the
        page that answered. The answering page closing it ends the channel."""
        comm = self._comm
        if comm is None:
            return
        closer = msg.get("header", {}).get("session") if isinstance(msg, dict) else None
        if self.client is None or closer != self._session:
            comm._closed = False
            comm.comm_manager.register_comm(comm)
            return
        with self._lock:
            self._comm, self.client, self._session = None, None, None
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(ToolError("the notebook page closed the channel"))

    async def changed(self, session_id: str) -> list[str]:
        """The cells the person edited or deleted since the agent last read or wrote them,
        each change named once (``seen.OutsideWatch``: the start of each prompt asks, and the
        answer goes into the note that names hand-edited files). ``edit_cell`` still refuses
        such a cell until it is read again. The table is the conversation's: another session
        never read these cells, so a prompt of another session starts it afresh."""
        if session_id != self._seen_session:
            self.seen.clear()
            self.told.clear()
            self._seen_session = session_id
            return []
        if not self.seen or not self.connected:
            return []
        found = await self.request("read", cells=None, timeout=NOTICE_TIMEOUT)
        live = {str(cell["id"]): cell for cell in found["cells"]}
        names: list[str] = []
        for cell_id, source in self.seen.items():
            cell = live.get(cell_id)
            now = None if cell is None else str(cell["source"])
            if now == source:
                self.told.pop(cell_id, None)
            elif cell_id not in self.told or self.told[cell_id] != now:
                self.told[cell_id] = now
                where = "deleted" if cell is None else f"now cell {cell['index']}"
                names.append(f"notebook cell {cell_id} ({where})")
        return names

    async def request(self, op: str, timeout: float = TIMEOUT, **fields: Any) -> Any:
        """Send one request to the page and await its answer (the result, or a ToolError)."""
        comm, client = self._comm, self.client
        if comm is None or client is None:
            raise ToolError(f"the notebook is not reachable: {self.why_not()}")
        rid = uuid.uuid4().hex
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            self._pending[rid] = future
        comm.send({"op": op, "id": rid, "client": client, **fields})
        try:
            answer = await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except TimeoutError:
            raise ToolError(f"the notebook page did not answer within {timeout:g} s") from None
        finally:
            with self._lock:
                self._pending.pop(rid, None)
        if not answer.get("ok"):
            error = str(answer.get("error"))
            raise ToolError(CHANGED if error == "changed" else error)
        return answer.get("result")


# -- the tools ---------------------------------------------------------------------------

CELL_REF = {
    "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "minLength": 1}],
    "description": "The cell: its 0-based index, or its cell id (from read_notebook).",
}


def _ref(value: Any) -> int | str:
    """A cell reference as the page takes it: a digit string is an index too."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ToolError("cell must be an index or a cell id")
    return value


def _diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), f"{name} (before)", f"{name} (after)", lineterm=""
    )
    return "\n".join(lines) or "(no change)"


def _cell_text(cell: dict[str, Any]) -> str:
    source = str(cell.get("source", ""))
    cut = ""
    if len(source) > SOURCE_CHARS:
        cut = f"\n… [{len(source) - SOURCE_CHARS:,} more chars: read_notebook cells=[...] "
        cut += "shows this cell alone, whole]"
        source = source[:SOURCE_CHARS]
    count = cell.get("execution_count")
    head = f"[{cell['index']}] id={cell['id']} {cell['type']}"
    if count is not None:
        head += f" (run {count})"
    parts = [head, source + cut]
    if cell.get("outputs"):
        parts.append(f"outputs: {cell['outputs']}")
    return "\n".join(parts)


PARTICIPANT = "notebook"
"""The ``participant`` of the ``state_snapshot`` events that record cell changes
(``agent/timetravel/participants.py``)."""


def notebook_tools(
    channel: NotebookChannel,
    shell: Any,
    runner: Any,
    changed: Callable[[list[str]], None] | None = None,
    limits: Callable[[], tuple[int, int]] | None = None,
) -> list[Tool]:
    """``read_notebook``, ``edit_cell``, ``insert_cell``, ``delete_cell``, ``execute_cell``;
    ``changed`` and ``limits`` as for ``run_cell`` (``execute_cell`` runs code the same way,
    its variables snapshotted for a rewind)."""

    async def record(ctx: ToolContext, op: str, cell: dict[str, Any], **sources: Any) -> None:
        """A ``state_snapshot`` event of participant :data:`PARTICIPANT`: the cell's id, its
        index then, and its source before and after as the session's blobs (``None``: the
        cell did not exist / does not any more), for a rewind to put it back."""
        put, write = ctx.put_state_blob, ctx.record_state
        if put is None or write is None or not ctx.session_id:
            return
        hashes: dict[str, str | None] = {}
        for key in ("before", "after"):
            text = sources.get(key)
            hashes[key] = None if text is None else await put(str(text).encode("utf-8"))
        data = {
            "op": op,
            "cell_id": str(cell["id"]),
            "index": int(cell["index"]),
            "cell_type": str(cell.get("type", "code")),
            "notebook": channel.path,
            **hashes,
        }
        if "prev" in cell:  # a deleted cell comes back after the cell that preceded it
            data["prev"] = cell["prev"]
        if op != "execute":  # a rewind point, `%agent restore 2.3` (timetravel/points.py)
            data["point"] = f"cell {cell['id']}"
        await write(PARTICIPANT, data)

    async def read_fresh(ref: int | str) -> dict[str, Any]:
        """The cell as the page holds it, checked against what the agent last read."""
        cell: dict[str, Any] = await channel.request("get", cell=ref)
        seen = channel.seen.get(str(cell["id"]))
        if seen is None:
            raise ToolError(f"you have not read cell {cell['index']} yet: read_notebook first")
        if seen != cell["source"]:
            raise ToolError(CHANGED)
        return cell

    async def read_notebook(ctx: ToolContext, cells: list[Any] | None = None) -> str:
        refs = None if cells is None else [_ref(c) for c in cells]
        found = await channel.request("read", cells=refs)
        for cell in found["cells"]:
            channel.seen[str(cell["id"])] = str(cell["source"])
        if found.get("path"):
            channel.path = str(found["path"])
        head = f"notebook {found.get('path', '')}: {len(found['cells'])} cells shown"
        if found.get("dirty"):
            head += " (unsaved changes in the page)"
        return "\n\n".join([head, *(_cell_text(c) for c in found["cells"])])

    async def edit_cell(ctx: ToolContext, cell: Any, source: str) -> str:
        current = await read_fresh(_ref(cell))
        done = await channel.request(
            "edit", cell=current["id"], source=source, expect=current["source"]
        )
        channel.seen[str(done["id"])] = source
        await record(
            ctx, "edit", done | {"type": current["type"]}, before=done["before"], after=source
        )
        return f"cell {done['index']} (id {done['id']}) edited; the person saves the notebook."

    async def insert_cell(
        ctx: ToolContext, source: str, after: Any = None, cell_type: str = "code"
    ) -> str:
        if cell_type not in ("code", "markdown"):
            raise ToolError("cell_type must be code or markdown")
        ref = None if after is None else _ref(after)
        done = await channel.request("insert", after=ref, source=source, cell_type=cell_type)
        channel.seen[str(done["id"])] = source
        await record(ctx, "insert", done | {"type": cell_type}, before=None, after=source)
        return f"new {cell_type} cell {done['index']} (id {done['id']}) inserted."

    async def delete_cell(ctx: ToolContext, cell: Any) -> str:
        current = await read_fresh(_ref(cell))
        gone = await channel.request("delete", cell=current["id"], expect=current["source"])
        channel.seen.pop(str(gone["id"]), None)
        await record(ctx, "delete", gone, before=gone["source"], after=None)
        return f"cell {gone['index']} (id {gone['id']}) deleted."

    async def execute_cell(ctx: ToolContext, cell: Any) -> str | list[dict[str, Any]]:
        from .outputs import bundle_images

        current: dict[str, Any] = await channel.request("get", cell=_ref(cell))
        if current["type"] != "code":
            raise ToolError(f"cell {current['index']} is {current['type']}, not code")
        code = str(current["source"])
        limit, value_limit = limits() if limits is not None else (DEFAULT_LIMIT, None)
        outputs: list[dict[str, Any]] = []

        def run() -> Any:
            return _run(
                shell, code, bundle_images, changed, limit, value_limit, show=False, outputs=outputs
            )

        answer = await on_main(runner, ctx.session_id, run)
        if answer is None:
            raise ToolError("no %%agent cell is waiting to run the code in the kernel")
        result, report = answer
        await channel.request("outputs", cell=current["id"], outputs=outputs)
        channel.seen[str(current["id"])] = code
        put, write = ctx.put_state_blob, ctx.record_state
        if put is not None and write is not None and ctx.session_id:
            await report.record(put, write)  # its variables, as run_cell's
        await record(ctx, "execute", current, before=code, after=code)
        return result  # type: ignore[no-any-return]

    async def preview_edit(arguments: dict[str, Any]) -> str | None:
        current = await channel.request("get", cell=_ref(arguments.get("cell")))
        name = f"cell {current['index']}"
        return _diff(str(current["source"]), str(arguments.get("source", "")), name)

    async def preview_whole(arguments: dict[str, Any]) -> str | None:
        current = await channel.request("get", cell=_ref(arguments.get("cell")))
        return f"cell {current['index']} (id {current['id']}):\n{current['source']}"

    async def preview_insert(arguments: dict[str, Any]) -> str | None:
        after = arguments.get("after")
        where = "at the top" if after is None else f"after cell {after}"
        kind = arguments.get("cell_type", "code")
        return f"new {kind} cell {where}:\n{arguments.get('source', '')}"

    return [
        Tool(
            "read_notebook",
            "Read the open notebook's cells as the page holds them now, unsaved edits "
            "included: index, cell id, type, source, execution count and a short summary of "
            "the outputs. Read a cell before you edit or delete it.",
            {
                "type": "object",
                "properties": {
                    "cells": {
                        "type": "array",
                        "items": CELL_REF,
                        "description": "Which cells (indexes or ids); all when omitted.",
                    }
                },
            },
            read_notebook,
            kind="read",
            takes_context=True,
        ),
        Tool(
            "edit_cell",
            "Replace a cell's source in the open notebook (the person sees it at once and "
            "saves it). Fails if the person changed the cell since you read it.",
            {
                "type": "object",
                "properties": {
                    "cell": CELL_REF,
                    "source": {"type": "string", "description": "The cell's new source."},
                },
                "required": ["cell", "source"],
            },
            edit_cell,
            kind="write",
            takes_context=True,
            preview=preview_edit,
        ),
        Tool(
            "insert_cell",
            "Insert a new cell into the open notebook, after the given cell (null: at the "
            "top). Nothing is run.",
            {
                "type": "object",
                "properties": {
                    "after": {
                        "anyOf": [*CELL_REF["anyOf"], {"type": "null"}],
                        "description": "The cell to insert after (index or id); null: top.",
                    },
                    "source": {"type": "string", "description": "The new cell's source."},
                    "cell_type": {"type": "string", "enum": ["code", "markdown"]},
                },
                "required": ["source"],
            },
            insert_cell,
            kind="write",
            takes_context=True,
            preview=preview_insert,
        ),
        Tool(
            "delete_cell",
            "Delete a cell of the open notebook. Fails if the person changed it since you read it.",
            {"type": "object", "properties": {"cell": CELL_REF}, "required": ["cell"]},
            delete_cell,
            kind="write",
            takes_context=True,
            preview=preview_whole,
        ),
        Tool(
            "execute_cell",
            "Run a code cell of the open notebook in the kernel, as the person would: its "
            "outputs appear in the notebook; you get what it printed, its result, displays "
            "or traceback, and the variables it changed.",
            {"type": "object", "properties": {"cell": CELL_REF}, "required": ["cell"]},
            execute_cell,
            kind="shell",
            takes_context=True,
            preview=preview_whole,
        ),
    ]
