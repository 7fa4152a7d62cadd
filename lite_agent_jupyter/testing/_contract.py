"""The Checkpointer contract (SPEC §4) as checks: each gets a fresh, empty store."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path

from ..checkpoint.events import (
    AssistantEvent,
    BackgroundCompletedEvent,
    CompactionEvent,
    Event,
    FileSnapshotEvent,
    InterruptedEvent,
    UnknownEvent,
    UserEvent,
)
from ..checkpoint.protocol import SupportsSync, SupportsTaskLists, new_session_id
from ..errors import (
    CheckpointConflictError,
    CheckpointerUnavailableError,
    InvalidSessionIdError,
)
from ._kit import (
    Context,
    assistant,
    batch,
    canon_all,
    check,
    payloads,
    prompt,
    raises,
    tool_result,
    user,
)

S = "session-1"


@check()
async def unknown_session_is_empty(ctx: Context) -> None:
    store = ctx.store
    assert await store.head(S) == 0
    assert await store.read(S) == []
    assert await store.read(S, after=5) == []
    assert await store.list() == []
    await store.truncate(S, 0)
    await store.delete(S)
    assert await store.list() == []


@check()
async def append_assigns_gap_free_seqs_from_one(ctx: Context) -> None:
    store = ctx.store
    first = [prompt("hi"), assistant("hello")]
    assert await store.append(S, first) == 2
    assert await store.append(S, [tool_result()]) == 3
    assert await store.append(S, batch(4)) == 7
    events = await store.read(S)
    assert [e.seq for e in events] == [1, 2, 3, 4, 5, 6, 7]
    assert await store.head(S) == 7
    assert payloads(events) == payloads([*first, tool_result(), *batch(4)])
    # Timestamps are stamped, ISO-8601 with a timezone; one batch shares one.
    stamps = [datetime.fromisoformat(e.ts) for e in events]
    assert all(ts.tzinfo is not None for ts in stamps)
    assert stamps[0] == stamps[1] and stamps == sorted(stamps)


@check()
async def caller_objects_are_not_modified(ctx: Context) -> None:
    store = ctx.store
    event = user("mine", note={"k": [1, 2]})
    await store.append(S, [event])
    assert event.seq == 0 and event.ts == ""
    events = await store.read(S)
    events[0].extra["note"]["k"].append(3)
    assert (await store.read(S))[0].extra == {"note": {"k": [1, 2]}}


@check()
async def read_after(ctx: Context) -> None:
    store = ctx.store
    await store.append(S, batch(10))
    for after in range(0, 12):
        events = await store.read(S, after=after)
        assert [e.seq for e in events] == list(range(after + 1, 11))
    assert [e.seq for e in await store.read(S, after=-3)] == list(range(1, 11))


@check()
async def sessions_are_independent(ctx: Context) -> None:
    store = ctx.store
    await store.append("a", batch(3, "a"))
    await store.append("b", batch(2, "b"))
    await store.append("a", batch(1, "a"))
    assert await store.head("a") == 4 and await store.head("b") == 2
    assert [e.content for e in await store.read("b")] == ["b0", "b1"]  # type: ignore[attr-defined]


@check()
async def empty_batch_writes_nothing(ctx: Context) -> None:
    store = ctx.store
    assert await store.append(S, []) == 0
    assert await store.list() == []
    await store.append(S, batch(2))
    assert await store.append(S, [], expected_head=2) == 2
    with raises(CheckpointConflictError):
        await store.append(S, [], expected_head=1)
    assert await store.head(S) == 2


@check()
async def expected_head(ctx: Context) -> None:
    store = ctx.store
    assert await store.append(S, batch(2), expected_head=0) == 2
    assert await store.append(S, batch(1), expected_head=2) == 3
    with raises(CheckpointConflictError) as info:
        await store.append(S, batch(5), expected_head=2)
    error = info[0]
    assert (error.session_id, error.expected, error.actual) == (S, 2, 3)
    assert await store.head(S) == 3
    assert len(await store.read(S)) == 3


@check()
async def conflict_on_unknown_session_creates_nothing(ctx: Context) -> None:
    store = ctx.store
    with raises(CheckpointConflictError) as info:
        await store.append(S, batch(1), expected_head=4)
    assert info[0].actual == 0
    assert await store.list() == []
    assert await store.head(S) == 0


@check()
async def truncate(ctx: Context) -> None:
    store = ctx.store
    await store.append(S, batch(6))
    await store.truncate(S, 4)
    assert [e.seq for e in await store.read(S)] == [1, 2, 3, 4]
    assert await store.head(S) == 4
    assert await store.append(S, [user("after")]) == 5  # seq continues, no gap
    events = await store.read(S)
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert events[-1].content == "after"  # type: ignore[attr-defined]
    await store.truncate(S, 5)  # to the head: nothing changes
    assert await store.head(S) == 5


@check()
async def truncate_to_zero_empties_the_session(ctx: Context) -> None:
    store = ctx.store
    await store.append(S, [prompt("p"), *batch(2)])
    await store.truncate(S, 0)
    assert await store.head(S) == 0
    assert await store.read(S) == []
    assert [info.id for info in await store.list()] == []
    assert await store.append(S, batch(1)) == 1


@check()
async def truncate_out_of_range(ctx: Context) -> None:
    store = ctx.store
    await store.append(S, batch(3))
    for to_seq in (-1, 4, 100):
        with raises(ValueError):
            await store.truncate(S, to_seq)
    assert await store.head(S) == 3
    with raises(ValueError):
        await store.truncate("unknown", 1)


@check()
async def truncate_conflict_changes_nothing(ctx: Context) -> None:
    store = ctx.store
    await store.append(S, batch(5))
    with raises(CheckpointConflictError) as info:
        await store.truncate(S, 2, expected_head=4)
    assert (info[0].expected, info[0].actual) == (4, 5)
    assert [e.seq for e in await store.read(S)] == [1, 2, 3, 4, 5]
    await store.truncate(S, 2, expected_head=5)
    assert await store.head(S) == 2
    with raises(CheckpointConflictError):
        await store.truncate("unknown", 0, expected_head=1)


@check()
async def list_newest_first_with_titles_and_turns(ctx: Context) -> None:
    store = ctx.store
    await store.append("a", [prompt("first question of a"), assistant()])
    await store.append("b", [user("background note"), assistant()])  # not a checkpoint
    await store.append("c", [prompt("c asks")])
    await store.append("a", [prompt("second question of a")])
    infos = await store.list()
    assert [info.id for info in infos] == ["a", "c", "b"]
    mtimes = [info.mtime for info in infos]
    assert all(isinstance(m, datetime) and m.tzinfo is not None for m in mtimes)
    assert mtimes == sorted(mtimes, reverse=True)
    by_id = {info.id: info for info in infos}
    assert (by_id["a"].title, by_id["a"].turns) == ("first question of a", 2)
    assert (by_id["b"].title, by_id["b"].turns) == (None, 0)
    assert (by_id["c"].title, by_id["c"].turns) == ("c asks", 1)
    for info in infos:
        assert info.head in (None, await store.head(info.id))
    await store.append("b", [assistant()])  # any append is a change, not only a prompt
    assert [info.id for info in await store.list()] == ["b", "a", "c"]


@check()
async def list_pages_newest_first(ctx: Context) -> None:
    """``list(limit=, before=)``: pages of the same order as the whole listing, joining up
    with no gap and no repeat; the newest page sees a change at once; titles and turns
    come with every page."""
    store = ctx.store
    ids = [f"s{n}" for n in range(7)]
    for sid in ids:
        await store.append(sid, [prompt(f"question {sid}"), assistant()])
    await store.append("s2", [assistant()])  # now the newest
    whole = await store.list()
    assert [info.id for info in whole] == ["s2", "s6", "s5", "s4", "s3", "s1", "s0"]
    first = await store.list(limit=3)
    assert first == whole[:3]
    assert (first[0].title, first[0].turns) == ("question s2", 1)
    second = await store.list(limit=3, before=first[-1])
    assert second == whole[3:6]
    assert await store.list(limit=3, before=second[-1]) == whole[6:]
    assert await store.list(before=first[0]) == whole[1:]
    assert await store.list(before=whole[-1]) == []
    assert await store.list(limit=0) == []
    assert await store.list(limit=100) == whole
    await store.append("s0", [assistant()])
    assert [info.id for info in await store.list(limit=2)] == ["s0", "s2"]
    for limit in (-1, 1.5, True):
        with raises(ValueError):
            await store.list(limit=limit)  # type: ignore[arg-type]
    with raises(TypeError):
        await store.list(before=whole[0].mtime)  # type: ignore[arg-type]


@check()
async def list_titles_follow_truncate_and_delete(ctx: Context) -> None:
    store = ctx.store
    await store.append("a", [prompt("one"), assistant(), prompt("two"), assistant()])
    await store.append("b", [prompt("bee")])
    await store.truncate("a", 2)
    infos = {info.id: info for info in await store.list()}
    assert (infos["a"].title, infos["a"].turns) == ("one", 1)
    await store.truncate("a", 0)
    await store.delete("b")
    assert await store.list() == []
    await store.append("b", [user("no prompt")])
    (info,) = await store.list()
    assert (info.id, info.title, info.turns) == ("b", None, 0)


@check()
async def title_is_shortened(ctx: Context) -> None:
    store = ctx.store
    await store.append(S, [prompt("x" * 5000)])
    (info,) = await store.list()
    assert info.title is not None and 0 < len(info.title) <= 200


@check()
async def delete_is_idempotent(ctx: Context) -> None:
    store = ctx.store
    await store.delete(S)
    await store.append(S, batch(3))
    await store.append("other", batch(1))
    await store.delete(S)
    await store.delete(S)
    assert await store.head(S) == 0
    assert await store.read(S) == []
    assert [info.id for info in await store.list()] == ["other"]
    assert await store.append(S, batch(1)) == 1  # a new life starts at seq 1


BAD_IDS: list[object] = [
    "../x",
    "/abs",
    "a/b",
    "",
    "a\x00b",
    "\x00",
    "a" * 129,
    "a" * 200,
    ".hidden",
    "-leading-dash",
    "_leading",
    "a.b",
    "a b",
    "é",
    "a\n",
    None,
    123,
    b"abc",
    ["a"],
]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@check()
async def invalid_ids_rejected_before_any_io(ctx: Context) -> None:
    """Every method validates the session id before any I/O: nothing appears anywhere."""
    store = ctx.store
    before = _tree(ctx.folder)  # stores live below the folder: "../x" would land in it
    for bad in BAD_IDS:
        sid: str = bad  # type: ignore[assignment]
        calls: list[Awaitable[object]] = [
            store.append(sid, batch(1)),
            store.append(sid, batch(1), expected_head=0),
            store.read(sid),
            store.read(sid, after=1),
            store.head(sid),
            store.delete(sid),
            store.truncate(sid, 0),
        ]
        for call in calls:
            with raises(InvalidSessionIdError):
                await call
    assert _tree(ctx.folder) == before
    assert not Path("/abs.jsonl").exists() and not Path("/abs").exists()
    assert await store.list() == []


@check()
async def valid_ids(ctx: Context) -> None:
    store = ctx.store
    good = ["a", "A1", "0", "a" * 128, "a-b_c", new_session_id()]
    for session_id in good:
        assert await store.append(session_id, batch(1)) == 1
    assert sorted(info.id for info in await store.list()) == sorted(good)


@check()
async def one_mebibyte_events(ctx: Context) -> None:
    store = ctx.store
    big = "".join(chr(0x61 + i % 26) for i in range(1 << 20))
    await store.append(S, [user("small")])
    await store.append(S, [user(big), user(big[::-1])])
    await store.append(S, [user("tail")])
    events = await store.read(S)
    assert [e.content for e in events] == ["small", big, big[::-1], "tail"]  # type: ignore[attr-defined]
    assert [e.content for e in await store.read(S, after=2)] == [big[::-1], "tail"]  # type: ignore[attr-defined]
    assert await store.head(S) == 4


UNICODE = [
    "emoji 😀👩‍👩‍👧 🇫🇷",
    "CJK 中文字符 日本語 한국어",
    "RTL עברית العربية",
    "combining e\u0301 and zero\u200bwidth",
    "line\u2028separator\u2029paragraph",
    "controls \x00 \x01 \x1f \x7f and NUL",
    "newlines\nand\r\ntabs\t",
    'quotes " and \\ backslashes',
    "lone surrogates \ud800 and \udfff and \udcff",
    "\U0010ffff max code point",
]


@check()
async def unicode_round_trips(ctx: Context) -> None:
    """Any Python string round-trips, lone surrogates included (stored as JSON escapes; see
    ``events.encode``), so text decoded with ``surrogateescape`` can be logged as is."""
    store = ctx.store
    events: list[Event] = [UserEvent(content=text, extra={f"key {text}": text}) for text in UNICODE]
    await store.append(S, events)
    back = await store.read(S)
    assert [e.content for e in back] == UNICODE  # type: ignore[attr-defined]
    assert [e.extra for e in back] == [{f"key {t}": t} for t in UNICODE]
    (info,) = await store.list()
    assert info.id == S


@check()
async def non_json_payload_raises_and_writes_nothing(ctx: Context) -> None:
    store = ctx.store
    with raises(TypeError):
        await store.append(S, [user("ok"), user("bad", obj=object())])
    assert await store.list() == []
    await store.append(S, batch(2))
    bad_batches: list[list[Event]] = [
        [user("bad", obj={1, 2})],
        [user("fine"), AssistantEvent(content=[{"type": "text", "text": b"bytes"}])],
        [user("bad", when=datetime.now())],
    ]
    for events in bad_batches:
        with raises(TypeError):
            await store.append(S, events)
    with raises(ValueError):  # NaN is not JSON either
        await store.append(S, [user("nan", x=math.nan)])
    assert await store.head(S) == 2
    assert payloads(await store.read(S)) == payloads(batch(2))
    assert await store.append(S, batch(1)) == 3


@check()
async def every_event_type_round_trips(ctx: Context) -> None:
    store = ctx.store
    events: list[Event] = [
        UserEvent(content=[{"type": "text", "text": "hi"}], origin="user", checkpoint=True),
        UserEvent(content="bg done", origin="background"),
        UserEvent(content="notice", origin="internal"),
        AssistantEvent(
            content=[
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}},
            ],
            usage={"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 7},
            stop_reason="tool_use",
            model="m",
        ),
        tool_result("t1", "contents"),
        FileSnapshotEvent(path="src/a.py", before=None, after="ab" * 32, tool_use_id="t1"),
        CompactionEvent(summary="s", through_seq=4, before=1000, after=100),
        InterruptedEvent(reason="cancelled"),
        BackgroundCompletedEvent(job_id="j1", summary="exit 0", exit_code=0),
        UnknownEvent(unknown_type="from_the_future", extra={"x": [1, {"y": None}]}),
        user("with extra", future_field={"nested": True}, n=1.5),
    ]
    await store.append(S, events)
    back = await store.read(S)
    assert [type(e) for e in back] == [type(e) for e in events]
    assert payloads(back) == payloads(events)
    assert back[9].type == "from_the_future"


@check()
async def concurrent_tasks_lose_nothing(ctx: Context) -> None:
    store = ctx.store

    async def writer(w: int) -> None:
        for i in range(10):
            await store.append(S, [user(f"{w}-{i}", w=w, i=i)])

    await asyncio.gather(*(writer(w) for w in range(8)))
    events = await store.read(S)
    assert [e.seq for e in events] == list(range(1, 81))
    seen = [(e.extra["w"], e.extra["i"]) for e in events]
    assert sorted(seen) == [(w, i) for w in range(8) for i in range(10)]
    for w in range(8):
        assert [i for ww, i in seen if ww == w] == list(range(10))


@check()
async def concurrent_tasks_with_expected_head(ctx: Context) -> None:
    """Optimistic concurrency inside one process: every winner wrote, every loser retried."""
    store = ctx.store

    async def writer(w: int) -> int:
        conflicts = 0
        for i in range(5):
            while True:
                head = await store.head(S)
                try:
                    await store.append(S, [user(f"{w}-{i}")], expected_head=head)
                    break
                except CheckpointConflictError:
                    conflicts += 1
                    await asyncio.sleep(0)
        return conflicts

    await asyncio.gather(*(writer(w) for w in range(6)))
    assert [e.seq for e in await store.read(S)] == list(range(1, 31))


@check("persistent")
async def another_object_sees_everything(ctx: Context) -> None:
    store = ctx.store
    await store.append(S, [prompt("remember me"), *batch(3)])
    other = ctx.reopen()
    assert await other.head(S) == 4
    assert canon_all(await other.read(S)) == canon_all(await store.read(S))
    assert canon_all(await other.read(S, after=3)) == canon_all(await store.read(S, after=3))
    assert await other.append(S, batch(1), expected_head=4) == 5
    assert await store.head(S) == 5  # the first object's caches follow
    with raises(CheckpointConflictError):
        await store.append(S, batch(1), expected_head=4)
    await other.truncate(S, 2)
    assert [e.seq for e in await store.read(S)] == [1, 2]
    assert await store.append(S, batch(1)) == 3
    (info,) = await other.list()
    assert (info.id, info.title, info.turns) == (S, "remember me", 1)
    await other.delete(S)
    assert await store.head(S) == 0 and await store.read(S) == []


@check()
async def close_is_idempotent(ctx: Context) -> None:
    """``close()`` twice is fine; afterwards every method raises CheckpointerUnavailableError
    (unless the backend says it has nothing to release)."""
    store = ctx.store
    await store.append(S, batch(1))
    await store.close()
    await store.close()
    if ctx.backend.usable_after_close:
        assert await store.head(S) == 1
        return
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.append(S, batch(1)),
        lambda: store.read(S),
        lambda: store.head(S),
        lambda: store.list(),
        lambda: store.delete(S),
        lambda: store.truncate(S, 0),
    ]
    for call in calls:
        with raises(CheckpointerUnavailableError, match="closed"):
            await call()


@check()
async def sync_when_offered(ctx: Context) -> None:
    """A backend offering ``sync(id)`` (SupportsSync) accepts any valid session, known or not,
    and validates the id."""
    store = ctx.store
    if not isinstance(store, SupportsSync):
        return
    await store.append(S, batch(2))
    await store.sync(S)
    await store.sync("unknown-session")
    with raises(InvalidSessionIdError):
        await store.sync("../x")
    assert await store.head(S) == 2


_PLAN = [
    {"content": "a step ü ✓", "status": "in_progress"},
    {"content": "the next", "status": "pending"},
]


@check()
async def task_lists_when_offered(ctx: Context) -> None:
    """A backend offering ``task_lists()`` (SupportsTaskLists) keeps lists by id: a session's
    own and ``shared/<name>`` never collide, ``set`` replaces, ``delete`` is idempotent, and
    bad ids are refused before any I/O."""
    store = ctx.store
    if not isinstance(store, SupportsTaskLists):
        return
    lists = store.task_lists()
    assert await lists.get(S) == []
    await lists.set(S, _PLAN)
    await lists.set(f"shared/{S}", _PLAN[1:])
    assert await lists.get(S) == _PLAN
    assert await lists.get(f"shared/{S}") == _PLAN[1:]
    await lists.set(S, [])
    assert await lists.get(S) == []
    await lists.delete(f"shared/{S}")
    await lists.delete(f"shared/{S}")
    assert await lists.get(f"shared/{S}") == []
    for bad in ("../x", "", "a b", "shared/", "shared/../x", "shared/a/b"):
        with raises(ValueError):  # InvalidSessionIdError is one too
            await lists.set(bad, _PLAN)


@check("persistent")
async def task_lists_seen_by_another_object(ctx: Context) -> None:
    """Task lists live with the store, not the object: another object (another process or
    machine) reads what this one wrote."""
    store = ctx.store
    if not isinstance(store, SupportsTaskLists):
        return
    await store.task_lists().set("shared/plan", _PLAN)
    other = ctx.reopen()
    assert isinstance(other, SupportsTaskLists)
    assert await other.task_lists().get("shared/plan") == _PLAN
    await other.task_lists().delete("shared/plan")
    assert await store.task_lists().get("shared/plan") == []
