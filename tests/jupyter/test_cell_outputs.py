"""The agent sees the notebook's outputs (#20): from ``%load_ext`` on the kernel keeps what each
cell showed (text, plots, errors), ``{Cell[n]}`` puts a cell into a prompt with its images as
image blocks, and the read-only ``cell_output`` tool returns the same. A real kernel, the real
``anthropic`` client against the fake Messages API server."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from mcp_server import PNG
from nbkernel import SETUP, Kernel, StartKernel

SHOW_PNG = f"""\
import base64
from IPython.display import Image, display
print("drawing the plot")
display(Image(data=base64.b64decode({base64.b64encode(PNG).decode()!r})))
"""


def _images(content: Any) -> list[bytes]:
    """The bytes of every image block in a message's content (tool results included)."""
    found: list[bytes] = []
    if not isinstance(content, list):
        return found
    for block in content:
        if block.get("type") == "image":
            found.append(base64.b64decode(block["source"]["data"]))
        elif block.get("type") == "tool_result":
            found += _images(block.get("content"))
    return found


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if block.get("type") == "text":
            parts.append(block["text"])
        elif block.get("type") == "tool_result":
            parts.append(_text(block.get("content") or ""))
    return "\n".join(parts)


def test_cell_ref_sends_the_plot_as_one_image_block(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    plot = agent_kernel.run(SHOW_PNG).check()  # cell 2 (the fixture's setup is cell 1)
    assert "drawing the plot" in plot.stream_text
    fake_anthropic.script("The plot is a single dot: nothing is plotted.")
    cell = agent_kernel.run("%%agent\nwhat is wrong with this plot? {Cell[2]}").check()
    assert "a single dot" in cell.markdown
    prompt = fake_anthropic.last_request.messages[-1]["content"]
    assert _images(prompt) == [PNG], prompt
    assert "1 image from the notebook" in cell.plain
    text = _text(prompt)
    assert "what is wrong with this plot?" in text
    assert "display(Image(" in text and "drawing the plot" in text
    assert "{Cell[2]}" not in text


def test_cell_output_tool_returns_the_image_and_errors(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    agent_kernel.run(SHOW_PNG).check()  # cell 2
    failed = agent_kernel.run("1 / 0")  # cell 3
    assert failed.status == "error"
    fake_anthropic.script(
        FakeReply("Looking.", tool_calls=[FakeToolCall("cell_output", {"cell": 2})]),
        FakeReply("And the newest.", tool_calls=[FakeToolCall("cell_output", {})]),
        "The plot is a dot and cell 3 divides by zero.",
    )
    agent_kernel.run("%%agent\nlook at my cells").check()
    requests = fake_anthropic.message_requests
    first = requests[1].messages[-1]["content"]
    assert _images(first) == [PNG]
    assert "drawing the plot" in _text(first)
    newest = _text(requests[2].messages[-1]["content"])
    assert "1 / 0" in newest and "ZeroDivisionError" in newest


def test_share_outputs_false_sends_no_output(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    agent_kernel.run("%config LiteAgentMagics.share_outputs = False").check()  # cell 2
    agent_kernel.run(SHOW_PNG).check()  # cell 3
    fake_anthropic.script("Nothing to see.")
    agent_kernel.run("%%agent\nwhat is wrong? {Cell[3]}").check()
    request = fake_anthropic.last_request
    content = request.messages[-1]["content"]
    assert _text(content) == "what is wrong? {Cell[3]}" and _images(content) == []
    assert "cell_output" not in {t["name"] for t in request.body.get("tools", [])}


def test_large_images_are_downscaled_and_outputs_are_bounded() -> None:
    import io

    from PIL import Image as PILImage

    from lite_agent_jupyter.jupyter.outputs import (
        MAX_CELLS,
        MAX_IMAGE_SIDE,
        TEXT_CAP,
        CellOutputs,
        Image,
        cell_blocks,
        image_block,
    )

    raw = io.BytesIO()
    PILImage.new("RGB", (3000, 1000), "white").save(raw, "PNG")
    block = image_block(Image("image/png", raw.getvalue()))
    with PILImage.open(io.BytesIO(base64.b64decode(block["source"]["data"]))) as small:
        assert max(small.size) <= MAX_IMAGE_SIDE and small.size == (1500, 500)
    assert image_block(Image("image/png", PNG))["source"]["data"] == base64.b64encode(PNG).decode()

    outputs = CellOutputs()
    for n in range(1, MAX_CELLS + 11):
        outputs.start(n, f"print({n})")
        outputs.stream("x" * (TEXT_CAP + 500) if n == MAX_CELLS + 10 else f"{n}\n")
        outputs.finish(n, None)
    assert len(outputs) == MAX_CELLS
    assert outputs.get(10) is None and outputs.get(11) is not None
    newest = outputs.get(None)
    assert newest is not None and newest.count == MAX_CELLS + 10
    before = outputs.get(-2)  # {Cell[-2]}: counted back from the newest finished cell
    assert before is not None and before.count == MAX_CELLS + 9
    assert outputs.get(-MAX_CELLS - 1) is None
    text = cell_blocks(newest)[0]["text"]
    assert "[output cut: 500 more characters not kept]" in text
    assert len(text) < TEXT_CAP + 200


def test_propose_cell_puts_code_in_a_new_cell_and_runs_nothing(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("No tool.")
    agent_kernel.run("%%agent\nhi").check()
    assert "propose_cell" not in {t["name"] for t in fake_anthropic.last_request.body["tools"]}
    agent_kernel.run("%config LiteAgentMagics.kernel_tools = True").check()
    fake_anthropic.script(
        FakeReply(
            "Proposing.",
            tool_calls=[FakeToolCall("propose_cell", {"code": "proposed_value = 42"})],
        ),
        "It is in the cell below; run it when you are ready.",
    )
    cell = agent_kernel.run("%%agent\nset proposed_value to 42").check()
    [payload] = [p for p in cell.payload if p.get("source") == "set_next_input"]
    # tagged with the prompt's checkpoint: the id %agent restore takes (prompt 2 here)
    tag = re.match(r"# proposed by the agent at prompt (2-[a-z2-7]{4}) \(session ", payload["text"])
    assert tag is not None, payload["text"]
    assert re.search(rf"%agent restore {tag.group(1)}\b", cell.plain), cell.plain
    assert "proposed_value = 42" in payload["text"] and payload["replace"] is False
    shown = agent_kernel.run("print('proposed_value' in globals())").check()
    assert shown.stream_text.strip() == "False"  # proposed, not run


def test_a_recorded_plot_question_replays_identically_offline(
    start_kernel: StartKernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_anthropic.script(
        FakeReply("Looking again.", tool_calls=[FakeToolCall("cell_output", {"cell": 2})]),
        "The plot is one dot: the data has a single point.",
    )
    home = start_kernel(tmp_path / "home", fake_anthropic.client_env())
    home.run(SETUP).check()
    home.run(SHOW_PNG).check()  # cell 2
    home.run("%agent record plot.jsonl").check()
    recorded = home.run("%%agent\nwhat is wrong with this plot? {Cell[2]}").check()
    assert "1 image from the notebook" in recorded.plain
    cassette = (tmp_path / "home" / "plot.jsonl").read_bytes()
    assert base64.b64encode(PNG) in cassette  # the image is in the recording

    school = tmp_path / "school"
    school.mkdir()
    (school / "plot.jsonl").write_bytes(cassette)
    offline = start_kernel(school, {"ANTHROPIC_API_KEY": None, "ANTHROPIC_BASE_URL": None})
    offline.run(SETUP).check()
    offline.run(SHOW_PNG).check()  # cell 2 again
    offline.run("%agent replay plot.jsonl --speed 0").check()
    before = len(fake_anthropic.message_requests)
    replayed = offline.run("%%agent\nwhat is wrong with this plot? {Cell[2]}").check()
    assert "The plot is one dot: the data has a single point." in replayed.markdown

    def answer(markdown: str) -> str:  # the turn itself: no replay note, no footer
        turn = "Looking again." + markdown.split("Looking again.", 1)[1].rsplit("<sub>", 1)[0]
        # a call's time is the machine's, not the recording's ("done (0.1 s)" under load)
        return re.sub(r"\(\d+(?:\.\d+)? s\)", "(… s)", turn)

    assert "cell_output 2" in answer(recorded.markdown)
    assert answer(replayed.markdown) == answer(recorded.markdown)
    assert "1 image from the notebook" in replayed.plain
    assert len(fake_anthropic.message_requests) == before  # nothing went to a server
