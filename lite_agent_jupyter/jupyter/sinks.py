"""Where a turn's rendered text goes: the output sinks of ``%%agent`` and ``%agent``.

A sink takes what :mod:`.render` built and puts it on the page through the one door of each
kind (``safe.bundle``: inert ``text/html`` and a plain twin; ``terminal_safe`` for whatever is
printed): a notebook display updated in place (:class:`NotebookOutput`), plain text printed as it
streams in terminal IPython (:class:`TerminalOutput`), or a progress bar
(:class:`ProgressOutput`). Must not build text of its own from untrusted input, and must not
know the agent, the magics or any subcommand.
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import Iterator
from typing import Any

from ..controls import terminal_safe
from . import progress, render, safe


class NotebookOutput:
    """One display, updated in place (main thread only)."""

    def __init__(self, view: render.TurnView) -> None:
        self.view = view
        self.display_id = f"lite-agent-{uuid.uuid4().hex}"
        self.shown = False

    def _bundle(self) -> dict[str, str]:
        return safe.bundle(self.view.html(), self.view.plain())

    def text(self, text: str) -> None:
        pass

    def tool(self, tool_id: str) -> None:
        pass

    def tasks(self) -> None:
        pass  # the checklist is part of the display

    def tick(self) -> None:
        """The clock moved: the same display, redrawn (``progress.py``)."""
        self.update()

    def update(self) -> None:
        from IPython import display as ipd

        display: Any = ipd.display
        update_display: Any = ipd.update_display
        bundle = self._bundle()
        with _flush_if_written():
            if not self.shown:
                display(bundle, raw=True, display_id=self.display_id)
                self.shown = True
            else:
                update_display(bundle, raw=True, display_id=self.display_id)

    def final(self) -> None:
        self.update()


class TerminalOutput:
    """Terminal IPython: plain text printed as it streams (no display updates there)."""

    def __init__(self, view: render.TurnView) -> None:
        self.view = view
        self.printed_tools: set[str] = set()
        self.warned = False
        for note in view.notes:
            print(terminal_safe(note))

    def text(self, text: str) -> None:
        print(terminal_safe(text), end="", flush=True)

    def tool(self, tool_id: str) -> None:
        for part in self.view.parts:
            if isinstance(part, render.ToolLine) and part.id == tool_id and part.output:
                print(terminal_safe(render.tool_plain(part)), end="", flush=True)

    def tasks(self) -> None:
        """The task list changed: printed whole, as plain text."""
        if self.view.tasks is not None:
            print(terminal_safe("\n" + progress.checklist_plain(self.view.tasks)), flush=True)

    def tick(self) -> None:
        """No display to redraw in a terminal: one line, once, when a call runs long."""
        clock = self.view.clock
        if clock is not None and " is still running" in clock and not self.warned:
            self.warned = True
            print(terminal_safe(f"\n({clock})"), flush=True)

    def update(self) -> None:
        pass

    def final(self) -> None:
        if self.view.stale:
            print(terminal_safe(f"\n{self.view.stale}"))
        if self.view.status:
            print(terminal_safe(f"\n[{self.view.status}]"))
        if self.view.footer:
            print(terminal_safe(f"\n-- {self.view.footer}"))


class WidgetOutput:
    """A turn drawn inside a widget (the plan panel's run: ``plan.py``), not a cell's
    display: the same safe HTML, set as the widget's value."""

    def __init__(self, view: render.TurnView, show: Any) -> None:
        self.view = view
        self._show = show

    def text(self, text: str) -> None:
        pass

    def tool(self, tool_id: str) -> None:
        pass

    def tasks(self) -> None:
        pass

    def tick(self) -> None:
        self.update()

    def update(self) -> None:
        self._show(self.view.html())

    def final(self) -> None:
        self.update()


class ProgressOutput:
    """A progress bar: one display updated in place in a notebook, a line per stage in a
    terminal."""

    def __init__(self, rich: bool) -> None:
        self.rich = rich
        self.display_id = f"lite-agent-progress-{uuid.uuid4().hex}"
        self.shown = False

    def _show(self, text: str) -> None:
        if not self.rich:
            print(text, flush=True)
            return
        from IPython import display as ipd

        bundle = safe.bundle(f"<code>{safe.escape(text)}</code>", text)
        show: Any = ipd.update_display if self.shown else ipd.display
        show(bundle, raw=True, display_id=self.display_id)
        self.shown = True

    def step(self, progress: Any) -> None:
        self._show(render.progress_text(progress.stage, progress.before, progress.after))

    def finish(self, text: str) -> None:
        if self.rich:
            self._show(render.progress_text("done", None, None))
        print(terminal_safe(text))


@contextlib.contextmanager
def _flush_if_written() -> Iterator[None]:
    """Around one display message of a turn: flush stdout and stderr first only if they hold
    text.

    Why: ipykernel's display publisher flushes both streams before every display message,
    and a flush is a round trip to its IOPub thread, waited for, even with nothing written;
    a ``%%agent`` cell sends two messages, so four of them (#32: most of what its two
    display messages cost, 1.2-1.5 ms a cell). With nothing pending (ipykernel's own
    ``_flush_pending`` flags false) there is nothing the display could overtake, so the
    publisher's flush is skipped for this one message. Text waiting, streams that are not
    ipykernel's, or a publisher without that step: flushed as before."""
    from IPython import get_ipython

    publisher: Any = getattr(get_ipython(), "display_pub", None)
    own = getattr(publisher, "__dict__", None)
    if (
        own is None
        or "_flush_streams" in own  # not the class's: someone else's, left alone
        or not hasattr(publisher, "_flush_streams")
        or _pending(sys.stdout)
        or _pending(sys.stderr)
    ):
        yield
        return
    publisher._flush_streams = _nothing
    try:
        yield
    finally:
        del publisher._flush_streams


def _pending(stream: Any) -> bool:
    """Whether ``stream`` may hold text not sent yet (true unless it is ipykernel's
    ``OutStream`` and says it holds none)."""
    flags = (
        getattr(stream, "_flush_pending", None),
        getattr(stream, "_subprocess_flush_pending", None),
    )
    return flags != (False, False)


def _nothing() -> None:
    pass
