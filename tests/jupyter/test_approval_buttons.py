"""Approval buttons: the widget logic in this process, and the whole path in a real kernel
where this test plays the widget front end (it answers the view count and sends the click as
comm messages while the ``%%agent`` cell waits). The same in Chromium: tests/browser."""

from __future__ import annotations

import asyncio
import queue
import time
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, tool_reply
from nbkernel import Cell, Kernel, StartKernel
from payloads import HIDDEN_CODE, TAGGED_CODE

from lite_agent_jupyter.agent import ApprovalRequest
from lite_agent_jupyter.jupyter import approval

REQUEST = ApprovalRequest(
    tool_name="write_file",
    input={"path": "hello.py", "content": "print('hi')\n"},
    kind="write",
    session_id="s1",
    tool_use_id="t1",
)


def test_first_click_decides_and_disables_the_buttons() -> None:
    buttons = approval.ApprovalButtons(REQUEST)
    buttons.deny.click()
    buttons.allow.click()
    assert buttons.decision.result(0) is False
    assert buttons.allow.disabled and buttons.deny.disabled
    assert "hello.py" in buttons.question.value


def test_a_view_reported_by_the_front_end_marks_it_rendered() -> None:
    buttons = approval.ApprovalButtons(REQUEST)
    assert buttons.widget._view_count == 0  # tracking on
    assert not buttons.rendered.done()
    buttons.widget._view_count = 1  # what the front end syncs when it shows the view
    assert buttons.rendered.done()


async def _shown(texts: list[str], timeout: float) -> tuple[asyncio.Future[Any], Any]:
    """Start ``ask_with_buttons`` for :data:`REQUEST` (its text lines into ``texts``, the
    render wait ``timeout``); the task and the box it showed, once shown."""
    shown: list[Any] = []
    task = asyncio.ensure_future(
        approval.ask_with_buttons(REQUEST, shown.append, texts.append, render_timeout=timeout)
    )
    while not shown:
        await asyncio.sleep(0.01)
    return task, shown[0]


def _ask(clicks: str, *, render: bool, timeout: float = 5.0) -> tuple[bool | None, list[str]]:
    texts: list[str] = []

    async def main() -> bool | None:
        task, box = await _shown(texts, timeout)
        if render:
            box._view_count = 1
        for click in clicks:
            buttons = box.children[1].children
            (buttons[0] if click == "a" else buttons[1]).click()
        decided = await task
        return None if decided is None else decided.allowed

    return asyncio.run(main()), texts


def test_ask_with_buttons_returns_the_click_and_leaves_a_text_line() -> None:
    assert _ask("a", render=True) == (True, ["allowed: write_file hello.py"])
    assert _ask("d", render=True) == (False, ["denied: write_file hello.py"])


def test_no_front_end_renders_the_buttons_so_the_caller_asks_another_way() -> None:
    decided, texts = _ask("", render=False, timeout=0.2)
    assert decided is None
    assert texts == ["no widget front end here; asking below: write_file hello.py"]


def test_interrupt_while_waiting_replaces_the_buttons() -> None:
    texts: list[str] = []

    async def main() -> None:
        task, box = await _shown(texts, 30)
        box._view_count = 1
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert texts == ["interrupted: write_file hello.py"]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            ["get_ipython().run_cell_magic('agent', '--new', 'hi {x}\\n')\n"],
            "await __import__('lite_agent_jupyter.jupyter', fromlist=['agent_cell_async'])"
            ".agent_cell_async('--new', 'hi {x}\\n')\n",
        ),
        (["get_ipython().run_cell_magic('timeit', '', 'x\\n')\n"], None),
        (["x = 1\n", "get_ipython().run_cell_magic('agent', '', 'hi')\n"], None),
        (["print('run_cell_magic')\n"], None),
        (
            ["get_ipython().run_line_magic('agent', 'restore 2 --force')\n"],
            "await __import__('lite_agent_jupyter.jupyter', fromlist=['agent_line_async'])"
            ".agent_line_async('restore 2 --force')\n",
        ),
        (
            ["get_ipython().run_line_magic('agent', 'undo')\n"],
            "await __import__('lite_agent_jupyter.jupyter', fromlist=['agent_line_async'])"
            ".agent_line_async('undo')\n",
        ),
        (
            ["get_ipython().run_line_magic('agent', 'go')\n"],
            "await __import__('lite_agent_jupyter.jupyter', fromlist=['agent_go_async'])"
            ".agent_go_async('')\n",
        ),
        (["get_ipython().run_line_magic('agent', 'checkpoints')\n"], None),
        (["x = 1\n", "get_ipython().run_line_magic('agent', 'restore 2')\n"], None),
    ],
)
def test_only_agent_cells_become_coroutines(lines: list[str], expected: str | None) -> None:
    out = approval.async_cell_transform(lines)
    assert out == (lines if expected is None else [expected])


# ---------------------------------------------------------------- in a real kernel


def _comm_msg(kernel: Kernel, comm_id: str, data: dict[str, Any]) -> None:
    msg = kernel.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
    kernel.kc.shell_channel.send(msg)


def _run_answering(
    kernel: Kernel,
    code: str,
    answer: str | None,
    models: dict[str, dict[str, Any]] | None = None,
) -> Cell:
    """Run ``code`` as a widget front end would: when the approval prompt opens, report a
    view of it and click ``answer`` ("Allow"/"Deny"; "interrupt": interrupt the kernel
    instead; ``None``: report no view, click nothing). ``models`` gets the state of every
    widget model the kernel opened, by comm id."""
    msg_id = str(kernel.kc.execute(code, allow_stdin=True, stop_on_error=True))
    cell = Cell(msg_id)
    models = {} if models is None else models
    replied = idle = False
    while not (replied and idle):  # a hang ends by the suite's pytest-timeout
        try:
            msg = kernel.kc.get_iopub_msg(timeout=0.05)
        except queue.Empty:
            msg = None
        if msg is not None and msg["parent_header"].get("msg_id") == msg_id:
            kind = msg["msg_type"]
            if kind == "comm_open":
                state = msg["content"]["data"]["state"]
                models[msg["content"]["comm_id"]] = state
                if state.get("_model_name") == "VBoxModel" and state.get("_view_count") == 0:
                    box = msg["content"]["comm_id"]
                    children = [c.removeprefix("IPY_MODEL_") for c in state["children"]]
                    buttons = models[children[1]]["children"]
                    labels = {
                        models[b.removeprefix("IPY_MODEL_")]["description"]: b.removeprefix(
                            "IPY_MODEL_"
                        )
                        for b in buttons
                    }
                    if answer is not None:
                        _comm_msg(kernel, box, {"method": "update", "state": {"_view_count": 1}})
                        time.sleep(0.3)  # a person reading the question
                        if answer == "interrupt":
                            kernel.interrupt()  # the stop button instead of an answer
                        else:
                            _comm_msg(
                                kernel,
                                labels[answer],
                                {"method": "custom", "content": {"event": "click"}},
                            )
            elif kind == "status":
                idle = msg["content"]["execution_state"] == "idle"
            elif kind not in ("execute_input", "comm_msg", "comm_close"):
                cell.add(msg)
        try:
            reply = kernel.kc.get_shell_msg(timeout=0)
        except queue.Empty:
            continue
        if reply["parent_header"].get("msg_id") == msg_id:
            cell.status = reply["content"]["status"]
            replied = True
    return cell


WRITE = "%%agent\nWrite hello.py"


@pytest.fixture
def ask_kernel(
    start_kernel: StartKernel, fake_env: dict[str, str | None], tmp_path: Path
) -> Kernel:
    """A kernel in ``tmp_path/work`` with the extension loaded and approvals "ask" (the
    default)."""
    kernel = start_kernel(tmp_path / "work", fake_env)
    kernel.run("%load_ext lite_agent_jupyter").check()
    return kernel


def _write_hello(text: str = "I'll write it.") -> FakeReply:
    return tool_reply(text, "write_file", path="hello.py", content="hi\n")


@pytest.fixture
def write_kernel(ask_kernel: Kernel, fake_anthropic: FakeAnthropicServer) -> Kernel:
    """:func:`ask_kernel`, its model scripted to write hello.py, then to say "Finished."."""
    fake_anthropic.script(_write_hello(), FakeReply("Finished."))
    return ask_kernel


def test_allow_clicked_while_the_turn_waits_runs_the_tool(
    write_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    cell = _run_answering(write_kernel, WRITE, "Allow").check()
    assert (tmp_path / "work" / "hello.py").read_text() == "hi\n"
    assert "allowed: write_file hello.py" in cell.html
    assert "Finished." in cell.html
    # the model got the tool's real result
    result = fake_anthropic.message_requests[1].messages[-1]["content"][0]
    assert result["type"] == "tool_result" and not result.get("is_error")


def test_deny_clicked_leaves_the_file_unwritten_and_tells_the_model(
    write_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    cell = _run_answering(write_kernel, WRITE, "Deny").check()
    assert not (tmp_path / "work" / "hello.py").exists()
    assert "denied: write_file hello.py" in cell.html
    result = fake_anthropic.message_requests[1].messages[-1]["content"][0]
    assert result["is_error"] is True and "denied" in str(result["content"])


def test_interrupt_while_the_buttons_wait_stops_the_turn_cleanly(
    ask_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_anthropic.script(_write_hello(), "Still here.")
    cell = _run_answering(ask_kernel, WRITE, "interrupt")
    assert cell.status == "error"
    assert cell.error is not None and cell.error["ename"] == "AgentInterrupted", cell.error_text
    assert "interrupted: write_file hello.py" in cell.html
    assert not (tmp_path / "work" / "hello.py").exists()
    ask_kernel.run("%config LiteAgentMagics.approvals = 'allow'").check()
    after = ask_kernel.run("%%agent\nare you there?").check()
    assert "Still here." in after.html
    # the log stayed valid: the unanswered call got an "interrupted" result
    messages = fake_anthropic.message_requests[-1].messages
    assert messages[-1]["content"][-1]["text"] == "are you there?"


def test_no_widget_front_end_falls_back_to_input(write_kernel: Kernel, tmp_path: Path) -> None:
    """A client with stdin that shows no widgets (``jupyter console``): after the render
    wait the question comes as an input request, and "y" allows the call."""
    msg_id = str(write_kernel.kc.execute(WRITE, allow_stdin=True))
    request = write_kernel.kc.get_stdin_msg(timeout=60)
    assert "Allow write_file hello.py?" in request["content"]["prompt"]
    write_kernel.kc.input("y")
    cell = write_kernel.collect([msg_id])[0].check()
    assert (tmp_path / "work" / "hello.py").read_text() == "hi\n"
    assert "no widget front end here" in cell.html


def test_no_one_to_answer_denies_at_once(write_kernel: Kernel, tmp_path: Path) -> None:
    """nbconvert / nbclient (``allow_stdin`` off): denied without showing buttons."""
    cell = write_kernel.run(WRITE).check()
    assert not (tmp_path / "work" / "hello.py").exists()
    assert "no way to ask here: write_file denied" in cell.stream_text
    assert not any(m["msg_type"] == "comm_open" for m in cell.messages)


# -- what the approval shows (#29 defect 3) -------------------------------------------------


@pytest.fixture
def cell_kernel(ask_kernel: Kernel) -> Kernel:
    """:func:`ask_kernel` with ``run_cell`` (approvals "ask")."""
    ask_kernel.run("%config LiteAgentMagics.kernel_tools = True").check()
    return ask_kernel


def _tagged_then(fake_anthropic: FakeAnthropicServer, final: str) -> None:
    fake_anthropic.script(tool_reply("Running it.", "run_cell", code=TAGGED_CODE), final)


def _untagged(text: str) -> bool:
    return not any(0xE0000 <= ord(c) <= 0xE007F for c in text)


WARNING = f"⚠ this input holds {len(HIDDEN_CODE)} invisible characters, shown as escapes"


def test_the_widget_shows_tagged_code_as_escapes_and_warns(
    cell_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    """The issue's payload through a real kernel: the question the widget front end gets
    (the HTML model's value) shows the hidden code as ``\\U000e00..`` escapes under a
    warning line; Deny, and nothing ran."""
    _tagged_then(fake_anthropic, "Not run.")
    models: dict[str, dict[str, Any]] = {}
    cell = _run_answering(cell_kernel, "%%agent\nrun it", "Deny", models).check()
    [question] = [m["value"] for m in models.values() if m.get("_model_name") == "HTMLModel"]
    assert _untagged(question)
    assert WARNING in question
    escapes = "".join(f"\\U{0xE0000 + ord(c):08x}" for c in HIDDEN_CODE)
    assert escapes.replace("'", "&#x27;") in question
    assert "lite-agent-approval-code" in question and "code (1 line):" in question
    assert _untagged(cell.html + cell.text)
    assert f"denied: run_cell exec(bytes(ord(c)-0xE0000 for c in &#x27;{escapes[:40]}" in (
        cell.html
    )


def test_the_console_question_shows_code_lines_escapes_and_the_warning(
    cell_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    """A front end without widgets (``jupyter console``): it prints the buttons' output as
    text (the code line by line behind a gutter, the escapes, the warning), then the
    question comes as an input request after the render wait: ``Allow ...? [y/N]``."""
    code = f"first = 1\n{TAGGED_CODE}\nprint('third')\n"
    fake_anthropic.script(tool_reply("Running it.", "run_cell", code=code), "Not run.")
    msg_id = str(cell_kernel.kc.execute("%%agent\nrun it", allow_stdin=True))
    request = cell_kernel.kc.get_stdin_msg(timeout=60)
    prompt = request["content"]["prompt"]
    cell_kernel.kc.input("n")
    cell = cell_kernel.collect([msg_id])[0].check()
    [printed] = [
        m["content"]["data"]["text/plain"]
        for m in cell.messages
        if m["msg_type"] == "display_data" and approval.WIDGET_VIEW in m["content"]["data"]
    ]
    assert _untagged(prompt) and _untagged(printed) and _untagged(cell.text)
    lines = printed.split("\n")
    at = lines.index("code (3 lines):")
    assert lines[at + 1] == "  │ first = 1"
    assert lines[at + 2].startswith("  │ exec(bytes(ord(c)-0xE0000 for c in '\\U000e0069")
    assert lines[at + 3] == "  │ print('third')"
    assert lines[at + 4] == WARNING
    assert prompt.startswith("Allow run_cell first = 1 exec(bytes(ord(c)-0xE0000 for c in '\\U")
    assert prompt.endswith("? [y/N] ")
    ran = cell_kernel.run("print('first' in globals())").check()
    assert ran.stream_text.strip() == "False"
