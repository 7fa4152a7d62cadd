"""Costs in dollars and budgets that stop cleanly, with the real ``anthropic`` client against
the fake Messages API server: a turn's cost equals the bundled table's to the cent's hundredth;
a cap passed stops the turn between two requests (no further request reaches the server), the
log stays valid (the server accepts the next request) and a higher cap continues."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall

from lite_agent_jupyter import BudgetError, LiteAgent, Price
from lite_agent_jupyter.agent import UnpricedCapWarning
from lite_agent_jupyter.agent.prices import ANTHROPIC_PRICES, PRICES_CHECKED, prices_age_days
from lite_agent_jupyter.checkpoint.events import InterruptedEvent, ToolResultEvent
from lite_agent_jupyter.checkpoint.fold import fold

MakeAgent = Callable[..., LiteAgent]
SONNET = ANTHROPIC_PRICES["claude-sonnet-4-6"]


def read_call(tokens_in: int, tokens_out: int, **cache: int) -> FakeReply:
    return FakeReply(
        tool_calls=[FakeToolCall("read_file", {"path": "notes.md"})],
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        **cache,
    )


@pytest.fixture
def agent(make_agent: MakeAgent, claude: Callable[..., Any], workdir: Path) -> LiteAgent:
    (workdir / "notes.md").write_text("# notes\n")
    return make_agent(model=claude(), model_name="claude-sonnet-4-6", approvals="allow")


async def test_a_turn_costs_what_the_table_says(
    agent: LiteAgent, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(
        read_call(1000, 500, cache_read_input_tokens=2000, cache_creation_input_tokens=3000),
        FakeReply(text="done", input_tokens=1234, output_tokens=40),
    )
    result = await agent.send("read the notes")
    expected = (
        (1000 + 1234) * SONNET.input
        + (500 + 40) * SONNET.output
        + 2000 * (SONNET.cache_read or 0)
        + 3000 * (SONNET.cache_write or 0)
    ) / 1_000_000
    assert result.cost == pytest.approx(expected, abs=1e-12)
    assert f"{result.cost:.4f}" == "0.0267"  # 3.0 in, 15.0 out, 0.30 read, 3.75 write per MTok
    assert result.session_cost == pytest.approx(result.cost)
    fake_anthropic.script(FakeReply(text="ok"))
    again = await agent.send("again")
    assert again.cost is not None and again.session_cost == pytest.approx(result.cost + again.cost)
    totals = await agent.usage()
    assert totals.cost == pytest.approx(again.session_cost)


async def test_a_cost_cap_stops_between_requests_and_a_higher_cap_continues(
    agent: LiteAgent, fake_anthropic: FakeAnthropicServer
) -> None:
    # 20,000 in + 1,000 out on Sonnet: $0.075 a call; a second one would pass $0.10
    fake_anthropic.script(read_call(20_000, 1_000), FakeReply(text="never sent"))
    stopped = await agent.send("read the notes", max_turn_cost=0.10)
    assert stopped.stop_reason == "budget" and stopped.model_calls == 1
    assert stopped.cost == pytest.approx(0.075)
    assert len(fake_anthropic.message_requests) == 1  # nothing more reached the server
    events = await agent.checkpointer.read(agent.session_id)
    assert isinstance(events[-1], InterruptedEvent) and "$0.0750 of its $0.10" in events[-1].reason
    assert isinstance(events[-2], ToolResultEvent) and events[-2].is_error
    fold(events)  # the log folds into messages

    assert fake_anthropic.pending == 1  # the answer scripted for a second request was never asked
    fake_anthropic.reset()
    fake_anthropic.script(FakeReply(text="carried on", input_tokens=100, output_tokens=10))
    follow = await agent.send("go on", max_turn_cost=1.0)
    assert follow.text == "carried on" and follow.stop_reason == "end_turn"
    assert fake_anthropic.message_requests[-1].status == 200  # the API accepted the log


async def test_a_session_cap_already_reached_sends_nothing(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    agent = make_agent(
        model=claude(), model_name="claude-sonnet-4-6", approvals="allow", max_session_cost=0.05
    )
    fake_anthropic.script(FakeReply(text="first", input_tokens=20_000, output_tokens=1_000))
    first = await agent.send("hello")  # one call: $0.075, past the cap only afterwards
    assert first.stop_reason == "end_turn"
    before = len(fake_anthropic.message_requests)
    second = await agent.send("more")
    assert second.stop_reason == "budget" and second.model_calls == 0
    assert len(fake_anthropic.message_requests) == before
    fake_anthropic.script(FakeReply(text="with a higher cap", input_tokens=10, output_tokens=5))
    third = await agent.send("more", max_session_cost=1.0)
    assert third.text == "with a higher cap"
    assert fake_anthropic.message_requests[-1].status == 200


async def test_a_cost_cap_without_a_price_warns_once_and_does_not_block(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    """A local model has no price: its dollar cap cannot be kept, so the turn runs and the
    agent warns once (it used to refuse every turn); a token cap still stops it."""
    agent = make_agent(model=claude(), model_name="my-own-model", approvals="allow")
    fake_anthropic.script(FakeReply(text="one"), FakeReply(text="two"))
    with pytest.warns(UnpricedCapWarning, match="'my-own-model' has no price"):
        first = await agent.send("hello", max_turn_cost=0.0001)
    assert first.text == "one" and first.cost is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would fail here
        second = await agent.send("again", max_turn_cost=0.0001, max_session_cost=0.0001)
    assert second.text == "two" and second.stop_reason == "end_turn"
    (agent.workdir / "notes.md").write_text("# notes\n")
    fake_anthropic.script(read_call(600, 100), FakeReply(text="not reached"))
    capped = await agent.send("read", max_turn_cost=0.0001, max_turn_tokens=1000)
    assert capped.stop_reason == "budget" and capped.model_calls == 1
    with pytest.raises(BudgetError, match="above 0"):
        await agent.send("hello", max_turn_cost=0)
    fake_anthropic.reset()  # "not reached" stays unsent
    priced = make_agent(
        model=claude(),
        model_name="my-own-model",
        prices={"my-own": Price(input=1.0, output=2.0)},
        max_turn_cost=0.5,
    )
    fake_anthropic.script(FakeReply(text="ok", input_tokens=1000, output_tokens=1000))
    result = await priced.send("hello")
    assert result.cost == pytest.approx(0.003)


def test_the_table_is_dated_and_prefixes_resolve() -> None:
    from lite_agent_jupyter.agent.usage import price_for

    assert prices_age_days(PRICES_CHECKED) == 0
    assert price_for("claude-sonnet-4-20250514", ANTHROPIC_PRICES) is SONNET
    assert (
        price_for("claude-opus-4-5-20251101", ANTHROPIC_PRICES)
        == ANTHROPIC_PRICES["claude-opus-4-5"]
    )
    haiku = ANTHROPIC_PRICES["claude-haiku-5-5"]
    from lite_agent_jupyter.providers.base import Usage

    short = haiku.cost(Usage(input_tokens=100_000, output_tokens=1000))
    long = haiku.cost(Usage(input_tokens=100_001, output_tokens=1000))
    assert short == pytest.approx(0.0105) and long == pytest.approx(5 * 0.0105, rel=1e-4)


class _Counted(list[Any]):
    """A session's events list that counts the events read by index (#32)."""

    reads = 0

    def __getitem__(self, index: Any) -> Any:
        _Counted.reads += 1
        return super().__getitem__(index)

    def __iter__(self) -> Any:
        _Counted.reads += len(self)
        return super().__iter__()


def test_a_turn_prices_only_the_events_added_since_the_last() -> None:
    """The session's cost before a turn is a running sum over the session's cached events:
    the same figure as summing the whole log, but each turn reads only what was appended
    (it summed every call of the session at every turn, so a turn's cost grew with it)."""
    from lite_agent_jupyter.agent.budget import RunningCost, TurnSpend
    from lite_agent_jupyter.agent.usage import usage_totals
    from lite_agent_jupyter.checkpoint.events import AssistantEvent, UserEvent

    def call(tokens: int, model: str = "claude-sonnet-4-6") -> AssistantEvent:
        usage = {"input_tokens": tokens, "output_tokens": tokens // 10}
        return AssistantEvent(content=[{"type": "text", "text": "a"}], usage=usage, model=model)

    prices = {**ANTHROPIC_PRICES, "local-model": Price(0.0, 0.0)}
    events = _Counted()
    running = RunningCost()
    for turn in range(50):
        events.extend([UserEvent(content=f"q{turn}"), call(1000 + turn)])
        if turn % 7 == 0:
            events.append(call(500, model="unpriced-model"))
        _Counted.reads = 0
        spend = TurnSpend.start(events, "claude-sonnet-4-6", prices, running)
        assert _Counted.reads <= 3  # what this turn added, not the session
        assert spend.prior == usage_totals(list(events), prices).cost
    replaced = _Counted(events[:10])  # a restore: the session's cache is a new list
    assert running.of(replaced, prices) == usage_totals(list(replaced), prices).cost
    assert running.of(replaced, ANTHROPIC_PRICES) == usage_totals(replaced, ANTHROPIC_PRICES).cost
