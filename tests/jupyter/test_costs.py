"""Costs in dollars in a real kernel: every ``%%agent`` footer shows the cell's cost and the
session's, equal to the bundled price table to 4 decimals for the usage the fake Messages API
reports."""

from __future__ import annotations

from fake_anthropic import FakeAnthropicServer, FakeReply
from nbkernel import Kernel

from lite_agent_jupyter.agent.prices import ANTHROPIC_PRICES
from lite_agent_jupyter.providers.base import Usage

SONNET = ANTHROPIC_PRICES["claude-sonnet-4-6"]  # the magics' default model


def test_the_footer_shows_the_cells_cost_and_the_sessions(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    first = Usage(12_345, 678, cache_creation_input_tokens=1_000, cache_read_input_tokens=9_000)
    second = Usage(20_000, 2_000)
    for usage, text in ((first, "One."), (second, "Two.")):
        fake_anthropic.script(
            FakeReply(
                text,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_creation_input_tokens=usage.cache_creation_input_tokens,
                cache_read_input_tokens=usage.cache_read_input_tokens,
            )
        )
    one = agent_kernel.run("%%agent\nfirst").check().plain
    cost = SONNET.cost(first)
    assert f"{cost:.4f}" == "0.0537"  # 3.00 in, 15.00 out, 0.30 cache read, 3.75 write / MTok
    assert f"${cost:.4f} this cell, ${cost:.4f} this session" in one
    two = agent_kernel.run("%%agent\nsecond").check().plain
    total = cost + SONNET.cost(second)
    assert f"${SONNET.cost(second):.4f} this cell, ${total:.4f} this session" in two
    assert "$0.0900 this cell, $0.1437 this session" in two


def test_the_price_table_is_dated_and_warns_once_older_than_90_days() -> None:
    from datetime import timedelta

    from lite_agent_jupyter.agent.prices import PRICES_CHECKED
    from lite_agent_jupyter.jupyter.budgets import price_table_row

    name, fresh = price_table_row(PRICES_CHECKED + timedelta(days=90))
    assert name == "prices" and PRICES_CHECKED.isoformat() in fresh and "WARNING" not in fresh
    _, stale = price_table_row(PRICES_CHECKED + timedelta(days=91))
    assert "WARNING: the table is 91 days old" in stale


def test_info_shows_the_notebooks_cost_and_the_table(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(FakeReply("Hi.", input_tokens=10_000, output_tokens=1_000))
    agent_kernel.run("%%agent\nhello").check()
    agent_kernel.run("%agent new").check()
    fake_anthropic.script(FakeReply("Again.", input_tokens=10_000, output_tokens=1_000))
    agent_kernel.run("%%agent\nhello again").check()
    info = agent_kernel.run("%agent info").check().stream_text
    assert "cost ~$0.0450" in info.split("notebook usage")[0]  # this session: one call
    notebook = info.split("notebook usage")[1].splitlines()[0]
    assert "cost ~$0.0900" in notebook and "in 2 sessions" in notebook
    assert "Anthropic's, in US dollars, checked 2026-12-01" in info
    assert "per cell none, per session none" in info
