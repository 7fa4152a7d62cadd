"""Background completion turns shown in cells (SPEC §7).

Owns which display shows which background job's turn and when it is updated. Must not know
the magics or any subcommand: the ``%%agent`` cell driver calls :meth:`BackgroundTurns.show`.

Loaded by ``%load_ext``: what only a cell, a setting or a subcommand needs is imported in
the function that needs it (names for annotations under ``TYPE_CHECKING``), so registering
the magics stays cheap (#32, docs/design.md "Loading on first use").
"""

from __future__ import annotations

import queue
from typing import TYPE_CHECKING, Any

from ..controls import terminal_safe

if TYPE_CHECKING:
    from ..agent import BackgroundNotice, LiteAgent
    from . import render
    from .runner import AgentRunner
    from .sinks import NotebookOutput


class BackgroundTurns:
    """Background completion turns (SPEC §7: a background job's completion runs as a turn
    of its own, with no ``run()`` caller), shown in cells: each in a display of its own,
    opened in the ``%%agent`` cell that runs when its notices are read (the next one, or the
    one running) and updated in place as its events arrive; a terminal prints it when done."""

    def __init__(self, runner: AgentRunner) -> None:
        self.runner = runner
        self.views: dict[str, tuple[render.TurnView, NotebookOutput | None]] = {}

    def _view(self, job_id: str, rich: bool, note: str) -> tuple[render.TurnView, Any]:
        from . import render
        from .sinks import NotebookOutput

        entry = self.views.get(job_id)
        if entry is None:
            view = render.TurnView(notes=[note])
            entry = self.views[job_id] = (view, NotebookOutput(view) if rich else None)
        return entry

    def show(self, agent: LiteAgent, *, rich: bool) -> None:
        """Show what arrived since the last call (never blocks). A ``%%agent`` cell asks
        with each item of its turn, nearly always with nothing new: that answer costs one
        look at the queue (#32: it ran two imports and an exception first)."""
        if self.runner.notices.empty():
            return
        from ..agent import BackgroundEvent, BackgroundTurnFinished, BackgroundTurnStarted
        from . import answering

        notices: list[BackgroundNotice] = []
        while True:
            try:
                notices.append(self.runner.notices.get_nowait())
            except queue.Empty:
                break
        if not notices:
            return
        source = answering.turn_source(agent.model, agent.options.model_name, None)
        changed: dict[str, tuple[render.TurnView, Any]] = {}
        for notice in notices:
            job = notice.job_id
            if isinstance(notice, BackgroundTurnStarted):
                code = "" if notice.exit_code is None else f" (exit code {notice.exit_code})"
                note = f"background job {job} finished{code}: {notice.description}"
                changed[job] = self._view(job, rich, note)
            elif isinstance(notice, BackgroundEvent):
                view, out = self._view(job, rich, f"background job {job}")
                if view.apply(notice.event):
                    changed[job] = (view, out)
            elif isinstance(notice, BackgroundTurnFinished):
                view, out = self._view(job, rich, f"background job {job}")
                if notice.result is not None:
                    view.finish(
                        notice.result,
                        source.label,
                        tokens=source.tokens,
                        background=True,
                        local=source.local,
                    )
                else:
                    view.status = f"the background turn ended early: {notice.error}"
                changed[job] = (view, out)
                del self.views[job]
                if out is None:
                    print(terminal_safe(f"\n{view.plain()}"))
        for _, out in changed.values():
            if out is not None:
                out.update()
