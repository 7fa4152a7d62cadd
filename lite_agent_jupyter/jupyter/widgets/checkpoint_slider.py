"""The checkpoint slider: one stop per prompt of a session, the restore preview, Restore,
Restore anyway and Undo restore.

Owns the slider's stops, its preview and its restore/undo actions. Must not know the session
browser or how it is shown (``show.py``); talks to the agent only through
:class:`CheckpointControls`, and in a kernel through :class:`AwaitingControls` too: there the
preview, Restore and Undo restore run as tasks on the kernel's loop that await the agent
(``jupyter/awaiting.py``), so a restore of the notebook's cells hears the page while the
callback that started it has returned; elsewhere (tests, no running loop) they block.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import ipywidgets as w

from ...agent import Branch, Checkpoint, RestorePlan, RestoreResult
from ...errors import RestoreConflictError, SessionDeletedError
from .. import history_text, render
from ..awaiting import is_page_heard, page_heard, run_now
from ..safe import escape
from .controls import AwaitingControls, CheckpointControls
from .parts import Look, Reporter, batched, fill, relative_time, shorten

if TYPE_CHECKING:
    from ...agent import LiteAgent

T = TypeVar("T")

SUMMARY_CHECKPOINTS = 20
"""The static summary under the slider lists this many of the newest checkpoints."""

NOT_REWOUND = (
    "Restore rewinds the files the agent changed in its workdir and, if chosen, the "
    "conversation; with the files, the kernel variables changed by the run_cell tool of the "
    "agent, except those it named as cannot be rewound. Variables you changed yourself and "
    "effects outside the workdir (databases, network, other folders) are not rewound."
)


def first_words(text: str, count: int = 6, width: int = 40) -> str:
    words = text.split()
    short = " ".join(words[:count])
    if len(words) > count:
        short += "…"
    return shorten(short, width) or "(empty prompt)"


def stop_label(checkpoint: Checkpoint) -> str:
    """The slider readout of a stop: the state just before that prompt (numbered 1..N, as
    in ``%agent checkpoints`` and the footers)."""
    return f"before prompt {checkpoint.number}: {first_words(checkpoint.prompt)}"


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
        self,
        controls: CheckpointControls,
        session_id: str | None = None,
        *,
        load: bool = True,
        aio: AwaitingControls | None = None,
    ) -> None:
        """``load=False`` builds the frame only; :meth:`reload` fills it (see
        :class:`SessionBrowser`). ``aio``: the same calls awaited (the kernel's), used by
        actions started on a running event loop (a widget callback in a kernel)."""
        self.controls = controls
        self.aio = aio
        self._tasks: set[asyncio.Task[None]] = set()
        self.session_id = session_id or controls.session_id
        self.checkpoints: list[Checkpoint] = []
        self.forks: dict[int, list[Branch]] = {}
        self.plan: RestorePlan | None = None
        self._moving = False
        look = Look()
        self.report = Reporter(look)
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
        self.note = look.html(f"<small><i>{escape(NOT_REWOUND)}</i></small>")
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

    # After a restore the newest stop is the prompt before the one rewound to: Restore stays
    # off until the slider moves, so a second click cannot rewind again unasked (#19).
    _armed = True

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
        fill(self.report, "Reading the checkpoints", self.reload)

    def reload(self) -> None:
        """Re-read the checkpoints; select the newest stop and preview it."""
        sid = self.session_id
        self.checkpoints = list(self.controls.call(lambda a: a.list_checkpoints(sid)))
        self.forks = {}  # seq -> the branches forking there
        for branch in self.controls.call(lambda a: a.list_branches(sid)):
            self.forks.setdefault(branch.fork, []).append(branch)
        count = len(self.checkpoints)
        with batched(self.slider, self.title, self.restore_button):
            self.title.value = (
                f"<b>Checkpoints</b> of session {escape(render.short_id(self.session_id))}"
                f": {count} prompt{'s' * (count != 1)}"
                + (", oldest on the left" if count > 1 else "")
                + _forks_title(self.checkpoints, self.forks)
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
            self.restore_button.disabled = count == 0 or not self._armed
        self._show_preview()

    def _moved(self, _change: object) -> None:
        if not self._moving:
            self._armed = True
            self.restore_button.disabled = not self.checkpoints
            self._act("Preview", self._preview)

    # -- how an action runs: awaited on the kernel's loop, or blocking ---------------------

    def _act(self, what: str, action: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``action`` once, its error shown inline: as a task of the running loop that
        hears the page (with :attr:`aio`), else to its end now, blocking."""
        loop = _running_loop() if self.aio is not None else None
        if loop is None:
            self.report.run(what, lambda: run_now(action()))
            return

        async def heard() -> None:
            with page_heard():
                await self.report.run_async(what, action)

        task = loop.create_task(heard())
        self._tasks.add(task)  # kept until done: the loop holds tasks weakly
        task.add_done_callback(self._tasks.discard)

    async def _call(self, fn: Callable[[LiteAgent], Awaitable[T]], *, idle: bool = False) -> T:
        """``fn(agent)``: awaited inside an action started by :meth:`_act` on a loop (the page
        is heard), else blocking (``idle``: refused while the session is busy)."""
        sid = self.session_id
        if self.aio is not None and is_page_heard():
            return await (self.aio.call_idle(sid, fn) if idle else self.aio.call(fn))
        return self.controls.call_idle(sid, fn) if idle else self.controls.call(fn)

    def _show_preview(self) -> None:
        """The selected stop's preview: by a task that hears the page on a kernel's loop
        (after the action that asked for it), else drawn now."""
        if self.aio is not None and _running_loop() is not None:
            self._act("Preview", self._preview)
        else:
            run_now(self._preview())

    async def _preview(self) -> None:
        self._set_buttons(conflicted=False)
        checkpoint = self.selected
        if checkpoint is None:
            self.plan = None
            with batched(self.readout, self.preview):
                self.readout.value = "<i>no prompts yet</i>"
                self.preview.value = "<i>No prompts in this session yet: nothing to restore.</i>"
            self._draw_diffs()
            return
        sid = self.session_id
        self.plan = await self._call(lambda a: a.preview_restore(sid, checkpoint.seq))
        with batched(self.readout, self.preview):
            self.readout.value = f"<b>{escape(stop_label(checkpoint))}</b>"
            self.preview.value = _preview_html(checkpoint, self.plan) + _fork_html(
                self.forks.get(checkpoint.seq, [])
            )
        self._draw_diffs()

    def _draw_diffs(self) -> None:
        if not self.diffs_button.value or self.plan is None:
            self.diffs.value = ""
            return
        blocks = [
            f"<pre style='font-size:90%;overflow-x:auto'>{escape(f.diff)}</pre>"
            for f in self.plan.files
            if f.diff
        ]
        self.diffs.value = "".join(blocks) or "<i>No text differences to show.</i>"

    def summary(self) -> str:
        """The static text printed under the widget (widget state is not saved)."""
        return (
            f"Checkpoints of session {render.short_id(self.session_id)}… "
            f"({render.plural(len(self.checkpoints), 'prompt')}):\n"
            + render.checkpoints_text(self.checkpoints, limit=SUMMARY_CHECKPOINTS)
            + history_text.forks_text(self.checkpoints, self.forks)
        )

    # -- actions ------------------------------------------------------------------------

    def _busy(self) -> bool:
        if self.controls.is_busy(self.session_id):
            self.report.busy(self.session_id)
            return True
        return False

    def restore(self, *, force: bool = False) -> None:
        async def action() -> None:
            checkpoint = self.selected
            if checkpoint is None or self._busy():
                return
            if not self._armed and not force:  # a click delivered before the redraw landed
                self.report.ok("Restore is off until you move the slider to a point to rewind to.")
                return
            files = bool(self.files_toggle.value)
            conversation = bool(self.conversation_toggle.value)
            if not (files or conversation):
                self.report.ok("Nothing to restore: tick files, conversation or both.")
                return
            if self._stale(checkpoint):
                return
            try:
                sid = self.session_id
                result = await self._call(
                    lambda a: a.restore(
                        sid, checkpoint.seq, files=files, conversation=conversation, force=force
                    ),
                    idle=True,
                )
            except SessionDeletedError:
                self._show_gone()
                return
            except RestoreConflictError as error:
                self._show_conflicts(error)
                return
            what = f"Restored to before prompt {checkpoint.number} ({checkpoint.id})"
            self._armed = False
            self._set_buttons(undoable=True)
            self.reload()  # the new timeline: that prompt and the ones after it are gone
            self.result.value = _result_html(what, result)
            self.report.ok("")  # the result above is the one account of what happened

        self._act("Restore", action)

    def _stale(self, checkpoint: Checkpoint) -> bool:
        """Whether the selected stop is no longer a checkpoint of the session (the session
        was deleted, or restored elsewhere and went on with other prompts): then the slider
        is redrawn as the session is now and nothing is done. A click never acts on a stale
        target; new prompts after a stop leave it a valid target."""
        sid = self.session_id
        current = list(self.controls.call(lambda a: a.list_checkpoints(sid)))
        key = (checkpoint.seq, checkpoint.prompt, checkpoint.ts)
        if any((c.seq, c.prompt, c.ts) == key for c in current):
            return False
        if not current and self._deleted():
            self._show_gone()
            return True
        self.reload()
        message = (
            "The session changed since this slider was drawn (restored elsewhere and "
            "continued from another cell or kernel): that stop is gone. The slider now shows "
            "the session as it is; nothing was changed."
        )
        self.result.value = f"<b>Not restored</b>: {escape(message)}"
        self.report.ok("Not restored: the session changed meanwhile; the slider is up to date.")
        return True

    def _deleted(self) -> bool:
        try:
            sid = self.session_id
            self.controls.call(lambda a: a.preview_restore(sid, 0))
        except SessionDeletedError:
            return True
        return False

    def _show_gone(self) -> None:
        """The session was deleted: say so, and offer nothing to click."""
        short = escape(render.short_id(self.session_id))
        self.checkpoints = []
        self.plan = None
        with batched(self.title, self.preview, self.restore_button, self.result):
            self.title.value = f"<b>Checkpoints</b> of session {short}: deleted"
            self.preview.value = ""
            self.restore_button.disabled = True
            self.result.value = (
                f"<b>Session {short} was deleted</b> (here, in another notebook, kernel or "
                "process): there is nothing to restore or undo. Nothing was changed."
            )
        self._set_buttons(conflicted=False, undoable=False)
        self.report.ok(f"Session {render.short_id(self.session_id)} is gone: nothing was done.")

    def _show_conflicts(self, error: RestoreConflictError) -> None:
        paths = error.paths or (self.plan.conflicts if self.plan else ())
        listed = ", ".join(f"<code>{escape(p)}</code>" for p in paths)
        self.result.value = (
            "<b>Not restored</b>: these files were changed outside the agent since it last "
            f"wrote them: {listed or escape(str(error))}. Nothing was changed. "
            "<b>Restore anyway</b> overwrites them (Undo restore brings them back)."
        )
        self._set_buttons(conflicted=True)
        self.report.ok("Restore refused: files edited outside the agent.")

    def undo(self) -> None:
        async def action() -> None:
            if self._busy():
                return
            try:
                sid = self.session_id
                result = await self._call(lambda a: a.undo_restore(sid), idle=True)
            except SessionDeletedError:
                self._show_gone()
                return
            self._armed = True
            self._set_buttons(undoable=False)
            self.reload()
            what = f"Undid {result.undid or 'the last restore'}"
            self.result.value = _result_html(what, result, undo=True)
            self.report.ok("")

        self._act("Undo restore", action)


def _preview_html(checkpoint: Checkpoint, plan: RestorePlan) -> str:
    """The preview of one stop: its prompt and time, the files a restore would change, how
    much of the conversation it cuts, files edited outside the agent."""
    parts = [
        f"<div><b>Before prompt {checkpoint.number}</b> · {escape(_when(checkpoint.ts))} · "
        f"<code>%agent restore {escape(checkpoint.id)}</code></div>",
        *(
            [f"<div class='lite-agent-who'>{escape(render.prompt_who(checkpoint))}</div>"]
            if render.who_text(checkpoint)
            else []
        ),
        "<div style='white-space:pre-wrap;border-left:3px solid "
        "var(--jp-border-color1,#ccc);padding-left:6px;margin:4px 0'>"
        f"{escape(shorten(checkpoint.prompt, 400))}</div>",
    ]
    changes = [f for f in plan.files if f.action != "unchanged"]
    if changes:
        items = "".join(
            f"<li><code>{escape(f.path)}</code>: "
            f"{escape(_ACTION_WORDS.get(f.action, f.action))}"
            f"{' — ' + escape(f.summary) if f.summary else ''}</li>"
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
            + ", ".join(f"<code>{escape(p)}</code>" for p in plan.conflicts)
            + "</div>"
        )
    kernel = render.state_plan_lines(plan.state, "Restore")
    if kernel:
        parts.append(f"<div style='white-space:pre-wrap'>{escape(chr(10).join(kernel))}</div>")
    return "".join(parts)


def _result_html(what: str, result: RestoreResult, *, undo: bool = False) -> str:
    def paths(items: Sequence[str]) -> str:
        return ", ".join(f"<code>{escape(p)}</code>" for p in items) or "none"

    parts = [
        f"<b>{escape(what)}</b>.",
        f"Files written: {paths(result.restored)}.",
        f"Deleted: {paths(result.deleted)}.",
    ]
    if result.skipped:
        parts.append(f"Skipped: {paths(result.skipped)}.")
    if undo:
        parts.append(
            f"Conversation as it was before that {render.undone_noun(result)}."
            if result.conversation_restored
            else "Conversation unchanged."
        )
    else:
        parts.append(
            "Conversation rewound to before that prompt."
            if result.conversation_restored
            else "Conversation kept (the model is told its files were rewound)."
        )
    parts.extend(escape(line) for line in render.state_result_lines(result.state))
    return " ".join(parts)


def _forks_title(checkpoints: Sequence[Checkpoint], forks: dict[int, list[Branch]]) -> str:
    """The title's note of where branches fork (``branches fork before prompt 2: b1``): in
    words, as no branch glyph is in the fonts most notebooks use (``⑂`` drew a box, #30)."""
    if not forks:
        return ""
    spots = [
        f"{history_text.fork_spot(checkpoints, seq)}: "
        + ", ".join(escape(b.name) for b in branches)
        for seq, branches in sorted(forks.items())
    ]
    return " · branches fork " + "; ".join(spots)


def _fork_html(branches: Sequence[Branch]) -> str:
    """The preview's note that branches fork at this stop, and how to switch to each."""
    if not branches:
        return ""
    items = "".join(
        f"<li><code>{escape(b.name)}</code>: {b.prompts} prompt(s), "
        f"{escape(shorten(b.first_prompt, 60))} — "
        f"<code>%agent switch {escape(b.name)}</code></li>"
        for b in branches
    )
    return f"<div class='lite-agent-forks'>Branches fork here:<ul>{items}</ul></div>"


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running on this thread (a kernel's, in a widget callback), if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
