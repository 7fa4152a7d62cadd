"""``%agent review``'s widget: every file a prompt changed, one row each, Keep or Revert the
selected file (or one hunk of it), its diff shown only once it is selected.

Owns :class:`ReviewPanel` and :func:`show_review`. Revert calls the agent's ``revert_file``
through the facade (the agent's conflict check, journal and undo: ``%agent undo`` takes a
revert back); Keep only marks the file reviewed. Must not know how a revert is done.

Why one list and not a row of buttons per file: a widget is a model, a message and a view,
and a 100-file turn drawn as five widgets per file (row, Keep, Revert, a folded accordion,
its diff) took ~1.3 s to reach the screen (#21). The rows are the options of one ``Select``
(their text set as text by the front end, and made printable by :func:`.parts.shorten`);
the panel is ten widgets whatever the number of files. A file's diff is made in the kernel
(``change_diff``) the first time its row is selected, never up front. Every diff, summary
and error reaches the page escaped by ``safe.escape``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import ipywidgets as w

from ...agent import FileChange, PromptChanges, RestoreResult
from ...errors import LiteAgentError, RestoreConflictError, SessionBusyError
from .. import history_text, render
from ..safe import escape
from .controls import SessionControls
from .parts import Look, Reporter, batched, shorten
from .show import show_widget

_CSS = (
    "<style>.lite-agent-review select{font-family:var(--jp-code-font-family,monospace);"
    "font-size:var(--jp-code-font-size,13px)}"
    ".lite-agent-review option{overflow:hidden;text-overflow:ellipsis}"
    ".lite-agent-review-diff pre{margin:2px 0;max-height:32em;overflow:auto}"
    ".lite-agent-review-diff .add{color:var(--jp-success-color0,#080)}"
    ".lite-agent-review-diff .del{color:var(--jp-error-color0,#b00)}"
    ".lite-agent-review-diff .hunk{color:var(--jp-info-color0,#05a)}</style>"
)

MARKS = {"kept": "✓", "reverted": "↶", "not reverted": "!"}
"""The mark a row gets once its file is decided (or a revert of it was refused)."""

MARKS_DONE = frozenset({"kept", "reverted"})
"""States after which a file is reviewed (a refused revert leaves it to decide)."""

_PATH_WIDTH = 60
"""Paths are padded to the longest one up to this width (a row is cut with "…" anyway)."""


ReviewControls = SessionControls
"""What the panel needs of the kernel's facade: its ``call`` / ``call_idle``."""

Reverter = Callable[[str, str, int | None, bool], Awaitable[RestoreResult] | None]
"""``reverter(session_id, path, checkpoint, force)``: the revert of a row that is not a file, as an
awaitable the panel runs as a task on the kernel's loop (a notebook cell's asks the page,
whose answers reach the kernel only while its main thread is free), or ``None``: a file."""


def _mark(state: str | None) -> str:
    if state and state.startswith("hunk"):  # some hunks reverted, the file still to decide
        return "◐"
    return MARKS.get(state or "", " ")


def review_row(change: FileChange, state: str | None, width: int) -> str:
    """One row: its mark, the path, what changed, by which tools, and its state."""
    cells = [
        shorten(change.path, _PATH_WIDTH).ljust(width),
        shorten(change.summary, 80),
        f"by {shorten(', '.join(change.tools), 40)}",
    ]
    if state:
        cells.append(f"· {state}")
    row = _mark(state) + " " + "  ".join(cells)
    # Non-breaking spaces: a browser collapses runs of ordinary ones inside <option>.
    return row.replace(" ", "\u00a0")


def diff_html(change: FileChange, diff: str | None) -> str:
    """The diff of one file as escaped HTML (added, removed and hunk lines coloured), or why
    there is none."""
    head = f"<div><b>{escape(change.path)}</b>: {escape(change.summary)}</div>"
    if not diff:
        return head + "<div><i>no diff to show (binary, too large, or content missing)</i></div>"
    lines = []
    for line in history_text.numbered_hunks(diff):
        kind = ""
        if line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+") and not line.startswith("+++"):
            kind = "add"
        elif line.startswith("-") and not line.startswith("---"):
            kind = "del"
        text = escape(line)
        lines.append(f"<span class='{kind}'>{text}</span>" if kind else text)
    return head + "<pre>" + "\n".join(lines) + "</pre>"


class ReviewPanel:
    """The rows of a prompt's changed files (a ``Select``), Keep and Revert for the selected
    row, the outcome of the last action, and the selected file's diff.

    Keep and Revert move the selection to the next file not yet decided, so a review is
    a walk down the list; the row of a decided file says so (``✓ kept``, ``↶ reverted``,
    ``! not reverted`` after a refused revert, which changed nothing)."""

    def __init__(
        self,
        controls: ReviewControls,
        changes: PromptChanges,
        reverter: Reverter | None = None,
    ) -> None:
        self.controls = controls
        self.changes = changes
        self.reverter = reverter
        """Reverts a row that is not a file (a notebook cell) as an awaitable; ``None`` for
        a file (the facade reverts it)."""
        self.pending: asyncio.Future[RestoreResult] | None = None
        """The last revert run as a task (a cell's, which asks the page)."""
        self.files = {change.path: change for change in changes.files}
        self.states: dict[str, str] = {}
        self._diffs: dict[str, str] = {}
        """Each file's diff HTML, made the first time its row is selected."""
        self._hunks: dict[str, int] = {}
        """How many hunks each shown diff has (a changed text file's; else 0)."""
        self.hunks_reverted: dict[str, set[int]] = {}
        self._width = max((len(shorten(p, _PATH_WIDTH)) for p in self.files), default=0)
        self._drawing = False
        look = Look()
        self.report = Reporter(look)
        self.head = look.html(_CSS + _headline_html(changes), "review-head")
        self.rows = w.Select(
            options=self._options(),
            value=None,
            rows=max(2, min(len(self.files), 12)),  # 1 would draw a drop-down
            layout=look.full,
            _dom_classes=("lite-agent-review-rows",),
        )
        self.keep_button = look.button(
            "Keep", "keep", disabled=True, tooltip="mark the selected file reviewed"
        )
        self.revert_button = look.button(
            "Revert",
            "revert",
            button_style="warning",
            disabled=True,
            tooltip="put the selected file back to before this prompt (%agent undo takes it back)",
        )
        self._look = look
        self._force_button: w.Button | None = None
        self.forceable: set[str] = set()
        """Files whose revert was refused for changes a forced revert overwrites."""
        self.hunk_pick = w.Dropdown(
            options=[], layout=look.auto, _dom_classes=("lite-agent-review-hunk",)
        )
        self.hunk_button = look.button(
            "Revert hunk",
            "revert-hunk",
            tooltip="put only the chosen hunk of the selected file back to before this prompt, "
            "keeping the rest of it (%agent undo takes it back)",
        )
        self.diff = look.html("", "review-diff")
        self.keep_button.on_click(lambda _b: self.keep(self.selected))
        self.revert_button.on_click(lambda _b: self.revert(self.selected))
        self.hunk_button.on_click(lambda _b: self.revert_hunk(self.selected, self.hunk_pick.value))
        self.rows.observe(self._selection_changed, names="value")
        self.actions = look.hbox(self._actions(False, False))
        self.widget = w.VBox(
            [self.head, self.rows, self.actions, self.diff],
            layout=look.full,
            _dom_classes=("lite-agent-review",),
        )

    @property
    def force_button(self) -> w.Button:
        """ "Revert anyway": made the first time a revert is refused (most panels never
        need it: the panel stays the same few widgets)."""
        if self._force_button is None:
            self._force_button = self._look.button(
                "Revert anyway",
                "revert-anyway",
                button_style="danger",
                tooltip="revert the selected file, overwriting what changed in it after this "
                "prompt (%agent undo takes it back)",
            )
            self._force_button.on_click(lambda _b: self.revert(self.selected, force=True))
        return self._force_button

    @property
    def selected(self) -> str | None:
        """The path of the selected row (None: no row selected)."""
        value = self.rows.value
        return None if value is None else str(value)

    def select(self, path: str | None) -> None:
        """Select the row of ``path`` (None: none): its diff is shown, made if need be."""
        self.rows.value = path

    def _options(self) -> list[tuple[str, str]]:
        return [
            (review_row(change, self.states.get(path), self._width), path)
            for path, change in self.files.items()
        ]

    def _selection_changed(self, _change: object) -> None:
        if not self._drawing:
            self.report.run("Showing the diff", self._show_selected)

    def _actions(self, hunks: bool, force: bool) -> list[w.Widget]:
        """The action row; the hunk controls only for a file with hunks left to revert,
        "Revert anyway" only for a file whose revert was refused for later changes."""
        hunk_parts = [self.hunk_pick, self.hunk_button] if hunks else []
        force_part = [self.force_button] if force else []
        return [self.keep_button, self.revert_button, *force_part, *hunk_parts, self.report.status]

    def _show_selected(self) -> None:
        path = self.selected
        decided = self.states.get(path or "") in MARKS_DONE
        with batched(self.keep_button, self.revert_button, self.diff, self.hunk_pick):
            self.keep_button.disabled = path is None or decided
            self.revert_button.disabled = path is None or decided
            self.diff.value = "" if path is None else self._diff_of(path)
            left = [] if path is None or decided else self._hunks_left(path)
            self.hunk_pick.options = [(f"hunk {n}", n) for n in left]
        force = path is not None and not decided and path in self.forceable
        children = self._actions(bool(left), force)
        if list(self.actions.children) != children:
            self.actions.children = children

    def _diff_of(self, path: str) -> str:
        if path not in self._diffs:
            change = self.files[path]
            diff = self.controls.call(lambda a: a.change_diff(change))
            both = change.before is not None and change.after is not None
            count = sum(line.startswith("@@") for line in (diff or "").splitlines())
            self._hunks[path] = count if both else 0
            self._diffs[path] = diff_html(change, diff)
        return self._diffs[path]

    def _hunks_left(self, path: str) -> list[int]:
        """The hunks of ``path`` the panel offers to revert one by one: a changed text
        file's, when it has two or more (one hunk is the whole file's Revert), less those
        already reverted."""
        count = self._hunks.get(path, 0)
        done = self.hunks_reverted.get(path, set())
        return [n for n in range(1, count + 1) if n not in done] if count > 1 else []

    def _decided(self, path: str, state: str, *, stay: bool = False) -> None:
        """Mark ``path``'s row and select the next file not decided yet (after it, then
        from the top; none: no selection), or with ``stay`` keep ``path`` selected."""
        self.states[path] = state
        paths = list(self.files)
        at = paths.index(path)
        undecided = [
            p for p in paths[at + 1 :] + paths[:at] if self.states.get(p) not in MARKS_DONE
        ]
        following = path if stay else (undecided[0] if undecided else None)
        with batched(self.rows):
            self._drawing = True
            try:
                self.rows.options = self._options()
                self.rows.value = following
            finally:
                self._drawing = False
        self._show_selected()

    def keep(self, path: str | None) -> None:
        def action() -> None:
            if path is None:
                self.report.ok("Select a file first.")
                return
            self._decided(path, "kept")
            self.report.ok(f"Kept {shorten(path, 200)}.{self._left()}")

        self.report.run("Keep", action)

    def revert(self, path: str | None, *, force: bool = False) -> None:
        """Revert ``path``; ``force`` ("Revert anyway") overwrites what changed in it after
        the prompt. A refusal stays on the file, saying why in the notebook's words, with
        "Revert anyway" when forcing would do."""

        def action() -> None:
            if path is None:
                self.report.ok("Select a file first.")
                return
            sid, checkpoint = self.changes.session_id, self.changes.checkpoint
            later = self.reverter(sid, path, checkpoint, force) if self.reverter else None
            if later is not None:  # a revert that asks the page (a cell's): a task
                self.report.ok(f"Reverting {shorten(path, 200)}…")
                self.pending = asyncio.ensure_future(later)
                self.pending.add_done_callback(lambda done: self._settle(path, done))
                return
            try:
                result = self.controls.call_idle(
                    sid, lambda a: a.revert_file(sid, path, checkpoint=checkpoint, force=force)
                )
            except SessionBusyError:
                raise  # said by the reporter; the row stays as it was
            except LiteAgentError as exc:  # a conflict: said, nothing changed
                self._refused(path, exc)
                return
            self._reverted(path, result)

        self.report.run("Revert", action)

    def _settle(self, path: str, done: asyncio.Future[RestoreResult]) -> None:
        """A revert that ran as a task (on the kernel's loop, which hears the page) ended."""

        def action() -> None:
            try:
                result = done.result()
            except SessionBusyError:
                raise
            except LiteAgentError as exc:
                self._refused(path, exc)
                return
            self._reverted(path, result)

        self.report.run("Revert", action)

    def _refused(self, path: str, exc: LiteAgentError) -> None:
        """A revert refused (a conflict): said, with "Revert anyway" where forcing would do;
        nothing changed."""
        why = history_text.refusal_text(exc, None)
        if isinstance(exc, RestoreConflictError) and exc.forceable:
            self.forceable.add(path)
            why += " “Revert anyway” overwrites it; `%agent undo` takes that back."
        self._decided(path, "not reverted", stay=path in self.forceable)
        self.report.ok(f"{shorten(path, 200)} not reverted: {why}")

    def _reverted(self, path: str, result: RestoreResult) -> None:
        self.forceable.discard(path)
        self._decided(path, "reverted")
        text = " ".join(history_text.revert_text(result, path, self.changes.number).splitlines())
        self.report.ok(text + self._left())

    def revert_hunk(self, path: str | None, number: int | None) -> None:
        """Revert one hunk of ``path`` (its number in the diff shown); the file stays
        selected, with its other hunks still offered."""

        def action() -> None:
            if path is None or number is None:
                self.report.ok("Select a file and a hunk first.")
                return
            try:
                sid, checkpoint = self.changes.session_id, self.changes.checkpoint
                result = self.controls.call_idle(
                    sid,
                    lambda a: a.revert_file(sid, path, checkpoint=checkpoint, hunks=[number]),
                )
            except SessionBusyError:
                raise
            except LiteAgentError as exc:  # its lines changed since: said, nothing changed
                self.report.ok(f"Hunk {number} of {shorten(path, 200)} not reverted: {exc}")
                return
            done = self.hunks_reverted.setdefault(path, set())
            done.add(number)
            self._decided(path, f"{history_text.hunk_words(sorted(done))} reverted", stay=True)
            text = history_text.revert_text(result, path, self.changes.number, [number])
            self.report.ok(" ".join(text.splitlines()))

        self.report.run("Revert hunk", action)

    def _left(self) -> str:
        left = sum(self.states.get(p) not in MARKS_DONE for p in self.files)
        return f" {render.plural(left, 'file')} left to review." if left else " All reviewed."


def _headline_html(changes: PromptChanges) -> str:
    prompt = shorten(changes.prompt, 120)
    count = render.plural(len(changes.files), "file")
    by = f" by {changes.by}" if changes.by else ""
    return (
        f"<div><b>Prompt {changes.number}</b>{escape(by)}: {escape(prompt)} · "
        f"{escape(count)} changed. "
        "Select a file to see its diff; Keep or Revert it "
        f"(<code>%agent undo</code> takes a revert back).</div>"
    )


def show_review(
    controls: ReviewControls, changes: PromptChanges, reverter: Reverter | None = None
) -> ReviewPanel:
    """Display the panel with its plain-text twin (what a saved notebook keeps: the files,
    without the diffs the panel made only on demand), and print the twin under it."""
    panel = ReviewPanel(controls, changes, reverter)
    summary = history_text.changes_text(changes, diffs=False)
    command = f"%agent review {changes.number}"
    html = render.static_html(summary)
    show_widget(panel.widget, summary, "review", command, html=html)
    print(summary)
    return panel
