"""A notebook page over a real comm, for kernel-level tests of the notebook tools.

:class:`FakePage` plays the package's front-end extension (``labextension/static/
remoteEntry.js``) against a real kernel driven by ``jupyter_client`` (``nbkernel.Kernel``):
it answers the kernel's ``hello`` on the comm target ``lite_agent_jupyter.notebook`` and
applies each request (read, get, edit, insert, delete, outputs, rewind) to a list of cells held in
this process, with the same answers and the same "changed" refusal as the page. The comm is
the real one: requests leave the kernel on IOPub and the answers go back as ``comm_msg`` on
the shell channel while the ``%%agent`` cell awaits, as a browser's do. A test edits
:attr:`FakePage.cells` as the person would type in the page. The page itself is tested in
Chromium (tests/browser/test_notebook_tools_in_jupyterlab.py).
"""

from __future__ import annotations

import queue
import time
import uuid
from typing import Any

from nbkernel import Cell, Kernel

from lite_agent_jupyter.jupyter.notebook_cells import TARGET


def code_cell(source: str, cell_id: str) -> dict[str, Any]:
    return {
        "id": cell_id,
        "cell_type": "code",
        "source": source,
        "execution_count": None,
        "outputs": [],
    }


class FakePage:
    """One page view of the notebook ``path`` on ``kernel``. Cell ids are ``c0``, ``c1``, ...
    in the order the cells were made (the page's are random): two pages made alike give
    the same ids, so a cassette recorded on one replays on the other."""

    def __init__(self, kernel: Kernel, path: str, sources: list[str]) -> None:
        self.kernel = kernel
        self.path = path
        self._made = 0
        self.cells = [self._new(source) for source in sources]
        self.client = uuid.uuid4().hex
        self.comm_id: str | None = None
        self.requests: list[dict[str, Any]] = []
        """Every request the kernel sent (hello included), in order."""

    # -- the model of the page ---------------------------------------------------------

    def _new(self, source: str) -> dict[str, Any]:
        cell = code_cell(source, f"c{self._made}")
        self._made += 1
        return cell

    @property
    def sources(self) -> list[str]:
        return [str(cell["source"]) for cell in self.cells]

    def _describe(self, index: int) -> dict[str, Any]:
        cell = self.cells[index]
        return {
            "index": index,
            "id": cell["id"],
            "type": cell["cell_type"],
            "source": cell["source"],
            "execution_count": cell["execution_count"],
            "outputs": "",
        }

    def _find(self, ref: Any) -> int:
        if isinstance(ref, int):
            if not 0 <= ref < len(self.cells):
                raise ValueError(f"no cell {ref} (the notebook has {len(self.cells)} cells)")
            return ref
        for index, cell in enumerate(self.cells):
            if cell["id"] == ref:
                return index
        raise ValueError(f"no cell with id {ref!r}")

    def _check(self, index: int, expect: Any) -> None:
        if expect is not None and self.cells[index]["source"] != expect:
            raise ValueError("changed")

    def _apply(self, request: dict[str, Any]) -> Any:
        op = request["op"]
        if op == "read":
            wanted = request.get("cells")
            indexes = range(len(self.cells)) if wanted is None else map(self._find, wanted)
            cells = [self._describe(i) for i in indexes]
            return {"cells": cells, "path": self.path, "dirty": True}
        if op == "get":
            return self._describe(self._find(request["cell"]))
        if op == "edit":
            index = self._find(request["cell"])
            self._check(index, request.get("expect"))
            before = self.cells[index]["source"]
            self.cells[index]["source"] = request["source"]
            return {"index": index, "id": self.cells[index]["id"], "before": before}
        if op == "insert":
            after = request.get("after")
            at = 0 if after is None else self._find(after) + 1
            made = self._new(request["source"])
            made["cell_type"] = request.get("cell_type") or "code"
            self.cells.insert(at, made)
            return {"index": at, "id": made["id"]}
        if op == "delete":
            index = self._find(request["cell"])
            self._check(index, request.get("expect"))
            gone = self._describe(index)
            gone["prev"] = self.cells[index - 1]["id"] if index > 0 else None
            del self.cells[index]
            return gone
        if op == "rewind":
            return self._rewind(request)
        if op == "outputs":
            index = self._find(request["cell"])
            self.cells[index]["outputs"] = list(request.get("outputs") or [])
            return {"index": index, "id": self.cells[index]["id"]}
        raise ValueError(f"unknown request {op!r}")

    def _at(self, cell_id: str) -> int:
        return next((i for i, c in enumerate(self.cells) if c["id"] == cell_id), -1)

    def _rewind(self, request: dict[str, Any]) -> Any:
        """The page's ``rewind`` (remoteEntry.js): every expectation checked first, then
        the steps in order, each answering what it replaced."""
        for cell_id, source in (request.get("expect") or {}).items():
            at = self._at(cell_id)
            if (None if at < 0 else self.cells[at]["source"]) != source:
                raise ValueError(f"changed: {cell_id}")
        done = []
        for step in request.get("steps") or []:
            at = self._at(step["id"])
            cell = self.cells[at] if at >= 0 else None
            did: dict[str, Any] = {
                "before": cell["source"] if cell else None,
                "index": at,
                "cell_type": cell["cell_type"] if cell else None,
            }
            if step["do"] == "delete":
                if cell is not None:
                    did["prev"] = self.cells[at - 1]["id"] if at > 0 else None
                    del self.cells[at]
            elif cell is not None:
                cell["source"] = step["source"]
            else:
                place = min(max(step.get("index") or 0, 0), len(self.cells))
                prev = step.get("prev", "")
                if prev is None:
                    place = 0
                elif prev and self._at(prev) >= 0:
                    place = self._at(prev) + 1
                made = code_cell(step["source"], step["id"])
                made["cell_type"] = step.get("cell_type") or "code"
                self.cells.insert(place, made)
                did["index"] = place
            done.append(did)
        return {"steps": done}

    # -- the comm ----------------------------------------------------------------------

    def _send(self, data: dict[str, Any]) -> None:
        assert self.comm_id is not None
        msg = self.kernel.kc.session.msg("comm_msg", {"comm_id": self.comm_id, "data": data})
        self.kernel.kc.shell_channel.send(msg)

    def _hello(self) -> None:
        self._send({"op": "hello", "client": self.client, "path": self.path})

    def handle(self, msg: dict[str, Any]) -> bool:
        """Take one IOPub message if it is the channel's; ``True`` when it was."""
        kind, content = msg["msg_type"], msg["content"]
        if kind == "comm_open" and content.get("target_name") == TARGET:
            self.comm_id = content["comm_id"]
            self.requests.append(dict(content.get("data") or {}))
            self._hello()
            return True
        if kind != "comm_msg":
            return False
        data = dict(content.get("data") or {})
        if self.comm_id is None and data.get("op") == "hello":
            self.comm_id = content["comm_id"]  # opened before this page was there
        if content["comm_id"] != self.comm_id:
            return False
        self.requests.append(data)
        if data.get("op") == "hello":
            self._hello()
        elif data.get("client") == self.client:
            try:
                reply = {"id": data["id"], "ok": True, "result": self._apply(data)}
            except ValueError as exc:
                reply = {"id": data["id"], "ok": False, "error": str(exc)}
            self._send(reply)
        return True

    def run(self, code: str, timeout: float = 120.0) -> Cell:
        """Run ``code`` in the kernel while this page answers the channel."""
        kernel = self.kernel
        msg_id = str(kernel.kc.execute(code, allow_stdin=False, stop_on_error=True))
        cell = Cell(msg_id)
        replied = idle = False
        deadline = time.monotonic() + timeout
        while not (replied and idle):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the cell did not finish in {timeout} s:\n{cell.text}")
            try:
                msg = kernel.kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                msg = None
            ours = msg is not None and msg["parent_header"].get("msg_id") == msg_id
            if msg is not None and not self.handle(msg) and ours:
                if msg["msg_type"] == "status":
                    idle = msg["content"]["execution_state"] == "idle"
                elif msg["msg_type"] not in ("execute_input", "clear_output", "comm_close"):
                    cell.add(msg)
            try:
                reply = kernel.kc.get_shell_msg(timeout=0)
            except queue.Empty:
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                cell.status = reply["content"]["status"]
                replied = True
        return cell
