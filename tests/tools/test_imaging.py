"""The image check on its own (#29): headers read without decoding, the size checked before
anything is decoded, the structure of each format, the pixel budget, Pillow's global bomb
guard left alone, and Pillow imported only when an image is decoded."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import warnings
import zlib
from typing import Any

import pytest
from image_helpers import bomb_png, jpeg, noise_png
from PIL import Image as PILImage

from lite_agent_jupyter.tools import imaging
from lite_agent_jupyter.tools.imaging import (
    PIXEL_BUDGET,
    CheckedImage,
    Header,
    check_image,
    read_header,
)


def _encoded(size: tuple[int, int], fmt: str, **options: Any) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", size, (10, 120, 200)).save(out, fmt, **options)
    return out.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _redeclare(png: bytes, width: int, height: int) -> bytes:
    """``png`` with its header declaring another size (its checksum right)."""
    header = png[16 : 20 + 13 - 4]
    body = b"IHDR" + struct.pack(">II", width, height) + header[8:]
    return png[:12] + body + struct.pack(">I", zlib.crc32(body)) + png[33:]


def _grey_png_of(width: int, height: int, stream: bytes, interlace: int = 0) -> bytes:
    """An 8-bit grey PNG whose pixel stream (each row's filter byte included) is ``stream``,
    as given: the PNGs below are wrong or unusual on purpose, which Pillow will not write."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, interlace)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(stream))
        + _chunk(b"IEND", b"")
    )


def _interlaced_png(width: int, height: int) -> bytes:
    """An Adam7-interlaced 8-bit grey PNG (Pillow writes none), its passes' rows all zero."""
    passes = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4))
    passes += ((1, 0, 2, 2), (0, 1, 1, 2))
    stream = b""
    for x0, y0, dx, dy in passes:
        cols, rows = -(-(width - x0) // dx), -(-(height - y0) // dy)
        if cols > 0 and rows > 0:
            stream += bytes(1 + cols) * rows
    return _grey_png_of(width, height, stream, interlace=1)


@pytest.mark.parametrize(
    ("fmt", "options", "media_type"),
    [
        ("PNG", {}, "image/png"),
        ("JPEG", {}, "image/jpeg"),
        ("JPEG", {"progressive": True}, "image/jpeg"),
        ("GIF", {}, "image/gif"),
        ("WEBP", {}, "image/webp"),
        ("WEBP", {"lossless": True}, "image/webp"),
    ],
)
def test_each_format_is_read_from_its_header_and_passes_as_it_is(
    fmt: str, options: dict[str, Any], media_type: str
) -> None:
    raw = _encoded((37, 23), fmt, **options)
    header = read_header(raw)
    assert header is not None
    assert (header.media_type, header.width, header.height) == (media_type, 37, 23)
    assert header.progressive is bool(options.get("progressive"))
    for label in (None, "image/png", "image/gif"):  # the label is never believed
        checked = check_image(raw, label)
        assert checked == CheckedImage(media_type, raw, 37, 23)


def test_an_interlaced_png_is_counted_pass_by_pass() -> None:
    for size in ((1, 1), (3, 5), (9, 17), (64, 33)):
        raw = _interlaced_png(*size)
        with PILImage.open(io.BytesIO(raw)) as pic:  # Pillow agrees it is whole
            pic.load()
        assert isinstance(check_image(raw), CheckedImage), size
        assert imaging._damage(raw, read_header(raw) or Header("", 0, 0)) is None
        taller = _redeclare(raw, size[0], size[1] + 1)
        assert "short of its declared size" in str(check_image(taller)), size


def _grey_png(width: int, height: int, filters: dict[int, int]) -> bytes:
    """An 8-bit grey PNG of zero rows, row ``i`` starting with filter byte ``filters[i]``."""
    stream = b"".join(bytes([filters.get(i, 0)]) + bytes(width) for i in range(height))
    return _grey_png_of(width, height, stream)


def test_every_rows_filter_byte_is_checked_across_inflated_pieces() -> None:
    assert isinstance(check_image(_grey_png(3_001, 900, {0: 1, 899: 4})), CheckedImage)
    for row in (0, 1, 350, 699, 899):  # 2.7 MB inflated: rows cross the 1 MB pieces
        bad = _grey_png(3_001, 900, {row: 5})
        assert check_image(bad) == "a damaged PNG (a row names no known filter)", row


def test_damage_is_found_without_decoding() -> None:
    png = noise_png(3)
    header = read_header(png)
    assert header is not None
    flipped = bytearray(png)
    flipped[60] ^= 0xFF
    assert "fails its checksum" in (imaging._damage(bytes(flipped), header) or "")
    assert "truncated PNG" in (imaging._damage(png[:-20], header) or "")
    taller = _redeclare(bomb_png(100, 100), 100, 101)
    assert "short of its declared size" in (imaging._damage(taller, read_header(taller)) or "")
    wider = _redeclare(bomb_png(100, 100), 99, 100)
    assert "more pixel data" in (imaging._damage(wider, read_header(wider)) or "")
    photo = jpeg()
    assert "truncated JPEG" in str(check_image(photo[: len(photo) // 2]))
    gif = _encoded((20, 20), "GIF")
    assert "truncated GIF" in str(check_image(gif[:-1]))
    webp = _encoded((20, 20), "WEBP")
    assert "truncated WebP" in str(check_image(webp[:-8]))
    refused = check_image(b"hello", "image/png")
    assert refused == "not a PNG, JPEG, GIF or WebP image (5 bytes, labelled image/png)"


def test_the_size_is_checked_before_decoding_and_pillows_global_guard_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = PILImage.MAX_IMAGE_PIXELS
    opened: list[object] = []
    real_plugin = imaging._plugin
    monkeypatch.setattr(imaging, "_plugin", lambda kind: opened.append(kind) or real_plugin(kind))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no DecompressionBombWarning either
        for side in (13_000, 20_000):
            found = check_image(bomb_png(side, side), "image/png")
            assert isinstance(found, str)
            assert found.startswith(f"image too large: {side:,} × {side:,} px")
            assert f"over the budget of {PIXEL_BUDGET:,}" in found
            found = check_image(bomb_png(side, side), fit=1568)
            assert isinstance(found, str) and "image too large" in found
    assert opened == []  # Pillow never opened them
    assert before == PILImage.MAX_IMAGE_PIXELS


def test_a_baseline_jpeg_is_budgeted_at_its_draft_scale() -> None:
    baseline = Header("image/jpeg", 20_000, 20_000)
    progressive = Header("image/jpeg", 20_000, 20_000, progressive=True)
    assert imaging._decoded_pixels(baseline, 1568) == 2_500 * 2_500  # libjpeg at 1/8
    assert imaging._decoded_pixels(progressive, 1568) == 20_000 * 20_000
    assert imaging._decoded_pixels(Header("image/png", 20_000, 20_000), 1568) == 400_000_000
    shrunk = check_image(jpeg((4_000, 3_000)), fit=1568)
    assert isinstance(shrunk, CheckedImage) and shrunk.changed
    assert (shrunk.media_type, shrunk.width, shrunk.height) == ("image/jpeg", 1_000, 750)


def test_over_the_budget_but_within_the_api_it_goes_as_it_is_checked_by_structure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(imaging, "PIXEL_BUDGET", 10_000)
    raw = noise_png(5, (200, 100))  # 20,000 pixels: not decoded, but sound
    assert check_image(raw, fit=64) == CheckedImage("image/png", raw, 200, 100)
    assert "truncated" in str(check_image(raw[:-30], fit=64))


def test_without_pillow_sound_images_go_as_they_are_and_large_ones_are_described(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(imaging, "_pillow", lambda: False)
    monkeypatch.setattr(imaging, "_plugin", lambda kind: pytest.fail("decoded without Pillow"))
    raw = noise_png(6, (300, 200))
    assert check_image(raw, fit=100) == CheckedImage("image/png", raw, 300, 200)
    assert "truncated" in str(check_image(raw[:-30]))
    wide = noise_png(6, (8_001, 1))
    assert "Pillow, which would shrink it, is not installed" in str(check_image(wide))


def test_pillow_is_imported_only_to_decode() -> None:
    code = (
        "import sys\n"
        "import lite_agent_jupyter, lite_agent_jupyter.agent.images\n"
        "import lite_agent_jupyter.jupyter.outputs\n"
        "from lite_agent_jupyter.tools.imaging import check_image\n"
        "assert 'PIL' not in sys.modules, 'imported at import'\n"
        "check_image(b'not an image')\n"
        "assert 'PIL' not in sys.modules, 'imported for a refusal'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
