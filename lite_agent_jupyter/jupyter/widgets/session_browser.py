"""The session browser: a page of this notebook's sessions with Resume / New / Delete.

Owns the browser's rows, paging and its two-click delete. Must not know the checkpoint slider
or how it is shown (``show.py``); talks to the agent only through :class:`SessionControls`.
"""

from __future__ import annotations

from datetime import UTC, datetime

import ipywidgets as w

from ...checkpoint.protocol import SessionInfo
from .. import render
from ..safe import escape
from .controls import SessionControls
from .parts import Look, Reporter, batched, fill, relative_time, shorten

# A row longer than the list is as wide as it is cut with "…" (Chromium would clip it at the
# right edge mid-word and let the list's content run wider than its box).
_SESSIONS_CSS = (
    "<style>.lite-agent-sessions select{font-family:var(--jp-code-font-family,monospace);"
    "font-size:var(--jp-code-font-size,13px)}"
    ".lite-agent-sessions option{overflow:hidden;text-overflow:ellipsis}</style>"
)


def session_row(info: SessionInfo, current: bool, now: datetime | None = None) -> str:
    """One row of the browser: mark, short id, modified, prompts, first prompt."""
    turns = "" if info.turns is None else f"{info.turns} prompt{'s' * (info.turns != 1)}"
    cells = [
        "●" if current else " ",
        f"{render.short_id(info.id):<8}",
        f"{relative_time(info.mtime, now):<11}",
        f"{turns:>11}",
        shorten(info.title, 90) or "(no prompt)",
    ]
    # Non-breaking spaces: a browser collapses runs of ordinary ones inside <option>.
    return "  ".join(cells).replace(" ", "\u00a0")


class SessionBrowser:
    """A page of sessions (one row each, the current one marked ● and selected) with
    Resume / Delete for the selected row (Delete asks for a second click) and New.

    ``browser.widget`` is the widget to display. The rows are the options of one ``Select``,
    and a page is all the browser asks the store for (``list_sessions(limit=, before=)``,
    one more row than it shows, to know whether an older page exists): showing the newest
    15 of 10,000 sessions costs what it costs of 100 (#24). It opens on the newest page;
    the total is known once the last page is reached.
    """

    def __init__(
        self, controls: SessionControls, *, page_size: int = 15, load: bool = True
    ) -> None:
        """``load=False`` builds the empty frame only; :meth:`refresh` fills it (``show_*``
        display the frame first, so the front end draws it while the kernel lists)."""
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self.controls = controls
        self.page_size = page_size
        self.page = 0
        self.sessions: list[SessionInfo] = []
        """The rows of the page shown."""
        self.has_older = False
        self._cursors: list[SessionInfo | None] = [None]
        """``before`` of each page reached so far (page 0: none, the newest)."""
        self.confirming: str | None = None
        self._drawing = False
        look = Look()
        self.report = Reporter(look)
        self.title = look.html(f"{_SESSIONS_CSS}<b>Sessions</b> (reading…)")
        self.new_button = look.button("New", "new", icon="plus", tooltip="new empty session")
        self.refresh_button = look.button("Refresh", "refresh", icon="refresh")
        self.prev_button = look.button("◀ Newer", "newer")
        self.next_button = look.button("Older ▶", "older")
        self.page_label = look.html()
        self.rows = w.Select(
            options=[], rows=2, layout=look.full, _dom_classes=("lite-agent-session-rows",)
        )
        self.resume_button = look.button("Resume", "resume", button_style="primary")
        self.delete_button = look.button("Delete", "delete")
        self.new_button.on_click(lambda _b: self.new())
        self.refresh_button.on_click(lambda _b: self.report.run("Refresh", self._refresh_ok))
        self.prev_button.on_click(lambda _b: self.show_page(self.page - 1))
        self.next_button.on_click(lambda _b: self.show_page(self.page + 1))
        self.resume_button.on_click(lambda _b: self.resume(self.selected))
        self.delete_button.on_click(lambda _b: self.delete(self.selected))
        self.rows.observe(self._selection_changed, names="value")
        self.header = look.hbox(
            [
                self.title,
                self.new_button,
                self.refresh_button,
                self.prev_button,
                self.page_label,
                self.next_button,
            ]
        )
        self.actions = look.hbox([self.resume_button, self.delete_button, self.report.status])
        self.widget = w.VBox(
            self._children(), layout=look.full, _dom_classes=("lite-agent-sessions",)
        )
        if load:
            self.refresh()

    # -- reading ------------------------------------------------------------------------

    @property
    def pages(self) -> int:
        """Pages reached so far, plus the next one if there is an older page."""
        return self.page + 1 + self.has_older

    @property
    def selected(self) -> str | None:
        """The session id of the selected row (None: no row selected)."""
        value = self.rows.value
        return None if value is None else str(value)

    def select(self, session_id: str) -> None:
        """Select the row of ``session_id``, turning to its page (pages are read from the
        newest until it is found: the cost is how far back it is)."""
        if all(info.id != session_id for info in self.sessions):
            self.show_page(0)
            while all(info.id != session_id for info in self.sessions) and self.has_older:
                self.show_page(self.page + 1)
        if all(info.id != session_id for info in self.sessions):
            raise KeyError(session_id)
        self.rows.value = session_id

    def fill(self) -> None:
        """First listing of a browser already on screen (see :func:`show_sessions`)."""
        fill(self.report, "Listing the sessions", self.refresh)

    def refresh(self) -> None:
        """Read the page shown again (after an action: a new session is not listed until
        it has a prompt; a resumed one is on the page it was picked from)."""
        self._load(self.page)
        self._draw()

    def _page(self, before: SessionInfo | None) -> list[SessionInfo]:
        """The sessions after ``before`` (``None``: the newest), one more than a page."""
        limit = self.page_size + 1
        return self.controls.call(lambda a: a.list_sessions(limit=limit, before=before))

    def _load(self, page: int) -> None:
        """Read page ``page`` (one reached before, or the next one), falling back to the
        page before it when it has become empty (sessions deleted meanwhile)."""
        while True:
            got = self._page(self._cursors[page])
            if got or page == 0:
                break
            page -= 1
        self.page = page
        self.sessions = got[: self.page_size]
        self.has_older = len(got) > self.page_size
        del self._cursors[page + 1 :]
        if self.has_older:
            self._cursors.append(self.sessions[-1])

    def _refresh_ok(self) -> None:
        self.confirming = None
        self.refresh()
        more = " (and older ones)" if self.has_older else ""
        self.report.ok(f"{render.plural(len(self.sessions), 'session')} on this page{more}.")

    def show_page(self, page: int) -> None:
        self._load(max(0, min(page, self.pages - 1)))
        self.confirming = None
        self._draw()

    def _children(self) -> list[w.Widget]:
        """The rows are left out while there are none (an empty list box says nothing)."""
        rows = [self.rows] if self.rows.options else []
        return [self.header, *rows, self.actions]

    def _draw(self) -> None:
        current = self.controls.session_id
        now = datetime.now(UTC)
        start = self.page * self.page_size
        shown = self.sessions
        end = start + len(shown)
        total = None if self.has_older else end
        note = ""
        if all(info.id != current for info in shown):
            where = (
                "nothing sent yet" if total is not None and self.page == 0 else "not on this page"
            )
            note = f" · current: {render.short_id(current)} ({where})"
        parts = (self.rows, self.title, self.page_label, self.prev_button, self.next_button)
        with batched(*parts):
            self._drawing = True
            try:
                self.rows.options = [
                    (session_row(info, info.id == current, now), info.id) for info in shown
                ]
                self.rows.rows = max(2, len(shown))  # 1 would draw a drop-down
                ids = [info.id for info in shown]
                self.rows.value = current if current in ids else None
            finally:
                self._drawing = False
            count = "" if total is None else f" ({total})"
            self.title.value = f"{_SESSIONS_CSS}<b>Sessions</b>{count}{escape(note)}"
            of = f"{end}+" if total is None else str(total)
            self.page_label.value = f"{start + 1}–{end} of {of}" if end else "no sessions yet"
            self.prev_button.disabled = self.page == 0
            self.next_button.disabled = not self.has_older
        self._draw_actions()
        if list(self.widget.children) != self._children():
            self.widget.children = self._children()

    def _draw_actions(self) -> None:
        selected = self.selected
        confirming = selected is not None and selected == self.confirming
        with batched(self.resume_button, self.delete_button):
            self.resume_button.disabled = selected is None or selected == self.controls.session_id
            self.delete_button.disabled = selected is None
            self.delete_button.description = "Confirm delete" if confirming else "Delete"
            self.delete_button.button_style = "danger" if confirming else ""

    def _selection_changed(self, _change: object) -> None:
        if self._drawing:
            return
        self.confirming = None  # a pending delete is for the row it was asked on only
        self._draw_actions()

    def summary(self) -> str:
        """The static text printed under the widget (widget state is not saved)."""
        return render.sessions_text(
            self.sessions, self.controls.session_id, more=self.has_older or self.page > 0
        )

    # -- actions ------------------------------------------------------------------------

    def _guard(self, *session_ids: str) -> bool:
        """Whether none of ``session_ids`` is running a turn; else the first busy one is
        reported and the action buttons are drawn again."""
        for session_id in session_ids:
            if self.controls.is_busy(session_id):
                self.report.busy(session_id)
                self._draw_actions()
                return False
        return True

    def _gone(self, session_id: str) -> bool:
        """Re-read the list before acting on a row: a session deleted meanwhile (another
        cell, notebook, kernel or process) is said to be gone, and nothing is done (resuming
        it would begin it again, empty, under the old id)."""
        self.refresh()
        try:
            self.select(session_id)
        except KeyError:
            self.refresh()
            self.report.ok(
                f"Session {render.short_id(session_id)} is gone (deleted elsewhere); the list "
                "is up to date and nothing was done."
            )
            return True
        return False

    def resume(self, session_id: str | None) -> None:
        def action() -> None:
            self.confirming = None
            if session_id is None:
                self.report.ok("Select a session first.")
                return
            if not self._guard(self.controls.session_id, session_id) or self._gone(session_id):
                return
            self.controls.resume(session_id)
            self.refresh()
            self.report.ok(f"Resumed session {render.short_id(session_id)}.")

        self.report.run("Resume", action)

    def new(self) -> None:
        def action() -> None:
            self.confirming = None
            if not self._guard(self.controls.session_id):
                return
            new_id = self.controls.clear()
            self.refresh()
            self.report.ok(f"New session {render.short_id(new_id)} is current.")

        self.report.run("New", action)

    def delete(self, session_id: str | None) -> None:
        """First click asks for confirmation; a second click on the same row deletes."""

        def action() -> None:
            if session_id is None:
                self.report.ok("Select a session first.")
                return
            if self.confirming != session_id:
                self.confirming = session_id
                self._draw_actions()
                self.report.ok(
                    f"Delete session {render.short_id(session_id)} and its files? Click "
                    "'Confirm delete' to delete it; any other action cancels."
                )
                return
            self.confirming = None
            if not self._guard(session_id):
                return
            self.controls.call_idle(session_id, lambda a: a.delete_session(session_id))
            self.refresh()
            self.report.ok(f"Deleted session {render.short_id(session_id)}.")

        self.report.run("Delete", action)
