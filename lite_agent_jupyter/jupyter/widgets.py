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
from ..errors import LiteAgentError, RestoreConflictError, SessionBusyError

display: Callable[..., Any] = _ipython_display.display  # untyped in IPython

__all__ = [
    "CheckpointControls",
    "CheckpointSlider",
    "SessionBrowser",
    "SessionControls",
    "checkpoint_table",
    "relative_time",
    "session_table",
    "show_checkpoints",
    "show_sessions",
    "show_ui",
    "stacked",
    "widget_frontend",
]


class _Checkpoint(Protocol):
    @property
    def seq(self) -> int: ...
    @property
    def prompt(self) -> str: ...
    @property
    def ts(self) -> datetime: ...
    @property
    def files(self) -> Sequence[str]: ...


class _FileAction(Protocol):
    @property
    def path(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def diff(self) -> str | None: ...
    @property
    def summary(self) -> str: ...


class _RestorePlan(Protocol):
    @property
    def files(self) -> Sequence[_FileAction]: ...
    @property
    def events_cut(self) -> int: ...
    @property
    def conflicts(self) -> Sequence[str]: ...


class _RestoreResult(Protocol):
    @property
    def restored(self) -> Sequence[str]: ...
    @property
    def deleted(self) -> Sequence[str]: ...
    @property
    def skipped(self) -> Sequence[str]: ...
    @property
    def conversation_restored(self) -> bool: ...


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


class CheckpointControls(SessionControls, Protocol):
    """The session calls plus time travel (``list_checkpoints`` ... ``undo_restore``)."""

    def list_checkpoints(self, session_id: str) -> Sequence[_Checkpoint]:
        """One checkpoint per prompt of the session, oldest first."""
        ...

    def preview_restore(self, session_id: str, seq: int) -> _RestorePlan:
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
    ) -> _RestoreResult:
        """Rewind files and/or conversation to just before the prompt after ``seq``."""
        ...

    def undo_restore(self, session_id: str) -> _RestoreResult:
        """Put back what the last restore of the session replaced."""
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
        except SessionBusyError:  # a turn started between our check and the call
            self.status.value = "<b>busy</b>: a turn is running in this session; nothing changed."
        except Exception as error:
            self.fail(what, error)
        finally:
            self.lock.release()


_SESSIONS_CSS = (
    "<style>.lite-agent-sessions select{font-family:var(--jp-code-font-family,monospace);"
    "font-size:var(--jp-code-font-size,13px)}</style>"
)


def session_row(info: SessionInfo, current: bool, now: datetime | None = None) -> str:
    """One row of the browser: mark, short id, modified, prompts, first prompt."""
    turns = "" if info.turns is None else f"{info.turns} prompt{'s' * (info.turns != 1)}"
    cells = [
        "●" if current else " ",
        f"{short_id(info.id):<8}",
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

    def __init__(self, controls: SessionControls, *, page_size: int = 15) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self.controls = controls
        self.page_size = page_size
        self.page = 0
        self.sessions: list[SessionInfo] = []
        self.confirming: str | None = None
        self.report = _Reporter()
        self._drawing = False
        self.title = w.HTML()
        self.new_button = w.Button(description="New", icon="plus", tooltip="new empty session")
        self.refresh_button = w.Button(description="Refresh", icon="refresh")
        self.prev_button = w.Button(description="◀ Newer")
        self.next_button = w.Button(description="Older ▶")
        self.page_label = w.HTML()
        self.rows = w.Select(options=[], rows=1, layout=w.Layout(width="100%"))
        self.resume_button = w.Button(description="Resume", button_style="primary")
        self.delete_button = w.Button(description="Delete")
        for button, name in (
            (self.new_button, "new"),
            (self.refresh_button, "refresh"),
            (self.prev_button, "newer"),
            (self.next_button, "older"),
            (self.resume_button, "resume"),
            (self.delete_button, "delete"),
        ):
            button.layout.width = "auto"
            button.add_class(f"lite-agent-{name}")
        self.rows.add_class("lite-agent-session-rows")
        self.new_button.on_click(lambda _b: self.new())
        self.refresh_button.on_click(lambda _b: self.report.run("Refresh", self._refresh_ok))
        self.prev_button.on_click(lambda _b: self.show_page(self.page - 1))
        self.next_button.on_click(lambda _b: self.show_page(self.page + 1))
        self.resume_button.on_click(lambda _b: self.resume(self.selected))
        self.delete_button.on_click(lambda _b: self.delete(self.selected))
        self.rows.observe(self._selection_changed, names="value")
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
        actions = w.HBox(
            [self.resume_button, self.delete_button, self.report.status],
            layout=w.Layout(align_items="center"),
        )
        self.widget = w.VBox(
            [w.HTML(_SESSIONS_CSS), header, self.rows, actions, self.report.errors],
            layout=w.Layout(width="100%"),
        )
        self.widget.add_class("lite-agent-sessions")
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
        self.rows.layout.display = None if shown else "none"
        total = len(self.sessions)
        listed = any(info.id == current for info in self.sessions)
        note = "" if listed else f" · current: {short_id(current)} (nothing sent yet)"
        self.title.value = f"<b>Sessions</b> ({total}){html.escape(note)}"
        self.page_label.value = (
            f"{start + 1}–{start + len(shown)} of {total}" if total else "no sessions yet"
        )
        self.prev_button.disabled = self.page == 0
        self.next_button.disabled = self.page >= self.pages - 1
        self._draw_actions()

    def _draw_actions(self) -> None:
        selected = self.selected
        self.resume_button.disabled = selected is None or selected == self.controls.session_id
        self.delete_button.disabled = selected is None
        confirming = selected is not None and selected == self.confirming
        self.delete_button.description = "Confirm delete" if confirming else "Delete"
        self.delete_button.button_style = "danger" if confirming else ""

    def _selection_changed(self, _change: object) -> None:
        if self._drawing:
            return
        self.confirming = None  # a pending delete is for the row it was asked on only
        self._draw_actions()

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

    def resume(self, session_id: str | None) -> None:
        def action() -> None:
            self.confirming = None
            if session_id is None:
                self.report.ok("Select a session first.")
                return
            if not self._guard(self.controls.session_id) or not self._guard(session_id):
                self._draw_actions()
                return
            self.controls.resume(session_id)
            self.refresh()
            self.report.ok(f"Resumed session {short_id(session_id)}.")

        self.report.run("Resume", action)

    def new(self) -> None:
        def action() -> None:
            self.confirming = None
            if not self._guard(self.controls.session_id):
                self._draw_actions()
                return
            new_id = self.controls.clear()
            self.refresh()
            self.report.ok(f"New session {short_id(new_id)} is current.")

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
                    f"Delete session {short_id(session_id)} and its files? Click "
                    "'Confirm delete' to delete it; any other action cancels."
                )
                return
            self.confirming = None
            if not self._guard(session_id):
                self._draw_actions()
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


def stop_label(checkpoint: _Checkpoint) -> str:
    """The slider readout of a stop: the state just before that prompt."""
    return f"before: {first_words(checkpoint.prompt)}"


def _when(ts: datetime, now: datetime | None = None) -> str:
    return f"{ts.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S UTC')} ({relative_time(ts, now)})"


def checkpoint_table(checkpoints: Sequence[_Checkpoint], *, limit: int = 50) -> str:
    """The checkpoints as plain text (oldest first), with the command that restores each."""
    lines = [f"  {'seq':>6}  {'when':<12}  prompt  (files changed from there on)"]
    shown = list(checkpoints)[-limit:]
    if len(checkpoints) > limit:
        lines.append(f"  … {len(checkpoints) - limit} older prompts")
    for cp in shown:
        files = f"  ({', '.join(cp.files[:4])}{', …' if len(cp.files) > 4 else ''})"
        lines.append(
            f"  {cp.seq:>6}  {relative_time(cp.ts):<12}  {_shorten(cp.prompt, 50)}"
            f"{files if cp.files else ''}"
        )
    return "\n".join(lines)


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
    newest stop with its preview on screen, so Restore works at once.
    """

    def __init__(self, controls: CheckpointControls, session_id: str | None = None) -> None:
        self.controls = controls
        self.session_id = session_id or controls.session_id
        self.checkpoints: list[_Checkpoint] = []
        self.plan: _RestorePlan | None = None
        self.report = _Reporter()
        self._moving = False
        self.title = w.HTML()
        self.slider = w.SelectionSlider(
            options=[("(none)", 0)],
            value=0,
            continuous_update=False,
            # Our own readout: the built-in one is a narrow box that cuts the prompt's words.
            readout=False,
            layout=w.Layout(flex="1 1 auto", min_width="0"),
            style={"description_width": "0px"},
        )
        self.slider.add_class("lite-agent-slider")
        self.readout = w.HTML(layout=w.Layout(flex="0 1 auto", max_width="50%"))
        self.readout.add_class("lite-agent-readout")
        self.slider.observe(self._moved, names="value")
        self.preview = w.HTML()
        self.preview.add_class("lite-agent-preview")
        self.diffs_button = w.ToggleButton(
            value=False, description="Show diffs", icon="code", layout=w.Layout(width="auto")
        )
        self.diffs_button.observe(lambda _c: self._draw_diffs(), names="value")
        self.diffs = w.HTML()
        self.files_toggle = w.Checkbox(value=True, description="files", indent=False)
        self.conversation_toggle = w.Checkbox(value=True, description="conversation", indent=False)
        for toggle in (self.files_toggle, self.conversation_toggle):
            toggle.layout = w.Layout(width="auto")
        self.restore_button = w.Button(description="Restore", button_style="warning", icon="undo")
        self.restore_button.add_class("lite-agent-restore")
        self.restore_button.on_click(lambda _b: self.restore())
        self.force_button = w.Button(
            description="Restore anyway", button_style="danger", layout=w.Layout(display="none")
        )
        self.force_button.add_class("lite-agent-restore-anyway")
        self.force_button.on_click(lambda _b: self.restore(force=True))
        self.undo_button = w.Button(
            description="Undo restore", icon="redo", layout=w.Layout(display="none")
        )
        self.undo_button.add_class("lite-agent-undo")
        self.undo_button.on_click(lambda _b: self.undo())
        self.result = w.HTML()
        self.result.add_class("lite-agent-result")
        note = w.HTML(f"<small><i>{html.escape(NOT_REWOUND)}</i></small>")
        actions = w.HBox(
            [
                self.restore_button,
                self.files_toggle,
                self.conversation_toggle,
                self.diffs_button,
                self.force_button,
                self.undo_button,
            ],
            layout=w.Layout(align_items="center", flex_flow="row wrap"),
        )
        self.widget = w.VBox(
            [
                self.title,
                w.HBox(
                    [self.slider, self.readout],
                    layout=w.Layout(width="100%", align_items="center"),
                ),
                self.preview,
                actions,
                self.diffs,
                self.result,
                self.report.status,
                self.report.errors,
                note,
            ],
            layout=w.Layout(width="100%"),
        )
        self.widget.add_class("lite-agent-checkpoints")
        self.reload()

    # -- reading ------------------------------------------------------------------------

    @property
    def selected(self) -> _Checkpoint | None:
        if not self.checkpoints:
            return None
        return self.checkpoints[int(self.slider.value)]

    def reload(self) -> None:
        """Re-read the checkpoints; select the newest stop and preview it."""
        self.checkpoints = list(self.controls.list_checkpoints(self.session_id))
        count = len(self.checkpoints)
        self.title.value = (
            f"<b>Checkpoints</b> of session {html.escape(short_id(self.session_id))}: "
            f"{count} prompt{'s' * (count != 1)}" + (", oldest on the left" if count > 1 else "")
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
        self.force_button.layout.display = "none"
        self._show_preview()

    def _moved(self, _change: object) -> None:
        if not self._moving:
            self.report.run("Preview", self._show_preview)

    def _show_preview(self) -> None:
        checkpoint = self.selected
        self.force_button.layout.display = "none"
        self.readout.value = (
            "<i>no prompts yet</i>"
            if checkpoint is None
            else f"<b>{html.escape(stop_label(checkpoint))}</b>"
        )
        if checkpoint is None:
            self.plan = None
            self.preview.value = "<i>No prompts in this session yet: nothing to restore.</i>"
            self._draw_diffs()
            return
        self.plan = self.controls.preview_restore(self.session_id, checkpoint.seq)
        number = self.checkpoints.index(checkpoint) + 1
        parts = [
            f"<div><b>Before prompt {number}</b> · {html.escape(_when(checkpoint.ts))} · "
            f"seq {checkpoint.seq}</div>",
            "<div style='white-space:pre-wrap;border-left:3px solid "
            "var(--jp-border-color1,#ccc);padding-left:6px;margin:4px 0'>"
            f"{html.escape(_shorten(checkpoint.prompt, 400))}</div>",
        ]
        changes = [f for f in self.plan.files if f.action != "unchanged"]
        if changes:
            items = "".join(
                f"<li><code>{html.escape(f.path)}</code>: "
                f"{html.escape(_ACTION_WORDS.get(f.action, f.action))}"
                f"{' — ' + html.escape(f.summary) if f.summary else ''}</li>"
                for f in changes
            )
            parts.append(
                f"<div>Files a restore would change ({len(changes)}):<ul>{items}</ul></div>"
            )
        else:
            parts.append("<div>No file would change.</div>")
        cut = self.plan.events_cut
        parts.append(
            f"<div>Conversation: {cut} event{'s' * (cut != 1)} after this point would be "
            "cut (kept for Undo restore).</div>"
        )
        if self.plan.conflicts:
            parts.append(
                "<div><b>Edited outside the agent</b> (Restore will refuse; "
                "Restore anyway overwrites): "
                + ", ".join(f"<code>{html.escape(p)}</code>" for p in self.plan.conflicts)
                + "</div>"
            )
        self.preview.value = "".join(parts)
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
        """The static text left beside the widget (widget state is not saved)."""
        head = (
            f"Checkpoints of session {self.session_id} ({len(self.checkpoints)} prompts, "
            "oldest first). Restore one with: %agent restore SEQ"
        )
        if not self.checkpoints:
            return head + "\n  (no prompts yet)"
        return head + "\n" + checkpoint_table(self.checkpoints)

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
            self.undo_button.layout.display = None
            self.reload()
            self.report.ok(f"Restored session {short_id(self.session_id)} to {label}.")

        self.report.run("Restore", action)

    def _show_conflicts(self, error: RestoreConflictError) -> None:
        paths = getattr(error, "paths", ()) or (self.plan.conflicts if self.plan else ())
        listed = ", ".join(f"<code>{html.escape(p)}</code>" for p in paths)
        self.result.value = (
            "<b>Not restored</b>: these files were changed outside the agent since it last "
            f"wrote them: {listed or html.escape(str(error))}. Nothing was changed. "
            "<b>Restore anyway</b> overwrites them (Undo restore brings them back)."
        )
        self.force_button.layout.display = None
        self.report.ok("Restore refused: files edited outside the agent.")

    def undo(self) -> None:
        def action() -> None:
            if self._busy():
                return
            result = self.controls.undo_restore(self.session_id)
            self.result.value = _result_html("Undid the last restore", result, undo=True)
            self.undo_button.layout.display = "none"
            self.reload()
            self.report.ok(f"Undid the last restore of session {short_id(self.session_id)}.")

        self.report.run("Undo restore", action)


def _result_html(what: str, result: _RestoreResult, *, undo: bool = False) -> str:
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


def show_checkpoints(
    controls: CheckpointControls, session_id: str | None = None, *, text: bool = False
) -> CheckpointSlider | None:
    """``%agent checkpoints``: the slider (with a static summary) where a widget front end
    is present, else (or with ``text=True``) the text table."""
    if text or not widget_frontend():
        sid = session_id or controls.session_id
        print(f"Checkpoints of session {sid} (oldest first); restore with %agent restore SEQ")
        print(checkpoint_table(controls.list_checkpoints(sid)))
        return None
    slider = CheckpointSlider(controls, session_id)
    _show(slider.widget, slider.summary())
    return slider


def stacked(*parts: w.Widget) -> w.VBox:
    """Widgets one under the other, separated by a rule (``%agent ui``)."""
    children: list[w.Widget] = []
    for part in parts:
        if children:
            children.append(w.HTML("<hr>"))
        children.append(part)
    return w.VBox(children)


def show_ui(controls: CheckpointControls) -> tuple[SessionBrowser, CheckpointSlider] | None:
    """``%agent ui``: the session browser and the checkpoint slider of the current session."""
    if not widget_frontend():
        show_sessions(controls, text=True)
        show_checkpoints(controls, text=True)
        return None
    browser = SessionBrowser(controls)
    slider = CheckpointSlider(controls)
    box = stacked(browser.widget, slider.widget)
    _show(box, browser.summary() + "\n\n" + slider.summary())
    return browser, slider
