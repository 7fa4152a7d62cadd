"""Plan first: a planning turn's plan, the prompt that runs it, and the panel that shows it.

``%%agent --plan`` (or ``%config LiteAgentMagics.plan_first = True``) runs a turn with
read-only tools only (``agent/planning.py``). Its plan is what the model left: its task list
and its final text. :func:`plan_text` makes them one editable text; :func:`go_prompt` the
prompt that runs it (the next turn has every tool again, under the usual approvals).

:class:`PlanPanel` is the widget under a plan: the plan in a text box (edit it first if you
like), **Run this plan** and **Stop**. A click runs the turn as a task on the kernel's own
event loop, drawn inside the panel (its display, its approval buttons), so the kernel stays
free to handle the approval clicks; ``%agent go [TEXT]`` is its twin in a cell. A saved
notebook keeps the plan as text printed under the panel (widget state is not saved).

Every text shown goes through ``safe.escape`` (the plan is model text). Must not know the
magics or any subcommand: the magics hand in how to run a plan.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .progress import checklist_plain
from .safe import escape

GO_HEAD = (
    "Run this plan now (the user approved it; the planning turn is over and every tool is "
    "available again, under the usual approvals). Keep the task list up to date as you go."
)
"""The first line of the prompt that runs a plan."""


@dataclass(frozen=True)
class Plan:
    """What a planning turn left: its task list and its final text."""

    text: str
    tasks: list[dict[str, str]] = field(default_factory=list)
    session_id: str = ""


def plan_text(plan: Plan) -> str:
    """The plan as one editable text: the checklist (if any), then the model's summary."""
    parts = []
    if plan.tasks:
        parts.append(checklist_plain(plan.tasks))
    if plan.text.strip():
        parts.append(plan.text.strip())
    return "\n\n".join(parts)


def go_prompt(text: str) -> str:
    """The prompt that runs the plan ``text`` (as shown, or as the person edited it)."""
    return f"{GO_HEAD}\n\nThe plan:\n\n{text.strip()}"


def static_text(plan: Plan) -> str:
    """The plan's readable twin, printed under the panel (what a saved notebook keeps)."""
    return (
        f"Plan (read-only turn: nothing was changed):\n\n{plan_text(plan)}\n\n"
        "Run it: the Run this plan button above, or `%agent go` "
        "(`%agent go <your edited plan>` runs an edited one)."
    )


Start = Callable[[str, "PlanPanel"], Coroutine[Any, Any, None]]
"""Runs the plan text in the panel (the magics' side): a coroutine on the kernel's loop."""


class PlanPanel:
    """The plan in a text box, Run this plan, Stop, and the run's own output."""

    def __init__(self, plan: Plan, start: Start) -> None:
        import ipywidgets as w

        self.plan = plan
        self._start = start
        self.task: asyncio.Task[None] | None = None
        self.box = w.Textarea(
            value=plan_text(plan),
            layout=w.Layout(
                width="100%", height=f"{min(20, plan_text(plan).count(chr(10)) + 3)}em"
            ),
        )
        self.run = w.Button(description="Run this plan", button_style="primary", icon="play")
        self.stop = w.Button(description="Stop", icon="stop", disabled=True)
        self.status = w.HTML()
        self.output = w.HTML()
        """The run's turn, drawn as the cell would draw it (safe HTML)."""
        self.approvals = w.VBox([])
        """Where the run's approval buttons appear."""
        self.run.on_click(lambda _: self.click())
        self.stop.on_click(lambda _: self.cancel())
        head = w.HTML("<b>The plan</b> <small>(edit it here before running, if you like)</small>")
        buttons = w.HBox([self.run, self.stop, self.status])
        self.widget = w.VBox([head, self.box, buttons, self.approvals, self.output])

    def click(self) -> None:
        """Run this plan: once (the button stays disabled after), on the kernel's loop."""
        if self.run.disabled:
            return
        self.run.disabled = self.box.disabled = True
        self.stop.disabled = False
        self.say("running…")
        coro = self._guarded(self.box.value)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop on this thread (a plain callback): run to the end
            asyncio.run(coro)
            return
        self.task = loop.create_task(coro)

    async def _guarded(self, text: str) -> None:
        try:
            await self._start(text, self)
        except BaseException as exc:  # shown here: a callback's error would vanish
            first = (str(exc).strip().splitlines() or [""])[0]
            self.say(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)
        else:
            self.say("done")
        finally:
            self.stop.disabled = True

    def cancel(self) -> None:
        """Stop: cancel the run (its turn stops and the session's log is made valid)."""
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def say(self, text: str) -> None:
        self.status.value = f"<em>{escape(text)}</em>"

    def show(self, html: str) -> None:
        """Draw the run's turn (HTML built by ``render.TurnView``, safe)."""
        self.output.value = html

    def show_approval(self, widget: Any) -> None:
        self.approvals.children = (widget,)

    def show_approval_text(self, line: str) -> None:
        import ipywidgets as w

        self.approvals.children = (w.HTML(f"<p><em>{escape(line)}</em></p>"),)


def tasks_of(items: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    return [{"content": str(i["content"]), "status": str(i["status"])} for i in items]


def read_tasks(facade: Any) -> list[dict[str, str]]:
    """The current session's task list (its own, or the shared one the agent uses), read
    from the agent's store; empty when there is none or it cannot be read."""
    from ..checkpoint.task_lists import task_list_id
    from ..errors import LiteAgentError

    async def get(agent: Any) -> list[dict[str, str]]:
        list_id = task_list_id(agent.session_id, agent.options.task_list)
        return tasks_of(await agent.task_lists.get(list_id))

    try:
        found: list[dict[str, str]] = facade.call(get)
    except LiteAgentError:
        return []
    return found


def show(plan: Plan, start: Start, *, rich: bool) -> PlanPanel | None:
    """Under a planning turn: the panel (in a notebook with widgets), then the plan as text."""
    panel = None
    if rich:
        try:
            import ipywidgets  # noqa: F401
        except ImportError:
            rich = False
    if rich:
        from .widgets.show import show_widget

        panel = PlanPanel(plan, start)
        placeholder = "(live widget: Run this plan; the plan is printed below)"
        # dead (its kernel gone), the front-end part says %agent go runs the plan below
        show_widget(panel.widget, placeholder, "plan", "%agent go")
    from ..controls import terminal_safe

    print(terminal_safe(static_text(plan)))
    return panel
