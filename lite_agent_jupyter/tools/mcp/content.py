"""An MCP tool result as the model reads it: text and images kept, the rest described.

MCP content blocks map to Messages-API blocks: ``text`` stays text; ``image`` becomes an
``image`` block with a base64 source (the model sees the picture); an embedded text resource
becomes text headed by its URI; audio, blobs and resource links become a line of text saying
what was returned (the Messages API takes no audio in tool results). With no content, the
``structuredContent`` is given as JSON. A result of only text is returned as one string.
"""

from __future__ import annotations

import json
from typing import Any

from ..base import ToolOutput

_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def convert_result(result: Any) -> tuple[ToolOutput, bool]:
    """``(output, is_error)`` of an ``mcp.types.CallToolResult``."""
    blocks: list[dict[str, Any]] = []
    for item in getattr(result, "content", None) or []:
        blocks.append(_block(item))
    structured = getattr(result, "structured_content", None)
    if not blocks and structured is not None:
        blocks.append({"type": "text", "text": json.dumps(structured, ensure_ascii=False)})
    is_error = bool(getattr(result, "is_error", False))
    if all(b["type"] == "text" for b in blocks):
        return "\n".join(b["text"] for b in blocks) or "(no output)", is_error
    return blocks, is_error


def _block(item: Any) -> dict[str, Any]:
    kind = getattr(item, "type", None)
    if kind == "text":
        return {"type": "text", "text": str(item.text)}
    if kind == "image":
        mime = str(getattr(item, "mime_type", ""))
        if mime in _IMAGE_TYPES:
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": mime, "data": str(item.data)},
            }
        return {"type": "text", "text": f"[an image of type {mime!r} the model cannot read]"}
    if kind == "resource":
        resource = item.resource
        uri = str(getattr(resource, "uri", ""))
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return {"type": "text", "text": f"[resource {uri}]\n{text}"}
        mime = getattr(resource, "mime_type", None) or "binary"
        return {"type": "text", "text": f"[resource {uri}: {mime} data, not shown]"}
    if kind == "resource_link":
        return {"type": "text", "text": f"[resource link {getattr(item, 'uri', '')}]"}
    if kind == "audio":
        mime = getattr(item, "mime_type", "audio")
        return {"type": "text", "text": f"[{mime} audio, not shown]"}
    return {"type": "text", "text": f"[{kind} content, not shown]"}
