"""The magics' part in plan first and stale cells: ``%agent go``, Run this plan, and the
kernel variables ``run_cell`` changed.

One object held by :class:`~.magics.LiteAgentMagics` as ``magics.plans`` (#31: composed,
not mixed in). It owns its state (the last plan, its panel, the changed variables) and is
given what it needs from the magics explicitly: the shell, the runner's facade, and callables
for the agent, the magics' turn of a cell, the caps and whether the page is rich. So nothing
here reads an attribute defined elsewhere. The plan itself, its panel and its prompt are
``plan.py``'s; the stale cells ``stale.py``'s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from ..agent import ApprovalRequest, LiteAgent, LiteAgentResult
    from . import plan
    from .cell import Steps
    from .plan import Plan
    from .runner import AgentFacade
    from .stale import Changes

PLAN_FIRST = "Every %%agent cell plans first (read-only tools); %agent go runs the plan."
"""The help of the ``plan_first`` setting (a trait of the magics class)."""

SCRIPTED = "scripted model: a stand-in that replays a script, not a real model"

Limits = tuple[int | None, float | None, float | None]
"""The magics' caps, read at each turn: ``max_turn_tokens``, ``max_turn_cost``,
``max_session_cost`` (``%config`` may change them between turns)."""


class PlanCells:
    """``%agent go``, Run this plan and the changed-variables seam, for the magics."""

    def __init__(
        self,
        shell: Any,
        facade: AgentFacade,
        *,
        agent: Callable[[], LiteAgent],
        cell_turn: Callable[..., Steps[None]],
        limits: Callable[[], Limits],
        rich: Callable[[], bool],
    ) -> None:
        """``agent`` is the magics' ``require_agent``; ``cell_turn`` their turn of a cell
        (``agent, prompt, notes, *, quiet, budget``), passed rather than written again so its
        signature has one home (``magics.py``); ``limits`` the caps and ``rich`` whether a
        notebook front end draws (both callables: settings change between turns)."""
        self.shell = shell
        self.facade = facade
        self.require_agent = agent
        self.cell_turn = cell_turn
        self.limits = limits
        self.rich = rich
        self.last_plan: Plan | None = None
        """The last planning turn's plan (what ``%agent go`` runs)."""
        self.plan_panel: plan.PlanPanel | None = None
        """The last plan's panel with Run this plan (``None`` outside a notebook)."""

    @functools.cached_property
    def changes(self) -> Changes:
        """Kernel variables the agent's ``run_cell`` changed, for the stale cells."""
        from .stale import Changes

        return Changes()

    def planned(
        self, result: LiteAgentResult, agent: LiteAgent, read_only: bool = False, sink: Any = None
    ) -> None:
        """After a turn: if it was a planning turn, keep its plan and show it with Run this
        plan (a panel in a notebook, unless the turn itself was drawn in one)."""
        from . import plan
        from .plan import Plan

        if not read_only:
            return
        rich = self.rich() and sink is None
        self.last_plan = Plan(result.text, plan.read_tasks(self.facade), agent.session_id)
        self.plan_panel = plan.show(self.last_plan, self._run_plan, rich=rich)

    def stale_line(self) -> Callable[[], str | None]:
        """The cells the running prompt will have left stale, for the person (asked after
        its turn; the prompt is known by its cell's execution count, taken now)."""
        from . import stale

        count = self._count()

        def line() -> str | None:
            if not self.changes.names:
                return None
            return stale.user_line(self.changes.stale(self._history(), count))

        return line

    def stale_note(self) -> str | None:
        """The cells left stale since the last prompt, for the model (told once)."""
        from . import stale

        if not self.changes.names:
            return None
        note = stale.model_note(self.changes.stale(self._history()))
        self.changes.clear()
        return note

    def go_steps(self, text: str | None) -> Steps[None]:
        """``%agent go [TEXT]``: the turn that runs the last plan (or ``TEXT`` instead)."""
        from ..agent.budget import Budget
        from . import budgets, plan

        if not (text or "").strip():
            if self.last_plan is None:
                raise UsageError("no plan in this kernel yet: run a %%agent --plan cell first")
            text = plan.plan_text(self.last_plan)
        max_tokens, max_turn_cost, max_session_cost = self.limits()
        caps = budgets.cell_caps(None, max_turn_cost, max_session_cost, self.shell)
        budget = Budget(max_tokens, *caps)
        agent = self.require_agent()
        notes = [] if getattr(agent.model, "is_real_model", True) else [SCRIPTED]
        return self.cell_turn(agent, plan.go_prompt(text or ""), notes, quiet=False, budget=budget)

    async def _run_plan(self, text: str, panel: plan.PlanPanel) -> None:
        """Run this plan, clicked: the turn drawn in the panel, its approvals asked there."""
        from ..agent.budget import Budget
        from . import approval, plan
        from .cell import drive_async
        from .sinks import WidgetOutput

        async def ask(request: ApprovalRequest) -> bool:
            shown = await approval.ask_with_buttons(
                request, panel.show_approval, panel.show_approval_text
            )
            return bool(shown)

        steps = self.cell_turn(
            self.require_agent(),
            plan.go_prompt(text),
            [],
            quiet=False,
            budget=Budget(self.limits()[0], None, None),
            sink=lambda view: WidgetOutput(view, panel.show),
        )
        await drive_async(steps, ask)

    def variables_changed(self, names: list[str]) -> None:
        """``run_cell`` changed these kernel variables (the kernel and notebook tools' seam)."""
        self.changes.note(names, self._count())

    def _count(self) -> int:
        """The running cell's execution count (IPython counts it up after the cell)."""
        return int(getattr(self.shell, "execution_count", 0) or 0)

    def _history(self) -> list[str]:
        """Each execution count's source, as Python (``In``)."""
        history = getattr(getattr(self.shell, "history_manager", None), "input_hist_parsed", None)
        return list(history) if isinstance(history, list) else []
