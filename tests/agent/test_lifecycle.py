"""Session lifecycle: send, run, resume, clear, list, delete, sessions=False, close."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from lite_agent_jupyter import (
    AgentClosedError,
    InvalidSessionIdError,
    LiteAgent,
    SessionsDisabledError,
    Storage,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    UsageUpdate,
    memory_checkpointer,
)
from lite_agent_jupyter.checkpoint.events import FileSnapshotEvent, UserEvent
from lite_agent_jupyter.providers.scripted import call, reply, scripted

MakeAgent = Callable[..., LiteAgent]


async def test_send_continues_the_same_session(make_agent: MakeAgent) -> None:
    model = scripted(["Hello!", "You said hi."])
    agent = make_agent(model=model)
    first = await agent.send("hi")
    second = await agent.send("what did I say?")
    assert (first.text, second.text) == ("Hello!", "You said hi.")
    assert first.session_id == second.session_id == agent.session_id
    assert first.stop_reason == "end_turn"
    assert first.checkpoint_seq == 0 and second.checkpoint_seq == 2
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    # the second request carried the whole conversation
    assert [m["role"] for m in model.requests[1].messages] == ["user", "assistant", "user"]


async def test_run_streams_events_in_order(make_agent: MakeAgent, workdir: Path) -> None:
    model = scripted([reply("Writing.", [call("write_file", path="a.txt", content="A")]), "Done."])
    agent = make_agent(model=model, approvals={"write_file": "allow"})
    events = [event async for event in agent.run("write a.txt")]
    kinds = [type(e) for e in events]
    assert kinds[0] is TurnStarted and kinds[-1] is TurnFinished
    assert TextDelta in kinds and UsageUpdate in kinds
    started = kinds.index(ToolCallStarted)
    finished = kinds.index(ToolCallFinished)
    assert started < finished
    done = events[finished]
    assert isinstance(done, ToolCallFinished) and not done.is_error
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Writing.Done."
    last = events[-1]
    assert isinstance(last, TurnFinished) and last.result.text == "Done."
    assert last.result.model_calls == 2
    assert (workdir / "a.txt").read_text() == "A"


async def test_resume_clear_and_list(make_agent: MakeAgent) -> None:
    agent = make_agent(model=scripted(["one", "two", "three"]))
    await agent.send("first prompt")
    first_id = agent.session_id
    new_id = agent.clear()
    assert new_id != first_id and agent.session_id == new_id
    await agent.send("second prompt")
    infos = await agent.list_sessions()
    assert [i.id for i in infos] == [new_id, first_id]  # newest first
    assert infos[1].title == "first prompt" and infos[1].turns == 1
    agent.resume(first_id)
    result = await agent.send("again")
    assert result.session_id == first_id and result.checkpoint_seq == 2
    assert (await agent.list_sessions())[0].turns == 2


async def test_list_sessions_pages_newest_first(make_agent: MakeAgent) -> None:
    """``list_sessions(limit=, before=)``: the page form the session browser uses; pages
    join up with the whole listing, titles and turns included."""
    agent = make_agent(model=scripted(["a", "b", "c"]))
    ids = []
    for text in ("one", "two", "three"):
        agent.clear()
        await agent.send(text)
        ids.append(agent.session_id)
    whole = await agent.list_sessions()
    assert [i.id for i in whole] == ids[::-1]
    first = await agent.list_sessions(limit=2)
    assert first == whole[:2] and first[0].title == "three" and first[0].turns == 1
    assert await agent.list_sessions(limit=2, before=first[-1]) == whole[2:]
    assert await agent.list_sessions(before=whole[0]) == whole[1:]


async def test_resume_unknown_valid_id_starts_empty(make_agent: MakeAgent) -> None:
    model = scripted(["fresh"])
    agent = make_agent(model=model)
    agent.resume("never-used-before")
    result = await agent.send("hello")
    assert result.session_id == "never-used-before" and result.checkpoint_seq == 0
    assert len(model.requests[0].messages) == 1


@pytest.mark.parametrize("bad", ["../x", "/abs", "a/b", "", "a\x00b", "x" * 200, "ü"])
async def test_invalid_session_ids_raise_before_any_io(
    make_agent: MakeAgent, storage: Storage, bad: str
) -> None:
    agent = make_agent(model=scripted(["never"]))
    with pytest.raises(InvalidSessionIdError):
        agent.resume(bad)
    with pytest.raises(InvalidSessionIdError):
        await agent.send("x", session_id=bad)
    with pytest.raises(InvalidSessionIdError):
        await agent.delete_session(bad)
    assert not storage.root.exists()


async def test_delete_session_removes_log_blobs_and_task_list(
    make_agent: MakeAgent, storage: Storage, workdir: Path
) -> None:
    model = scripted(
        [
            reply("", [call("write_file", path="only-mine.txt", content="private")]),
            reply("", [call("write_file", path="shared.txt", content="v1")]),
            reply("", [call("todo_write", todos=[{"content": "x", "status": "pending"}])]),
            "ok",
            reply("", [call("write_file", path="shared.txt", content="v2")]),
            "ok",
        ]
    )
    agent = make_agent(model=model, approvals="allow", blob_grace=0)
    (workdir / "shared.txt").write_text("v0")
    await agent.send("write")
    doomed = agent.session_id
    events = await agent.checkpointer.read(doomed)
    snaps = [e for e in events if isinstance(e, FileSnapshotEvent)]
    assert snaps and snaps[0].after is not None
    private_blob = snaps[0].after
    assert (storage.base / "tasks" / f"{doomed}.json").exists()

    agent.clear()
    await agent.send("write shared")
    kept = agent.session_id
    shared = [e for e in await agent.checkpointer.read(kept) if isinstance(e, FileSnapshotEvent)]
    shared_blob = shared[0].before  # "v1": the doomed session's "after" too
    assert shared_blob == snaps[1].after
    assert shared_blob is not None and await agent.blobs.has(shared_blob)

    await agent.delete_session(doomed)
    assert await agent.checkpointer.read(doomed) == []
    assert [i.id for i in await agent.list_sessions()] == [kept]
    await agent.wait_maintenance()  # blobs are collected in the background
    assert not await agent.blobs.has(private_blob)
    assert await agent.blobs.has(shared_blob)  # still referenced by the kept session
    assert not (storage.base / "tasks" / f"{doomed}.json").exists()
    await agent.delete_session(doomed)  # idempotent


async def test_deleting_the_current_session_switches_to_a_new_one(make_agent: MakeAgent) -> None:
    agent = make_agent(model=scripted(["a"]))
    await agent.send("x")
    current = agent.session_id
    await agent.delete_session(current)
    assert agent.session_id != current


def _tree(path: Path) -> dict[str, float]:
    if not path.exists():
        return {}
    return {str(p.relative_to(path)): p.stat().st_mtime_ns for p in sorted(path.rglob("*"))}


async def test_sessions_false_writes_nothing_to_disk(
    make_agent: MakeAgent, tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("LITE_AGENT_HOME", str(home))
    (workdir / "data.txt").write_text("numbers 1 2 3")
    before = _tree(tmp_path)
    model = scripted(
        [
            reply("Reading.", [call("read_file", path="data.txt")]),
            "It has numbers.",
            "You asked about data.txt.",
        ]
    )
    agent = make_agent(model=model, sessions=False, storage=None)
    await agent.send("what is in data.txt?")
    result = await agent.send("what did I ask?")
    assert result.text == "You asked about data.txt."
    # the conversation is kept in memory: the second request saw the first turn
    assert len(model.requests[-1].messages) == 5
    new_id = agent.clear()
    assert agent.session_id == new_id
    for call_ in (
        agent.list_sessions(),
        agent.delete_session(new_id),
    ):
        with pytest.raises(SessionsDisabledError):
            await call_
    with pytest.raises(SessionsDisabledError):
        agent.resume(new_id)
    await agent.close()
    assert _tree(tmp_path) == before
    assert not home.exists()


async def test_close_is_idempotent_and_final(make_agent: MakeAgent) -> None:
    agent = make_agent(model=scripted(["a"]))
    async with agent:
        await agent.send("x")
    assert agent.closed
    await agent.close()
    with pytest.raises(AgentClosedError):
        await agent.send("again")
    with pytest.raises(AgentClosedError):
        agent.clear()
    with pytest.raises(AgentClosedError):
        await agent.list_sessions()


async def test_storage_is_private(make_agent: MakeAgent, storage: Storage) -> None:
    agent = make_agent(
        model=scripted([reply("", [call("write_file", path="f", content="x")]), "ok"]),
        approvals="allow",
    )
    await agent.send("go")
    assert (storage.root / ".gitignore").read_text() == "*\n"
    for path in [storage.root, *storage.root.rglob("*")]:
        mode = path.stat().st_mode & 0o777
        if path.is_dir():
            assert mode == 0o700, path
        else:
            assert mode == 0o600, path
    assert os.stat(storage.root).st_mode & 0o077 == 0


async def test_prompt_is_the_only_checkpoint(make_agent: MakeAgent) -> None:
    agent = make_agent(model=scripted([reply("", [call("list_files")]), "done"]))
    await agent.send("look around")
    events = await agent.checkpointer.read(agent.session_id)
    checkpoints = [e for e in events if isinstance(e, UserEvent) and e.checkpoint]
    assert len(checkpoints) == 1 and checkpoints[0].seq == 1


@pytest.mark.parametrize("bad", ["", "   \n", [], [1], None])
async def test_empty_or_malformed_prompt_is_refused_before_any_write(
    make_agent: MakeAgent, storage: Storage, bad: object
) -> None:
    agent = make_agent(model=scripted(["never"]))
    with pytest.raises((ValueError, TypeError)):
        await agent.send(bad)  # type: ignore[arg-type]
    assert not storage.root.exists()


async def test_content_block_prompt(make_agent: MakeAgent) -> None:
    model = scripted(["seen"])
    agent = make_agent(model=model)
    await agent.send([{"type": "text", "text": "as blocks"}])
    assert model.requests[0].messages == [
        {"role": "user", "content": [{"type": "text", "text": "as blocks"}]}
    ]
    assert (await agent.list_sessions())[0].title == "as blocks"


async def test_a_log_rewritten_elsewhere_is_reread_not_forked(make_agent: MakeAgent) -> None:
    """Another writer truncates the session and regrows it to the same head: the agent
    must notice (a stale cache would fork the conversation silently)."""
    model = scripted(["first answer", "second answer", "third answer"])
    agent = make_agent(model=model)
    await agent.send("one")  # seq 1-2
    other = make_agent(model=model, session_id=agent.session_id)
    await other.checkpointer.truncate(agent.session_id, 0)
    await other.send("rewritten")  # seq 1-2 again, different content
    await agent.send("three")
    sent = model.requests[-1].messages
    assert sent[0]["content"][0]["text"] == "rewritten"
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]


def test_options_are_checked_up_front(workdir: Path, storage: Storage) -> None:
    from lite_agent_jupyter import create_lite_agent

    with pytest.raises(TypeError, match="model_name"):
        create_lite_agent(model="claude-sonnet-4-6", workdir=workdir, storage=storage)
    with pytest.raises(TypeError, match="'model'"):
        create_lite_agent(workdir=workdir)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="max_turns"):
        create_lite_agent(model=scripted([]), workdir=workdir, max_turns=0)
    with pytest.raises(NotADirectoryError):
        create_lite_agent(model=scripted([]), workdir=workdir / "missing")
    with pytest.raises(ValueError, match="approvals"):
        create_lite_agent(model=scripted([]), workdir=workdir, approvals="always")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="approvals\\['bash'\\]"):
        create_lite_agent(model=scripted([]), workdir=workdir, approvals={"bash": "yes"})  # type: ignore[dict-item]
    with pytest.raises(InvalidSessionIdError):
        create_lite_agent(model=scripted([]), workdir=workdir, session_id="../x")
    with pytest.raises(TypeError, match="tools="):
        create_lite_agent(model=scripted([]), workdir=workdir, tools=[print])  # type: ignore[list-item]
    assert not storage.root.exists()


def test_an_unknown_option_names_the_closest_one(workdir: Path) -> None:
    from lite_agent_jupyter import create_lite_agent

    with pytest.raises(
        TypeError, match="unknown agent option 'max_turn'; did you mean 'max_turns'"
    ):
        create_lite_agent(model=scripted([]), workdir=workdir, max_turn=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown agent option 'store'"):
        create_lite_agent(model=scripted([]), workdir=workdir, store=memory_checkpointer())  # type: ignore[arg-type]


async def test_options_object_is_frozen_and_checked_on_replace(workdir: Path) -> None:
    import dataclasses

    from lite_agent_jupyter import AgentOptions, LiteAgent

    options = AgentOptions(model=scripted([]), workdir=workdir, sessions=False)
    assert options.workdir == workdir.resolve() and options.tools == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_turns = 3  # type: ignore[misc]
    with pytest.raises(TypeError, match="did you mean 'max_tokens'"):
        options.replace(max_token=10)
    with pytest.raises(ValueError, match="max_tokens"):
        options.replace(max_tokens=0)
    agent = LiteAgent(options.replace(max_turns=3))
    assert agent.options.max_turns == 3 and agent.options.model is options.model
    await agent.close()


async def test_own_tool_replaces_a_builtin_of_the_same_name(make_agent: MakeAgent) -> None:
    from lite_agent_jupyter import tool

    @tool(name="read_file", kind="read")
    async def my_read(path: str) -> str:
        """Read through my own store."""
        return f"mine: {path}"

    model = scripted([reply("", [call("read_file", path="x")]), "ok"])
    agent = make_agent(model=model, tools=[my_read])
    await agent.send("read x")
    names = [t["name"] for t in model.requests[0].tools]
    assert names.count("read_file") == 1
    result = model.requests[1].messages[-1]["content"][0]
    assert result["content"] == "mine: x"


async def test_corrupt_log_is_a_clear_error_and_nothing_is_written(
    make_agent: MakeAgent, storage: Storage
) -> None:
    from lite_agent_jupyter import CorruptLogError

    agent = make_agent(model=scripted(["one", "two", "three"]))
    await agent.send("first")
    await agent.send("second")
    log = storage.base / "sessions" / f"{agent.session_id}.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[1] = b'{"v":1,"seq":2,"ts":"x","type":"assistant","content":[BROKEN\n'
    log.write_bytes(b"".join(lines))
    before = log.read_bytes()
    fresh = make_agent(model=scripted(["never"]), session_id=agent.session_id)
    with pytest.raises(CorruptLogError) as caught:
        await fresh.send("third")
    assert caught.value.path == str(log) and caught.value.line == 2
    assert log.read_bytes() == before


async def test_torn_final_line_is_repaired_and_the_session_goes_on(
    make_agent: MakeAgent, storage: Storage
) -> None:
    agent = make_agent(model=scripted(["one", "two"]))
    await agent.send("first")
    log = storage.base / "sessions" / f"{agent.session_id}.jsonl"
    with log.open("ab") as f:  # a crash mid-append leaves half a line
        f.write(b'{"v":1,"seq":3,"ts":"2026-11-29T00:00:00+00:00","type":"us')
    fresh = make_agent(model=scripted(["two"]), session_id=agent.session_id)
    with pytest.warns(RuntimeWarning, match="torn|repair"):
        result = await fresh.send("second")
    assert result.text == "two" and result.checkpoint_seq == 2
    assert [e.seq for e in await fresh.checkpointer.read(agent.session_id)] == [1, 2, 3, 4]
