"""The session browser and the checkpoint slider, built from ipywidgets 8 built-ins only.

No front-end code of our own, so they render wherever ipywidgets does. Both talk to the agent
through a small *blocking* interface (:class:`SessionControls`, :class:`CheckpointControls`):
the magics' sync facade, which runs each call on the agent's own event-loop thread. A widget
callback may run on the kernel's main thread when the kernel is idle or, with comms over
subshells, on another thread while a cell runs; either way it only calls the facade, which
serialises access to the agent. A click while a turn runs on the same session answers "busy"
and changes nothing.

A callback's exception would otherwise vanish into the browser's log console, so every action
reports its result or error inline. Widget state is not saved in notebooks: each ``show_*``
also leaves a static text summary in the cell output.
"""

from __future__ import annotations

import html
import threading
import traceback
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import ipywidgets as w
from IPython import display as _ipython_display

from ..checkpoint.protocol import SessionInfo
from ..errors import LiteAgentError

display: Callable[..., Any] = _ipython_display.display  # untyped in IPython

__all__ = [
    "SessionBrowser",
    "SessionControls",
    "relative_time",
    "session_table",
    "show_sessions",
    "widget_frontend",
]


class SessionControls(Protocol):
    """The blocking agent calls the session browser needs (the magics' sync facade)."""

    @property
    def session_id(self) -> str:
        """The current session."""
        ...

    def list_sessions(self) -> list[SessionInfo]:
        """Sessions of the store, newest first."""
        ...

    def resume(self, session_id: str) -> str:
        """Make ``session_id`` current."""
        ...

    def clear(self) -> str:
        """Switch to a new, empty session and return its id."""
        ...

    def delete_session(self, session_id: str) -> None:
        """Delete the session as ``LiteAgent.delete_session`` does."""
        ...

    def is_busy(self, session_id: str) -> bool:
        """True while a turn of ``session_id`` runs."""
        ...


def widget_frontend() -> bool:
    """True when the kernel talks to a front end that can show widgets (a Jupyter kernel);
    False in terminal IPython or plain Python, where the text twins are used."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def relative_time(when: datetime, now: datetime | None = None) -> str:
    """``when`` as "just now", "5 min ago", "3 h ago", "2 d ago", or a date past 30 days."""
    now = now or datetime.now(UTC)
    seconds = (now - when).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    if seconds < 30 * 86400:
        return f"{int(seconds // 86400)} d ago"
    return when.astimezone(UTC).strftime("%Y-%m-%d")


def short_id(session_id: str) -> str:
    return session_id[:8]


def _shorten(text: str | None, width: int) -> str:
    if not text:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def session_table(
    sessions: Sequence[SessionInfo],
    current: str,
    *,
    limit: int | None = None,
    now: datetime | None = None,
) -> str:
    """The sessions as a plain text table, the current one marked ``*``."""
    lines = [f"  {'id':<8}  {'modified':<12}  {'prompts':>7}  first prompt"]
    shown = sessions if limit is None else sessions[:limit]
    for info in shown:
        mark = "*" if info.id == current else " "
        turns = "" if info.turns is None else str(info.turns)
        lines.append(
            f"{mark} {short_id(info.id):<8}  {relative_time(info.mtime, now):<12}  "
            f"{turns:>7}  {_shorten(info.title, 60)}"
        )
    if limit is not None and len(sessions) > limit:
        lines.append(f"  … and {len(sessions) - limit} more")
    if not any(info.id == current for info in sessions):
        lines.append(f"* {short_id(current):<8}  (current, nothing sent yet)")
    return "\n".join(lines)


class _Reporter:
    """One place that shows an action's outcome: a status line and an Output for errors."""

    def __init__(self) -> None:
        self.status = w.HTML(value="")
        self.errors = w.Output()
        self.lock = threading.Lock()

    def ok(self, message: str) -> None:
        self.errors.outputs = ()
        self.status.value = f"<span>{html.escape(message)}</span>"

    def busy(self, session_id: str) -> None:
        self.errors.outputs = ()
        self.status.value = (
            f"<b>busy</b>: a turn is running in session {html.escape(short_id(session_id))}; "
            "nothing changed. Try again when it has finished."
        )

    def fail(self, what: str, error: BaseException) -> None:
        self.status.value = (
            f"<b>{html.escape(what)} failed</b>: {html.escape(type(error).__name__)}: "
            f"{html.escape(str(error))}"
        )
        self.errors.outputs = ()
        if not isinstance(error, LiteAgentError):
            self.errors.append_stderr("".join(traceback.format_exception(error)))

    def run(self, what: str, action: Callable[[], None]) -> None:
        """Run one action; its exception is shown inline, never lost in the browser's log."""
        if not self.lock.acquire(blocking=False):
            self.status.value = "<b>busy</b>: the previous action has not finished."
            return
        try:
            action()
        except Exception as error:
            self.fail(what, error)
        finally:
            self.lock.release()


_ROW_STYLE = (
    "display:flex;gap:1em;align-items:center;font-family:var(--jp-code-font-family,monospace);"
    "white-space:nowrap;overflow:hidden;padding:2px 6px;border-radius:3px;"
)
_CURRENT_STYLE = "background:var(--jp-brand-color3,#e3f2fd);font-weight:bold;"


class _Row:
    """One session row: its text and its Resume / Delete buttons (reused across pages)."""

    def __init__(self, browser: SessionBrowser, layouts: dict[str, w.Layout]) -> None:
        self.session_id = ""
        self.text = w.HTML(layout=layouts["text"])
        self.resume = w.Button(description="Resume", layout=layouts["button"])
        self.delete = w.Button(description="Delete", layout=layouts["button"])
        self.resume.add_class("lite-agent-resume")
        self.delete.add_class("lite-agent-delete")
        self.resume.on_click(lambda _b: browser.resume(self.session_id))
        self.delete.on_click(lambda _b: browser.delete(self.session_id))
        self.box = w.HBox([self.text, self.resume, self.delete], layout=layouts["row"])
        self.box.add_class("lite-agent-session-row")

    def show(self, info: SessionInfo, current: bool, confirming: bool, now: datetime) -> None:
        self.session_id = info.id
        turns = "–" if info.turns is None else f"{info.turns} prompt{'s' * (info.turns != 1)}"
        cells = [
            f"<span style='width:6.5em'>{html.escape(short_id(info.id))}</span>",
            f"<span style='width:7em'>{html.escape(relative_time(info.mtime, now))}</span>",
            f"<span style='width:6.5em'>{turns}</span>",
            f"<span style='overflow:hidden;text-overflow:ellipsis'>"
            f"{html.escape(_shorten(info.title, 80)) or '<i>(no prompt)</i>'}</span>",
        ]
        if current:
            cells.append("<span>● current</span>")
        style = _ROW_STYLE + (_CURRENT_STYLE if current else "")
        self.text.value = (
            f"<div style='{style}' title='{html.escape(info.id)}'>{''.join(cells)}</div>"
        )
        self.resume.disabled = current
        if confirming:
            self.delete.description = "Confirm delete"
            self.delete.button_style = "danger"
        else:
            self.delete.description = "Delete"
            self.delete.button_style = ""


class SessionBrowser:
    """A page of sessions with Resume / New / Delete (Delete asks for a second click).

    ``browser.widget`` is the widget to display. Only one page of rows exists at a time (the
    row widgets are reused), so thousands of sessions cost what one page costs on screen.
    """

    def __init__(self, controls: SessionControls, *, page_size: int = 15) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self.controls = controls
        self.page_size = page_size
        self.page = 0
        self.sessions: list[SessionInfo] = []
        self.confirming: str | None = None
        self.report = _Reporter()
        layouts = {
            "text": w.Layout(flex="1 1 auto", min_width="0"),
            "button": w.Layout(width="auto"),
            "row": w.Layout(width="100%", align_items="center"),
        }
        self._rows: list[_Row] = []
        self._layouts = layouts
        self.title = w.HTML()
        self.new_button = w.Button(description="New", icon="plus", tooltip="new empty session")
        self.new_button.add_class("lite-agent-new")
        self.new_button.on_click(lambda _b: self.new())
        self.refresh_button = w.Button(description="Refresh", icon="refresh")
        self.refresh_button.on_click(lambda _b: self.report.run("Refresh", self._refresh_ok))
        self.prev_button = w.Button(description="◀ Newer", layout=w.Layout(width="auto"))
        self.next_button = w.Button(description="Older ▶", layout=w.Layout(width="auto"))
        self.prev_button.on_click(lambda _b: self.show_page(self.page - 1))
        self.next_button.on_click(lambda _b: self.show_page(self.page + 1))
        self.page_label = w.HTML()
        self.rows_box = w.VBox(layout=w.Layout(width="100%"))
        header = w.HBox(
            [
                self.title,
                self.new_button,
                self.refresh_button,
                self.prev_button,
                self.page_label,
                self.next_button,
            ],
            layout=w.Layout(align_items="center", flex_flow="row wrap"),
        )
        self.widget = w.VBox(
            [header, self.rows_box, self.report.status, self.report.errors],
            layout=w.Layout(width="100%"),
        )
        self.widget.add_class("lite-agent-sessions")
        self.refresh()

    # -- reading ------------------------------------------------------------------------

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.sessions) // self.page_size))

    def refresh(self) -> None:
        """Re-read the sessions and redraw the page that holds the current session."""
        self.sessions = self.controls.list_sessions()
        current = self.controls.session_id
        for index, info in enumerate(self.sessions):
            if info.id == current:
                self.page = index // self.page_size
                break
        else:
            self.page = min(self.page, self.pages - 1)
        self._draw()

    def _refresh_ok(self) -> None:
        self.confirming = None
        self.refresh()
        self.report.ok(f"{len(self.sessions)} sessions.")

    def show_page(self, page: int) -> None:
        self.page = max(0, min(page, self.pages - 1))
        self.confirming = None
        self._draw()

    def _draw(self) -> None:
        current = self.controls.session_id
        now = datetime.now(UTC)
        start = self.page * self.page_size
        shown = self.sessions[start : start + self.page_size]
        while len(self._rows) < len(shown):
            self._rows.append(_Row(self, self._layouts))
        for row, info in zip(self._rows, shown, strict=False):
            row.show(info, info.id == current, info.id == self.confirming, now)
        self.rows_box.children = tuple(row.box for row in self._rows[: len(shown)])
        total = len(self.sessions)
        listed = any(info.id == current for info in self.sessions)
        current_note = "" if listed else f" · current: {short_id(current)} (nothing sent yet)"
        self.title.value = f"<b>Sessions</b> ({total}){html.escape(current_note)}"
        if total:
            self.page_label.value = f"{start + 1}–{start + len(shown)} of {total}"
        else:
            self.page_label.value = "no sessions yet"
        self.prev_button.disabled = self.page == 0
        self.next_button.disabled = self.page >= self.pages - 1

    def summary(self) -> str:
        """The static text left beside the widget (widget state is not saved)."""
        return f"Sessions ({len(self.sessions)}, newest first; * = current):\n" + session_table(
            self.sessions, self.controls.session_id, limit=self.page_size
        )

    # -- actions ------------------------------------------------------------------------

    def _guard(self, session_id: str) -> bool:
        if self.controls.is_busy(session_id):
            self.report.busy(session_id)
            return False
        return True

    def resume(self, session_id: str) -> None:
        def action() -> None:
            self.confirming = None
            if not self._guard(self.controls.session_id) or not self._guard(session_id):
                return
            self.controls.resume(session_id)
            self.refresh()
            self.report.ok(f"Resumed session {short_id(session_id)}.")

        self.report.run("Resume", action)

    def new(self) -> None:
        def action() -> None:
            self.confirming = None
            if not self._guard(self.controls.session_id):
                return
            new_id = self.controls.clear()
            self.refresh()
            self.report.ok(f"New session {short_id(new_id)} is current.")

        self.report.run("New", action)

    def delete(self, session_id: str) -> None:
        """First click asks for confirmation; a second click on the same row deletes."""

        def action() -> None:
            if self.confirming != session_id:
                self.confirming = session_id
                self._draw()
                self.report.ok(
                    f"Delete session {short_id(session_id)} and its files? Click "
                    "'Confirm delete' to delete it; any other action cancels."
                )
                return
            self.confirming = None
            if not self._guard(session_id):
                self._draw()
                return
            self.controls.delete_session(session_id)
            self.refresh()
            self.report.ok(f"Deleted session {short_id(session_id)}.")

        self.report.run("Delete", action)


def _show(widget: w.Widget, summary: str) -> None:
    display(widget)
    display({"text/plain": summary}, raw=True)


def show_sessions(
    controls: SessionControls, *, text: bool = False, page_size: int = 15
) -> SessionBrowser | None:
    """``%agent sessions``: the browser where a widget front end is present (with a static
    summary beside it), else (or with ``text=True``) the text table. Returns the browser."""
    if text or not widget_frontend():
        print(session_table(controls.list_sessions(), controls.session_id))
        return None
    browser = SessionBrowser(controls, page_size=page_size)
    _show(browser.widget, browser.summary())
    return browser
