"""A real IPython kernel driven over ZeroMQ by ``jupyter_client`` (what nbclient builds on).

:class:`Kernel` starts ``python -m ipykernel`` in a folder with a chosen environment and runs
cells the way a front end does: :meth:`Kernel.run` sends one execute request and collects
its outputs; :meth:`Kernel.submit` + :meth:`Kernel.collect` send several at once ("Run All").
:class:`Cell` applies ``update_display_data`` to its displays, as a front end would, so a test
reads the final Markdown and text of each display and counts the display messages.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager

LAUNCH_TIMEOUT = 90.0
SETUP = """\
%load_ext lite_agent_jupyter
%config LiteAgentMagics.approvals = "allow"
"""


@dataclass
class Cell:
    """What one execute request produced."""

    msg_id: str
    status: str = ""
    error: dict[str, Any] | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    displays: dict[str, dict[str, Any]] = field(default_factory=dict)
    """display_id -> its latest data bundle (updates applied)."""
    order: list[str] = field(default_factory=list)
    stream_text: str = ""
    payload: list[dict[str, Any]] = field(default_factory=list)
    """The execute reply's payloads (``set_next_input``: a new cell for the front end)."""
    timeline: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)
    """(monotonic time received, msg_type, content) of every output message."""

    def add(self, msg: dict[str, Any]) -> None:
        kind = msg["msg_type"]
        content = msg["content"]
        self.messages.append(msg)
        self.timeline.append((time.monotonic(), kind, content))
        if kind == "stream":
            self.stream_text += content["text"]
        elif kind in ("display_data", "execute_result"):
            display_id = (content.get("transient") or {}).get("display_id") or f"#{len(self.order)}"
            self.displays[display_id] = content["data"]
            if display_id not in self.order:
                self.order.append(display_id)
        elif kind == "update_display_data":
            display_id = content["transient"]["display_id"]
            self.displays[display_id] = content["data"]
        elif kind == "error":
            self.error = content

    @property
    def display_messages(self) -> int:
        return sum(
            1
            for m in self.messages
            if m["msg_type"] in ("display_data", "update_display_data", "execute_result")
        )

    @property
    def html(self) -> str:
        """Every display's rich form: ``text/html`` (the renderer's, ``jupyter/safe.py``)."""
        return "\n".join(self.displays[d].get("text/html", "") for d in self.order)

    @property
    def markdown(self) -> str:
        """The former name of :attr:`html` (displays were ``text/markdown`` before #17)."""
        return self.html

    @property
    def rich_types(self) -> set[str]:
        """The MIME types of every display (``text/markdown`` must never be among them)."""
        return {kind for d in self.order for kind in self.displays[d]}

    @property
    def plain(self) -> str:
        return "\n".join(self.displays[d].get("text/plain", "") for d in self.order)

    @property
    def text(self) -> str:
        """Everything a text front end shows: streams, then each display's text."""
        return self.stream_text + "\n" + self.plain + "\n" + self.error_text

    @property
    def error_text(self) -> str:
        if self.error is None:
            return ""
        return f"{self.error['ename']}: {self.error['evalue']}\n" + "\n".join(
            self.error.get("traceback", [])
        )

    def check(self) -> Cell:
        """Raise with the cell's outputs if it failed."""
        if self.status != "ok":
            raise AssertionError(f"cell failed ({self.status}):\n{self.text}")
        return self


class Kernel:
    """One kernel process; use as a context manager."""

    def __init__(self, cwd: Path, env: Mapping[str, str]) -> None:
        self.cwd = cwd
        self.env = dict(env)
        self.km = KernelManager(kernel_name="python3")
        self._start()

    def _start(self) -> None:
        self.km.start_kernel(cwd=str(self.cwd), env=self.env)
        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=LAUNCH_TIMEOUT)
            self._drain_iopub()
        except BaseException:  # no caller holds the kernel yet: it must not outlive this
            self.kc.stop_channels()
            self.km.shutdown_kernel(now=True)
            raise

    def _drain_iopub(self) -> None:
        while True:
            try:
                self.kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                return

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Shut the kernel down as a front end does; idempotent (a test may shut it down
        itself before the fixture does)."""
        if not self.km.has_kernel:
            return
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=False)

    def restart(self) -> None:
        """Restart the kernel process (same folder and environment), as the UI does."""
        self.kc.stop_channels()
        self.km.restart_kernel(now=False)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=LAUNCH_TIMEOUT)
        self._drain_iopub()

    def interrupt(self) -> None:
        self.km.interrupt_kernel()

    def submit(self, code: str) -> str:
        return str(self.kc.execute(code, allow_stdin=False, stop_on_error=True))

    def collect(self, msg_ids: list[str], timeout: float = 120.0) -> list[Cell]:
        """Read iopub and shell until every one of ``msg_ids`` is idle and replied."""
        cells = {m: Cell(m) for m in msg_ids}
        idle: set[str] = set()
        replied: set[str] = set()
        deadline = time.monotonic() + timeout
        while len(idle) < len(cells) or len(replied) < len(cells):
            if time.monotonic() > deadline:
                raise TimeoutError(f"kernel did not finish {len(cells)} cells in {timeout}s")
            try:
                msg = self.kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                msg = None
            if msg is not None:
                parent = msg.get("parent_header", {}).get("msg_id")
                if parent in cells:
                    if msg["msg_type"] == "status":
                        if msg["content"]["execution_state"] == "idle":
                            idle.add(parent)
                    elif msg["msg_type"] not in ("execute_input", "clear_output"):
                        cells[parent].add(msg)
            while True:
                try:
                    reply = self.kc.get_shell_msg(timeout=0)
                except queue.Empty:
                    break
                parent = reply.get("parent_header", {}).get("msg_id")
                if parent in cells:
                    cells[parent].status = reply["content"]["status"]
                    cells[parent].payload = list(reply["content"].get("payload") or [])
                    replied.add(parent)
        return [cells[m] for m in msg_ids]

    def run(self, code: str, timeout: float = 120.0) -> Cell:
        return self.collect([self.submit(code)], timeout)[0]


StartKernel = Callable[..., "Kernel"]
