"""How a running turn shows its work: the task list as a checklist, the clock of the turn
and of the running tool call, and how each tool call ended.

Pure string building through the one door (``safe.escape``; task texts are model text), no
IPython: :class:`~.render.TurnView` holds a :class:`Progress` and draws what it says.

The clock costs nothing until a tool call has run for :data:`TICK_AFTER` seconds: the cell's
rendering loop asks :meth:`Progress.tick_due` (one comparison) on each wake-up, and only then
redraws the display once a second with the elapsed times. After :data:`STILL_RUNNING` seconds
of one call the line names the call and says that an interrupt stops it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..tools.tasks import render_tasks
from .safe import escape

TICK_AFTER = 1.0
"""Seconds a tool call runs before the cell starts showing elapsed times."""

TICK = 1.0
"""Seconds between two redraws of the clock."""

STILL_RUNNING = 30.0
"""Seconds of one call after which the cell says which call runs and how to stop it."""

_HTML_MARK = {"pending": "☐", "in_progress": "▶", "completed": "☑"}


def seconds(value: float) -> str:
    """``0.4 s``, ``12 s``, ``3 min 05 s``: short, steady widths."""
    if value < 10:
        return f"{value:.1f} s"
    if value < 60:
        return f"{value:.0f} s"
    minutes, rest = divmod(int(value), 60)
    return f"{minutes} min {rest:02d} s"


def tasks_from(arguments: Mapping[str, object]) -> list[dict[str, str]] | None:
    """The list a ``todo_write`` call wrote (its ``todos``), or ``None`` if malformed."""
    todos = arguments.get("todos")
    if not isinstance(todos, list):
        return None
    items = []
    for todo in todos:
        if not isinstance(todo, Mapping):
            return None
        content, status = todo.get("content"), todo.get("status")
        if not isinstance(content, str) or status not in _HTML_MARK:
            return None
        items.append({"content": content, "status": str(status)})
    return items


def checklist_plain(tasks: Sequence[Mapping[str, str]]) -> str:
    """``Task list (1/3 completed):`` then ``[x]`` / ``[>]`` / ``[ ]`` lines."""
    return render_tasks(tasks)


def checklist_html(tasks: Sequence[Mapping[str, str]]) -> str:
    """The checklist as HTML: pending ☐, in progress ▶ in bold, completed ☑ struck through;
    every text escaped."""
    done = sum(1 for t in tasks if t["status"] == "completed")
    rows = []
    for task in tasks:
        status, text = task["status"], escape(task["content"])
        if status == "in_progress":
            text = f"<b>{text}</b> <em>(in progress)</em>"
        elif status == "completed":
            text = f"<s>{text}</s>"
        rows.append(f'<li data-status="{status}">{_HTML_MARK[status]} {text}</li>')
    return (
        f'<div class="lite-agent-tasks"><p><b>Task list</b> ({done}/{len(tasks)} completed)</p>'
        f'<ul style="list-style:none;padding-left:0.5em;margin:0">{"".join(rows)}</ul></div>'
    )


@dataclass
class Progress:
    """The clock of one turn (monotonic seconds) and its tool calls' times."""

    started: float = field(default_factory=time.monotonic)
    running: dict[str, tuple[str, str, float]] = field(default_factory=dict)
    """Tool call id -> (name, key argument, when it started running)."""
    tick_at: float | None = None
    """When the clock is next due (``None``: no call running)."""
    ended: float | None = None

    def call_started(self, call_id: str, name: str, argument: str, now: float) -> None:
        self.running[call_id] = (name, argument, now)
        if self.tick_at is None:
            self.tick_at = now + TICK_AFTER

    def call_approved(self, call_id: str, now: float) -> None:
        """The call waited for a person: its clock starts when they answered."""
        if call_id in self.running:
            name, argument, _ = self.running[call_id]
            self.running[call_id] = (name, argument, now)

    def call_ended(self, call_id: str, now: float) -> float | None:
        """The call's duration (``None`` if it was never seen starting)."""
        found = self.running.pop(call_id, None)
        if not self.running:
            self.tick_at = None
        return None if found is None else now - found[2]

    def wait(self, now: float, default: float) -> float:
        """How long the rendering loop may wait before the clock is due."""
        if self.tick_at is None:
            return default
        return max(0.0, min(default, self.tick_at - now))

    def tick_due(self, now: float) -> bool:
        """Whether to redraw the clock now (and schedule the next tick)."""
        if self.tick_at is None or now < self.tick_at:
            return False
        self.tick_at = now + TICK
        return True

    def clock(self, now: float) -> str | None:
        """``running 12 s · bash sleep 3: 4.0 s`` while a call has run past
        :data:`TICK_AFTER`; past :data:`STILL_RUNNING` it names the call and the way out."""
        if not self.running:
            return None
        name, argument, since = min(self.running.values(), key=lambda r: r[2])
        if now - since < TICK_AFTER:
            return None
        call = f"{name} {argument}".strip()
        text = f"running {seconds(now - self.started)} · {call}: {seconds(now - since)}"
        if now - since >= STILL_RUNNING:
            text += (
                f" — {call} is still running; Interrupt the kernel (■, or I I) to stop it "
                "(the session stays valid)"
            )
        return text

    def wall(self, now: float) -> str:
        """The turn's wall time, for the footer."""
        self.ended = now
        return seconds(now - self.started)
