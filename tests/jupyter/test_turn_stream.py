"""The queue a ``%%agent`` cell reads its turn from: which items wake the cell (#32).

Every wake-up of the reading cell is a thread switch, and for an awaiting cell a turn of the
kernel's loop, paid by every cell. The events the cell draws nothing for when they come (the
turn's start, a usage count, the result kept for the footer) are queued without waking it;
they are still read, in order, with the next item that does."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply
from store_calls import count_store_calls

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.agent import TextDelta, TurnFinished, TurnStarted, UsageUpdate
from lite_agent_jupyter.jupyter.runner import AgentRunner, TurnStream
from lite_agent_jupyter.providers import anthropic, scripted


@pytest.fixture
def runner() -> Iterator[AgentRunner]:
    runner = AgentRunner()
    yield runner
    runner.stop()


def test_only_the_items_a_cell_draws_wake_it(
    runner: AgentRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    woken: list[tuple[str, bool]] = []
    put = TurnStream.put

    def recorded(self: TurnStream, item: Any, *, wake: bool = True) -> None:
        woken.append((type(item).__name__, wake))
        put(self, item, wake=wake)

    monkeypatch.setattr(TurnStream, "put", recorded)
    agent = runner.agent(
        "key",
        lambda approve: create_lite_agent(
            model=scripted(["Short answer."]),
            workdir=tmp_path,
            storage=Storage(tmp_path / ".lite_agent", "ns"),
            on_approval=approve,
        ),
    )
    stream = runner.start_turn(agent, "question")
    kinds = []
    while (item := stream.get(timeout=60)) is not None:
        kinds.append(type(item))
    assert kinds[0] is TurnStarted and kinds[-1] is TurnFinished  # all read, in order
    assert TextDelta in kinds and UsageUpdate in kinds
    assert [name for name, _ in woken] == [k.__name__ for k in kinds] + ["object"]
    drawn = {"TextDelta", "object"}  # the text, and the turn's end
    assert [wake for _, wake in woken] == [name in drawn for name, _ in woken]


def test_a_quiet_item_is_read_without_a_wake_up_and_an_awaiting_reader_gets_it_in_order(
    runner: AgentRunner,
) -> None:
    stream = TurnStream(runner, "s1")
    wakes: list[int] = []
    stream._waker = lambda: wakes.append(1)
    stream.put("quiet", wake=False)
    assert wakes == []
    stream._waker = None

    async def read() -> list[Any]:
        first = await stream.aget(60)  # queued already: no waiting
        reading = asyncio.ensure_future(stream.aget(60))
        await asyncio.sleep(0)
        runner.loop.call_soon_threadsafe(stream.put, "loud")  # from the agent's thread
        return [first, await reading]

    assert asyncio.run(read()) == ["quiet", "loud"]
    stream.put("late and quiet", wake=False)
    assert stream.get(timeout=0.01) == "late and quiet"  # a time-out still finds it
    with pytest.raises(queue.Empty):
        stream.get(timeout=0)


def test_the_footer_checkpoint_is_looked_up_while_the_model_answers(
    runner: AgentRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint a turn's footer names is looked up once its prompt is written (#32:
    off the way from the turn's last event to the footer), before the model's answer
    comes, and is the one the full listing gives, turn after turn."""
    from lite_agent_jupyter.agent import LiteAgent

    order: list[str] = []
    checkpoint_at = LiteAgent.checkpoint_at

    async def looked_up(self: LiteAgent, seq: int, session_id: str | None = None) -> Any:
        order.append("lookup")
        return await checkpoint_at(self, seq, session_id)

    monkeypatch.setattr(LiteAgent, "checkpoint_at", looked_up)
    agent = runner.agent(
        "key",
        lambda approve: create_lite_agent(
            model=scripted(["First.", "Second."], delay=0.05),  # a model that takes time
            workdir=tmp_path,
            storage=Storage(tmp_path / ".lite_agent", "ns"),
            on_approval=approve,
        ),
    )
    for number in (1, 2):
        order.clear()
        stream = runner.start_turn(agent, f"question {number}")
        while (item := stream.get(timeout=60)) is not None:
            if isinstance(item, TextDelta):
                order.append("text")
        assert order == ["lookup", "text"]
        listed = runner.call(agent.list_checkpoints)
        assert stream.checkpoint is not None
        assert (stream.checkpoint.number, stream.checkpoint.id) == (number, listed[-1].id)


def test_a_cells_footer_reads_nothing_after_the_first_turn(
    runner: AgentRunner,
    fake_anthropic: FakeAnthropicServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the runner, the real client and a server that answers at once (the footer's
    lookup, started when the prompt is written, then races the turn's next append), the
    lookup of every turn after the first asks the store nothing and looks for no crash
    journal (#32), and names the listing's checkpoint."""
    from lite_agent_jupyter.agent import LiteAgent

    fake_anthropic.default = FakeReply("ok")
    agent = runner.agent(
        "key",
        lambda approve: create_lite_agent(
            model=anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url),
            workdir=tmp_path,
            storage=Storage(tmp_path / ".lite_agent", "ns"),
            on_approval=approve,
        ),
    )
    asked = count_store_calls(agent)
    looked: list[list[str]] = []
    checkpoint_at = LiteAgent.checkpoint_at

    async def counted(self: LiteAgent, seq: int, session_id: str | None = None) -> Any:
        before = len(asked)
        found = await checkpoint_at(self, seq, session_id)
        looked.append(asked[before:])
        return found

    monkeypatch.setattr(LiteAgent, "checkpoint_at", counted)
    for number in range(1, 6):
        stream = runner.start_turn(agent, f"question {number}")
        while stream.get(timeout=60) is not None:
            pass
        listed = runner.call(agent.list_checkpoints)
        assert stream.checkpoint is not None
        assert (stream.checkpoint.number, stream.checkpoint.id) == (number, listed[-1].id)
    assert len(looked) == 5 and looked[1:] == [[]] * 4
