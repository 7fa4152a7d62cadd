"""What seeing the notebook costs (#20): output capture per cell, an image in a request, and
drift detection over the exposed variables.

    .venv/bin/python benchmarks/notebook_bench.py

* capture: the hooks ``outputs.install`` puts on an IPython shell (a cell start, a line of
  printed text through the tee, a display bundle, the cell's end) timed per cell, beside the
  same cell loop without them (the raw reference, same run). Target: <= 1 ms per cell.
* image: ``{Cell[n]}`` of a cell holding a 2,000 x 1,200 PNG (downscaled to 1,568 px) turned
  into content blocks, beside the same cell without the image. Target: <= 30 ms added.
* stored image: what the blob store adds to that (``agent/images.py``, a file blob store in a
  temporary folder): storing a plot-sized PNG (1,568 x 940, ~170 KB, a band of busy pixels)
  before its event is appended (new, and the same image again), and putting it back into a
  request after a resume (read from the store, base64); a request within the session reuses
  the text kept when it was stored. Counted in the same 30 ms.
* drift: ``VariableWatch.note`` over 20 exposed variables, one a 1M-row pandas DataFrame
  (sampled fingerprints). Target: <= 20 ms per turn.
"""

from __future__ import annotations

import asyncio
import base64
import io
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy
import pandas
from IPython.core.interactiveshell import InteractiveShell
from PIL import Image as PILImage

from lite_agent_jupyter.agent.images import ImageStore
from lite_agent_jupyter.checkpoint.events import UserEvent
from lite_agent_jupyter.checkpoint.fold import fold
from lite_agent_jupyter.jupyter.drift import VariableWatch
from lite_agent_jupyter.jupyter.outputs import CellOutputs, expand_cells, install
from lite_agent_jupyter.storage import BlobRef, FileBlobStore


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def capture(cells: int = 300) -> tuple[float, float]:
    shell = InteractiveShell.instance()
    source = "x = 1\nx;"

    def loop() -> list[float]:
        times = []
        for _ in range(cells):
            start = time.perf_counter()
            shell.run_cell(source, store_history=True, silent=False)
            times.append(time.perf_counter() - start)
        return times

    raw = loop()
    outputs = CellOutputs()
    install(shell, outputs)
    hooked = loop()
    feeds = []
    for _ in range(cells):  # what a kernel sends through the hooks besides, per cell
        start = time.perf_counter()
        outputs.stream("a line of text\n")
        outputs.message({"msg_type": "display_data", "content": {"data": {"text/plain": "1"}}})
        feeds.append(time.perf_counter() - start)
    return _median_ms(raw), _median_ms(hooked) + _median_ms(feeds)


def image(rounds: int = 20) -> tuple[float, float, float]:
    raw = io.BytesIO()
    PILImage.new("RGB", (2000, 1200), "white").save(raw, "PNG")
    outputs = CellOutputs()
    outputs.start(2, "plot()")
    outputs.stream("drawing\n")
    outputs.finish(2, None)
    outputs.start(3, "plot()")
    outputs.stream("drawing\n")
    outputs.message(
        {
            "msg_type": "display_data",
            "content": {"data": {"image/png": base64.b64encode(raw.getvalue()).decode()}},
        }
    )
    outputs.finish(3, None)

    def build(n: int) -> float:
        start = time.perf_counter()
        expand_cells(f"what is wrong? {{Cell[{n}]}}", outputs, lambda t: t)
        return time.perf_counter() - start

    plain = _median_ms([build(2) for _ in range(rounds)])
    first = build(3)  # the downscale is done once per image and kept
    return plain, first * 1000, _median_ms([build(3) for _ in range(rounds)])


def _plot_pngs(count: int) -> list[bytes]:
    """``count`` different plot-sized PNGs: white, with a band of random pixels (a plot's
    lines and labels compress about as badly)."""
    rng = numpy.random.default_rng(0)
    base = numpy.full((940, 1568, 3), 255, numpy.uint8)
    base[400:430] = rng.integers(0, 256, (30, 1568, 3), numpy.uint8)
    out = []
    for i in range(count):
        base[0, 0, 0] = i  # a different image each time
        raw = io.BytesIO()
        PILImage.fromarray(base).save(raw, "PNG", compress_level=1)
        out.append(raw.getvalue())
    return out


def stored(rounds: int = 20) -> tuple[float, float, float, int]:
    """Median ms to store a new image, to store the same again, to put one back after a
    resume; and the PNG's size."""
    pngs = _plot_pngs(rounds)

    def event(data: bytes) -> UserEvent:
        source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(data)}
        source["data"] = source["data"].decode()  # type: ignore[union-attr]
        return UserEvent(
            content=[{"type": "text", "text": "look"}, {"type": "image", "source": source}]
        )

    async def run(folder: Path) -> tuple[float, float, float]:
        blobs = FileBlobStore(folder / "blobs")
        images = ImageStore(blobs, BlobRef("bench:", "s"))
        new, again, resumed = [], [], []
        for data in pngs:
            start = time.perf_counter()
            [ref] = await images.store([event(data)])
            new.append(time.perf_counter() - start)
            start = time.perf_counter()
            await images.store([event(data)])
            again.append(time.perf_counter() - start)
            messages = fold([ref])
            start = time.perf_counter()
            await ImageStore(blobs, images.ref).resolve(messages)  # a new process: cold
            resumed.append(time.perf_counter() - start)
        return _median_ms(new), _median_ms(again), _median_ms(resumed)

    with tempfile.TemporaryDirectory() as tmp:
        new, again, resumed = asyncio.run(run(Path(tmp)))
    return new, again, resumed, len(pngs[0])


def drift(rounds: int = 20) -> float:
    ns: dict[str, Any] = {
        "big": pandas.DataFrame(
            {"a": numpy.arange(1_000_000), "b": numpy.random.default_rng(0).random(1_000_000)}
        )
    }
    for i in range(19):
        ns[f"v{i}"] = list(range(i * 1000)) if i % 2 else numpy.arange(i * 10_000)
    exposed = list(ns)
    watch = VariableWatch()
    watch.record(ns, exposed)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        watch.note(ns, exposed)
        samples.append(time.perf_counter() - start)
    return _median_ms(samples)


def main() -> None:
    raw, hooked = capture()
    print(f"capture: {raw:.3f} ms/cell raw, {hooked:.3f} ms/cell hooked: +{hooked - raw:.3f} ms")
    plain, first, again = image()
    print(
        f"image: {plain:.3f} ms without; with: +{first - plain:.3f} ms the first time "
        f"(decode + downscale), +{again - plain:.3f} ms after"
    )
    new, again, resumed, size = stored()
    print(
        f"stored image ({size / 1e6:.2f} MB PNG): +{new:.3f} ms to store it, +{again:.3f} ms "
        f"the same again, +{resumed:.3f} ms to put it back after a resume"
    )
    print(
        f"image in a request, first time: +{first - plain + new:.3f} ms "
        "(decode + downscale + store; target <= 30 ms)"
    )
    print(f"drift: {drift():.3f} ms for 20 variables incl. a 1M-row DataFrame")


if __name__ == "__main__":
    main()
