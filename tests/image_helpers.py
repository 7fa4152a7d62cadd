"""Images for the tests of stored images (#20): a PNG that does not compress, its content
block, and the bytes of every image a request carried."""

from __future__ import annotations

import base64
import io
import random
from typing import Any

from PIL import Image as PILImage


def noise_png(seed: int = 7, size: tuple[int, int] = (96, 64)) -> bytes:
    """A PNG of random pixels (it does not compress, so its bytes are easy to spot)."""
    rng = random.Random(seed)
    pixels = bytes(rng.randrange(256) for _ in range(size[0] * size[1] * 3))
    out = io.BytesIO()
    PILImage.frombytes("RGB", size, pixels).save(out, "PNG")
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
