"""The pieces both widgets share: shared ``Layout``/``Style`` models, the inline reporter of
an action's outcome, batched trait updates, short times and texts.

Must not know the agent or any one widget: the session browser and the checkpoint slider
build on these, never the other way round.
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import ipywidgets as w
from ipywidgets.widgets.widget_string import HTMLStyle

from ...controls import terminal_safe
from ...errors import LiteAgentError, SessionBusyError
from .. import render
from ..awaiting import run_now
from ..safe import escape


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


def shorten(text: str | None, width: int) -> str:
    """``text`` on one line, cut at ``width``; control characters shown as escapes (a title
    or a prompt is untrusted, and a widget's option list shows it as text)."""
    if not text:
        return ""
    text = terminal_safe(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 1] + "…"


@contextlib.contextmanager
def batched(*widgets: w.Widget) -> Iterator[None]:
    """Send each widget's trait changes as one message when the block ends."""
    with contextlib.ExitStack() as stack:
        for widget in widgets:
            stack.enter_context(widget.hold_sync())
        yield


class Look:
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


class Reporter:
    """One place that shows an action's outcome: a status line (with the traceback of an
    unexpected error under it)."""

    def __init__(self, look: Look) -> None:
        self.status = look.html(name="status")
        self.lock = threading.Lock()

    def ok(self, message: str) -> None:
        self.status.value = f"<span>{escape(message)}</span>"

    def busy(self, session_id: str) -> None:
        self.status.value = (
            f"<b>busy</b>: a turn is running in session {escape(render.short_id(session_id))}"
            "; nothing changed. Try again when it has finished."
        )

    def fail(self, what: str, error: BaseException) -> None:
        line = f"<b>{escape(what)} failed</b>: {escape(type(error).__name__)}: {escape(str(error))}"
        if not isinstance(error, LiteAgentError):
            trace = escape("".join(traceback.format_exception(error)))
            line += f"<details><summary>traceback</summary><pre>{trace}</pre></details>"
        self.status.value = line

    def run(self, what: str, action: Callable[[], None]) -> None:
        """Run one action; its exception is shown inline, never lost in the browser's log."""

        async def now() -> None:
            action()

        run_now(self.run_async(what, now))

    async def run_async(self, what: str, action: Callable[[], Awaitable[None]]) -> None:
        """:meth:`run` of an action that awaits (on the kernel's loop, see
        ``checkpoint_slider.py``): one at a time, a second click meanwhile says busy."""
        if not self.lock.acquire(blocking=False):
            self.status.value = "<b>busy</b>: the previous action has not finished."
            return
        try:
            await action()
        except SessionBusyError:  # a turn started between our check and the call
            self.status.value = "<b>busy</b>: a turn is running in this session; nothing changed."
        except Exception as error:
            self.fail(what, error)
        finally:
            self.lock.release()


def fill(report: Reporter, what: str, load: Callable[[], None]) -> None:
    """Fill a widget already on screen; an error shows in it and propagates to the cell."""
    try:
        load()
    except Exception as error:
        report.fail(what, error)
        raise
