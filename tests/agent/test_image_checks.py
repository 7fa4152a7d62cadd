"""Images are checked before they are stored or sent (#29): a small file declaring a huge
size is refused from its header, an image the API would refuse is shrunk or described in
text, a broken one (truncated, not base64, not an image) becomes a note, one labelled with
the wrong type is re-labelled by its content, and a log that already holds a bad image is
repaired when a request is built from it. The real ``anthropic`` client against the fake
Messages API server, which refuses bad images as the real API does."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from image_helpers import (
    accepted_text,
    bomb_png,
    image_block,
    image_sources,
    jpeg,
    noise_png,
    request_text,
    sent_images,
    sent_media_types,
)
from mcp_server import JPEG, stdio_entry
from PIL import Image as PILImage

from lite_agent_jupyter import LiteAgent, Storage
from lite_agent_jupyter.agent.images import BLOB_SOURCE
from lite_agent_jupyter.checkpoint.events import (
    AssistantEvent,
    Event,
    ToolResultEvent,
    UserEvent,
    encode,
)
from lite_agent_jupyter.tools import tool

MakeAgent = Callable[..., LiteAgent]


def _sources(events: list[Event]) -> list[dict[str, Any]]:
    """The ``source`` of every image block the events hold, tool results included."""
    return image_sources(e.content for e in events if isinstance(e, UserEvent | ToolResultEvent))


async def test_a_png_declaring_13000_px_a_side_is_described_not_decoded_nor_sent(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    bomb = bomb_png(13_000, 13_000)
    assert len(bomb) < 400_000  # small on disk, 169 megapixels decoded

    @tool
    def render() -> list[dict[str, Any]]:
        """Render the chart."""
        return [{"type": "text", "text": "the chart:"}, image_block(bomb)]

    agent = make_agent(model=claude(), tools=[render], approvals={"render": "allow"})
    fake_anthropic.script(
        FakeReply("Rendering.", tool_calls=[FakeToolCall("render", {})]), "It is too large."
    )
    result = await agent.send([{"type": "text", "text": "look"}, image_block(bomb)])
    assert result.text == "It is too large."
    for request in fake_anthropic.message_requests:
        assert request.status == 200 and sent_images(request.messages) == []
    text = request_text(fake_anthropic.last_request.messages)
    assert text.count("[image not sent: image too large: 13,000 × 13,000 px") == 2
    events = await agent.checkpointer.read(agent.session_id)
    assert _sources(events) == []  # nothing of it is stored
    log = "".join(encode(e) for e in events)
    assert "image too large: 13,000 × 13,000 px" in log

    fake_anthropic.script("Still fine.")
    assert (await agent.send("and now?")).text == "Still fine."  # the session goes on


async def test_a_20000_px_image_is_described_and_an_8000_plus_one_shrunk(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    wide = noise_png(4, (8_001, 2))  # over the API's 8,000 px a side, cheap to decode
    big_jpeg = jpeg((9_000, 600))  # a baseline JPEG: decoded at 1/4 scale
    agent = make_agent(model=claude())
    fake_anthropic.script("Seen.")
    await agent.send(
        [
            {"type": "text", "text": "three pictures"},
            image_block(bomb_png(20_000, 20_000)),
            image_block(wide),
            image_block(big_jpeg, "image/jpeg"),
        ]
    )
    request = fake_anthropic.last_request
    assert request.status == 200
    assert "[image not sent: image too large: 20,000 × 20,000 px" in request_text(request.messages)
    sizes = []
    for data in sent_images(request.messages):
        with PILImage.open(io.BytesIO(data)) as pic:
            sizes.append((pic.format, max(pic.size)))
    assert [kind for kind, _ in sizes] == ["PNG", "JPEG"]
    assert all(1_000 < side <= 1_568 for _, side in sizes), sizes  # what the model sees
    assert sent_media_types(request.messages) == ["image/png", "image/jpeg"]


async def test_broken_and_mislabelled_images_are_noted_and_relabelled(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    png = noise_png(21)
    photo = jpeg()
    agent = make_agent(model=claude())
    fake_anthropic.script("Seen.", "Still seen.")
    await agent.send(
        [
            {"type": "text", "text": "five pictures"},
            image_block(png[: len(png) // 2]),  # truncated
            image_block(photo, "image/png"),  # JPEG bytes labelled PNG
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "%%"},
            },
            image_block(b"<svg>not a picture the API reads</svg>", "image/gif"),
        ]
    )
    await agent.send("and again?")  # the log's version: stored checked
    for request in fake_anthropic.message_requests:
        text = accepted_text(request, [photo], ["image/jpeg"])
        assert "[image not sent: a truncated PNG" in text
        assert "[image not sent: its data is not base64 (labelled image/png)]" in text
        assert (
            "[image not sent: not a PNG, JPEG, GIF or WebP image (38 bytes, labelled image/gif)]"
            in text
        )
    [source] = _sources(await agent.checkpointer.read(agent.session_id))
    assert source["type"] == BLOB_SOURCE and source["media_type"] == "image/jpeg"
    assert source["verified"] is True


async def test_an_mcp_servers_bad_images_never_break_the_session(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.script(
        FakeReply("Looking.", tool_calls=[FakeToolCall("t__bad_pictures", {})]),
        "Two could not be read.",
        "Still here.",
    )
    agent = make_agent(
        model=claude(), mcp_servers={"mcpServers": {"t": stdio_entry()}}, approvals="allow"
    )
    assert (await agent.send("show me the pictures")).text == "Two could not be read."
    assert (await agent.send("and now?")).text == "Still here."  # the session goes on
    for request in fake_anthropic.message_requests[1:]:
        text = accepted_text(request, [JPEG], ["image/jpeg"])
        assert "[image not sent: its data is not base64 (labelled image/png)]" in text
        assert "[image not sent: a truncated PNG" in text
    log = "".join(encode(e) for e in await agent.checkpointer.read(agent.session_id))
    assert "not base64 at all!" not in log


async def test_a_log_holding_bad_images_is_repaired_when_read(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    storage: Storage,
) -> None:
    """Written as releases before these checks did: an inline block whose data is not
    base64, an inline JPEG labelled PNG, a reference to a truncated PNG (no ``verified``),
    a tool result holding a PNG bomb. A resumed session sends a valid request."""
    png = noise_png(23)
    photo = jpeg((64, 48))
    agent = make_agent(model=claude())
    sid = agent.session_id
    truncated = await agent.blobs.put(png[:-30], ref=agent._blob_ref(sid))
    bad_text = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "no!"},
    }
    old_ref = {
        "type": "image",
        "source": {"type": "blob", "media_type": "image/png", "sha256": truncated},
    }
    written = [
        UserEvent(
            content=[
                {"type": "text", "text": "see these"},
                bad_text,
                image_block(photo, "image/png"),
                old_ref,
            ],
            origin="user",
            checkpoint=True,
        ),
        AssistantEvent(
            content=[
                {"type": "text", "text": "Rendering."},
                {"type": "tool_use", "id": "toolu_1", "name": "render", "input": {}},
            ],
            stop_reason="tool_use",
        ),
        ToolResultEvent(tool_use_id="toolu_1", content=[image_block(bomb_png(13_000, 13_000))]),
        AssistantEvent(content=[{"type": "text", "text": "I see them."}], stop_reason="end_turn"),
    ]
    await agent.checkpointer.append(sid, written)
    before = [encode(e) for e in await agent.checkpointer.read(sid)]
    await agent.close()

    fresh = make_agent(model=claude())
    fresh.resume(sid)
    fake_anthropic.script("Two of them are broken.")
    assert (await fresh.send("what do you see?")).text == "Two of them are broken."
    request = fake_anthropic.last_request
    text = accepted_text(request, [photo], ["image/jpeg"])
    assert "[image not sent: its data is not base64 (labelled image/png)]" in text
    assert "[image not sent: a truncated PNG" in text
    assert "[image not sent: image too large: 13,000 × 13,000 px" in text
    after = [encode(e) for e in await fresh.checkpointer.read(sid)]
    assert after[: len(before)] == before  # repaired in the request, the log left as written
    assert json.dumps(request.body).count(base64.b64encode(photo).decode()) == 1


async def test_a_verified_reference_is_sent_without_a_second_check(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    monkeypatch: Any,
    workdir: Path,
) -> None:
    png = noise_png(25)
    agent = make_agent(model=claude())
    fake_anthropic.script("A plot.")
    await agent.send([{"type": "text", "text": "look"}, image_block(png)])
    sid = agent.session_id
    await agent.close()

    from lite_agent_jupyter.agent import images

    checks: list[bytes] = []
    real = images.check_image

    def counting(raw: bytes, declared: str | None = None, **options: Any) -> Any:
        checks.append(raw)
        return real(raw, declared, **options)

    monkeypatch.setattr(images, "check_image", counting)
    fresh = make_agent(model=claude())
    fresh.resume(sid)
    fake_anthropic.script("The same plot.")
    await fresh.send("and after a resume?")
    assert sent_images(fake_anthropic.last_request.messages) == [png]
    assert checks == []  # the reference says it was checked when stored
