"""A plot the agent saw is stored once by hash in the blob store (#20): the session's log names
it, a kernel restarted (a new process) sends the same bytes again, and ``%agent export`` /
``%agent import`` carries it to another storage root. Real kernels, the real ``anthropic``
client against the fake Messages API server."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from image_helpers import noise_png, sent_images
from nbkernel import SETUP, StartKernel

from lite_agent_jupyter.storage import blob_hash

PNG = noise_png(11)
SHOW = """\
import io, random
from IPython.display import Image, display
from PIL import Image as Picture
rng = random.Random(11)
pixels = bytes(rng.randrange(256) for _ in range(96 * 64 * 3))
drawn = io.BytesIO()
Picture.frombytes("RGB", (96, 64), pixels).save(drawn, "PNG")
display(Image(data=drawn.getvalue()))
"""
"""Draws :data:`PNG` in the kernel (``image_helpers.noise_png``'s way), so the cell's source,
which the prompt quotes, does not hold the image's bytes."""


def logs_of(folder: Path) -> list[Path]:
    found = folder.glob(".lite_agent/*/sessions/*.jsonl")
    return sorted(p for p in found if not p.name.startswith("."))  # not the index


def blob_names(folder: Path) -> list[str]:
    return sorted(p.parent.name + p.name for p in folder.glob(".lite_agent/*/blobs/??/*"))


def test_a_plot_is_one_blob_named_by_the_log_and_a_new_kernel_sends_it_again(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    fake_anthropic: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    kernel = start_kernel(work, fake_env)
    kernel.run(SETUP).check()
    kernel.run(SHOW).check()  # cell 2
    fake_anthropic.script(
        "The plot is noise.",
        FakeReply("Looking again.", tool_calls=[FakeToolCall("cell_output", {"cell": 2})]),
        "Still noise.",
    )
    kernel.run("%%agent\nwhat is wrong with this plot? {Cell[2]}").check()
    kernel.run("%%agent\nlook at cell 2 again").check()
    assert sent_images(fake_anthropic.last_request.messages) == [PNG, PNG]

    [log] = logs_of(work)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    refs = [
        block["source"]
        for event in events
        for block in (event.get("content") if isinstance(event.get("content"), list) else [])
        if block.get("type") == "image"
    ]
    assert (
        refs
        == [{"type": "blob", "media_type": "image/png", "sha256": blob_hash(PNG), "verified": True}]
        * 2
    )  # the prompt's and cell_output's: the same blob twice
    assert base64.b64encode(PNG).decode()[:100] not in log.read_text()
    assert log.stat().st_size < len(PNG)
    assert blob_hash(PNG) in blob_names(work)

    kernel.restart()  # a new process: nothing of the first one's memory is left
    kernel.run(SETUP).check()
    fake_anthropic.script("It is the same noise.")
    kernel.run("%%agent\nand now?").check()
    assert sent_images(fake_anthropic.last_request.messages) == [PNG, PNG]


def test_an_exported_session_carries_its_plot_to_another_root(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    fake_anthropic: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    teacher = start_kernel(home, fake_env)
    teacher.run(SETUP).check()
    teacher.run(SHOW).check()  # cell 2
    fake_anthropic.script("The plot is noise.")
    teacher.run("%%agent\nwhat is wrong with this plot? {Cell[2]}").check()
    exported = teacher.run("%agent export plot.zip").check().stream_text
    assert "1 stored file snapshot(s) and image(s)" in exported, exported

    school = tmp_path / "school"
    school.mkdir()
    (school / "plot.zip").write_bytes((home / "plot.zip").read_bytes())
    student = start_kernel(school, fake_env)
    student.run(SETUP).check()
    student.run("%agent import plot.zip").check()
    assert blob_hash(PNG) in blob_names(school)
    fake_anthropic.script("Noise, as before.")
    student.run("%%agent\nwhat did the plot show?").check()
    assert sent_images(fake_anthropic.last_request.messages) == [PNG]
