"""``%%agent`` and ``%agent`` in a real kernel, against the fake Messages API server."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, tool_reply
from nbkernel import SETUP, Cell, Kernel, StartKernel
from payloads import math_runs


def test_streams_tool_calls_and_footer(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_anthropic.script(
        tool_reply("I'll write the file.", "write_file", path="notes.md", content="a\nb\n"),
        FakeReply(
            "Done: **notes.md** has two lines.",
            text_chunk=4,
            input_tokens=120,
            output_tokens=9,
            cache_read_input_tokens=7,
        ),
    )
    cell = agent_kernel.run("%%agent\nWrite notes.md with two lines").check()
    assert (tmp_path / "work" / "notes.md").read_text() == "a\nb\n"
    md = cell.html
    assert "I'll write the file." in md
    assert "Done: <strong>notes.md</strong> has two lines." in md  # rendered in the kernel
    assert cell.rich_types == {"text/html", "text/plain"}
    assert "write_file notes.md (+2 lines)" in md
    assert "<details>" in md
    assert re.search(r"prompt 1: %agent restore 1-[a-z2-7]{4}", md)
    footer = md.rsplit("<sub>", 1)[1]
    # "$a ... $b" in one text node would be LaTeX: each $ stands alone (safe.py, #30)
    assert "<span>$</span>" in footer and " this cell, <span>$</span>" in footer
    assert math_runs(md) == []
    assert "claude-sonnet-4-6" in md
    assert "cache read 7" in md
    # the plain-text twin says the same
    assert "Done: **notes.md** has two lines." in cell.plain
    assert "[✓ write_file notes.md (+2 lines)]" in cell.plain
    assert re.search(r"prompt 1: %agent restore 1-[a-z2-7]{4}", cell.plain)
    # streamed: more than one display message for this one display
    assert len(cell.displays) == 1
    assert cell.display_messages >= 2
    # the real client sent our prompt
    first = fake_anthropic.message_requests[0].body
    assert first["messages"][0]["content"][0]["text"] == "Write notes.md with two lines"


def test_second_cell_continues_and_new_starts_fresh(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("One.", "Two.", "Three.")
    first = agent_kernel.run("%%agent\nfirst prompt").check()
    second = agent_kernel.run("%%agent\nsecond prompt").check()
    assert "One." in first.html and "Two." in second.html
    messages = fake_anthropic.message_requests[1].messages
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    session = _session_of(first)
    assert _session_of(second) == session
    third = agent_kernel.run("%%agent --new\nthird prompt").check()
    assert _session_of(third) != session
    assert len(fake_anthropic.message_requests[2].messages) == 1


def _session_of(cell: Cell) -> str:
    """The short session id in the cell's footer."""
    found = re.search(r"· session ([0-9a-f]{8}) ·", cell.plain)
    assert found is not None, cell.plain
    return found.group(1)


def test_subcommands(agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.script("Hi.", "Again.")
    agent_kernel.run("%%agent\nhello there").check()
    listed = agent_kernel.run("%agent sessions").check()
    assert "hello there" in listed.stream_text
    info = agent_kernel.run("%agent info").check().stream_text
    assert "claude-sonnet-4-6" in info and "console" in info
    config = agent_kernel.run("%agent config").check().stream_text
    assert "approvals" in config and "ANTHROPIC_API_KEY" in config
    assert fake_anthropic.api_key not in config
    helped = agent_kernel.run("%agent help").check().stream_text
    assert "resume" in helped and "delete" in helped
    new = agent_kernel.run("%agent new").check().stream_text
    assert "new session" in new
    agent_kernel.run("%%agent\nin the new one").check()
    sessions = agent_kernel.run("%agent sessions").check().stream_text
    assert "in the new one" in sessions and "hello there" in sessions
    resumed = agent_kernel.run("%agent resume").check().stream_text
    assert "resumed session" in resumed


def test_config_applies_at_next_cell_and_keeps_the_session(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("One.", "Two.")
    first = agent_kernel.run("%%agent\nfirst").check()
    agent_kernel.run('%config LiteAgentMagics.model_name = "claude-opus-4-1"').check()
    second = agent_kernel.run("%%agent\nsecond").check()
    assert fake_anthropic.message_requests[1].body["model"] == "claude-opus-4-1"
    assert len(fake_anthropic.message_requests[1].messages) == 3
    assert _session_of(first) == _session_of(second)


def test_no_key_is_one_friendly_message(start_kernel: object, tmp_path: Path) -> None:
    kernel = start_kernel(tmp_path / "w", {})  # type: ignore[operator]
    kernel.run("%load_ext lite_agent_jupyter").check()
    cell = kernel.run("%%agent\nhello").check()
    assert "No Anthropic API key" in cell.stream_text
    assert "%agent key" in cell.stream_text and "scripted" in cell.stream_text
    assert "Traceback" not in cell.text


def test_unload_stops_cleanly(agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.script("Hi.")
    agent_kernel.run("%%agent\nhello").check()
    agent_kernel.run("%unload_ext lite_agent_jupyter").check()
    gone = agent_kernel.run("%agent info")
    assert gone.status == "error"
    threads = agent_kernel.run(
        "import threading; print([t.name for t in threading.enumerate()])"
    ).check()
    assert "lite-agent-loop" not in threads.stream_text
    agent_kernel.run("%load_ext lite_agent_jupyter").check()
    assert json.loads("1") == 1


def test_run_all_runs_queued_cells_in_order(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("Answer A.", "Answer B.", "Answer C.")
    ids = [agent_kernel.submit(f"%%agent\nprompt {n}") for n in "ABC"]
    cells = agent_kernel.collect(ids)
    for cell, n in zip(cells, "ABC", strict=True):
        assert cell.check().html.count(f"Answer {n}.") == 1
    prompts = [r.messages[-1]["content"][0]["text"] for r in fake_anthropic.message_requests]
    assert prompts == ["prompt A", "prompt B", "prompt C"]
    assert len(fake_anthropic.message_requests[2].messages) == 5


def test_await_on_the_sdk_between_magic_cells(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("From the magic.", "From await.", "Streamed.", "Magic again.")
    agent_kernel.run("%%agent\nmagic one").check()
    awaited = agent_kernel.run(
        "import lite_agent_jupyter\n"
        "agent = lite_agent_jupyter.get_agent()\n"
        "result = await agent.send('awaited prompt')\n"
        "print('TEXT', result.text, result.session_id == agent.session_id)\n"
    ).check()
    assert "TEXT From await. True" in awaited.stream_text
    streamed = agent_kernel.run(
        "kinds = []\n"
        "async for event in agent.run('streamed prompt'):\n"
        "    kinds.append(type(event).__name__)\n"
        "print(kinds[0], kinds[-1], 'TextDelta' in kinds)\n"
    ).check()
    assert "TurnStarted TurnFinished True" in streamed.stream_text
    agent_kernel.run("%%agent\nmagic two").check()
    assert len(fake_anthropic.message_requests[3].messages) == 7


def test_interrupt_during_streaming(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    release = threading.Event()
    fake_anthropic.script(
        FakeReply(["Starting ", "to ", "answer ", "and ", "more"], hold=release, hold_after=4),
        "After the interrupt.",
    )
    msg_id = agent_kernel.submit("%%agent\na long answer please")
    request = fake_anthropic.wait_for_requests(1, timeout=60)[0]
    _wait_for(lambda: request.events_sent >= 4)
    agent_kernel.interrupt()
    cell = agent_kernel.collect([msg_id])[0]
    release.set()
    assert cell.status == "error"
    assert cell.error is not None and cell.error["ename"] == "AgentInterrupted", cell.error_text
    assert "interrupted" in cell.html
    assert "Traceback" not in cell.error_text
    after = agent_kernel.run("%%agent\nare you there?").check()
    assert "After the interrupt." in after.html
    # the fake server validates every request like the API: the log stayed valid
    messages = fake_anthropic.message_requests[1].messages
    assert messages[0]["content"][0]["text"] == "a long answer please"
    assert messages[-1]["content"][-1]["text"] == "are you there?"


def _wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        time.sleep(0.01)


def test_kernel_restart_continues_the_session(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("Before.", "After restart.")
    before = agent_kernel.run("%%agent\nremember 42").check()
    agent_kernel.restart()
    agent_kernel.run(SETUP).check()
    after = agent_kernel.run("%%agent\nwhat number?").check()
    assert "continuing session" in after.html and "(1 prompt)" in after.html
    assert _session_of(after) == _session_of(before)
    assert len(fake_anthropic.message_requests[1].messages) == 3


def test_memory_writes_nothing_to_disk(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    tmp_path: Path,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    folder = tmp_path / "mem"
    kernel = start_kernel(folder, fake_env)
    kernel.run(SETUP).check()
    fake_anthropic.script(
        tool_reply("Writing.", "write_file", path="x.txt", content="x"),
        "Done.",
        "Still here.",
    )
    first = kernel.run("%%agent --memory\nwrite x.txt").check()
    assert "Memory only" in first.stream_text
    kernel.run("%%agent\nand now?").check()
    assert len(fake_anthropic.message_requests[2].messages) == 5
    assert sorted(p.name for p in folder.iterdir()) == ["x.txt"]
    listed = kernel.run("%agent sessions").check()
    assert "SessionsDisabledError" in listed.stream_text


def test_two_notebooks_in_one_folder_are_kept_apart(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    tmp_path: Path,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    folder = tmp_path / "project"
    fake_anthropic.script("For A.", "For B.")
    kernels = {}
    for name in ("a", "b"):
        env = {**fake_env, "JPY_SESSION_NAME": str(folder / f"{name}.ipynb")}
        kernels[name] = start_kernel(folder, env)
        kernels[name].run(SETUP).check()
    kernels["a"].run("%%agent\nprompt of notebook a").check()
    kernels["b"].run("%%agent\nprompt of notebook b").check()
    a_sessions = kernels["a"].run("%agent sessions").check().stream_text
    b_sessions = kernels["b"].run("%agent sessions").check().stream_text
    assert "notebook a" in a_sessions and "notebook b" not in a_sessions
    assert "notebook b" in b_sessions and "notebook a" not in b_sessions
    info = kernels["a"].run("%agent info").check().stream_text
    assert "JPY_SESSION_NAME" in info and str(folder / ".lite_agent" / "a") in info
    assert sorted(p.name for p in (folder / ".lite_agent").iterdir()) == [".gitignore", "a", "b"]


def test_vs_code_notebook_file_names_the_storage_before_jupyter_server(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    tmp_path: Path,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    # VS Code's Jupyter extension puts __vsc_ipynb_file__ in the user namespace before any
    # cell runs; it names the notebook even where JPY_SESSION_NAME names something else.
    folder = tmp_path / "vsc"
    notebook = folder / "analysis.ipynb"
    fake_anthropic.script("Noted.")
    env = {**fake_env, "JPY_SESSION_NAME": str(tmp_path / "elsewhere" / "other.ipynb")}
    kernel = start_kernel(folder, env)
    kernel.run(f"__vsc_ipynb_file__ = {str(notebook)!r}").check()
    kernel.run(SETUP).check()
    kernel.run("%%agent\na prompt from VS Code").check()
    info = kernel.run("%agent info").check().stream_text
    assert "__vsc_ipynb_file__" in info and str(folder / ".lite_agent" / "analysis") in info
    assert (folder / ".lite_agent" / "analysis").is_dir()
    assert not (tmp_path / "elsewhere").exists()


def test_key_typed_with_agent_key_is_in_no_output_and_no_file(
    start_kernel: StartKernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    folder = tmp_path / "keyed"
    kernel = start_kernel(folder, {"ANTHROPIC_BASE_URL": fake_anthropic.url})
    kernel.run(SETUP).check()
    msg_id = str(kernel.kc.execute("%agent key", allow_stdin=True))
    request = kernel.kc.get_stdin_msg(timeout=60)
    assert request["msg_type"] == "input_request" and request["content"]["password"]
    kernel.kc.input(fake_anthropic.api_key)
    keyed = kernel.collect([msg_id])[0].check()
    fake_anthropic.script("Keyed answer.")
    answered = kernel.run("%%agent\nhello").check()
    assert "Keyed answer." in answered.html
    outputs = [
        keyed,
        answered,
        kernel.run("%agent config").check(),
        kernel.run("%agent info").check(),
    ]
    for cell in outputs:
        assert fake_anthropic.api_key not in json.dumps([m["content"] for m in cell.messages])
    for path in folder.rglob("*"):
        if path.is_file():
            assert fake_anthropic.api_key.encode() not in path.read_bytes(), path


def test_interpolation_of_variables_and_cells(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("Ok.", "Ok again.")
    agent_kernel.run("answer = 41 + 1").check()
    failing = agent_kernel.run("1 / 0")
    assert failing.status == "error"
    count = agent_kernel.run("print(len(In) - 1)").check().stream_text.strip()
    err_cell = int(count) - 1
    agent_kernel.run(
        "%%agent\nanswer={answer} code={In[1]} err={Err[" + str(err_cell) + "]} keep={unknown} {x"
    ).check()
    sent = fake_anthropic.message_requests[0].messages[0]["content"][0]["text"]
    assert "answer=42" in sent
    assert "ZeroDivisionError" in sent
    assert "keep={unknown} {x" in sent
    agent_kernel.run("%%agent --no-interpolate\nraw {answer}").check()
    raw = fake_anthropic.message_requests[1].messages[-1]["content"][0]["text"]
    assert raw == "raw {answer}"


def test_variable_tools_only_for_exposed_names(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    agent_kernel.run("rows = [1, 2, 3]\nsecret = 'hidden'").check()
    agent_kernel.run("%config LiteAgentMagics.expose_variables = ['rows']").check()
    fake_anthropic.script(
        FakeReply(
            "",
            tool_calls=[
                FakeToolCall("list_variables", {}),
                FakeToolCall("inspect_variable", {"name": "rows"}),
                FakeToolCall("inspect_variable", {"name": "secret"}),
            ],
        ),
        "Seen.",
    )
    agent_kernel.run("%%agent\nlook at my data").check()
    results = {
        block["tool_use_id"]: block
        for block in fake_anthropic.message_requests[1].messages[-1]["content"]
    }
    texts = [json.dumps(b["content"]) for b in results.values()]
    assert "rows: list len 3" in texts[0] and "secret" not in texts[0]
    assert "length: 3" in texts[1]
    assert "not exposed" in texts[2]


def test_compact_shows_progress_and_the_next_cell_sees_the_summary(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("One.", "Two.", "SUMMARY: the user likes the number 42.", "Three.")
    agent_kernel.run("%%agent\nI like 42").check()
    agent_kernel.run("%%agent\nremember it").check()
    compacted = agent_kernel.run("%agent compact keep the numbers").check()
    assert "[####################] done" in compacted.plain
    assert len(compacted.displays) == 1 and compacted.display_messages >= 3
    assert "Compacted session" in compacted.stream_text and "tokens" in compacted.stream_text
    summarize = fake_anthropic.message_requests[2].body
    assert "keep the numbers" in json.dumps(summarize)
    agent_kernel.run("%%agent\nand now?").check()
    after = json.dumps(fake_anthropic.message_requests[3].messages)
    assert "the user likes the number 42" in after
    assert "I like 42" not in after


def test_the_open_notebook_is_not_edited_unless_allowed(
    notebook_kernel: Callable[[Path], Kernel],
    tmp_path: Path,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    folder = tmp_path / "nb"
    folder.mkdir()
    notebook = folder / "analysis.ipynb"
    notebook.write_text("{}")
    kernel = notebook_kernel(notebook)
    edit = FakeToolCall("write_file", {"path": "analysis.ipynb", "content": "overwritten"})
    fake_anthropic.script(
        FakeReply("", tool_calls=[edit]), "Refused.", FakeReply("", tool_calls=[edit]), "Written."
    )
    kernel.run("%%agent\nrewrite the notebook").check()
    assert notebook.read_text() == "{}"
    refusal = fake_anthropic.message_requests[1].messages[-1]["content"][0]
    assert refusal["is_error"] and "open in this kernel" in json.dumps(refusal["content"])
    kernel.run("%config LiteAgentMagics.allow_notebook_edits = True").check()
    kernel.run("%%agent\nrewrite it anyway").check()
    assert notebook.read_text() == "overwritten"


def test_delete_and_resume_by_prefix(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("First.", "Second.")
    first = _session_of(agent_kernel.run("%%agent\nfirst session").check())
    second = _session_of(agent_kernel.run("%%agent --new\nsecond session").check())
    resumed = agent_kernel.run(f"%agent resume {first[:6]}").check().stream_text
    assert f"resumed session {first}" in resumed
    refused = agent_kernel.run(f"%agent delete {second}")
    assert "add --yes" in refused.text  # no stdin here: it cannot ask
    agent_kernel.run(f"%agent delete {second} --yes").check()
    listed = agent_kernel.run("%agent sessions").check().stream_text
    assert first in listed and second not in listed
    usage = agent_kernel.run("%agent restore").text
    assert "usage" in usage.lower() or "unknown subcommand" in usage


def test_quiet_shows_the_answer_once(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(FakeReply("A quiet answer in many small pieces.", text_chunk=2))
    cell = agent_kernel.run("%%agent --quiet\nquietly").check()
    assert cell.display_messages == 1
    assert "A quiet answer in many small pieces." in cell.html
    assert "%agent restore" in cell.plain


def test_checkpoints_restore_preview_and_undo(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    target = tmp_path / "work" / "settings.py"
    fake_anthropic.script(
        tool_reply("", "write_file", path="settings.py", content="DEBUG = False\n"),
        "Created.",
        tool_reply("", "edit_file", path="settings.py", old_string="False", new_string="True"),
        "Edited.",
        "After the restore.",
    )
    agent_kernel.run("%%agent\ncreate settings").check()
    second = agent_kernel.run("%%agent\nturn debug on").check()
    assert target.read_text() == "DEBUG = True\n"
    found = re.search(r"prompt 2: %agent restore (2-[a-z2-7]{4})", second.plain)
    assert found is not None  # prompts are numbered 1..N, the command names the prompt's id
    cp = found.group(1)
    listed = agent_kernel.run("%agent checkpoints").check().stream_text
    assert "create settings" in listed and "turn debug on" in listed
    assert f"%agent restore {cp}" in listed and "settings.py" in listed
    preview = agent_kernel.run(f"%agent restore {cp} --preview").check().stream_text
    assert "-DEBUG = True" in preview and "+DEBUG = False" in preview
    assert "rewrite   settings.py  13 bytes -> 14 bytes" in preview  # not "rewrite ... rewrite"
    assert "before prompt 2" in preview
    assert target.read_text() == "DEBUG = True\n"
    restored = agent_kernel.run(f"%agent restore {cp}").check().stream_text
    assert f"Restored to before prompt 2 ({cp})" in restored
    assert "conversation rewound to before that prompt" in restored
    assert target.read_text() == "DEBUG = False\n"
    undone = agent_kernel.run("%agent undo").check().stream_text
    assert "conversation as it was before that restore" in undone
    assert target.read_text() == "DEBUG = True\n"
    agent_kernel.run("%agent restore 2").check()  # a prompt number of the timeline now
    agent_kernel.run("%%agent\nwhere are we?").check()
    messages = fake_anthropic.message_requests[-1].messages
    assert "turn debug on" not in json.dumps(messages)
    # the saved command of the cut prompt no longer rewinds anything: prompt 2 is another one
    stale = agent_kernel.run(f"%agent restore {cp}")
    assert "no longer in this session's timeline" in stale.text
    assert target.read_text() == "DEBUG = False\n"
    both = agent_kernel.run("%agent restore 1 --files-only --conversation-only")
    assert both.status == "error" and "exclude each other" in both.text


def test_text_printed_around_a_turn_keeps_its_place(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    """A turn's display messages skip ipykernel's flush of stdout and stderr when nothing is
    waiting there (#32); text printed before the turn still comes before its display, and
    text printed after it after the last update."""
    fake_anthropic.script(FakeReply("The answer."))
    cell = agent_kernel.run(
        "print('before the turn')\n"
        "get_ipython().run_cell_magic('agent', '', 'a question')\n"
        "print('after the turn')"
    ).check()
    kinds = [
        (m["msg_type"], m["content"].get("text", ""))
        for m in cell.messages
        if m["msg_type"] in ("stream", "display_data", "update_display_data")
    ]
    assert kinds[0] == ("stream", "before the turn\n")
    assert kinds[1][0] == "display_data"
    assert kinds[-1] == ("stream", "after the turn\n")
    assert "The answer." in cell.plain


def test_a_display_flushes_only_streams_holding_text() -> None:
    """``sinks._flush_if_written`` unit: the publisher's flush is skipped for the message
    only when ipykernel's streams say they hold nothing, and put back after it."""
    import sys
    from unittest import mock

    from lite_agent_jupyter.jupyter import sinks

    class Stream:
        def __init__(self, pending: bool) -> None:
            self._flush_pending = pending
            self._subprocess_flush_pending = False

    class Publisher:
        def __init__(self) -> None:
            self.flushed = 0

        def _flush_streams(self) -> None:
            self.flushed += 1

    class Shell:
        display_pub = Publisher()

    shell = Shell()
    publisher = shell.display_pub
    with mock.patch("IPython.get_ipython", return_value=shell):
        for out, err, flushed in ((False, False, 0), (True, False, 1), (False, True, 1)):
            publisher.flushed = 0
            with (
                mock.patch.object(sys, "stdout", Stream(out)),
                mock.patch.object(sys, "stderr", Stream(err)),
                sinks._flush_if_written(),
            ):
                publisher._flush_streams()
            assert publisher.flushed == flushed
            assert "_flush_streams" not in vars(publisher)
        with sinks._flush_if_written():  # streams that are not ipykernel's: flushed
            publisher._flush_streams()
        assert publisher.flushed == 2
