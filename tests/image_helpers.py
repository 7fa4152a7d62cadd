"""Images for the tests of stored images (#20) and of image checks (#29): a PNG that does
not compress, a PNG bomb (a small file declaring a huge size), a JPEG, an image's content
block, and the bytes of every image a request carried."""

from __future__ import annotations

import base64
import functools
import io
import random
import struct
import zlib
from collections.abc import Iterable
from typing import Any

from PIL import Image as PILImage


def noise_png(seed: int = 7, size: tuple[int, int] = (96, 64)) -> bytes:
    """A PNG of random pixels (it does not compress, so its bytes are easy to spot)."""
    rng = random.Random(seed)
    pixels = bytes(rng.randrange(256) for _ in range(size[0] * size[1] * 3))
    out = io.BytesIO()
    PILImage.frombytes("RGB", size, pixels).save(out, "PNG")
    return out.getvalue()


@functools.cache
def bomb_png(width: int, height: int) -> bytes:
    """A sound PNG declaring ``width`` x ``height`` black grey pixels, in a few hundred KB:
    its pixel stream (a filter byte and ``width`` zero bytes a row) compresses ~1,000:1, so
    the file is small and decoding it takes ``width * height`` pixels of memory."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit grey, no interlace
    squeeze = zlib.compressobj(9)
    row = bytes(1 + width)
    pixels = b"".join(squeeze.compress(row) for _ in range(height)) + squeeze.flush()
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def jpeg(size: tuple[int, int] = (120, 80), **options: Any) -> bytes:
    """A JPEG of one colour (``options`` go to Pillow's encoder: ``progressive=True``)."""
    out = io.BytesIO()
    PILImage.new("RGB", size, (200, 40, 40)).save(out, "JPEG", **options)
    return out.getvalue()


def image_block(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    """An inline (base64) image content block, as the Messages API takes it."""
    encoded = base64.b64encode(data).decode()
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": encoded},
    }


def content_blocks(content: Any) -> list[dict[str, Any]]:
    """Every content block of one message's (or event's) ``content``, the blocks inside its
    tool results included, in order; text given as a plain string counts as a text block
    (the API's shorthand). The one walk the image helpers below share."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    found: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        found.append(block)
        if block.get("type") == "tool_result":
            found += content_blocks(block.get("content"))
    return found


def image_sources(contents: Iterable[Any]) -> list[dict[str, Any]]:
    """The ``source`` of every image block of these contents, in order."""
    return [
        block["source"]
        for content in contents
        for block in content_blocks(content)
        if block.get("type") == "image"
    ]


def sent_images(messages: list[dict[str, Any]]) -> list[bytes]:
    """The bytes of every image block of a request, tool results included, in order; fails
    on an image that is not inline base64 (a reference must never reach a model)."""
    found: list[bytes] = []
    for source in image_sources(message["content"] for message in messages):
        assert source["type"] == "base64", source
        found.append(base64.b64decode(source["data"]))
    return found


def sent_media_types(messages: list[dict[str, Any]]) -> list[str]:
    """The ``media_type`` of every image block of a request, in :func:`sent_images`' order."""
    return [source["media_type"] for source in image_sources(m["content"] for m in messages)]


def request_text(messages: list[dict[str, Any]]) -> str:
    """Every text of a request (tool results included), one block a line."""
    return "\n".join(
        block["text"]
        for message in messages
        for block in content_blocks(message["content"])
        if block.get("type") == "text"
    )


def accepted_text(request: Any, images: list[bytes], media_types: list[str]) -> str:
    """The text of a request the fake API accepted (status 200) that carried exactly
    ``images``, labelled ``media_types``: what the tests of image checks assert of every
    request, before they look for the notes that stand for the images not sent."""
    assert request.status == 200, request.status
    assert sent_images(request.messages) == images
    assert sent_media_types(request.messages) == media_types
    return request_text(request.messages)
