"""Token usage totals of a session (or several), and an optional cost estimate.

The totals are read from the session log (each ``assistant`` event keeps its call's usage and
the model that answered), so they survive restarts and count every turn, background ones
included. Costs are computed per model call from the prices passed in: the agent passes its
bundled, dated table (``prices.py``) with the user's overrides on top. Knows nothing of
Jupyter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..checkpoint.events import AssistantEvent, Event
from ..providers.base import Usage

__all__ = [
    "Price",
    "Prices",
    "UsageTotals",
    "call_cost",
    "price_for",
    "turn_tokens",
    "usage_totals",
]


@dataclass(frozen=True, slots=True)
class Price:
    """What one model costs, per million tokens (the bundled table is in US dollars).

    ``cache_write``/``cache_read`` default to ``input`` when not given. A model that bills
    long prompts higher (Claude Haiku 5.5) sets ``long_prompt_tokens``: a call whose prompt
    (input plus cache reads and writes) passes it costs ``long_prompt_factor`` times the
    rates, on every token of that call.
    """

    input: float
    output: float
    cache_write: float | None = None
    cache_read: float | None = None
    long_prompt_tokens: int | None = None
    long_prompt_factor: float = 5.0

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_write", "cache_read", "long_prompt_factor"):
            value = getattr(self, name)
            if value is None and name.startswith("cache"):
                continue
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ValueError(f"Price.{name} must be a number >= 0, not {value!r}")
        limit = self.long_prompt_tokens
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise ValueError(f"Price.long_prompt_tokens must be an int or None, not {limit!r}")

    def cost(self, usage: Usage) -> float:
        """The cost of ``usage`` at this price (one call's, for the long-prompt rule)."""
        write = self.input if self.cache_write is None else self.cache_write
        read = self.input if self.cache_read is None else self.cache_read
        cost = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_creation_input_tokens * write
            + usage.cache_read_input_tokens * read
        ) / 1_000_000
        if self.long_prompt_tokens is not None:
            prompt = (
                usage.input_tokens
                + usage.cache_creation_input_tokens
                + usage.cache_read_input_tokens
            )
            if prompt > self.long_prompt_tokens:
                cost *= self.long_prompt_factor
        return cost


Prices = Mapping[str, Price]
"""Model name (or a prefix of it, e.g. ``"claude-sonnet-4"``) -> :class:`Price`."""


def turn_tokens(usage: Usage) -> int:
    """The tokens a budget counts: input (fresh, cache-written and cache-read) plus output."""
    return (
        usage.input_tokens
        + usage.cache_creation_input_tokens
        + usage.cache_read_input_tokens
        + usage.output_tokens
    )


@dataclass(slots=True)
class UsageTotals:
    """Tokens of many model calls, per model, and their cost if prices were given."""

    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    by_model: dict[str, Usage] = field(default_factory=dict)
    cost: float | None = None
    """Estimated cost of the priced models' calls; ``None`` when no prices were given."""
    unpriced: tuple[str, ...] = ()
    """Models that answered but had no price (their calls are not in ``cost``)."""

    @property
    def tokens(self) -> int:
        """All tokens: input (fresh and cached) plus output."""
        return turn_tokens(self.usage)

    def __add__(self, other: UsageTotals) -> UsageTotals:
        by_model = dict(self.by_model)
        for model, usage in other.by_model.items():
            by_model[model] = by_model.get(model, Usage()) + usage
        cost = (
            None
            if self.cost is None and other.cost is None
            else (self.cost or 0.0) + (other.cost or 0.0)
        )
        return UsageTotals(
            self.calls + other.calls,
            self.usage + other.usage,
            by_model,
            cost,
            tuple(sorted({*self.unpriced, *other.unpriced})),
        )

    def summary(self) -> str:
        """One line for a UI: calls, input/output tokens, and the cost if known."""
        u = self.usage
        cached = u.cache_creation_input_tokens + u.cache_read_input_tokens
        text = (
            f"{self.calls} model call{'s' if self.calls != 1 else ''}, "
            f"{u.input_tokens + cached:,} input tokens"
            + (f" ({cached:,} cached)" if cached else "")
            + f", {u.output_tokens:,} output tokens"
        )
        if self.cost is not None:
            text += f", cost ~${self.cost:.4f}"
            if self.unpriced:
                text += f" (no price for {', '.join(self.unpriced)})"
        return text


def price_for(model: str, prices: Prices) -> Price | None:
    """The price of ``model``: an exact entry, else the longest prefix entry."""
    exact = prices.get(model)
    if exact is not None:
        return exact
    best = ""
    for name in prices:
        if model.startswith(name) and len(name) > len(best):
            best = name
    return prices[best] if best else None


def usage_totals(events: Iterable[Event], prices: Prices | None = None) -> UsageTotals:
    """The usage of every model call recorded in ``events`` (a session log), and with
    ``prices`` its cost, summed call by call."""
    if prices is not None:
        for name, given in prices.items():
            if not isinstance(given, Price):
                raise TypeError(f"prices[{name!r}] must be a Price, not {type(given).__name__}")
    calls = 0
    total = Usage()
    by_model: dict[str, Usage] = {}
    cost: float | None = None if prices is None else 0.0
    unpriced: set[str] = set()
    found: dict[str, Price | None] = {}
    for event in events:
        if not isinstance(event, AssistantEvent) or not event.usage:
            continue
        usage = Usage.from_dict(event.usage)
        model = event.model or "unknown"
        calls += 1
        total = total + usage
        by_model[model] = by_model.get(model, Usage()) + usage
        if prices is not None:
            if model not in found:
                found[model] = price_for(model, prices)
            price = found[model]
            if price is None:
                unpriced.add(model)
            else:
                cost = (cost or 0.0) + price.cost(usage)
    return UsageTotals(calls, total, by_model, cost, tuple(sorted(unpriced)))


def call_cost(usage: Usage, model: str, prices: Prices) -> float | None:
    """One model call's cost, ``None`` if ``model`` has no price."""
    price = price_for(model, prices)
    return None if price is None else price.cost(usage)
