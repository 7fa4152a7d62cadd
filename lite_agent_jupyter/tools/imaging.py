"""Images a model may be sent: checked by their content, kept within the API's limits.

Every image a request can carry (a prompt's, a tool's or an MCP server's result, a notebook
plot, one read back from a log) goes through :func:`check_image` before it is stored or
sent. A bad image sent once is sent again with every later prompt of the session (it is in
the log), and the API refuses the whole request each time: so nothing reaches a request that
the API would refuse, and what is refused is said in text (:func:`image_note`) instead.

The steps, cheapest first:

1. **The header** (a few bytes, read here without any decoding): the format by its magic
   bytes (the label is ignored: JPEG bytes labelled ``image/png`` go as ``image/jpeg``), the
   declared width and height.
2. **The size, before anything is decoded.** The Messages API takes at most
   :data:`API_MAX_SIDE` px a side and :data:`API_MAX_BYTES` bytes. A larger image is shrunk
   only if decoding it fits :data:`PIXEL_BUDGET` (a baseline JPEG is decoded at 1/2 to 1/8
   scale by libjpeg's draft mode, so its budget counts the reduced pixels); otherwise it is
   refused as ``image too large: 20,000 × 20,000 px``. A 600 KB PNG declaring 13,000 ×
   13,000 px would take over a gigabyte to decode: it is refused from its 33-byte header.
3. **The structure**, in constant memory: a PNG's chunks are walked to ``IEND`` with their
   CRCs and its pixel stream is inflated piece by piece and counted against what the header
   declares; a JPEG must hold a frame, a scan and the end marker after it; a GIF must end
   with its trailer; a WebP's RIFF size must fit. A truncated or damaged file is refused.
4. **A decode** (Pillow, when installed: the ``lab`` extra), within the budget: the full
   check, and the shrinking when one is needed (to :data:`MODEL_SIDE`, the size the model
   sees anyway). An image that cannot be decoded within the budget but that the API takes as
   it is goes as it is, checked by step 3.

Pillow's own bomb guard (``Image.MAX_IMAGE_PIXELS``) is global to the process, the user's
kernel: it is neither read nor changed here. Each format's plugin class is opened directly
(which skips that guard) and this module's budget is applied to the size the header gives,
before ``load()``. Pillow is imported inside the functions that decode, never at import.
"""

from __future__ import annotations

import functools
import hashlib
import io
import struct
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

API_MAX_SIDE = 8000
"""Pixels a side the Messages API takes at most."""

API_MAX_BYTES = 3_750_000
"""Raw bytes whose base64 stays under the Messages API's 5 MB per image."""

MODEL_SIDE = 1568
"""Longer side the Messages API scales an image down to before the model sees it: what an
image that has to be shrunk anyway is shrunk to (a smaller request, the same picture)."""

PIXEL_BUDGET = 32_000_000
"""Pixels this module decodes at most for one image (about 128 MB at Pillow's 4 bytes a
pixel): a 6,000 × 5,000 px plot is shrunk, a 13,000 × 13,000 px PNG is not decoded."""

MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The formats the Messages API reads."""

_NAMES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}


@dataclass(frozen=True, slots=True)
class Header:
    """What an image's first bytes declare."""

    media_type: str
    width: int
    height: int
    progressive: bool = False
    """A progressive JPEG: libjpeg keeps all of it in memory whatever the scale."""
    png: tuple[int, int, int] = (0, 0, 0)
    """A PNG's bit depth, colour type and interlace method."""


@dataclass(frozen=True, slots=True)
class CheckedImage:
    """An image a request may carry: its true media type and the bytes to send."""

    media_type: str
    data: bytes
    width: int
    height: int
    changed: bool = False
    """Whether ``data`` is a shrunk copy, not the bytes that were checked."""


# ------------------------------------------------------------------------------ header


def read_header(raw: bytes) -> Header | None:
    """The format and declared size of ``raw`` (PNG, JPEG, GIF, WebP), else None. Reads a
    few dozen bytes (a JPEG: its markers up to the frame header); decodes nothing."""
    if raw[:8] == b"\x89PNG\r\n\x1a\n":
        if len(raw) < 29 or raw[12:16] != b"IHDR":
            return None
        width, height = struct.unpack(">II", raw[16:24])
        return Header("image/png", width, height, png=(raw[24], raw[25], raw[28]))
    if raw[:3] == b"\xff\xd8\xff":
        return _jpeg_header(raw)
    if raw[:6] in (b"GIF87a", b"GIF89a") and len(raw) >= 10:
        width, height = struct.unpack("<HH", raw[6:10])
        return Header("image/gif", width, height)
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP" and len(raw) >= 30:
        return _webp_header(raw)
    return None


_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
_PROGRESSIVE = frozenset({0xC2, 0xC6, 0xCA, 0xCE})


def _jpeg_header(raw: bytes) -> Header | None:
    frame = _jpeg_frame(raw)
    if frame is None:
        return None
    marker, at = frame
    if at + 9 > len(raw):
        return None
    height, width = struct.unpack(">HH", raw[at + 5 : at + 9])
    return Header("image/jpeg", width, height, progressive=marker in _PROGRESSIVE)


def _jpeg_frame(raw: bytes) -> tuple[int, int] | None:
    """``(marker, offset)`` of a JPEG's frame header (SOFn), walking its segments."""
    at = 2
    while at + 4 <= len(raw):
        if raw[at] != 0xFF:
            return None
        marker = raw[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _SOF:
            return marker, at
        if marker == 0xDA or marker == 0xD9:  # a scan or the end before any frame
            return None
        if 0xD0 <= marker <= 0xD8 or marker == 0x01:  # markers without a length
            at += 2
            continue
        at += 2 + struct.unpack(">H", raw[at + 2 : at + 4])[0]
    return None


def _webp_header(raw: bytes) -> Header | None:
    kind = raw[12:16]
    if kind == b"VP8 " and raw[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", raw[26:30])
        return Header("image/webp", width & 0x3FFF, height & 0x3FFF)
    if kind == b"VP8L" and raw[20] == 0x2F:
        bits = int.from_bytes(raw[21:25], "little")
        return Header("image/webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if kind == b"VP8X":
        width = int.from_bytes(raw[24:27], "little") + 1
        return Header("image/webp", width, int.from_bytes(raw[27:30], "little") + 1)
    return None


# --------------------------------------------------------------------------- structure


_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_ADAM7: tuple[tuple[int, int, int, int], ...] = (
    (0, 0, 8, 8),
    (4, 0, 8, 8),
    (0, 4, 4, 8),
    (2, 0, 4, 4),
    (0, 2, 2, 4),
    (1, 0, 2, 2),
    (0, 1, 1, 2),
)
"""The seven passes of an interlaced PNG: first column and row, then column and row steps."""
_INFLATE_STEP = 1 << 20


def _damage(raw: bytes, header: Header, *, inflate: bool = True) -> str | None:
    """Why ``raw`` is not a whole, sound image of its format; None when it is. ``inflate``
    False: a PNG's chunks are checked, not its pixel stream (Pillow will decode it and a
    copy it makes is what is sent)."""
    name = _NAMES[header.media_type]
    if header.width == 0 or header.height == 0:
        return f"a damaged {name} (it declares {header.width} × {header.height} px)"
    if header.media_type == "image/png":
        return _png_damage(raw, header, inflate)
    if header.media_type == "image/jpeg":
        frame = _jpeg_frame(raw)  # the main image's, past any thumbnail in its metadata
        scan = raw.find(b"\xff\xda", frame[1]) if frame is not None else -1
        if scan < 0 or raw.rfind(b"\xff\xd9") < scan:
            return "a truncated JPEG (its image data does not end)"
    elif header.media_type == "image/gif":
        if not raw.rstrip(b"\0").endswith(b";"):
            return "a truncated GIF (it has no end marker)"
    elif 8 + struct.unpack("<I", raw[4:8])[0] > len(raw):
        return "a truncated WebP (shorter than its RIFF header says)"
    return None


def _png_rows(header: Header) -> list[tuple[int, int]] | None:
    """``(rows, bytes a row)`` of each pass of a PNG's inflated pixel stream (one pass, or
    the seven of an interlaced one), a row being a filter byte and its pixels; None for an
    impossible bit depth or colour type."""
    depth, colour, interlace = header.png
    if depth not in _DEPTHS.get(colour, ()) or interlace not in (0, 1):
        return None
    bits = depth * _CHANNELS[colour]
    width, height = header.width, header.height
    if interlace == 0:
        return [(height, 1 + (width * bits + 7) // 8)]
    passes = []
    for x0, y0, dx, dy in _ADAM7:
        cols, rows = -(-(width - x0) // dx), -(-(height - y0) // dy)
        if cols > 0 and rows > 0:
            passes.append((rows, 1 + (cols * bits + 7) // 8))
    return passes


class _Filters:
    """Checks the filter byte starting each row of a PNG's pixel stream, fed in pieces:
    a byte over 4 names no filter, and a decoder refuses the image."""

    __slots__ = ("left", "passes", "skip", "width")

    def __init__(self, passes: list[tuple[int, int]]) -> None:
        self.passes = passes[::-1]
        self.left, self.width = self.passes.pop() if self.passes else (0, 1)
        self.skip = 0
        """Bytes of the next piece before its first row starts."""

    def feed(self, piece: bytes) -> bool:
        at = self.skip
        while at < len(piece) and self.left:
            rows = min(self.left, -(-(len(piece) - at) // self.width))
            if max(piece[at : at + (rows - 1) * self.width + 1 : self.width]) > 4:
                return False
            self.left -= rows
            at += rows * self.width
            if not self.left and self.passes:
                self.left, self.width = self.passes.pop()
        self.skip = max(0, at - len(piece))
        return True


def _png_damage(raw: bytes, header: Header, inflate: bool = True) -> str | None:
    """Each chunk's length and CRC, up to ``IEND``; the pixel stream inflated a megabyte at a
    time (memory stays flat whatever the size), each row's filter byte checked and the whole
    counted against the header's size (Pillow decodes a short stream without a word)."""
    passes = _png_rows(header)
    if passes is None:
        return "a damaged PNG (an impossible bit depth or colour type)"
    expected = sum(rows * width for rows, width in passes)
    filters = _Filters(passes)
    inflater = zlib.decompressobj()
    inflated = 0
    view = memoryview(raw)
    at = 8
    while True:
        if at + 12 > len(raw):
            return "a truncated PNG (it ends before its last chunk)"
        length = struct.unpack(">I", raw[at : at + 4])[0]
        kind = bytes(view[at + 4 : at + 8])
        end = at + 8 + length
        if end + 4 > len(raw):
            return "a truncated PNG (it ends inside a chunk)"
        if zlib.crc32(view[at + 4 : end]) != struct.unpack(">I", raw[end : end + 4])[0]:
            return f"a damaged PNG (chunk {kind.decode('latin-1')!r} fails its checksum)"
        if kind == b"IDAT" and inflate:
            data: bytes | memoryview = view[at + 8 : end]
            try:
                while data and not inflater.eof and inflated <= expected:
                    piece = inflater.decompress(data, _INFLATE_STEP)
                    if not filters.feed(piece):
                        return "a damaged PNG (a row names no known filter)"
                    inflated += len(piece)
                    data = inflater.unconsumed_tail
            except zlib.error:
                return "a damaged PNG (its pixel data does not inflate)"
            if inflated > expected:
                return "a damaged PNG (more pixel data than its size declares)"
        elif kind == b"IEND":
            break
        at = end + 4
    if inflate and (not inflater.eof or inflated != expected):
        return "a damaged PNG (its pixel data is short of its declared size)"
    return None


# ---------------------------------------------------------------------------- the check


def check_image(
    raw: bytes, declared: str | None = None, *, fit: int | None = None
) -> CheckedImage | str:
    """``raw`` as a request may carry it, or the reason it may not (text for a note).

    ``declared`` is the label it came with (only named in a reason: the format is read from
    the bytes). ``fit``: shrink it to that many pixels on its longer side when it is larger
    (a notebook plot); without it an image is shrunk only when the API would refuse it."""
    header = read_header(raw)
    if header is None:
        label = f", labelled {declared}" if declared else ""
        return f"not a PNG, JPEG, GIF or WebP image ({_human(len(raw))}{label})"
    width, height = header.width, header.height
    side = max(width, height)
    too_big = side > API_MAX_SIDE or len(raw) > API_MAX_BYTES
    target = min(fit, side) if fit is not None and side > fit else None
    if too_big:
        target = min(target or MODEL_SIDE, side)
    known = _known(raw)
    if known and target is None:
        return CheckedImage(header.media_type, raw, width, height)
    decodable = _pillow() and _decoded_pixels(header, target) <= PIXEL_BUDGET
    if too_big and not decodable:
        return _too_large(header, len(raw))
    if not known:  # a PNG to shrink is decoded and re-encoded: its stream is not counted
        problem = _damage(raw, header, inflate=target is None or not decodable)
        if problem is not None:
            return problem
    if target is None and header.media_type == "image/png":
        _remember(raw)  # its structure is all of it: no decode needed
        return CheckedImage(header.media_type, raw, width, height)
    if not decodable:  # no Pillow, or over the budget: the API takes it as it is
        return CheckedImage(header.media_type, raw, width, height)
    return _decode(raw, header, target)


def image_note(reason: str) -> dict[str, Any]:
    """The text block a request carries in place of an image that may not be sent."""
    return {"type": "text", "text": f"[image not sent: {reason}]"}


def _too_large(header: Header, size: int) -> str:
    width, height = header.width, header.height
    if max(width, height) > API_MAX_SIDE:
        if _pillow():
            how = (
                f"shrinking it would decode {_decoded_pixels(header, MODEL_SIDE):,} pixels, "
                f"over the budget of {PIXEL_BUDGET:,}"
            )
        else:
            how = "Pillow, which would shrink it, is not installed"
        return (
            f"image too large: {width:,} × {height:,} px (the model takes at most "
            f"{API_MAX_SIDE:,} px a side; {how})"
        )
    return (
        f"image too large: {_human(size)}, {width:,} × {height:,} px (the model takes at most "
        f"5 MB of base64)"
    )


def _decoded_pixels(header: Header, target: int | None) -> int:
    """Pixels a decode of this image holds: a baseline JPEG to shrink is decoded at the
    smallest libjpeg scale (1/2, 1/4, 1/8) still at least ``target``."""
    pixels = header.width * header.height
    if target is None or header.media_type != "image/jpeg" or header.progressive:
        return pixels
    scale = 1
    while scale < 8 and max(header.width, header.height) // (scale * 2) >= target:
        scale *= 2
    return -(-header.width // scale) * -(-header.height // scale)


@functools.cache
def _pillow() -> bool:
    """Whether Pillow is installed (the ``lab`` extra): without it nothing is decoded."""
    try:
        import PIL  # noqa: F401
    except ImportError:
        return False
    return True


def _plugin(media_type: str) -> Any:
    """The Pillow class opening ``media_type`` (opened directly: no global bomb check)."""
    if media_type == "image/png":
        from PIL import PngImagePlugin

        return PngImagePlugin.PngImageFile
    if media_type == "image/jpeg":
        from PIL import JpegImagePlugin

        return JpegImagePlugin.JpegImageFile
    if media_type == "image/gif":
        from PIL import GifImagePlugin

        return GifImagePlugin.GifImageFile
    from PIL import WebPImagePlugin

    return WebPImagePlugin.WebPImageFile


def _decode(raw: bytes, header: Header, target: int | None) -> CheckedImage | str:
    name = _NAMES[header.media_type]
    try:
        with _plugin(header.media_type)(io.BytesIO(raw)) as pic:
            if pic.size != (header.width, header.height):
                return f"a damaged {name} (its header and its data disagree on its size)"
            if target is not None and header.media_type == "image/jpeg":
                ratio = max(header.width, header.height) / target
                pic.draft(None, (int(header.width / ratio), int(header.height / ratio)))
            width, height = (header.width, header.height) if header.progressive else pic.size
            if width * height > PIXEL_BUDGET:  # the budget, checked on what load() makes
                return _too_large(header, len(raw))
            pic.load()
            if target is None:
                _remember(raw)
                return CheckedImage(header.media_type, raw, header.width, header.height)
            return _shrink(pic, header, target)
    except Exception as exc:  # Pillow raises many kinds for a bad file
        detail = str(exc)[:160] or type(exc).__name__
        return f"a damaged {name} ({detail})"


def _shrink(pic: Any, header: Header, target: int) -> CheckedImage | str:
    """``pic`` (loaded) reduced by a whole factor to ``target`` px on its longer side (a box
    reduction: ~10x faster than a Lanczos resize), halved again while its encoding is over
    :data:`API_MAX_BYTES`. A JPEG stays a JPEG; anything else becomes a PNG."""
    jpeg = header.media_type == "image/jpeg"
    small = pic if pic.mode in ("L", "RGB", "RGBA", "LA") else pic.convert("RGBA")
    if jpeg and small.mode not in ("L", "RGB"):
        small = small.convert("RGB")
    factor = -(-max(small.size) // target)
    data = b""
    for _ in range(6):
        if factor > 1:
            small = small.reduce(factor)
        out = io.BytesIO()
        if jpeg:
            small.save(out, "JPEG", quality=90)
        else:
            small.save(out, "PNG", compress_level=1)
        data = out.getvalue()
        if len(data) <= API_MAX_BYTES:
            _remember(data)
            media_type = "image/jpeg" if jpeg else "image/png"
            return CheckedImage(media_type, data, small.size[0], small.size[1], changed=True)
        factor = 2
    return _too_large(header, len(data))


# ------------------------------------------------------------------ known good images

_KNOWN: OrderedDict[bytes, None] = OrderedDict()
_KNOWN_MAX = 256
_KNOWN_LOCK = threading.Lock()


def _remember(data: bytes) -> None:
    """Note that ``data`` passed a full check (a notebook plot is checked when its block is
    made and again before it is stored: the second time costs a hash, not a decode)."""
    digest = hashlib.sha256(data).digest()
    with _KNOWN_LOCK:
        _KNOWN[digest] = None
        _KNOWN.move_to_end(digest)
        while len(_KNOWN) > _KNOWN_MAX:
            _KNOWN.popitem(last=False)


def _known(data: bytes) -> bool:
    digest = hashlib.sha256(data).digest()
    with _KNOWN_LOCK:
        return digest in _KNOWN


def _human(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"
