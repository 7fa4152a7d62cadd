"""The bundled price table of Anthropic's models, in US dollars, and how overrides apply.

Why bundle prices at all: a cost shown in tokens only means nothing to most users, and a
budget in dollars needs a price. Why dated: prices change, and a stale table is worse than
none if nobody can tell it is stale. So the table carries the day it was checked
(:data:`PRICES_CHECKED`), ``%agent info`` warns once it is older than
:data:`STALE_AFTER_DAYS`, and every entry can be overridden per model
(``create_lite_agent(prices={...})``, ``%config LiteAgentMagics.prices``).

Rates are per million tokens: fresh input, output, cache reads (hits and refreshes) and
cache writes priced apart. Cache writes use the 5-minute rate (the API's default TTL);
requests that write 1-hour caches cost more than shown. Batch, regional and "fast mode"
surcharges are not modelled. Claude Haiku 5.5 bills a request whose prompt (input plus
cache reads and writes) passes 100,000 tokens at five times its rates, which the table
models per call (:attr:`Price.long_prompt_tokens`).

Keys are model ids or prefixes of them (``claude-sonnet-4`` covers
``claude-sonnet-4-20250514``); the longest matching prefix wins. Knows nothing of Jupyter.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

from .usage import Price, Prices

__all__ = [
    "ANTHROPIC_PRICES",
    "PRICES_CHECKED",
    "PRICES_SOURCE",
    "STALE_AFTER_DAYS",
    "merged_prices",
    "prices_age_days",
]

PRICES_CHECKED = date(2026, 12, 1)
"""The day the table below was checked against :data:`PRICES_SOURCE`."""
PRICES_SOURCE = "https://platform.claude.com/docs/en/about-claude/pricing"
STALE_AFTER_DAYS = 90
"""``%agent info`` says the table may be out of date once it is older than this."""


def _p(input: float, output: float, read: float, write: float, long: int | None = None) -> Price:
    return Price(input, output, cache_write=write, cache_read=read, long_prompt_tokens=long)


_OPUS_45 = _p(5.0, 25.0, 0.50, 6.25)
_OPUS_4 = _p(15.0, 75.0, 1.50, 18.75)
_SONNET_4 = _p(3.0, 15.0, 0.30, 3.75)
_FABLE_5 = _p(10.0, 50.0, 1.00, 12.50)
_FABLE_51 = _p(10.0, 50.0, 0.25, 12.50)

ANTHROPIC_PRICES: Mapping[str, Price] = {
    "claude-fable-5-1": _FABLE_51,
    "claude-mythos-5-1": _FABLE_51,
    "claude-fable-5": _FABLE_5,
    "claude-mythos-5": _FABLE_5,
    "claude-opus-5-5": _p(4.0, 20.0, 0.20, 5.0),
    "claude-opus-5": _OPUS_45,
    "claude-opus-4-8": _OPUS_45,
    "claude-opus-4-7": _OPUS_45,
    "claude-opus-4-6": _OPUS_45,
    "claude-opus-4-5": _OPUS_45,
    "claude-opus-4-1": _OPUS_4,
    "claude-opus-4": _OPUS_4,
    "claude-sonnet-5-5": _p(2.0, 10.0, 0.10, 2.50),
    "claude-sonnet-5": _p(2.0, 10.0, 0.20, 2.50),
    "claude-sonnet-4-6": _SONNET_4,
    "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4": _SONNET_4,
    "claude-3-7-sonnet": _SONNET_4,
    "claude-haiku-5-5": _p(0.10, 0.50, 0.01, 0.125, long=100_000),
    "claude-haiku-4-5": _p(1.0, 5.0, 0.10, 1.25),
    "claude-3-5-haiku": _p(0.80, 4.0, 0.08, 1.0),
    "claude-3-opus": _OPUS_4,
    "claude-3-haiku": _p(0.25, 1.25, 0.03, 0.30),
}
"""USD per million tokens, as published on :data:`PRICES_SOURCE` on :data:`PRICES_CHECKED`."""


def merged_prices(overrides: Prices | None) -> dict[str, Price]:
    """The bundled table with ``overrides`` on top (a key given there replaces the
    bundled entry of the same key; a new key adds a model or a prefix)."""
    table = dict(ANTHROPIC_PRICES)
    if overrides:
        for name, price in overrides.items():
            if not isinstance(price, Price):
                raise TypeError(f"prices[{name!r}] must be a Price, not {type(price).__name__}")
            table[name] = price
    return table


def prices_age_days(today: date | None = None) -> int:
    """How many days old the bundled table is."""
    return ((today or date.today()) - PRICES_CHECKED).days
