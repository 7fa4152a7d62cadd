"""Budgets of a turn: tokens, dollars per turn, dollars per session, and how a turn checks them.

A budget is checked between model calls, never inside one: a stream is never cut, so the log
stays valid and the next request is accepted. After each call that asked for tools, the turn
estimates the next call as costing what the last one did (its input is at least the last
call's input and output); if that would pass a cap, the pending tool calls are answered
"not run" and the turn ends with ``stop_reason="budget"``. A session cap already reached
stops a turn before its first call. The next turn, with a higher cap, continues the session.

Costs come from the agent's price table (``prices.py`` plus overrides). A cost cap for a
model with no price (a local model through Ollama and the like) cannot be kept: the turn
runs anyway, and the agent warns once per model (:class:`UnpricedCapWarning`, or a note
above the cell in Jupyter) rather than refusing every turn of a model that costs nothing per
token. A token cap works for every model. The session's cost is read from its log (every
model call recorded there), so a cap holds across kernels; a restore that cuts turns off the
log also takes their cost off the session's total. Knows nothing of Jupyter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..checkpoint.events import AssistantEvent, Event
from ..errors import BudgetError
from ..providers.base import Usage
from .usage import Price, Prices, call_cost, price_for, turn_tokens, usage_totals

__all__ = ["Budget", "RunningCost", "TurnSpend", "UnpricedCapWarning", "check_cost_cap"]


class UnpricedCapWarning(UserWarning):
    """A dollar cap was set for a model the price table does not price: it is not kept."""


def check_cost_cap(name: str, value: object) -> float | None:
    """``None`` or a finite number of dollars > 0, as a float."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of dollars or None, not {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise BudgetError(f"{name} must be a number of dollars above 0, not {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Budget:
    """The caps of one turn; ``None``: no cap of that kind."""

    turn_tokens: int | None = None
    turn_cost: float | None = None
    session_cost: float | None = None

    @property
    def costs(self) -> bool:
        return self.turn_cost is not None or self.session_cost is not None

    def unpriced_note(self, model_name: str, prices: Prices) -> str | None:
        """What to say when a cost cap is set but ``model_name`` has no price (the cap cannot
        be kept; the turn runs, a token cap still holds); ``None`` otherwise."""
        if not self.costs or price_for(model_name, prices) is not None:
            return None
        return (
            f"{model_name!r} has no price (local (no price)): the dollar cap is not kept; "
            "cap tokens instead (--max-tokens, max_turn_tokens) or give it a price with "
            "prices={...} (in Jupyter: %config LiteAgentMagics.prices)"
        )


@dataclass(slots=True)
class TurnSpend:
    """What a turn has spent so far, and the session's spend before it."""

    model_name: str
    prices: Prices
    prior: float | None
    """The session's cost before this turn (its priced calls)."""
    usage: Usage
    cost: float | None = None
    last_tokens: int = 0
    last_cost: float = 0.0

    @classmethod
    def start(
        cls,
        events: Sequence[Event],
        model_name: str,
        prices: Prices,
        running: RunningCost | None = None,
    ) -> TurnSpend:
        """``running``: the session's running total (``events`` must be the list it follows),
        so a turn prices only the events added since the last one."""
        prior = running.of(events, prices) if running is not None else None
        if prior is None:
            prior = usage_totals(events, prices).cost
        return cls(model_name, prices, prior, Usage())

    def add(self, usage: Usage, model: str | None) -> None:
        """One model call's usage; priced by the model that answered, else the one asked."""
        self.usage = self.usage + usage
        self.last_tokens = turn_tokens(usage)
        cost = call_cost(usage, model or self.model_name, self.prices)
        if cost is None:
            cost = call_cost(usage, self.model_name, self.prices)
        self.last_cost = cost or 0.0
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost

    @property
    def session_cost(self) -> float | None:
        if self.prior is None and self.cost is None:
            return None
        return (self.prior or 0.0) + (self.cost or 0.0)

    def exhausted_before(self, budget: Budget) -> str | None:
        """Why the turn may not make its first call (a session cap already reached)."""
        cap = budget.session_cost
        spent = self.prior or 0.0
        if cap is not None and spent >= cap:
            return f"budget: the session has spent ${spent:.4f} of its ${cap:.2f}"
        return None

    def exhausted_after_call(self, budget: Budget) -> str | None:
        """Why the turn must stop before its next call, or ``None`` (see the module)."""
        tokens = turn_tokens(self.usage)
        if budget.turn_tokens is not None and tokens + self.last_tokens > budget.turn_tokens:
            return f"budget: {tokens} of {budget.turn_tokens} tokens used"
        spent = self.cost or 0.0
        if budget.turn_cost is not None and spent + self.last_cost > budget.turn_cost:
            return f"budget: this turn spent ${spent:.4f} of its ${budget.turn_cost:.2f}"
        session = self.session_cost or 0.0
        if budget.session_cost is not None and session + self.last_cost > budget.session_cost:
            return f"budget: the session spent ${session:.4f} of its ${budget.session_cost:.2f}"
        return None


class RunningCost:
    """The cost of a session's cached events, summed as they arrive (#32).

    A turn needs the session's cost so far (its session cap, the footer's "this session"):
    summing every call of the log at each turn made a turn's cost grow with the session.
    This follows one events list (the :class:`~.session.SessionLog`'s cache, which only
    grows or is replaced) and prices only what was appended since it last looked; a
    replaced list, a shorter one or other prices start the sum again. The same sum, call
    by call in log order, as :func:`~.usage.usage_totals`.
    """

    __slots__ = ("_cost", "_counted", "_events", "_found", "_prices")

    def __init__(self) -> None:
        self._events: Sequence[Event] | None = None
        self._prices: Prices | None = None
        self._counted = 0
        self._cost = 0.0
        self._found: dict[str, Price | None] = {}

    def of(self, events: Sequence[Event], prices: Prices) -> float:
        """The cost of the priced calls in ``events``."""
        if events is not self._events or prices is not self._prices or self._counted > len(events):
            for name, given in prices.items():
                if not isinstance(given, Price):
                    raise TypeError(f"prices[{name!r}] must be a Price, not {type(given).__name__}")
            self._events, self._prices = events, prices
            self._counted, self._cost, self._found = 0, 0.0, {}
        found = self._found
        for index in range(self._counted, len(events)):
            event = events[index]
            if not isinstance(event, AssistantEvent) or not event.usage:
                continue
            model = event.model or "unknown"
            if model not in found:
                found[model] = price_for(model, prices)
            price = found[model]
            if price is not None:
                self._cost += price.cost(Usage.from_dict(event.usage))
        self._counted = len(events)
        return self._cost
