"""Asking about a tool call while the ``%%agent`` cell waits: Allow / Deny buttons, or
``input()`` where no front end shows them (terminal IPython), or "denied" where no one can
answer (nbclient, nbconvert: no stdin).

Why this works at all: a widget click reaches the kernel as a ``comm_msg`` on the shell
channel, behind the running cell. A cell that *blocks* (the sync magic, ``input()``) would
never see it. From ipykernel 7.4 on, the kernel dispatches comm messages while the running
cell *awaits* (the cell holds the execute lock, but its coroutine yields the kernel's event
loop). So in a kernel that can do this, ``%%agent`` cells run as coroutines (see
:func:`async_cell_transform`) and the turn waits on the click with ``await``.

A button is only useful where something renders it. :class:`ApprovalButtons` turns on
ipywidgets' view counting (``_view_count``, which a widget front end updates when it shows a
view); if no view reports itself within :data:`RENDER_TIMEOUT` (a front end without widgets:
``jupyter console``, a client that ignores comms), the caller falls back to ``input()``.

The prompt shows the call's whole input in a scrollable box, never cut: Allow runs all of
it, so all of it is on screen (a 2,842-character command once had its tail hidden). Each
prompt leaves a text line in place of the buttons once answered (widget state is not saved
with the notebook; a saved notebook shows "allowed" / "denied", not a broken widget); that
record may be short, and then says how long the input was. Every string shown goes through
``safe.escape`` with ``invisible=True``: a character no font draws (Unicode tag characters,
zero-width ones, bidi controls...) is an escape (``\\U000e0061``), and a warning line says how
many there are. Code (``run_cell``'s) shows as code, one line per line, in a box of its own.

Who clicked: a click is a ``comm_msg`` whose header carries the ``username`` its front end
set. The buttons keep it, and the answer names that person when the name says something (not
empty, as JupyterLab sends it today, and not ``jupyter_client``'s defaults: ``$USER`` or the
word ``username``); otherwise the agent records its own user
(``JUPYTERHUB_USER``, else the OS user). See docs/jupyterhub.md.
"""

from __future__ import annotations

import ast
import asyncio
import concurrent.futures
import functools
import getpass
import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import StdinNotImplementedError

from ..controls import terminal_safe
from .registry import AWAITED

if TYPE_CHECKING:
    from ..agent import ApprovalRequest
    from ..agent.approvals import Approval

RENDER_TIMEOUT = 5.0
"""Seconds to wait for a front end to show the buttons before asking with ``input()``."""

MIN_IPYKERNEL = (7, 4)
"""The ipykernel release checked to handle comm messages while a cell awaits (7.4.0: its
shell dispatches comm_open/comm_msg/comm_close at once when the cell's lock is held, the
upstream change "Allow async cell to process Comm messages"); older kernels get ``input()``."""

RECORD_CHARS = 80
"""Characters of the key argument in the one-line record left in place of the buttons."""

INPUT_BOX_STYLE = (
    "max-height:24em;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere;"
    "margin:0.3em 0;padding:0.3em;border:1px solid var(--jp-border-color2,#ccc)"
)
"""The box of the whole input: wrapped (nothing hidden to the right), scrollable."""

WARNING_STYLE = "color:var(--jp-error-color1,#c62828);font-weight:bold;margin:0.3em 0"
"""The warning line: what the input hides is the first thing read."""


def kernel_handles_comms_while_awaiting() -> bool:
    """True in an ipykernel that dispatches widget messages during an awaiting cell."""
    try:
        import ipykernel
        import ipywidgets  # noqa: F401  (the buttons need it)
    except ImportError:
        return False
    version = tuple(getattr(ipykernel, "version_info", (0,))[:2])
    return version >= MIN_IPYKERNEL


TICK = 0.25
"""Longest sleep of the kernel's loop while the buttons wait (see :func:`_wait`)."""


async def _wait(future: asyncio.Future[Any], timeout: float | None) -> bool:
    """Wait for ``future`` (``False`` after ``timeout`` seconds), waking every :data:`TICK`.

    Why the ticks: a kernel interrupt is a SIGINT whose Python handler (ipykernel's, which
    cancels the awaiting cell) runs only when the main thread runs; the OS may deliver the
    signal to another of the kernel's threads, and a loop asleep on one future would only see
    it after the click. ``asyncio.wait``, not ``wait_for``: on Python 3.11 ``wait_for`` can
    swallow a cancellation that arrives as its timeout fires."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while not future.done():
        left = TICK if deadline is None else min(TICK, deadline - loop.time())
        if left <= 0:
            return False
        await asyncio.wait({future}, timeout=left)
    return True


def outcome_text(request: ApprovalRequest, outcome: str) -> str:
    """The line that replaces the buttons: ``allowed: write_file hello.py`` and the like; a
    key argument too long for one line is cut and says so (``… 2,842 chars``)."""
    from . import render

    key = render.key_field(request.tool_name, request.input)
    if key is None:
        return f"{outcome}: {request.tool_name}"
    value = " ".join(terminal_safe(str(key), invisible=True).split("\n"))
    if len(value) > RECORD_CHARS:
        value = f"{value[: RECORD_CHARS - 1]}… {len(value):,} chars"
    return f"{outcome}: {request.tool_name} {value}".rstrip()


def question_html(request: ApprovalRequest) -> str:
    """The question above the buttons: the tool, its key argument, the warning line when
    the input hides characters, then the whole input: its other fields as JSON and its code
    (``run_cell``'s) as lines, each in a box of its own, through ``safe.escape``."""
    from ..agent.approvals import input_text, shown_input
    from . import render
    from .safe import escape

    shown = shown_input(request)
    key = escape(render.key_argument(request.tool_name, request.input), invisible=True)
    size = len(input_text(request))
    parts = [
        f"<b>The agent asks to run</b> <code>{escape(request.tool_name, invisible=True)}</code>"
        f" <code>{key}</code> <small>(the whole input, {size:,} chars:)</small>"
    ]
    if shown.warning:
        parts.append(
            f'<p class="lite-agent-approval-warning" style="{WARNING_STYLE}">'
            f"{escape(shown.warning)}</p>"
        )
    if shown.fields:
        parts.append(
            f'<pre class="lite-agent-approval-input" style="{INPUT_BOX_STYLE}">'
            f"{escape(shown.fields, invisible=True)}</pre>"
        )
    if shown.code is not None:
        lines = shown.code_lines()
        parts.append(
            f"<small>{escape(shown.code_name)} ({len(lines):,} "
            f"line{'' if len(lines) == 1 else 's'}):</small>"
            f'<pre class="lite-agent-approval-input lite-agent-approval-code" '
            f'style="{INPUT_BOX_STYLE}"><code>'
            f"{escape(chr(10).join(lines), invisible=True)}</code></pre>"
        )
    return "".join(parts)


def front_end_user(msg: Any) -> str | None:
    """The person a front end names in a message's header, or ``None`` when it names no one:
    an empty ``username`` (JupyterLab), or ``jupyter_client``'s defaults (the client's
    ``$USER``, else the word ``username``), taken here as the kernel's own OS account."""
    header = msg.get("header") if isinstance(msg, dict) else None
    name = header.get("username") if isinstance(header, dict) else None
    if not isinstance(name, str) or not name.strip():
        return None
    try:
        own = getpass.getuser()
    except Exception:
        own = ""
    defaults = {"username", own, os.environ.get("USER", "")}
    return None if name in defaults else name.strip()


@functools.cache
def _button_class() -> type[Any]:
    """``ipywidgets.Button`` that remembers who sent its last message (its click)."""
    import ipywidgets as w

    class ClickButton(w.Button):  # type: ignore[misc]
        clicked_by: str | None = None

        def _handle_msg(self, msg: dict[str, Any]) -> None:
            self.clicked_by = front_end_user(msg)
            super()._handle_msg(msg)

    return ClickButton


class ApprovalButtons:
    """The Allow / Deny prompt of one tool call.

    ``decision`` resolves with ``True`` (Allow) or ``False`` (Deny) on the first click; later
    clicks change nothing. ``rendered`` resolves once a front end shows the prompt. Both are
    ``concurrent.futures.Future`` so that a click handled on any thread (the main shell, or a
    subshell under JupyterLab's per-comm setting) can settle them; the cell awaits them.
    """

    def __init__(self, request: ApprovalRequest) -> None:
        import ipywidgets as w

        self.request = request
        self.decision: concurrent.futures.Future[bool] = concurrent.futures.Future()
        self.rendered: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.answered_by: str | None = None
        """Who clicked, when the front end named them (see :func:`front_end_user`)."""
        button = _button_class()
        self.allow = button(description="Allow", button_style="success", icon="check")
        self.deny = button(description="Deny", button_style="danger", icon="times")
        self.allow.on_click(lambda b: self.answer(True, getattr(b, "clicked_by", None)))
        self.deny.on_click(lambda b: self.answer(False, getattr(b, "clicked_by", None)))
        self.question = w.HTML(question_html(request))
        # _view_count is ipywidgets' own view counting: 0 turns it on, and the front end
        # raises it when it shows the prompt (None, the default, means "not tracked").
        self.widget = w.VBox([self.question, w.HBox([self.allow, self.deny])], _view_count=0)
        self.widget.observe(self._on_views, names="_view_count")

    def _on_views(self, change: dict[str, Any]) -> None:
        if isinstance(change.get("new"), int) and change["new"] > 0 and not self.rendered.done():
            self.rendered.set_result(None)

    def answer(self, allowed: bool, by: str | None = None) -> bool:
        """Settle the decision (first answer wins; ``by``: who clicked, if known); returns
        the decision in force."""
        if not self.decision.done():
            self.answered_by = by
            self.decision.set_result(allowed)
            self.allow.disabled = self.deny.disabled = True
        return self.decision.result()

    def close(self) -> None:
        for widget in (self.allow, self.deny, self.question, self.widget):
            widget.close()


async def ask_with_buttons(
    request: ApprovalRequest,
    show_widget: Callable[[Any], None],
    show_text: Callable[[str], None],
    *,
    render_timeout: float = RENDER_TIMEOUT,
) -> Approval | None:
    """Show Allow / Deny for ``request`` and await the click.

    ``show_widget(widget)`` displays the prompt, ``show_text(line)`` replaces it with a text
    line. Returns the decision (and who clicked, when the front end named them), or ``None``
    when no front end rendered the buttons within
    ``render_timeout`` seconds (the caller asks another way). Cancelling (a kernel interrupt)
    replaces the buttons with "interrupted" and propagates.
    """
    from ..agent.approvals import Approval

    buttons = ApprovalButtons(request)
    show_widget(buttons.widget)
    outcome = "interrupted"
    try:
        rendered = asyncio.wrap_future(buttons.rendered)
        try:
            shown = await _wait(rendered, render_timeout)
        finally:
            rendered.cancel()  # no-op once shown
        if not shown and not buttons.decision.done():
            outcome = "no widget front end here; asking below"
            return None
        decision = asyncio.wrap_future(buttons.decision)
        await _wait(decision, None)
        allowed = decision.result()
        outcome = "allowed" if allowed else "denied"
        if buttons.answered_by:
            outcome += f" by {buttons.answered_by}"
        return Approval(allowed, buttons.answered_by)
    finally:
        show_text(outcome_text(request, outcome))
        buttons.close()


def async_cell_transform(lines: list[str]) -> list[str]:
    """An IPython ``input_transformers_post`` entry: a ``%%agent`` cell (which IPython has
    turned into ``get_ipython().run_cell_magic('agent', line, body)``) becomes
    ``await``-ing :func:`lite_agent_jupyter.jupyter.agent_cell_async`, so the cell runs as a
    coroutine and the kernel handles widget clicks while it waits; so do ``%agent go`` and
    the rewinds of :data:`~.registry.AWAITED` (``awaiting.py``) alone in a cell. Anything
    else is kept."""
    source = "".join(lines)
    if "run_cell_magic" not in source and "run_line_magic" not in source:
        return lines
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return lines
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return lines
    call = tree.body[0].value
    line = _agent_line(call)
    words = (line or "").split(maxsplit=1)
    if words and words[0] == "go":  # ``%agent go``: a turn too, run the same way
        go = words[1] if len(words) > 1 else ""
        return [
            "await __import__('lite_agent_jupyter.jupyter', fromlist=['agent_go_async'])"
            f".agent_go_async({go!r})\n"
        ]
    if words and words[0] in AWAITED:  # a rewind that must hear the page (awaiting.py)
        return [
            "await __import__('lite_agent_jupyter.jupyter', fromlist=['agent_line_async'])"
            f".agent_line_async({line!r})\n"
        ]
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "run_cell_magic"
        and isinstance(call.func.value, ast.Call)
        and isinstance(call.func.value.func, ast.Name)
        and call.func.value.func.id == "get_ipython"
        and len(call.args) == 3
        and not call.keywords
        and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args)
    ):
        return lines
    name, line, body = (a.value for a in call.args)  # type: ignore[attr-defined]
    if name != "agent":
        return lines
    return [
        "await __import__('lite_agent_jupyter.jupyter', fromlist=['agent_cell_async'])"
        f".agent_cell_async({line!r}, {body!r})\n"
    ]


def _agent_line(call: ast.expr) -> str | None:
    """The line of ``get_ipython().run_line_magic('agent', line)``, else None."""
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "run_line_magic"
        and len(call.args) == 2
        and not call.keywords
        and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args)
    ):
        return None
    name, line = (a.value for a in call.args)  # type: ignore[attr-defined]
    return str(line) if name == "agent" else None


# -- asking, where the cell runs -----------------------------------------------------------


def ask_in_terminal(shell: Any, request: ApprovalRequest, *, shown_above: bool = False) -> bool:
    """Ask with ``input()`` (terminal IPython, no widgets): the whole input, then the
    question on its own line (the question alone when ``shown_above``: the buttons' output
    already printed the input as its text, :func:`widget_bundle`)."""
    from ..agent.approvals import asking_text
    from . import render

    key = render.key_argument(request.tool_name, request.input)
    shown = terminal_safe(f"{request.tool_name} {key}", invisible=True)
    if not someone_can_answer(shell):
        return _no_one_to_ask(request)
    above = "" if shown_above else f"{asking_text(request)}\n"
    try:
        answer = input(f"{above}Allow {shown}? [y/N] ")
    except (EOFError, StdinNotImplementedError):
        return _no_one_to_ask(request)
    return answer.strip().lower() in ("y", "yes")


async def ask(shell: Any, request: ApprovalRequest) -> bool | Approval:
    """Ask with Allow / Deny buttons; ``input()`` where no front end shows them."""
    from . import safe

    if not someone_can_answer(shell):
        return _no_one_to_ask(request)
    from IPython import display as ipd

    display_id = f"lite-agent-approval-{uuid.uuid4().hex}"
    update: Any = ipd.update_display

    def show_text(line: str) -> None:
        bundle = safe.bundle(f"<p><em>{safe.escape(line)}</em></p>", f"[{line}]")
        update(bundle, raw=True, display_id=display_id)

    from .widgets.show import show_widget

    def show_buttons(widget: Any) -> None:
        show_widget(widget, plain_text(request), "approval", display_id=display_id)

    decided = await ask_with_buttons(request, show_buttons, show_text)
    return ask_in_terminal(shell, request, shown_above=True) if decided is None else decided


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
"""The widget output's MIME type (``widgets.show.WIDGET_VIEW``, not imported here: that module
imports ipywidgets)."""


def plain_text(request: ApprovalRequest) -> str:
    """The buttons' ``text/plain``, in place of the widget's ``repr`` (``VBox(children=(HTML(…``):
    the approval text, the tool and its whole input. A front end without widgets prints it
    (``jupyter console``: the ``[y/N]`` question follows it, see :func:`ask`)."""
    from ..agent.approvals import asking_text

    return f"{asking_text(request).strip()}\n(Allow / Deny buttons where widgets show)"


def someone_can_answer(shell: Any) -> bool:
    """False where the front end said it cannot answer a prompt (nbconvert, nbclient:
    ``allow_stdin`` is off in their execute requests)."""
    get_parent = getattr(getattr(shell, "kernel", None), "get_parent", None)
    if get_parent is None:
        return True  # terminal IPython: stdin is there
    content = get_parent().get("content") or {}
    return bool(content.get("allow_stdin", True))


def _no_one_to_ask(request: ApprovalRequest) -> bool:
    print(
        f"(no way to ask here: {terminal_safe(request.tool_name)} denied; "
        "%config LiteAgentMagics.approvals = 'allow' lets tools run)"
    )
    return False
