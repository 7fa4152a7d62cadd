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


def sent_images(messages: list[dict[str, Any]]) -> list[bytes]:
    """The bytes of every image block of a request, tool results included, in order; fails
    on an image that is not inline base64 (a reference must never reach a model)."""

    def walk(content: Any) -> list[bytes]:
        found: list[bytes] = []
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "image":
                assert block["source"]["type"] == "base64", block
                found.append(base64.b64decode(block["source"]["data"]))
            elif block.get("type") == "tool_result":
                found += walk(block.get("content"))
        return found

    return [data for message in messages for data in walk(message["content"])]


def sent_media_types(messages: list[dict[str, Any]]) -> list[str]:
    """The ``media_type`` of every image block of a request, in :func:`sent_images`' order."""

    def walk(content: Any) -> list[str]:
        found: list[str] = []
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "image":
                found.append(block["source"]["media_type"])
            elif block.get("type") == "tool_result":
                found += walk(block.get("content"))
        return found

    return [kind for message in messages for kind in walk(message["content"])]


def request_text(messages: list[dict[str, Any]]) -> str:
    """Every text of a request (tool results included), one block a line."""

    def walk(content: Any) -> list[str]:
        if isinstance(content, str):
            return [content]
        found: list[str] = []
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "text":
                found.append(block["text"])
            elif block.get("type") == "tool_result":
                found += walk(block.get("content"))
        return found

    return "\n".join(text for message in messages for text in walk(message["content"]))
