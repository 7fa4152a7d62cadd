"""What each executed cell showed: kept from ``%load_ext`` on, so the model can see it.

- :class:`CellOutputs`: the outputs of the last :data:`MAX_CELLS` executed cells (their source,
  stream text, rich displays with ``image/png``/``image/jpeg``, the result and the traceback),
  taken as the kernel sends them (display publisher and display hook hooks, a tee on the
  kernel's stdout/stderr), never by running a cell again. Text is cut at :data:`TEXT_CAP`
  characters with a note, so memory stays bounded.
- :func:`expand_cells`: ``{Cell[n]}`` in a ``%%agent`` prompt becomes cell ``n``'s source and
  outputs; its images go as image content blocks, checked and downscaled past
  :data:`MAX_IMAGE_SIDE` by :func:`~..tools.imaging.check_image` (its declared size read
  before any decoding, decoded within a pixel budget); one that cannot be sent (too large,
  truncated, not an image) is a line of text saying why.
- :func:`cell_output_tool`: the read-only ``cell_output`` tool returning the same.

Why hooks and not ``Out``: ``Out`` holds results only; plots, prints and displays are sent
to the front end and gone. Hooks on what the kernel sends see everything the person saw.
The loop thread (the ``cell_output`` tool) only reads copies taken under a lock.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
import sys
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ToolError
from ..tools.imaging import MODEL_SIDE, check_image, image_note

if TYPE_CHECKING:
    from ..tools import Tool
    from ..tools.imaging import CheckedImage

MAX_CELLS = 200
"""Cells whose outputs are kept (the oldest go first)."""

TEXT_CAP = 20_000
"""Characters of text kept per cell (stream, results, displays together)."""

MAX_IMAGES = 8
"""Images kept per cell (a loop drawing 1,000 plots keeps the first few)."""

MAX_IMAGE_SIDE = MODEL_SIDE
"""Longer side, in pixels, past which an image is downscaled before it goes to the model
(the size the Messages API would scale it to anyway: smaller requests, same picture)."""

IMAGE_TYPES = ("image/png", "image/jpeg")


@dataclass(slots=True)
class Image:
    media_type: str
    data: bytes
    checked: CheckedImage | str | None = None
    """What :func:`checked` made of it (downscaled, or why it is not sent), once made."""


@dataclass(slots=True)
class CellRecord:
    """One executed cell: its source and what it showed, in order."""

    count: int
    source: str
    parts: list[str | Image] = field(default_factory=list)
    displays: dict[str, int] = field(default_factory=dict)
    """display_id -> index in ``parts``: an updated display replaces its earlier output."""
    chars: int = 0
    cut: int = 0
    images_dropped: int = 0

    def add_text(self, text: str) -> None:
        room = TEXT_CAP - self.chars
        if room <= 0:
            self.cut += len(text)
            return
        if len(text) > room:
            self.cut += len(text) - room
            text = text[:room]
        self.chars += len(text)
        if self.parts and isinstance(self.parts[-1], str) and not self.displays:
            self.parts[-1] += text
        else:
            self.parts.append(text)

    def add_bundle(self, data: Mapping[str, Any], display_id: str | None, update: bool) -> None:
        part = _part(data)
        if part is None:
            return
        if isinstance(part, Image) and sum(isinstance(p, Image) for p in self.parts) >= MAX_IMAGES:
            self.images_dropped += 1
            return
        if display_id is not None and display_id in self.displays:
            index = self.displays[display_id]
            old = self.parts[index]
            if isinstance(old, str):
                self.chars -= len(old)
            if isinstance(part, str):
                part = part[: max(0, TEXT_CAP - self.chars)]
                self.chars += len(part)
            self.parts[index] = part
            return
        if update:
            return  # an update of a display shown by another cell
        if isinstance(part, str):
            self.add_text(part if part.endswith("\n") else part + "\n")
            if display_id is not None:
                self.displays[display_id] = len(self.parts) - 1
            return
        self.parts.append(part)
        if display_id is not None:
            self.displays[display_id] = len(self.parts) - 1

    def copy(self) -> CellRecord:
        return CellRecord(
            self.count, self.source, list(self.parts), {}, self.chars, self.cut, self.images_dropped
        )


def _part(data: Mapping[str, Any]) -> str | Image | None:
    for media_type in IMAGE_TYPES:
        raw = data.get(media_type)
        if isinstance(raw, str):
            try:
                return Image(media_type, base64.b64decode(raw, validate=False))
            except (binascii.Error, ValueError):
                continue
        if isinstance(raw, bytes):
            return Image(media_type, raw)
    text = data.get("text/plain")
    if isinstance(text, list):
        text = "".join(str(t) for t in text)
    return text if isinstance(text, str) and text else None


class CellOutputs:
    """The kept outputs of the last :data:`MAX_CELLS` cells, fed by the kernel's hooks."""

    def __init__(self) -> None:
        self._cells: OrderedDict[int, CellRecord] = OrderedDict()
        self._current: CellRecord | None = None
        self._lock = threading.Lock()
        self.enabled: Callable[[], bool] = lambda: True

    # -- feeding (main thread) ---------------------------------------------------------

    def start(self, count: int, source: str) -> None:
        """``pre_run_cell``: a new cell starts (its outputs replace any kept under ``count``)."""
        if not self.enabled():
            self._current = None
            return
        record = CellRecord(count, source)
        with self._lock:
            self._cells.pop(count, None)
            self._cells[count] = record
            while len(self._cells) > MAX_CELLS:
                self._cells.popitem(last=False)
        self._current = record

    def finish(self, count: int | None, error: BaseException | None) -> None:
        """``post_run_cell``: add the traceback of a failed cell and file the cell under its
        execution count (IPython versions differ on the count seen at ``pre_run_cell``)."""
        record, self._current = self._current, None
        if record is None:
            return
        with self._lock:
            if error is not None:
                record.add_text("".join(traceback.format_exception(error)).strip() + "\n")
            if isinstance(count, int) and count != record.count:
                if self._cells.get(record.count) is record:
                    del self._cells[record.count]
                record.count = count
                self._cells.pop(count, None)
                self._cells[count] = record

    def stream(self, text: str) -> None:
        record = self._current
        if record is not None and text:
            with self._lock:
                record.add_text(text)

    def message(self, msg: Any) -> Any:
        """Display publisher / display hook hook: keep the bundle, pass the message on."""
        try:
            record = self._current
            if record is not None and isinstance(msg, dict):
                kind = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
                content = msg.get("content") or {}
                data = content.get("data")
                if isinstance(data, Mapping):
                    transient = content.get("transient") or {}
                    display_id = transient.get("display_id")
                    with self._lock:
                        record.add_bundle(
                            data,
                            display_id if isinstance(display_id, str) else None,
                            kind == "update_display_data",
                        )
        except Exception:  # a hook must never break what the person sees
            pass
        return msg

    # -- reading (any thread) ----------------------------------------------------------

    def get(self, count: int | None) -> CellRecord | None:
        """A copy of cell ``count`` (the newest finished cell when ``None``; ``-n``: the n-th
        newest, so ``{Cell[-1]}`` is the cell run just before the ``%%agent`` cell)."""
        with self._lock:
            if count is None or count < 0:  # -1: the newest finished cell, -2 the one before
                done = [c for c in self._cells.values() if c is not self._current]
                index = -1 if count is None else count
                return done[index].copy() if len(done) >= -index else None
            found = self._cells.get(count)
            return found.copy() if found is not None else None

    def __len__(self) -> int:
        return len(self._cells)


# -------------------------------------------------------------------- the kernel's hooks


class _Tee:
    """Wraps a kernel stream's ``write`` so the text also goes to :class:`CellOutputs`."""

    def __init__(self, stream: Any, outputs: CellOutputs) -> None:
        self.stream = stream
        self.original = stream.write
        self.outputs = outputs

    def __call__(self, text: str) -> Any:
        if isinstance(text, str) and threading.current_thread() is threading.main_thread():
            self.outputs.stream(text)
        return self.original(text)


@dataclass
class Installed:
    """What :func:`install` hooked, for :func:`uninstall`."""

    outputs: CellOutputs
    pre: Callable[[Any], None]
    post: Callable[[Any], None]
    tees: list[_Tee] = field(default_factory=list)
    hooked: list[Any] = field(default_factory=list)

    def untee(self) -> None:
        for tee in self.tees:
            if tee.stream.write is tee:
                tee.stream.write = tee.original
        self.tees.clear()


def install(shell: Any, outputs: CellOutputs) -> Installed:
    """Hook ``outputs`` into ``shell``: cell start and end events, the display publisher and
    display hook (ipykernel's ``register_hook``), a tee on the kernel's stdout/stderr for the
    time of each cell (IPython 9 puts its own tee on them around each cell and takes it off
    after: ours goes on inside it and comes off first). In terminal IPython nothing is shown
    to a front end: only sources and errors are kept."""
    in_kernel = getattr(shell, "kernel", None) is not None

    def pre(info: Any) -> None:
        installed.untee()
        outputs.start(int(shell.execution_count), str(getattr(info, "raw_cell", "") or ""))
        if not in_kernel or outputs._current is None:
            return
        for stream in (sys.stdout, sys.stderr):
            try:
                tee = _Tee(stream, outputs)
                stream.write = tee  # type: ignore[method-assign]
                installed.tees.append(tee)
            except (AttributeError, TypeError):
                pass

    def post(result: Any) -> None:
        installed.untee()
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        count = getattr(result, "execution_count", None)
        outputs.finish(count if isinstance(count, int) else None, error)

    installed = Installed(outputs, pre, post)
    shell.events.register("pre_run_cell", pre)
    shell.events.register("post_run_cell", post)
    for hooked in (getattr(shell, "display_pub", None), getattr(shell, "displayhook", None)):
        if hooked is not None and hasattr(hooked, "register_hook"):
            hooked.register_hook(outputs.message)
            installed.hooked.append(hooked)
    return installed


def uninstall(shell: Any, installed: Installed) -> None:
    for name, fn in (("pre_run_cell", installed.pre), ("post_run_cell", installed.post)):
        with contextlib.suppress(ValueError):
            shell.events.unregister(name, fn)
    for hooked in installed.hooked:
        hooked.unregister_hook(installed.outputs.message)
    installed.untee()


# -------------------------------------------------------------------- what the model sees


def image_block(image: Image) -> dict[str, Any]:
    """An image content block, downscaled to :data:`MAX_IMAGE_SIDE` on its longer side; or
    the text block saying why the image is not sent."""
    found = checked(image)
    if isinstance(found, str):
        return image_note(found)
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": found.media_type,
            "data": base64.b64encode(found.data).decode("ascii"),
        },
    }


def checked(image: Image) -> CheckedImage | str:
    """The image checked and made to fit :data:`MAX_IMAGE_SIDE` (kept: done once per image,
    and a request is built while the person waits), or why it may not be sent. Without
    Pillow (the ``lab`` extra installs it) a sound image goes as it is."""
    found = image.checked
    if found is None:
        found = image.checked = check_image(image.data, image.media_type, fit=MAX_IMAGE_SIDE)
    return found


def cell_blocks(record: CellRecord) -> list[dict[str, Any]]:
    """Cell ``record`` as content blocks: its source and text outputs, then each image."""
    text = [f"Cell [{record.count}]:\n```python\n{record.source.rstrip()}\n```\n"]
    images: list[dict[str, Any]] = []
    out: list[str] = []
    for part in record.parts:
        if isinstance(part, str):
            out.append(part)
            continue
        block = image_block(part)
        if block["type"] == "image":
            out.append(f"[image {len(images) + 1}: {block['source']['media_type']}]\n")
            images.append(block)
        else:  # why it is not sent
            out.append(f"{block['text']}\n")
    if out:
        text.append("Output:\n" + "".join(out).rstrip() + "\n")
    else:
        text.append("(no output)\n")
    if record.cut:
        text.append(f"[output cut: {record.cut} more characters not kept]\n")
    if record.images_dropped:
        text.append(f"[{record.images_dropped} more images not kept]\n")
    return [{"type": "text", "text": "".join(text)}, *images]


_CELL = re.compile(r"\{Cell\[(-?\d+)\]\}")


def has_cell_refs(prompt: str) -> bool:
    return _CELL.search(prompt) is not None


def expand_cells(
    prompt: str, outputs: CellOutputs | None, fill: Callable[[str], str]
) -> tuple[str | list[dict[str, Any]], int]:
    """``{Cell[n]}`` -> cell ``n``'s blocks; ``fill`` interpolates the prompt's own text.
    Returns the prompt (a string when no cell was put in) and the number of images."""
    if outputs is None or not has_cell_refs(prompt):
        return fill(prompt), 0
    blocks: list[dict[str, Any]] = []
    text: list[str] = []
    images = 0
    last = 0
    for match in _CELL.finditer(prompt):
        text.append(fill(prompt[last : match.start()]))
        last = match.end()
        record = outputs.get(int(match.group(1)))
        if record is None:
            text.append(match.group(0))
            continue
        found = cell_blocks(record)
        text.append(found[0]["text"])
        if len(found) > 1:
            blocks.append({"type": "text", "text": "".join(text)})
            text = []
            blocks.extend(found[1:])
            images += len(found) - 1
    text.append(fill(prompt[last:]))
    if not blocks:
        return "".join(text), 0
    tail = "".join(text)
    if tail.strip():
        blocks.append({"type": "text", "text": tail})
    return blocks, images


def cell_output_tool(outputs: CellOutputs) -> Tool:
    """The read-only ``cell_output`` tool over ``outputs``."""
    from ..tools import tool

    def cell_output(cell: int | None = None) -> list[dict[str, Any]]:
        """Show an executed notebook cell: its source and what it output (printed text,
        results, tracebacks, and plots/images as images). Read-only.

        Args:
            cell: The execution count of the cell (the n of In[n]); the newest cell when
                omitted.
        """
        record = outputs.get(cell)
        if record is None:
            which = "no executed cell yet" if cell is None else f"no kept output for cell {cell}"
            raise ToolError(f"{which} (the last {MAX_CELLS} cells since %load_ext are kept)")
        return cell_blocks(record)

    return tool(cell_output, kind="read")


def bundle_images(bundles: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The image blocks of display bundles (``run_cell``'s displays), at most MAX_IMAGES."""
    found = [p for b in bundles if isinstance(p := _part(b), Image)]
    return [image_block(i) for i in found[:MAX_IMAGES]]
