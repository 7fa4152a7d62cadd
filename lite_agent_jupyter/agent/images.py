"""Images in a session's log: stored once by hash in the blob store, named in the event.

An image content block (``{"type": "image", "source": {"type": "base64", ...}}``) in a
``user`` or ``tool_result`` event (a plot put in by ``{Cell[n]}``, what ``cell_output``,
``run_cell``, ``read_file`` or an MCP tool returned) is written to the log as a reference::

    {"type": "image", "source": {"type": "blob", "media_type": "image/png", "sha256": "<hash>"}}

and its bytes go to the session's blob store under the session's blob reference, *before*
the event that names them is appended (the same write-ahead order as file snapshots). So the
same plot sent ten times is one blob, a log stays small, and everything that keeps a
session's blobs alive keeps its images: blob collection (the session's reference), export and
import (:data:`~.bundle.BLOB_REFERRERS`), restores and branches (the reference outlives a
truncation), compaction (raw events stay).

:class:`ImageStore` does both directions for one session: :meth:`~ImageStore.store` before an
append, :meth:`~ImageStore.resolve` when a request is built, putting each reference back as
the base64 block it replaced, byte for byte (so a cassette's key and a replay are what they
were with inline images). The checkpoint layer's fold never sees the blob store: it folds the
references like any block, and this module resolves them on the folded messages.

Every image is checked by :func:`~..tools.imaging.check_image` on the way in, before it is
stored: re-labelled by its content (JPEG bytes labelled ``image/png`` are stored as
``image/jpeg``), shrunk when the API would refuse its size and it can be decoded within the
pixel budget, and otherwise (data that is not base64, a truncated or damaged file, an image
too large: ``image too large: 20,000 × 20,000 px``) replaced by a text note
(``[image not sent: ...]``) with a warning in the log. One bad image in a log would be sent
again with every later prompt and the API would refuse each request: the session would
break for good. A reference made after the check says so (``"verified": true``), so a resume
sends it without decoding it again.

Logs written before these checks are repaired when read: :meth:`ImageStore.resolve` checks
every image it puts into a request that was not checked when stored (a reference without
``verified``, an inline block), once per process, and sends a note in place of a bad one;
the log itself is left as written.

Compatibility: a block is stored by reference only when its base64 decodes and encodes back
to the same text (or was only wrapped in whitespace), and its source has nothing else; a
sound image that would not come back the same stays inline, as logs written before this
module (inline base64) do, and those load and send as they always did. A reference whose
blob is missing or damaged becomes a short text block saying so (with a warning in the log),
so one lost image never makes a session unusable.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import itertools
import logging
import operator
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..checkpoint.events import Event, ToolResultEvent, UserEvent
from ..errors import CorruptLogError
from ..storage import BlobRef, Blobs
from ..tools.imaging import CheckedImage, check_image, image_note

log = logging.getLogger(__name__)

Block = dict[str, Any]
Message = dict[str, Any]

BLOB_SOURCE = "blob"
"""The ``source.type`` of an image stored by reference (never sent to a model)."""
_HASH = re.compile(r"[0-9a-f]{64}")
_BASE64_KEYS = frozenset({"type", "media_type", "data"})


def image_ref(block: Any) -> str | None:
    """The blob hash an image reference block names, else None."""
    if not isinstance(block, dict) or block.get("type") != "image":
        return None
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != BLOB_SOURCE:
        return None
    digest = source.get("sha256")
    return digest if isinstance(digest, str) and _HASH.fullmatch(digest) else None


def _is_inline(block: Any) -> bool:
    """Whether ``block`` is an image block with a base64 source (checked on the way in)."""
    if not isinstance(block, dict) or block.get("type") != "image":
        return False
    source = block.get("source")
    return isinstance(source, dict) and source.get("type") == "base64"


def _decode(data: Any) -> tuple[bytes, bool] | None:
    """``(bytes, strict)`` of base64 text: ``strict`` when it is base64 as the API reads it,
    not when it only decodes once its whitespace (line breaks) is taken out; None when it
    is no base64 at all."""
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True), True
    except (binascii.Error, ValueError):
        pass
    try:
        return base64.b64decode("".join(data.split()), validate=True), False
    except (binascii.Error, ValueError):
        return None


async def _check_inline(source: dict[str, Any]) -> tuple[bytes, bool, CheckedImage] | str:
    """An inline image's ``(bytes, strict, checked)`` (``strict`` as :func:`_decode` says),
    or the reason it may not be sent. One place, so that storing an image and repairing one
    in an old log refuse and re-label it alike."""
    media_type = source.get("media_type")
    label = media_type if isinstance(media_type, str) else None
    decoded = _decode(source.get("data"))
    if decoded is None:
        return f"its data is not base64 (labelled {label})"
    raw, strict = decoded
    checked = await asyncio.to_thread(check_image, raw, label)
    if isinstance(checked, str):
        return checked
    return raw, strict, checked


def _note(block: Block, reason: str) -> Block:
    """The text block standing for an image that may not be sent (its cache mark kept)."""
    note = image_note(reason)
    if "cache_control" in block:
        note["cache_control"] = block["cache_control"]
    return note


def _encode(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _canonical(raw: bytes, data: str) -> bool:
    """Whether ``data`` is exactly ``base64.b64encode(raw)``, without encoding it all again.
    Decoded with ``validate=True`` (alphabet and padding checked), it can differ only in its
    length or in the unused bits of its last group (``"QR=="`` decodes as ``"QQ=="`` does)."""
    if len(data) != 4 * -(-len(raw) // 3):
        return False
    tail = len(raw) % 3 or 3
    return not raw or base64.b64encode(raw[-tail:]).decode("ascii") == data[-4:]


def _nested(block: Any) -> list[Any] | None:
    """The content list inside a block that holds blocks (a ``tool_result``'s)."""
    if isinstance(block, dict) and block.get("type") == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return content
    return None


def _content_of(event: Event) -> Any:
    return event.content if isinstance(event, UserEvent | ToolResultEvent) else None


def event_images(event: Event) -> list[str]:
    """The blob hashes of the image references ``event`` holds (export, import, tests)."""
    return [d for d in _refs(_content_of(event)) if d is not None]


def _refs(content: Any) -> Iterable[str | None]:
    if not isinstance(content, list):
        return
    for block in content:
        yield image_ref(block)
        inner = _nested(block)
        if inner is not None:
            yield from _refs(inner)


def _shared_prefix(old: list[Message], new: list[Message]) -> int:
    """How many leading messages of ``new`` are the very objects at the same places in
    ``old`` (``map`` and ``compress`` in C: a few ns a message, no Python step each)."""
    mismatch = itertools.compress(itertools.count(), map(operator.is_not, old, new))
    return next(mismatch, min(len(old), len(new)))


def _has_inline(content: Any) -> bool:
    if not isinstance(content, list):
        return False
    for block in content:
        if isinstance(block, dict) and block.get("type") == "image":
            source = block.get("source")
            if isinstance(source, dict) and source.get("type") == "base64":
                return True
        inner = _nested(block)
        if inner is not None and _has_inline(inner):
            return True
    return False


def _has_images(content: Any) -> bool:
    """Whether ``content`` holds an image a request needs resolved or checked (a reference
    or an inline block): the one scan a message gets, as cheap as looking for references."""
    if not isinstance(content, list):
        return False
    for block in content:
        if isinstance(block, dict) and block.get("type") == "image":
            source = block.get("source")
            if isinstance(source, dict) and source.get("type") in (BLOB_SOURCE, "base64"):
                return True
        inner = _nested(block)
        if inner is not None and _has_images(inner):
            return True
    return False


class ImageStore:
    """One session's images in ``blobs``, recorded as used by ``ref``."""

    __slots__ = ("_data", "_given", "_refs", "_resolved", "blobs", "ref")

    def __init__(self, blobs: Blobs, ref: BlobRef) -> None:
        self.blobs = blobs
        self.ref = ref
        self._given: list[Message] = []
        """The messages of the last :meth:`resolve`, as given: the fold hands out the same
        message objects call after call (a snapshot is the last one's messages and what the
        turn added; a merge replaces the last message), so a request resolves, and scans,
        only the messages after the ones it shares with the last."""
        self._resolved: list[Message] = []
        """Their resolved copies (the message itself where it holds no image)."""
        self._refs: list[tuple[int, list[str]]] = []
        """``(index, hashes)`` of each of those messages resolved to a copy, ascending: the
        images the request holds, without a scan of every message."""
        self._data: dict[str, tuple[str, str] | str] = {}
        """hash -> ``(media type, base64 text)`` of the images the last resolved request
        held, or the reason one may not be sent."""

    # -- writing -----------------------------------------------------------------------

    async def store(self, events: Sequence[Event]) -> list[Event]:
        """``events`` with every inline image stored in the blob store and replaced by a
        reference (the same objects where there was none). Call before the append."""
        out: list[Event] = []
        for event in events:
            content = _content_of(event)
            if _has_inline(content):
                new = await self._store_blocks(content)
                if new is not content:
                    event = dataclasses.replace(event, content=new)  # type: ignore[call-arg]
            out.append(event)
        return out

    async def _store_blocks(self, content: list[Any]) -> list[Any]:
        out: list[Any] = []
        changed = False
        for block in content:
            new = block
            if _is_inline(block):
                new = await self._store_one(block)
            else:
                inner = _nested(block)
                if inner is not None and _has_inline(inner):
                    stored = await self._store_blocks(inner)
                    if stored is not inner:
                        new = {**block, "content": stored}
            changed = changed or new is not block
            out.append(new)
        return out if changed else content

    async def _store_one(self, block: Block) -> Block:
        """An inline image block checked: by reference (its bytes in the blob store), or
        inline and re-labelled when it would not come back the same, or a note."""
        source = block["source"]
        media_type, data = source.get("media_type"), source.get("data")
        found = await _check_inline(source)
        if isinstance(found, str):
            return self._refuse(block, found)
        raw, strict, checked = found
        exact = (
            strict
            and not checked.changed
            and set(source) == _BASE64_KEYS
            and _canonical(raw, str(data))
        )
        if exact or checked.changed or not strict:
            digest = await self.blobs.put(checked.data, ref=self.ref)
            new_source = {
                "type": BLOB_SOURCE,
                "media_type": checked.media_type,
                "sha256": digest,
                "verified": True,
            }
            # the next request sends it
            self._data[digest] = (checked.media_type, str(data) if exact else _encode(checked.data))
            return {k: (new_source if k == "source" else v) for k, v in block.items()}
        if checked.media_type != media_type:  # sound, kept inline: only its label changes
            return {**block, "source": {**source, "media_type": checked.media_type}}
        return block

    def _refuse(self, block: Block, reason: str) -> Block:
        log.warning("an image for session %s is not sent: %s", self.ref, reason)
        return _note(block, reason)

    # -- reading -----------------------------------------------------------------------

    async def resolve(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` with every image reference put back as its base64 block (a message
        without one is passed through as the same object).

        The leading messages that are the very objects the last call was given keep their
        resolved copies; only the rest is scanned and resolved. So a request costs what the
        turn added, not the session's length (the prefix is compared by identity, in C)."""
        given = list(messages)
        kept = _shared_prefix(self._given, given)
        resolved = self._resolved[:kept]
        refs = [entry for entry in self._refs if entry[0] < kept]
        for index in range(kept, len(given)):
            message = given[index]
            content = message.get("content")
            if isinstance(content, list) and _has_images(content):
                blocks = await self._resolve_blocks(content)
                resolved.append({**message, "content": blocks})
                refs.append((index, [d for d in _refs(content) if d is not None]))
            else:
                resolved.append(message)
        self._given, self._resolved, self._refs = given, resolved, refs
        data = self._data
        if data:  # the images of this request only (the same cost: what it holds)
            used = {d for _, digests in refs for d in digests}
            if any(d not in used for d in data):
                self._data = {d: text for d, text in data.items() if d in used}
        return list(resolved)

    async def _resolve_blocks(self, content: list[Any]) -> list[Any]:
        out: list[Any] = []
        for block in content:
            digest = image_ref(block)
            if digest is not None:
                out.append(await self._block(block, digest))
                continue
            if _is_inline(block):
                out.append(await self._inline_block(block))
                continue
            inner = _nested(block)
            if inner is not None and _has_images(inner):
                block = {**block, "content": await self._resolve_blocks(inner)}
            out.append(block)
        return out

    async def _block(self, block: Block, digest: str) -> Block:
        source = block["source"]
        media_type = source.get("media_type")
        found = self._data.get(digest)
        if found is None:
            try:
                raw = await self.blobs.get(digest)
            except (KeyError, CorruptLogError) as exc:
                log.warning("image %s of session %s cannot be read: %s", digest, self.ref, exc)
                return {
                    "type": "text",
                    "text": f"[an image ({media_type}) that was here is missing from storage]",
                }
            if source.get("verified") is True:  # checked when it was stored
                found = (str(media_type), _encode(raw))
            else:  # stored before images were checked: checked now, once
                label = media_type if isinstance(media_type, str) else None
                checked = await asyncio.to_thread(check_image, raw, label)
                if isinstance(checked, str):
                    log.warning("image %s of session %s is not sent: %s", digest, self.ref, checked)
                    found = checked
                else:
                    found = (checked.media_type, _encode(checked.data))
            self._data[digest] = found
        if isinstance(found, str):
            return _note(block, found)
        media_type, data = found
        new_source = {"type": "base64", "media_type": media_type, "data": data}
        return {k: (new_source if k == "source" else v) for k, v in block.items()}

    async def _inline_block(self, block: Block) -> Block:
        """An inline image of a log written before images were checked, as a request may
        carry it (the log is left as it is)."""
        source = block["source"]
        media_type = source.get("media_type")
        found = await _check_inline(source)
        if isinstance(found, str):
            return self._refuse(block, found)
        _, strict, checked = found
        if checked.changed or not strict:
            new_source = {**source, "media_type": checked.media_type, "data": _encode(checked.data)}
        elif checked.media_type != media_type:
            new_source = {**source, "media_type": checked.media_type}
        else:
            return block
        return {k: (new_source if k == "source" else v) for k, v in block.items()}
