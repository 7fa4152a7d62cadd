"""Cassettes end to end: record a tool-using session through the real ``anthropic`` client
against the fake Messages API server, stop the server, replay it offline elsewhere."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from workdir_helpers import files_in

from lite_agent_jupyter import (
    CassetteError,
    CassetteMismatchError,
    LiteAgent,
    Storage,
    create_lite_agent,
    tool,
)
from lite_agent_jupyter.agent.results import (
    AgentEvent,
    ToolCallFinished,
    TurnFinished,
    UsageUpdate,
)
from lite_agent_jupyter.checkpoint.events import InterruptedEvent, ToolResultEvent
from lite_agent_jupyter.providers import (
    ReplayProvider,
    Usage,
    call,
    record,
    replay,
    reply,
    scripted,
)

MakeAgent = Callable[..., LiteAgent]

PROMPTS = ("Write a note about the class.", "Show me the note and where it is.")


def script_session(server: FakeAnthropicServer, workdir: Path) -> None:
    """Two turns: the model writes a file by its absolute path, then reads it with bash."""
    server.script(
        FakeReply(
            "I'll write the note.",
            tool_calls=[
                FakeToolCall(
                    "write_file",
                    {"path": str(workdir / "notes" / "class.md"), "content": "# Class\nhello\n"},
                )
            ],
        ),
        FakeReply(["The note ", "is written."]),
        FakeReply(
            "Reading it.",
            tool_calls=[FakeToolCall("bash", {"command": "cat notes/class.md && pwd"})],
        ),
        "It says hello; it lives in the notes folder.",
    )


async def run_prompts(agent: LiteAgent, prompts: tuple[str, ...]) -> list[str]:
    """Every stream event of every turn, as text."""
    out: list[str] = []
    for prompt in prompts:
        async for event in agent.run(prompt):
            out.append(describe(event))
    return out


def describe(event: AgentEvent) -> str:
    if isinstance(event, TurnFinished):
        r = event.result
        return f"finished {r.text!r} {r.stop_reason} {r.usage} {r.model_calls} {r.session_id}"
    if isinstance(event, UsageUpdate):
        return f"usage {event.usage}"
    return repr(event)


def new_agent(model: Any, workdir: Path, store: Path, **options: Any) -> LiteAgent:
    options.setdefault("session_id", "lesson")
    options.setdefault("approvals", "allow")
    return create_lite_agent(model=model, workdir=workdir, storage=Storage(store, "t"), **options)


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home" / "ann" / "demo"
    school = tmp_path / "school" / "room-12" / "class"
    home.mkdir(parents=True)
    school.mkdir(parents=True)
    return home, school


async def record_session(
    server: FakeAnthropicServer,
    claude: Callable[..., Any],
    workdir: Path,
    cassette: Path,
    store: Path,
) -> list[str]:
    script_session(server, workdir)
    agent = new_agent(record(claude(), cassette), workdir, store)
    try:
        return await run_prompts(agent, PROMPTS)
    finally:
        await agent.close()


@pytest.fixture
async def recorded(
    fake_anthropic: FakeAnthropicServer,
    claude: Callable[..., Any],
    places: tuple[Path, Path],
    tmp_path: Path,
) -> tuple[list[str], Path]:
    """``(events, cassette)``: the session recorded at home (store ``s1``) into
    ``lesson.jsonl``, every stream event as text; the server is stopped after it (offline)."""
    cassette = tmp_path / "lesson.jsonl"
    events = await record_session(fake_anthropic, claude, places[0], cassette, tmp_path / "s1")
    fake_anthropic.stop()  # no network from here on
    return events, cassette


async def test_record_then_replay_offline_in_another_folder(
    recorded: tuple[list[str], Path],
    fake_anthropic: FakeAnthropicServer,
    places: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home, school = places
    events, cassette = recorded
    assert len(fake_anthropic.message_requests) == 4  # recorded, then the server stopped
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):  # no key
        monkeypatch.delenv(name, raising=False)

    model = replay(cassette, speed=0)
    assert model.recorded_calls == 4
    agent = new_agent(model, school, tmp_path / "s2")
    try:
        replayed = await run_prompts(agent, PROMPTS)
    finally:
        await agent.close()
    assert model.served == 4 and model.fallback_calls == 0
    assert [line.replace(str(school), "<workdir>") for line in replayed] == [
        line.replace(str(home), "<workdir>") for line in events
    ]
    assert any(str(school) in line for line in replayed)  # pwd, and the model's own path
    assert files_in(school) == files_in(home) == {"notes/class.md": b"# Class\nhello\n"}

    # a second replay gives the same again (deterministic), at the recorded pace too
    again_dir = tmp_path / "again"
    again_dir.mkdir()
    agent = new_agent(replay(cassette, speed=50), again_dir, tmp_path / "s3")
    try:
        again = await run_prompts(agent, PROMPTS)
    finally:
        await agent.close()
    assert [line.replace(str(again_dir), "<w>") for line in again] == [
        line.replace(str(school), "<w>") for line in replayed
    ]


async def test_cassette_holds_no_secret_and_no_machine_path(
    anthropic_env: FakeAnthropicServer,
    places: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    from lite_agent_jupyter.providers import anthropic

    home, _ = places
    key = anthropic_env.api_key

    @tool
    def leak() -> str:
        """Print the environment's key (a careless tool)."""
        return f"key={os.environ['ANTHROPIC_API_KEY']}"

    anthropic_env.script(FakeReply("Checking.", tool_calls=[FakeToolCall("leak", {})]), "All fine.")
    cassette = tmp_path / "secret.jsonl"
    agent = new_agent(record(anthropic(), cassette), home, tmp_path / "s", tools=[leak])
    try:
        result = await agent.send("check the setup")
    finally:
        await agent.close()
    assert result.text == "All fine."
    # the agent's redaction kept the key from the model (the tool result says [REDACTED]) ...
    sent = json.dumps(anthropic_env.message_requests[1].body)
    assert key not in sent and "key=[REDACTED]" in sent
    text = cassette.read_text(encoding="utf-8")
    # ... nor the cassette, nor any header or machine path
    assert key not in text
    assert "x-api-key" not in text.lower() and "authorization" not in text.lower()
    assert anthropic_env.url not in text
    assert str(home) not in text and str(tmp_path) not in text
    assert stat.S_IMODE(cassette.stat().st_mode) == 0o600
    for line in text.splitlines():
        json.loads(line)


async def test_a_changed_prompt_names_the_message_that_differs(
    recorded: tuple[list[str], Path], places: tuple[Path, Path], tmp_path: Path
) -> None:
    _, cassette = recorded
    _, school = places
    agent = new_agent(replay(cassette, speed=0), school, tmp_path / "s2")
    try:
        await agent.send(PROMPTS[0])
        with pytest.raises(CassetteMismatchError) as caught:
            await agent.send("Show me the note, please.")
        error = caught.value
        assert error.field == "messages" and error.message_index == 4
        assert "message 4 (user)" in str(error)
        assert "-Show me the note and where it is." in error.diff
        assert "+Show me the note, please." in error.diff
        # the log stays valid: the next request of the session is the recorded one again
        events = await agent.checkpointer.read("lesson")
        assert isinstance(events[-1], InterruptedEvent)
    finally:
        await agent.close()

    # a new first prompt: message 0 differs from the first recorded call
    agent = new_agent(replay(cassette, speed=0), school, tmp_path / "s3")
    try:
        with pytest.raises(CassetteMismatchError) as caught:
            await agent.send("Write a poem.")
        assert caught.value.message_index == 0 and caught.value.nearest_call == 1
        assert "-Write a note about the class." in caught.value.diff
    finally:
        await agent.close()

    # a changed system prompt is named as such
    agent = new_agent(replay(cassette, speed=0), school, tmp_path / "s4", system_prompt="Be terse.")
    try:
        with pytest.raises(CassetteMismatchError, match="the system prompt") as caught:
            await agent.send(PROMPTS[0])
        assert caught.value.field == "system" and "+Be terse." in caught.value.diff
    finally:
        await agent.close()


async def test_strict_false_hands_new_requests_to_the_fallback(
    recorded: tuple[list[str], Path], places: tuple[Path, Path], tmp_path: Path
) -> None:
    _, cassette = recorded
    _, school = places
    fallback = scripted(["A live answer."])
    model = replay(cassette, strict=False, fallback=fallback, speed=0)
    agent = new_agent(model, school, tmp_path / "s2")
    try:
        first = await agent.send(PROMPTS[0])
        second = await agent.send("Something new.")
    finally:
        await agent.close()
    assert first.text == "The note is written."
    assert second.text == "A live answer."
    assert (model.served, model.fallback_calls) == (2, 1)
    assert fallback.requests[0].messages[-1]["content"][-1]["text"] == "Something new."


def test_replay_options_and_bad_cassettes_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="no cassette"):
        replay(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="fallback"):
        replay(tmp_path / "missing.jsonl", strict=False)
    with pytest.raises(ValueError, match="speed"):
        replay(tmp_path / "missing.jsonl", speed=-1)
    with pytest.raises(TypeError, match="provider"):
        record("not a provider", tmp_path / "c.jsonl")  # type: ignore[arg-type]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "header", "v": 1}\nnot json\n{"kind": "count"}\n')
    with pytest.raises(CassetteError, match=r"bad.jsonl:2"):
        replay(bad)
    newer = tmp_path / "newer.jsonl"
    newer.write_text('{"kind": "header", "v": 99}\n')
    with pytest.raises(CassetteError, match="newer"):
        replay(newer)
    other = tmp_path / "other.jsonl"
    other.write_text('{"v": 1, "seq": 1, "type": "user"}\n')
    with pytest.raises(CassetteError, match="not a lite_agent_jupyter cassette"):
        replay(other)


async def test_a_torn_last_line_is_ignored_and_recording_appends(
    workdir: Path, tmp_path: Path
) -> None:
    cassette = tmp_path / "c.jsonl"
    model = record(scripted(["one"]), cassette)
    agent = new_agent(model, workdir, tmp_path / "s1", session_id="a")
    await agent.send("first")
    await agent.close()
    model = record(scripted(["two"]), cassette)  # appends to the same cassette
    agent = new_agent(model, workdir, tmp_path / "s1", session_id="b")
    await agent.send("second")
    await agent.close()
    with cassette.open("a") as f:
        f.write('{"kind": "call", "key": "tor')  # a crash mid-write
    player = replay(cassette, speed=0)
    assert player.recorded_calls == 2
    agent = new_agent(player, workdir, tmp_path / "s2", session_id="b")
    try:
        assert (await agent.send("second")).text == "two"
    finally:
        await agent.close()


async def test_repeated_requests_are_served_in_order_then_the_last_again(
    workdir: Path, tmp_path: Path
) -> None:
    cassette = tmp_path / "c.jsonl"
    model = record(scripted(["first answer", "second answer"]), cassette)
    for sid in ("s-1", "s-2"):
        agent = new_agent(model, workdir, tmp_path / "rec", session_id=sid)
        await agent.send("same question")
        await agent.close()
    player = replay(cassette, speed=0)
    texts = []
    for sid in ("r-1", "r-2", "r-3"):
        agent = new_agent(player, workdir, tmp_path / "play", session_id=sid)
        texts.append((await agent.send("same question")).text)
        await agent.close()
    assert texts == ["first answer", "second answer", "second answer"]


async def test_an_aborted_paced_replay_stops_and_leaves_a_valid_log(
    workdir: Path, tmp_path: Path
) -> None:
    cassette = tmp_path / "slow.jsonl"
    slow = scripted(["one two three four five six"], delay=0.02)
    agent = new_agent(record(slow, cassette), workdir, tmp_path / "s1")
    await agent.send("count")
    await agent.close()
    # played 1000 times slower than recorded: the first word would come after ~20 s
    agent = new_agent(replay(cassette, speed=0.001), workdir, tmp_path / "s2")
    try:
        stream = agent.run("count")
        async for event in stream:
            assert type(event).__name__ == "TurnStarted"
            break  # stop while the replay waits for its first word
        await stream.aclose()  # type: ignore[attr-defined]
        events = await agent.checkpointer.read("lesson")
        assert [e.type for e in events] == ["user", "interrupted"]
    finally:
        await agent.close()


async def test_count_tokens_is_recorded_and_replayed(workdir: Path, tmp_path: Path) -> None:
    from lite_agent_jupyter.providers import ModelRequest
    from lite_agent_jupyter.providers.scripted import estimate_tokens

    cassette = tmp_path / "c.jsonl"
    request = ModelRequest("m", [{"role": "user", "content": f"look in {workdir}"}])
    recorder = record(scripted([]), cassette, workdir=workdir)
    counted = await recorder.count_tokens(request)
    assert counted == estimate_tokens(request)
    elsewhere = tmp_path / "elsewhere" / "deeper"
    elsewhere.mkdir(parents=True)
    moved = ModelRequest("m", [{"role": "user", "content": f"look in {elsewhere}"}])
    player: ReplayProvider = replay(cassette, workdir=elsewhere)
    assert await player.count_tokens(moved) == counted != estimate_tokens(moved)


# ----------------------------------------------------------------------------- budgets


def looping_turn(_request: Any) -> Any:
    """A model that always wants one more tool call."""
    return reply("Once more.", [call("read_file", path="data.txt")], usage=Usage(1000, 100))


async def test_a_budget_stops_a_looping_turn_with_a_valid_log(
    fake_anthropic: FakeAnthropicServer,
    claude: Callable[..., Any],
    make_agent: MakeAgent,
    workdir: Path,
) -> None:
    (workdir / "data.txt").write_text("42")

    def loop_forever(_body: dict[str, Any]) -> FakeReply:
        return FakeReply(
            "Once more.",
            tool_calls=[FakeToolCall("read_file", {"path": "data.txt"})],
            input_tokens=1000,
            output_tokens=100,
        )

    fake_anthropic.script(loop_forever, loop_forever)  # a third call would get a 500
    agent = make_agent(model=claude(), max_turn_tokens=3000, approvals="allow")
    result = await agent.send("keep reading")
    # call 1: 1100 used, the next needs >= 1100 more: 2200 <= 3000, go on;
    # call 2: 2200 used, the next would pass 3000: stop before it
    assert result.stop_reason == "budget"
    assert result.model_calls == 2 and result.usage.input_tokens == 2000
    events = await agent.checkpointer.read(agent.session_id)
    last_result = events[-2]
    assert isinstance(last_result, ToolResultEvent) and last_result.is_error
    assert "budget" in str(last_result.content)
    assert isinstance(events[-1], InterruptedEvent) and "budget" in events[-1].reason
    # the log is valid for the real API: the next turn's request is accepted
    fake_anthropic.script("Stopped as asked.")
    follow = await agent.send("ok, stop")
    assert follow.text == "Stopped as asked." and follow.stop_reason == "end_turn"
    assert fake_anthropic.message_requests[-1].status == 200


async def test_a_budget_is_an_agent_option(make_agent: MakeAgent) -> None:
    with pytest.raises(ValueError, match="max_turn_tokens"):
        make_agent(model=scripted(), max_turn_tokens=0)
    with pytest.raises(TypeError, match="max_turn_tokens"):
        make_agent(model=scripted(), max_turn_tokens="100")
    agent = make_agent(model=scripted([looping_turn] * 5), max_turn_tokens=100_000)
    assert agent.options.max_turn_tokens == 100_000
    agent = make_agent(model=scripted([looping_turn] * 5), max_turn_tokens=1500, approvals="allow")
    result = await agent.send("go")  # the first call alone is allowed, then it stops
    assert (result.stop_reason, result.model_calls) == ("budget", 1)


# ----------------------------------------------------------------------------- usage totals


async def test_usage_totals_per_session_and_cost_estimate(make_agent: MakeAgent) -> None:
    from lite_agent_jupyter import Price, UsageTotals

    model = scripted(
        [
            reply("a", usage=Usage(100, 10, 5, 50)),
            reply("b", usage=Usage(200, 20)),
            reply("c", usage=Usage(1000, 100)),
        ]
    )
    agent = make_agent(model=model, session_id="first")
    await agent.send("one")
    await agent.send("two")
    agent.clear()
    other = agent.session_id
    await agent.send("three")
    first = await agent.usage("first")
    assert first.calls == 2 and first.usage == Usage(300, 30, 5, 50)
    # the agent's table prices Claude models, not a scripted one: no cost, named as unpriced
    assert first.tokens == 385 and first.cost == 0 and first.unpriced == ("scripted",)
    priced = await agent.usage(
        "first", prices={"script": Price(input=3.0, output=15.0, cache_read=0.3)}
    )
    expected = (300 * 3.0 + 30 * 15.0 + 5 * 3.0 + 50 * 0.3) / 1_000_000
    assert priced.cost == pytest.approx(expected) and priced.unpriced == ()
    unpriced = await agent.usage("first", prices={"claude": Price(input=1, output=1)})
    assert unpriced.cost == 0 and unpriced.unpriced == ("scripted",)
    assert "2 model calls" in first.summary() and "385" not in first.summary()
    by_session = await agent.usage_by_session()
    assert set(by_session) == {"first", other}
    total = sum(by_session.values(), UsageTotals())
    assert total.calls == 3 and total.usage.input_tokens == 1300
    with pytest.raises(TypeError, match="Price"):
        await agent.usage("first", prices={"scripted": 3.0})  # type: ignore[dict-item]


async def test_a_budget_for_one_turn_overrides_the_option(make_agent: MakeAgent) -> None:
    agent = make_agent(model=scripted([looping_turn] * 5 + ["done"]), approvals="allow")
    with pytest.raises(ValueError, match="max_turn_tokens"):
        await agent.send("go", max_turn_tokens=-5)
    result = await agent.send("go", max_turn_tokens=2000)
    assert (result.stop_reason, result.model_calls) == ("budget", 1)
    events = []
    async for event in agent.run("again", max_turn_tokens=3500):
        events.append(event)
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished[-1].is_error and "budget" in finished[-1].output
    assert isinstance(events[-1], TurnFinished) and events[-1].result.stop_reason == "budget"
    assert events[-1].result.model_calls == 3  # 1100, 2200, 3300 used; 4400 > 3500


async def test_tool_results_do_not_break_a_replay_in_a_folder_where_it_already_ran(
    workdir: Path, tmp_path: Path
) -> None:
    """Rehearse, then replay in the same folder: the file is already there, so write_file
    answers "no change" instead of "created"; the model's side still replays."""
    cassette = tmp_path / "c.jsonl"
    model = record(
        scripted([reply("Writing.", [call("write_file", path="a.txt", content="hi")]), "Done."]),
        cassette,
    )
    agent = new_agent(model, workdir, tmp_path / "s1")
    await agent.send("write a.txt")
    await agent.close()
    agent = new_agent(replay(cassette, speed=0), workdir, tmp_path / "s2")
    try:
        result = await agent.send("write a.txt")
        events = await agent.checkpointer.read("lesson")
    finally:
        await agent.close()
    assert result.text == "Done."
    outputs = [e.content for e in events if isinstance(e, ToolResultEvent)]
    assert "no change" in str(outputs[0])  # not what was recorded ("created ..."), yet replayed


async def test_the_cassette_redacts_with_the_agents_redactor(
    workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret named in ``secret_env`` stays out of the cassette, even in the model's own
    answer (a scripted model that "knows" it), and the wrapped provider's key is known."""
    token = "tok-0123456789abcdef"
    monkeypatch.setenv("LESSON_DB_TOKEN", token)
    cassette = tmp_path / "c.jsonl"
    inner = scripted([f"The token is {token}."])
    agent = new_agent(
        record(inner, cassette), workdir, tmp_path / "s", secret_env=["LESSON_DB_TOKEN"]
    )
    try:
        result = await agent.send("what is the token?")
    finally:
        await agent.close()
    assert result.text == "The token is [REDACTED]."  # the agent redacts what it shows
    text = cassette.read_text(encoding="utf-8")
    assert token not in text and "The token is [REDACTED]." in text
    from lite_agent_jupyter.providers import anthropic

    wrapped = record(anthropic(api_key="sk-ant-wrapped-key-0123456789"), tmp_path / "d.jsonl")
    assert "sk-ant-wrapped-key-0123456789" in wrapped.secret_values()
