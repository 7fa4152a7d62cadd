"""A notebook's images are checked before they go to the model (#29), through ``{Cell[n]}``
in a real kernel: a PNG of a few hundred KB declaring 13,000 × 13,000 px is described in
text from its header (never decoded: the old code decoded it, ~1.3 GB of the kernel's
memory, and sent it), a truncated one is described, JPEG bytes displayed as ``image/png``
go as ``image/jpeg``. The real ``anthropic`` client against the fake Messages API server,
which refuses bad images as the real API does."""

from __future__ import annotations

import base64

from fake_anthropic import FakeAnthropicServer
from image_helpers import accepted_text, jpeg, noise_png, sent_images
from nbkernel import Kernel

PHOTO = jpeg((90, 60))
BROKEN = noise_png(31)[:-40]

DRAW = f"""\
import base64, struct, zlib
from IPython.display import Image, display

def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

squeeze = zlib.compressobj(9)
row = bytes(1 + 13_000)
pixels = b"".join(squeeze.compress(row) for _ in range(13_000)) + squeeze.flush()
header = struct.pack(">IIBBBBB", 13_000, 13_000, 8, 0, 0, 0, 0)
signature = b"\\x89PNG\\r\\n\\x1a\\n"
bomb = signature + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
print(f"{{len(bomb):,}} bytes")
display(Image(data=bomb))
display({{"image/png": {base64.b64encode(PHOTO).decode()!r}}}, raw=True)
display({{"image/png": {base64.b64encode(BROKEN).decode()!r}}}, raw=True)
"""


def test_cell_images_are_checked_before_they_reach_the_model(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    drawn = agent_kernel.run(DRAW).check()  # cell 2
    assert " bytes" in drawn.stream_text
    fake_anthropic.script("One picture is readable.")
    cell = agent_kernel.run("%%agent\nwhat did I draw? {Cell[2]}").check()
    assert "One picture is readable." in cell.markdown
    text = accepted_text(fake_anthropic.last_request, [PHOTO], ["image/jpeg"])
    assert "[image not sent: image too large: 13,000 × 13,000 px" in text
    assert "[image 1: image/jpeg]" in text
    assert "[image not sent: a truncated PNG" in text
    assert "1 image from the notebook" in cell.plain

    fake_anthropic.script("Still one.")
    agent_kernel.run("%%agent\nand now?").check()  # the session goes on
    assert fake_anthropic.last_request.status == 200
    assert sent_images(fake_anthropic.last_request.messages) == [PHOTO]
