"""Images are stored once by hash in the blob store, not inline in the log (#20): the event
names the blob, a request carries the bytes, collection keeps them while the session lives,
memory mode works, and logs written with inline images (every earlier release) still load.
The real ``anthropic`` client against the fake Messages API server, a real file store."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from image_helpers import image_block, noise_png, sent_images

from lite_agent_jupyter import (
    LiteAgent,
    Storage,
    checkpointer_from_url,
)
from lite_agent_jupyter.agent.images import event_images
from lite_agent_jupyter.checkpoint.events import AssistantEvent, ToolResultEvent, UserEvent, encode
from lite_agent_jupyter.storage import blob_hash
from lite_agent_jupyter.tools import tool

MakeAgent = Callable[..., LiteAgent]


async def test_the_log_names_each_image_by_hash_and_the_store_holds_it_once(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    storage: Storage,
) -> None:
    png = noise_png()
    digest = blob_hash(png)

    @tool
    def plot() -> list[dict[str, Any]]:
        """Draw the plot."""
        return [{"type": "text", "text": "the plot:"}, image_block(png)]

    agent = make_agent(model=claude(), tools=[plot], approvals={"plot": "allow"}, blob_grace=0)
    fake_anthropic.script(
        FakeReply("Drawing it again.", tool_calls=[FakeToolCall("plot", {})]), "Same plot."
    )
    await agent.send([{"type": "text", "text": "what is wrong?"}, image_block(png)])
    first, second = fake_anthropic.message_requests
    assert sent_images(first.messages) == [png]
    assert sent_images(second.messages) == [png, png]  # the prompt's and the tool's

    events = await agent.checkpointer.read(agent.session_id)
    with_images = [e for e in events if event_images(e)]
    assert [type(e) for e in with_images] == [UserEvent, ToolResultEvent]
    assert [event_images(e) for e in with_images] == [[digest], [digest]]
    log_text = "".join(encode(e) for e in events)
    assert base64.b64encode(png).decode()[:200] not in log_text
    assert len(log_text) < len(png)  # the log holds names, not pictures
    blob_files = [p for p in (storage.base / "blobs").glob("??/*")]
    assert [p.parent.name + p.name for p in blob_files] == [digest]  # once

    kept = await agent.collect_blobs()  # no grace: only the session's reference keeps it
    assert digest not in kept.deleted and await agent.blobs.has(digest)
    await agent.delete_session(agent.session_id)
    await agent.wait_maintenance()
    assert not await agent.blobs.has(digest)


async def test_images_in_memory_mode_touch_no_disk(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    storage: Storage,
) -> None:
    png = noise_png(3)
    agent = make_agent(model=claude(), sessions=False)
    fake_anthropic.script("A plot.", "Still the same plot.")
    await agent.send([{"type": "text", "text": "look"}, image_block(png)])
    await agent.send("and again?")
    assert sent_images(fake_anthropic.last_request.messages) == [png]
    assert not storage.root.exists()
    [prompt] = [e for e in await agent.checkpointer.read(agent.session_id) if event_images(e)]
    assert event_images(prompt) == [blob_hash(png)]


async def test_a_log_with_inline_images_from_an_older_release_still_loads(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    png = noise_png(5)
    agent = make_agent(model=claude())
    sid = agent.session_id
    old = UserEvent(
        content=[{"type": "text", "text": "see this"}, image_block(png)],
        origin="user",
        checkpoint=True,
    )
    await agent.checkpointer.append(sid, [old])  # written as releases before #20 did
    await agent.checkpointer.append(
        sid,
        [AssistantEvent(content=[{"type": "text", "text": "I see it."}], stop_reason="end_turn")],
    )
    fake_anthropic.script("Yes, the same one.")
    await agent.send("still there?")
    assert sent_images(fake_anthropic.last_request.messages) == [png]
    stored = (await agent.checkpointer.read(sid))[0]
    assert stored.content == old.content  # left as it was written: inline


async def test_a_missing_image_blob_is_named_not_fatal(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Any,
    storage: Storage,
) -> None:
    png = noise_png(9)
    agent = make_agent(model=claude())
    fake_anthropic.script("A plot.")
    await agent.send([{"type": "text", "text": "look"}, image_block(png)])
    sid = agent.session_id
    await agent.close()
    await storage.blobs.delete(blob_hash(png))  # lost (a damaged store)

    fresh = make_agent(model=claude())
    fresh.resume(sid)
    fake_anthropic.script("I cannot see it any more.")
    await fresh.send("and now?")
    request = fake_anthropic.last_request.messages
    assert sent_images(request) == []
    assert "[an image (image/png) that was here is missing from storage]" in json.dumps(request)


async def test_a_compaction_summarises_the_images_and_keeps_their_blobs(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    png = noise_png(13)
    agent = make_agent(model=claude(), blob_grace=0)
    fake_anthropic.script("A plot.", "Summary: the user showed a noisy plot.")
    await agent.send([{"type": "text", "text": "look"}, image_block(png)])
    result = await agent.compact()
    assert result.after > 0
    assert sent_images(fake_anthropic.message_requests[-1].messages) == [png]  # the summary
    await agent.collect_blobs()  # raw events stay: a restore may go back past the summary
    assert await agent.blobs.has(blob_hash(png))


async def test_only_images_that_come_back_byte_for_byte_are_stored_by_reference() -> None:
    from lite_agent_jupyter.agent.images import ImageStore
    from lite_agent_jupyter.storage import BlobRef, MemoryBlobStore

    store = ImageStore(MemoryBlobStore(), BlobRef("test:", "s"))
    exact = image_block(noise_png(1))
    sizes = ((96, h) for h in range(60, 66))
    png = next(p for p in (noise_png(2, s) for s in sizes) if len(p) % 3)  # bits to spare
    odd = base64.b64encode(png).decode().rstrip("=")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    odd = odd[:-1] + alphabet[alphabet.index(odd[-1]) ^ 1]  # an unused bit set: same bytes
    odd += "=" * (-len(odd) % 4)
    assert base64.b64decode(odd, validate=True) == png
    odd_bits = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": odd},
    }
    extra_key = {**exact, "source": {**exact["source"], "note": "kept"}}
    marked = {**exact, "cache_control": {"type": "ephemeral"}}
    [event] = await store.store([UserEvent(content=[exact, odd_bits, extra_key, marked])])
    assert isinstance(event, UserEvent) and isinstance(event.content, list)
    kept = event.content
    assert kept[0]["source"]["type"] == "blob" and kept[3]["source"]["type"] == "blob"
    assert kept[1] == odd_bits and kept[2] == extra_key  # would not come back the same: inline
    assert kept[3]["cache_control"] == {"type": "ephemeral"}
    fresh = ImageStore(store.blobs, store.ref)  # as after a resume: read from the store
    [message] = await fresh.resolve([{"role": "user", "content": kept}])
    assert message["content"] == [exact, odd_bits, extra_key, marked]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_images_travel_between_backends_and_go_with_their_session(
    backend: str,
    backend_url_for: Callable[[str], str],
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    png = noise_png(17)
    digest = blob_hash(png)
    url = backend_url_for(backend)
    agent = make_agent(model=claude(), checkpointer=checkpointer_from_url(url), blob_grace=0)
    fake_anthropic.script("A plot.")
    await agent.send([{"type": "text", "text": "look"}, image_block(png)])
    sid = agent.session_id
    assert [event_images(e) for e in await agent.checkpointer.read(sid) if event_images(e)] == [
        [digest]
    ]
    again = make_agent(model=claude(), checkpointer=checkpointer_from_url(url))
    again.resume(sid)  # another agent on the same database: as another process would
    fake_anthropic.script("Still a plot.")
    await again.send("and now?")
    assert sent_images(fake_anthropic.last_request.messages) == [png]

    bundle = tmp_path / "plot.zip"
    await agent.export_session(bundle, session_id=sid)
    elsewhere = make_agent(model=claude(), storage=Storage(tmp_path / "elsewhere", "other"))
    await elsewhere.import_session(bundle)
    fake_anthropic.script("The same plot.")
    await elsewhere.send("what did I show you?")
    assert sent_images(fake_anthropic.last_request.messages) == [png]

    await agent.delete_session(sid)
    await agent.wait_maintenance()
    assert not await agent.blobs.has(digest)  # the imported copy lives in its own store
    assert await elsewhere.blobs.has(digest)


async def test_a_request_resolves_only_what_the_session_added_since_the_last() -> None:
    """#32: building a request's messages costs what the turn added, not the session's
    length. Counted, not timed: every Python call and builtin call ``request_messages`` makes
    (a profile hook) is the same after 3 turns as after 300, with an image among the old
    messages, and the image still goes out in each request."""
    import sys

    from lite_agent_jupyter.agent.images import ImageStore
    from lite_agent_jupyter.agent.session import SessionLog
    from lite_agent_jupyter.checkpoint.memory import memory_checkpointer
    from lite_agent_jupyter.storage import BlobRef, MemoryBlobStore

    png = noise_png(4)
    store = ImageStore(MemoryBlobStore(), BlobRef("test:", "s"))
    session = SessionLog(memory_checkpointer(), "s", images=store)
    await session.load()
    await session.append([UserEvent(content=[{"type": "text", "text": "see"}, image_block(png)])])
    await session.append([AssistantEvent(content=[{"type": "text", "text": "seen"}])])

    async def turn(n: int) -> int:
        """One turn's prompt and answer, then the calls its request's messages took."""
        await session.append([UserEvent(content=f"question {n}")])
        await session.request_messages()  # the request of the turn's first call
        await session.append([AssistantEvent(content=[{"type": "text", "text": f"answer {n}"}])])
        await session.append([UserEvent(content=f"question {n}.2")])
        calls = 0

        def count(_frame: object, event: str, _arg: object) -> None:
            nonlocal calls
            calls += event in ("call", "c_call")

        sys.setprofile(count)
        try:
            messages = await session.request_messages()
        finally:
            sys.setprofile(None)
        assert sent_images(messages) == [png]
        assert len(messages) == 2 * n + 3
        return calls

    early = [await turn(n) for n in range(1, 4)]
    for n in range(4, 300):
        await turn(n)
    late = [await turn(n) for n in range(300, 303)]
    assert early == late, (early, late)
