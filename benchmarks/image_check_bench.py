"""What checking images costs and saves (#29): peak memory of an image bomb, and the time
of checking the images a session usually sees.

    .venv/bin/python benchmarks/image_check_bench.py

* bomb: an RGB PNG declaring 13,000 x 13,000 px (~490 KB on disk, its pixel stream
  compresses ~1,000:1) put into a prompt as ``{Cell[n]}`` does
  (``jupyter/outputs.image_block``), each in a fresh child process whose peak resident
  memory (``ru_maxrss``) is read at its end. Beside it, the raw reference of the same run:
  what the code before #29 did (Pillow opens it and reduces it to 1,568 px), and a child
  that only imports the same modules. Target: the check adds under 50 MB.
* check: ``tools/imaging.check_image`` on what a session usually sees (a 1,568 x 940 plot
  PNG, a 2,000 x 1,200 one shrunk to fit 1,568 px, a 1,200 x 800 JPEG), median of rounds,
  beside the raw reference of the same run: the downscale before #29 (Pillow open, reduce,
  save) for the image it shrinks, a base64 encode (what a request costs anyway) for the
  others, which the code before #29 sent unchecked.
"""

from __future__ import annotations

import base64
import io
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy
from PIL import Image as PILImage

from lite_agent_jupyter.tools.imaging import check_image

CHILD = """
import resource, sys
from PIL import Image as PILImage
from lite_agent_jupyter.jupyter.outputs import Image, image_block
data = open(sys.argv[2], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if sys.argv[1] == "checked":
    block = image_block(Image("image/png", data))
    assert block["type"] == "text", block
elif sys.argv[1] == "reference":  # the downscale before #29
    import io
    PILImage.MAX_IMAGE_PIXELS = None  # as the old code met it: a warning, not a refusal
    with PILImage.open(io.BytesIO(data)) as pic:
        small = pic.reduce(-(-max(pic.size) // 1568))
        small.save(io.BytesIO(), "PNG", compress_level=1)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(before, after)
"""


def bomb_png(side: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    squeeze = zlib.compressobj(9)
    row = bytes(1 + 3 * side)  # 8-bit RGB, as a plot is
    pixels = b"".join(squeeze.compress(row) for _ in range(side)) + squeeze.flush()
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    signature = b"\x89PNG\r\n\x1a\n"
    return signature + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def peak(mode: str, path: Path) -> tuple[float, float]:
    """``(peak MB of the child, MB its work added)``: ru_maxrss is in KB on Linux."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(path)], check=True, capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    before, after = (int(x) for x in out.stdout.split())
    added = (after - before) / 1024
    print(f"  {mode:>9}: peak {after / 1024:7.1f} MB, +{added:7.1f} MB, {seconds:.2f} s")
    return after / 1024, added


def _median_ms(fn: object, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def _plot(width: int, height: int, fmt: str) -> bytes:
    rng = numpy.random.default_rng(0)
    base = numpy.full((height, width, 3), 255, numpy.uint8)
    base[height // 2 : height // 2 + 30] = rng.integers(0, 256, (30, width, 3), numpy.uint8)
    out = io.BytesIO()
    PILImage.fromarray(base).save(out, fmt, **({"compress_level": 1} if fmt == "PNG" else {}))
    return out.getvalue()


def main() -> None:
    bomb = bomb_png(13_000)
    print(f"bomb: a {len(bomb) / 1024:.0f} KB PNG declaring 13,000 x 13,000 px")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bomb.png"
        path.write_bytes(bomb)
        base, _ = peak("import", path)
        checked, _ = peak("checked", path)
        reference, _ = peak("reference", path)
    print(
        f"bomb: checked +{checked - base:.1f} MB over importing (target < 50 MB); "
        f"the code before #29 +{reference - base:.1f} MB"
    )

    rounds = 15
    from lite_agent_jupyter.tools import imaging

    for name, data, fit in (
        ("1,568 x 940 plot PNG", _plot(1568, 940, "PNG"), None),
        ("2,000 x 1,200 PNG shrunk", _plot(2000, 1200, "PNG"), 1568),
        ("1,200 x 800 JPEG", _plot(1200, 800, "JPEG"), None),
    ):

        def check(data: bytes = data, fit: int | None = fit) -> None:
            imaging._KNOWN.clear()  # a new image each time: no remembered result
            assert not isinstance(check_image(data, fit=fit), str)

        def before(data: bytes = data, fit: int | None = fit) -> None:
            if fit is None:
                base64.b64encode(data)
                return
            with PILImage.open(io.BytesIO(data)) as pic:
                small = pic.reduce(-(-max(pic.size) // fit))
                small.save(io.BytesIO(), "PNG", compress_level=1)

        ms, ref = _median_ms(check, rounds), _median_ms(before, rounds)
        what = "the downscale before #29" if fit else "base64"
        print(f"check: {name} ({len(data) / 1024:.0f} KB): {ms:.1f} ms ({what} {ref:.2f} ms)")


if __name__ == "__main__":
    main()
