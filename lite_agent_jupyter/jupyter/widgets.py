"""The session browser and the checkpoint slider, built from ipywidgets 8 built-ins only.

No front-end code of our own, so they render wherever ipywidgets does. Both talk to the agent
through a small *blocking* interface (:class:`SessionControls`, :class:`CheckpointControls`):
the kernel's :class:`~.runner.AgentFacade`, which runs each call on the agent's own event-loop
thread. A widget callback may run on the kernel's main thread when the kernel is idle or, with
comms over subshells, on another thread while a cell runs; either way it only calls the
facade, which serialises access to the agent. A click while a turn runs on the same session
answers "busy" and changes nothing.

A callback's exception would otherwise vanish into the browser's log console, so every action
reports its result or error inline. Widget state is not saved in notebooks: each ``show_*``
also prints a static text summary under the widget.

What a widget costs on screen is mostly how many widget models the front end has to create
(each is a message, a model and a view): the widgets share their ``Layout`` and ``Style``
models (:class:`_Look`), show and hide buttons by changing their box's children rather than
by a layout of their own, and send one page of sessions, never the whole list.
"""

from __future__ import annotations

import contextlib
import html
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import ipywidgets as w
from IPython import display as _ipython_display
from ipywidgets.widgets.widget_string import HTMLStyle

from ..agent import Checkpoint, RestorePlan, RestoreResult
from ..checkpoint.protocol import SessionInfo
from ..errors import LiteAgentError, RestoreConflictError, SessionBusyError
from . import render

display: Callable[..., Any] = _ipython_display.display  # untyped in IPython

__all__ = [
    "NOT_REWOUND",
    "SUMMARY_CHECKPOINTS",
    "CheckpointControls",
    "CheckpointSlider",
    "SessionBrowser",
    "SessionControls",
    "relative_time",
    "show_checkpoints",
    "show_sessions",
    "show_ui",
]

SUMMARY_CHECKPOINTS = 20
"""The static summary under the slider lists this many of the newest checkpoints."""


class SessionControls(Protocol):
    """The blocking agent calls the session browser needs (the kernel's facade)."""

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

    def is_busy(self, session_id: str | None = None) -> bool:
        """True while a turn of ``session_id`` runs."""
        ...


class CheckpointControls(SessionControls, Protocol):
    """The session calls plus time travel (``list_checkpoints`` ... ``undo_restore``)."""

    def list_checkpoints(self, session_id: str | None = None) -> list[Checkpoint]:
        """One checkpoint per prompt of the session, oldest first."""
        ...

    def preview_restore(self, session_id: str, seq: int) -> RestorePlan:
        """What ``restore`` would do; changes nothing."""
        ...

    def restore(
        self,
        session_id: str,
        seq: int,
        *,
        files: bool = True,
        conversation: bool = True,
        force: bool = False,
    ) -> RestoreResult:
        """Rewind files and/or conversation to just before the prompt after ``seq``."""
        ...

    def undo_restore(self, session_id: str, *, force: bool = False) -> RestoreResult:
        """Put back what the last restore of the session replaced."""
        ...


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


def _shorten(text: str | None, width: int) -> str:
    if not text:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@contextlib.contextmanager
def _batched(*widgets: w.Widget) -> Iterator[None]:
    """Send each widget's trait changes as one message when the block ends."""
    with contextlib.ExitStack() as stack:
        for widget in widgets:
            stack.enter_context(widget.hold_sync())
        yield


class _Look:
    """The ``Layout`` and ``Style`` models one widget's parts share.

    ipywidgets gives every widget a layout and (most) a style model of its own: a Button is
    three models, so a browser of a dozen parts was ~40 models for the front end to create.
    Shared ones are never changed after creation (a change would show on every part)."""

    def __init__(self) -> None:
        self.auto = w.Layout(width="auto")
        self.full = w.Layout(width="100%")
        self.row = w.Layout(align_items="center", flex_flow="row wrap")
        self.text = w.Layout()
        self.button_style = w.ButtonStyle()
        self.html_style = HTMLStyle()

    def button(self, description: str, name: str, **traits: Any) -> w.Button:
        return w.Button(
            description=description,
            layout=self.auto,
            style=self.button_style,
            _dom_classes=(f"lite-agent-{name}",),
            **traits,
        )

    def html(self, value: str = "", name: str | None = None) -> w.HTML:
        classes = (f"lite-agent-{name}",) if name else ()
        return w.HTML(value=value, layout=self.text, style=self.html_style, _dom_classes=classes)

    def hbox(self, children: Sequence[w.Widget]) -> w.HBox:
        return w.HBox(list(children), layout=self.row)


class _Reporter:
    """One place that shows an action's outcome: a status line (with the traceback of an
    unexpected error under it)."""

    def __init__(self, look: _Look) -> None:
        self.status = look.html(name="status")
        self.lock = threading.Lock()

    def ok(self, message: str) -> None:
        self.status.value = f"<span>{html.escape(message)}</span>"

    def busy(self, session_id: str) -> None:
        self.status.value = (
            f"<b>busy</b>: a turn is running in session {html.escape(render.short_id(session_id))}"
            "; nothing changed. Try again when it has finished."
        )

    def fail(self, what: str, error: BaseException) -> None:
        line = (
            f"<b>{html.escape(what)} failed</b>: {html.escape(type(error).__name__)}: "
            f"{html.escape(str(error))}"
        )
        if not isinstance(error, LiteAgentError):
            trace = html.escape("".join(traceback.format_exception(error)))
            line += f"<details><summary>traceback</summary><pre>{trace}</pre></details>"
        self.status.value = line

    def run(self, what: str, action: Callable[[], None]) -> None:
        """Run one action; its exception is shown inline, never lost in the browser's log."""
        if not self.lock.acquire(blocking=False):
            self.status.value = "<b>busy</b>: the previous action has not finished."
            return
        try:
            action()
        except SessionBusyError:  # a turn started between our check and the call
            self.status.value = "<b>busy</b>: a turn is running in this session; nothing changed."
        except Exception as error:
            self.fail(what, error)
        finally:
            self.lock.release()


# -- the session browser ------------------------------------------------------------------

_SESSIONS_CSS = (
    "<style>.lite-agent-sessions select{font-family:var(--jp-code-font-family,monospace);"
    "font-size:var(--jp-code-font-size,13px)}</style>"
)


def session_row(info: SessionInfo, current: bool, now: datetime | None = None) -> str:
    """One row of the browser: mark, short id, modified, prompts, first prompt."""
    turns = "" if info.turns is None else f"{info.turns} prompt{'s' * (info.turns != 1)}"
    cells = [
        "●" if current else " ",
        f"{render.short_id(info.id):<8}",
        f"{relative_time(info.mtime, now):<11}",
        f"{turns:>11}",
        _shorten(info.title, 90) or "(no prompt)",
    ]
    # Non-breaking spaces: a browser collapses runs of ordinary ones inside <option>.
    return "  ".join(cells).replace(" ", "\u00a0")


class SessionBrowser:
    """A page of sessions (one row each, the current one marked ● and selected) with
    Resume / Delete for the selected row (Delete asks for a second click) and New.

    ``browser.widget`` is the widget to display. The rows are the options of one ``Select``
    and only one page is sent to the front end, so thousands of sessions cost what one page
    costs on screen.
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
        self.confirming: str | None = None
        self._drawing = False
        look = _Look()
        self.report = _Reporter(look)
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
        return max(1, -(-len(self.sessions) // self.page_size))

    @property
    def selected(self) -> str | None:
        """The session id of the selected row (None: no row selected)."""
        value = self.rows.value
        return None if value is None else str(value)

    def select(self, session_id: str) -> None:
        """Select the row of ``session_id`` (turning to its page)."""
        for index, info in enumerate(self.sessions):
            if info.id == session_id:
                if index // self.page_size != self.page:
                    self.show_page(index // self.page_size)
                self.rows.value = session_id
                return
        raise KeyError(session_id)

    def fill(self) -> None:
        """First listing of a browser already on screen (see :func:`show_sessions`)."""
        _fill(self.report, "Listing the sessions", self.refresh)

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

    def _children(self) -> list[w.Widget]:
        """The rows are left out while there are none (an empty list box says nothing)."""
        rows = [self.rows] if self.rows.options else []
        return [self.header, *rows, self.actions]

    def _draw(self) -> None:
        current = self.controls.session_id
        now = datetime.now(UTC)
        start = self.page * self.page_size
        shown = self.sessions[start : start + self.page_size]
        total = len(self.sessions)
        listed = any(info.id == current for info in self.sessions)
        note = "" if listed else f" · current: {render.short_id(current)} (nothing sent yet)"
        parts = (self.rows, self.title, self.page_label, self.prev_button, self.next_button)
        with _batched(*parts):
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
            self.title.value = f"{_SESSIONS_CSS}<b>Sessions</b> ({total}){html.escape(note)}"
            self.page_label.value = (
                f"{start + 1}–{start + len(shown)} of {total}" if total else "no sessions yet"
            )
            self.prev_button.disabled = self.page == 0
            self.next_button.disabled = self.page >= self.pages - 1
        self._draw_actions()
        if list(self.widget.children) != self._children():
            self.widget.children = self._children()

    def _draw_actions(self) -> None:
        selected = self.selected
        confirming = selected is not None and selected == self.confirming
        with _batched(self.resume_button, self.delete_button):
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
        return render.sessions_text(self.sessions, self.controls.session_id, limit=self.page_size)

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

    def resume(self, session_id: str | None) -> None:
        def action() -> None:
            self.confirming = None
            if session_id is None:
                self.report.ok("Select a session first.")
                return
            if not self._guard(self.controls.session_id, session_id):
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
            self.controls.delete_session(session_id)
            self.refresh()
            self.report.ok(f"Deleted session {render.short_id(session_id)}.")

        self.report.run("Delete", action)


# -- the checkpoint slider ----------------------------------------------------------------

NOT_REWOUND = (
    "Restore rewinds the files the agent changed in its workdir and, if chosen, the "
    "conversation. Kernel variables and effects outside the workdir (databases, network, "
    "other folders) are not rewound."
)


def first_words(text: str, count: int = 6, width: int = 40) -> str:
    words = text.split()
    short = " ".join(words[:count])
    if len(words) > count:
        short += "…"
    return _shorten(short, width) or "(empty prompt)"


def stop_label(checkpoint: Checkpoint) -> str:
    """The slider readout of a stop: the state just before that prompt."""
    return f"before: {first_words(checkpoint.prompt)}"


def _when(ts: datetime, now: datetime | None = None) -> str:
    return f"{ts.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S UTC')} ({relative_time(ts, now)})"


_ACTION_WORDS = {
    "rewrite": "restore",
    "delete": "delete",
    "recreate": "re-create",
    "unchanged": "unchanged",
    "conflict": "CONFLICT",
}


class CheckpointSlider:
    """A slider over the prompts of one session with a preview, Restore and Undo restore.

    Each stop is the state just before that prompt, oldest on the left; it starts on the
    newest stop with its preview on screen, so Restore works at once. ``Restore anyway``
    and ``Undo restore`` are in the button row only while they apply.
    """

    def __init__(
        self, controls: CheckpointControls, session_id: str | None = None, *, load: bool = True
    ) -> None:
        """``load=False`` builds the frame only; :meth:`reload` fills it (see
        :class:`SessionBrowser`)."""
        self.controls = controls
        self.session_id = session_id or controls.session_id
        self.checkpoints: list[Checkpoint] = []
        self.plan: RestorePlan | None = None
        self._moving = False
        look = _Look()
        self.report = _Reporter(look)
        self.title = look.html("<b>Checkpoints</b> (reading…)")
        self.slider = w.SelectionSlider(
            options=[("(none)", 0)],
            value=0,
            continuous_update=False,
            # Our own readout: the built-in one is a narrow box that cuts the prompt's words.
            readout=False,
            layout=w.Layout(flex="1 1 auto", min_width="0"),
            style={"description_width": "0px"},
            _dom_classes=("lite-agent-slider",),
        )
        self.readout = w.HTML(
            layout=w.Layout(flex="0 1 auto", max_width="50%"),
            style=look.html_style,
            _dom_classes=("lite-agent-readout",),
        )
        self.slider.observe(self._moved, names="value")
        self.preview = look.html(name="preview")
        self.diffs_button = w.ToggleButton(
            value=False, description="Show diffs", icon="code", layout=look.auto
        )
        self.diffs_button.observe(lambda _c: self._draw_diffs(), names="value")
        self.diffs = look.html(name="diffs")
        self.files_toggle = w.Checkbox(
            value=True, description="files", indent=False, layout=look.auto
        )
        self.conversation_toggle = w.Checkbox(
            value=True,
            description="conversation",
            indent=False,
            layout=look.auto,
            style=self.files_toggle.style,
        )
        self.restore_button = look.button("Restore", "restore", button_style="warning", icon="undo")
        self.restore_button.on_click(lambda _b: self.restore())
        self.force_button = look.button("Restore anyway", "restore-anyway", button_style="danger")
        self.force_button.on_click(lambda _b: self.restore(force=True))
        self.undo_button = look.button("Undo restore", "undo", icon="redo")
        self.undo_button.on_click(lambda _b: self.undo())
        self.result = look.html(name="result")
        self.note = look.html(f"<small><i>{html.escape(NOT_REWOUND)}</i></small>")
        self._undoable = False
        self._conflicted = False
        self.actions = look.hbox(self._buttons())
        self.widget = w.VBox(
            [
                self.title,
                w.HBox(
                    [self.slider, self.readout],
                    layout=w.Layout(width="100%", align_items="center"),
                ),
                self.preview,
                self.actions,
                self.diffs,
                self.result,
                self.report.status,
                self.note,
            ],
            layout=look.full,
            _dom_classes=("lite-agent-checkpoints",),
        )
        if load:
            self.reload()

    # -- reading ------------------------------------------------------------------------

    @property
    def selected(self) -> Checkpoint | None:
        if not self.checkpoints:
            return None
        return self.checkpoints[int(self.slider.value)]

    def shows(self, button: w.Button) -> bool:
        """Whether ``button`` is in the button row now (Restore anyway, Undo restore)."""
        return button in self.actions.children

    def _buttons(self) -> list[w.Widget]:
        extra = [self.force_button] if self._conflicted else []
        extra += [self.undo_button] if self._undoable else []
        base = [self.restore_button, self.files_toggle, self.conversation_toggle]
        return [*base, self.diffs_button, *extra]

    def _set_buttons(self, *, conflicted: bool | None = None, undoable: bool | None = None) -> None:
        if conflicted is not None:
            self._conflicted = conflicted
        if undoable is not None:
            self._undoable = undoable
        wanted = self._buttons()
        if list(self.actions.children) != wanted:
            self.actions.children = wanted

    def fill(self) -> None:
        """First reading of a slider already on screen (see :func:`show_checkpoints`)."""
        _fill(self.report, "Reading the checkpoints", self.reload)

    def reload(self) -> None:
        """Re-read the checkpoints; select the newest stop and preview it."""
        self.checkpoints = list(self.controls.list_checkpoints(self.session_id))
        count = len(self.checkpoints)
        with _batched(self.slider, self.title, self.restore_button):
            self.title.value = (
                f"<b>Checkpoints</b> of session {html.escape(render.short_id(self.session_id))}"
                f": {count} prompt{'s' * (count != 1)}"
                + (", oldest on the left" if count > 1 else "")
            )
            self._moving = True
            try:
                if count:
                    self.slider.options = [
                        (stop_label(cp), index) for index, cp in enumerate(self.checkpoints)
                    ]
                    self.slider.value = count - 1
                else:
                    self.slider.options = [("no prompts yet", 0)]
                    self.slider.value = 0
            finally:
                self._moving = False
            # One stop: a slider cannot move; the readout still names the prompt.
            self.slider.disabled = count < 2
            self.restore_button.disabled = count == 0
        self._show_preview()

    def _moved(self, _change: object) -> None:
        if not self._moving:
            self.report.run("Preview", self._show_preview)

    def _show_preview(self) -> None:
        self._set_buttons(conflicted=False)
        checkpoint = self.selected
        if checkpoint is None:
            self.plan = None
            with _batched(self.readout, self.preview):
                self.readout.value = "<i>no prompts yet</i>"
                self.preview.value = "<i>No prompts in this session yet: nothing to restore.</i>"
            self._draw_diffs()
            return
        self.plan = self.controls.preview_restore(self.session_id, checkpoint.seq)
        with _batched(self.readout, self.preview):
            self.readout.value = f"<b>{html.escape(stop_label(checkpoint))}</b>"
            self.preview.value = _preview_html(checkpoint, int(self.slider.value) + 1, self.plan)
        self._draw_diffs()

    def _draw_diffs(self) -> None:
        if not self.diffs_button.value or self.plan is None:
            self.diffs.value = ""
            return
        blocks = [
            f"<pre style='font-size:90%;overflow-x:auto'>{html.escape(f.diff)}</pre>"
            for f in self.plan.files
            if f.diff
        ]
        self.diffs.value = "".join(blocks) or "<i>No text differences to show.</i>"

    def summary(self) -> str:
        """The static text printed under the widget (widget state is not saved)."""
        return (
            f"Checkpoints of session {render.short_id(self.session_id)}… "
            f"({len(self.checkpoints)} prompts):\n"
            + render.checkpoints_text(self.checkpoints, limit=SUMMARY_CHECKPOINTS)
        )

    # -- actions ------------------------------------------------------------------------

    def _busy(self) -> bool:
        if self.controls.is_busy(self.session_id):
            self.report.busy(self.session_id)
            return True
        return False

    def restore(self, *, force: bool = False) -> None:
        def action() -> None:
            checkpoint = self.selected
            if checkpoint is None or self._busy():
                return
            files = bool(self.files_toggle.value)
            conversation = bool(self.conversation_toggle.value)
            if not (files or conversation):
                self.report.ok("Nothing to restore: tick files, conversation or both.")
                return
            try:
                result = self.controls.restore(
                    self.session_id,
                    checkpoint.seq,
                    files=files,
                    conversation=conversation,
                    force=force,
                )
            except RestoreConflictError as error:
                self._show_conflicts(error)
                return
            label = stop_label(checkpoint)
            self.result.value = _result_html(f"Restored to {label}", result)
            self._set_buttons(undoable=True)
            self.reload()
            self.report.ok(f"Restored session {render.short_id(self.session_id)} to {label}.")

        self.report.run("Restore", action)

    def _show_conflicts(self, error: RestoreConflictError) -> None:
        paths = error.paths or (self.plan.conflicts if self.plan else ())
        listed = ", ".join(f"<code>{html.escape(p)}</code>" for p in paths)
        self.result.value = (
            "<b>Not restored</b>: these files were changed outside the agent since it last "
            f"wrote them: {listed or html.escape(str(error))}. Nothing was changed. "
            "<b>Restore anyway</b> overwrites them (Undo restore brings them back)."
        )
        self._set_buttons(conflicted=True)
        self.report.ok("Restore refused: files edited outside the agent.")

    def undo(self) -> None:
        def action() -> None:
            if self._busy():
                return
            result = self.controls.undo_restore(self.session_id)
            self.result.value = _result_html("Undid the last restore", result, undo=True)
            self._set_buttons(undoable=False)
            self.reload()
            self.report.ok(f"Undid the last restore of session {render.short_id(self.session_id)}.")

        self.report.run("Undo restore", action)


def _preview_html(checkpoint: Checkpoint, number: int, plan: RestorePlan) -> str:
    """The preview of one stop: its prompt and time, the files a restore would change, how
    much of the conversation it cuts, files edited outside the agent."""
    parts = [
        f"<div><b>Before prompt {number}</b> · {html.escape(_when(checkpoint.ts))} · "
        f"seq {checkpoint.seq}</div>",
        "<div style='white-space:pre-wrap;border-left:3px solid "
        "var(--jp-border-color1,#ccc);padding-left:6px;margin:4px 0'>"
        f"{html.escape(_shorten(checkpoint.prompt, 400))}</div>",
    ]
    changes = [f for f in plan.files if f.action != "unchanged"]
    if changes:
        items = "".join(
            f"<li><code>{html.escape(f.path)}</code>: "
            f"{html.escape(_ACTION_WORDS.get(f.action, f.action))}"
            f"{' — ' + html.escape(f.summary) if f.summary else ''}</li>"
            for f in changes
        )
        parts.append(f"<div>Files a restore would change ({len(changes)}):<ul>{items}</ul></div>")
    else:
        parts.append("<div>No file would change.</div>")
    cut = plan.events_cut
    parts.append(
        f"<div>Conversation: {cut} event{'s' * (cut != 1)} after this point would be "
        "cut (kept for Undo restore).</div>"
    )
    if plan.conflicts:
        parts.append(
            "<div><b>Edited outside the agent</b> (Restore will refuse; "
            "Restore anyway overwrites): "
            + ", ".join(f"<code>{html.escape(p)}</code>" for p in plan.conflicts)
            + "</div>"
        )
    return "".join(parts)


def _result_html(what: str, result: RestoreResult, *, undo: bool = False) -> str:
    def paths(items: Sequence[str]) -> str:
        return ", ".join(f"<code>{html.escape(p)}</code>" for p in items) or "none"

    parts = [
        f"<b>{html.escape(what)}</b>.",
        f"Files written: {paths(result.restored)}.",
        f"Deleted: {paths(result.deleted)}.",
    ]
    if result.skipped:
        parts.append(f"Skipped: {paths(result.skipped)}.")
    if result.conversation_restored:
        parts.append("Conversation put back." if undo else "Conversation rewound.")
    else:
        parts.append("Conversation unchanged." if undo else "Conversation kept.")
    return " ".join(parts)


# -- showing them -------------------------------------------------------------------------


def _fill(report: _Reporter, what: str, load: Callable[[], None]) -> None:
    """Fill a widget already on screen; an error shows in it and propagates to the cell."""
    try:
        load()
    except Exception as error:
        report.fail(what, error)
        raise


def _show(*views: SessionBrowser | CheckpointSlider) -> None:
    """Display the empty frames first (the front end draws them while the kernel reads),
    fill them, then print one static summary under them (what a saved notebook keeps)."""
    frames: list[w.Widget] = []
    for view in views:
        frames += [w.HTML("<hr>"), view.widget] if frames else [view.widget]
    display(frames[0] if len(frames) == 1 else w.VBox(frames))
    for view in views:
        view.fill()
    print("\n\n".join(view.summary() for view in views))


_View = TypeVar("_View", bound=SessionBrowser | CheckpointSlider)


def _show_one(text: bool, table: Callable[[], str], view: Callable[[], _View]) -> _View | None:
    """With ``text``, print ``table()`` only and return None; else :func:`_show` the widget
    ``view()`` makes and return it."""
    if text:
        print(table())
        return None
    shown = view()
    _show(shown)
    return shown


def show_sessions(controls: SessionControls, *, text: bool = False) -> SessionBrowser | None:
    """``%agent sessions``: the browser with its static summary printed under it; with
    ``text=True`` (no widget front end, or ``--text``) the whole table only."""
    return _show_one(
        text,
        lambda: render.sessions_text(controls.list_sessions(), controls.session_id),
        lambda: SessionBrowser(controls, load=False),
    )


def show_checkpoints(
    controls: CheckpointControls, *, text: bool = False
) -> CheckpointSlider | None:
    """``%agent checkpoints``: the slider of the current session with its static summary
    printed under it; with ``text=True`` every checkpoint as a table only."""
    return _show_one(
        text,
        lambda: render.checkpoints_text(controls.list_checkpoints(controls.session_id)),
        lambda: CheckpointSlider(controls, load=False),
    )


def show_ui(
    controls: CheckpointControls, *, text: bool = False
) -> tuple[SessionBrowser, CheckpointSlider] | None:
    """``%agent ui``: the session browser over the checkpoint slider of the current session,
    one summary for both printed under them."""
    if text:
        show_sessions(controls, text=True)
        show_checkpoints(controls, text=True)
        return None
    browser = SessionBrowser(controls, load=False)
    slider = CheckpointSlider(controls, load=False)
    _show(browser, slider)
    return browser, slider
