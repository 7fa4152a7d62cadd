"""Show the work (#35) in a real kernel against the fake Messages API server: the task list
as a live checklist, each tool call's clock and ending, plan first, and stale cells."""

from __future__ import annotations

import re
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, tool_reply
from nbkernel import Kernel

WIDGET = "application/vnd.jupyter.widget-view+json"
TASKS = ["load the data", "clean the dates", "save clean.csv"]


def todo(*states: str) -> FakeReply:
    todos = [{"content": c, "status": s} for c, s in zip(TASKS, states, strict=True)]
    return FakeReply(tool_calls=[FakeToolCall("todo_write", {"todos": todos})])


def test_three_todo_writes_are_one_checklist_updated_in_place(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(
        todo("pending", "pending", "pending"),
        todo("in_progress", "pending", "pending"),
        todo("completed", "completed", "in_progress"),
        "Two of three done.",
    )
    cell = agent_kernel.run("%%agent\nClean the data").check()
    assert len(cell.order) == 1  # one display id, updated in place
    checklists = [
        m["content"]["data"]["text/html"]
        for m in cell.messages
        if m["msg_type"] in ("display_data", "update_display_data")
        and "lite-agent-tasks" in m["content"]["data"]["text/html"]
    ]
    assert len(checklists) >= 1
    html = cell.html
    assert html.count('class="lite-agent-tasks"') == 1
    assert '<li data-status="completed">☑ <s>load the data</s></li>' in html
    assert '<li data-status="completed">☑ <s>clean the dates</s></li>' in html
    assert "▶ <b>save clean.csv</b> <em>(in progress)</em>" in html
    assert "(2/3 completed)" in html
    # the saved notebook's text twin holds the same list
    assert "[x] load the data\n[x] clean the dates\n[>] save clean.csv" in cell.plain
    # %agent tasks: the session's list, any time
    tasks = agent_kernel.run("%agent tasks").check()
    assert "☑ <s>load the data</s>" in tasks.html
    assert "Task list (2/3 completed):\n[x] load the data" in tasks.plain


def test_task_texts_are_model_text_and_stay_text(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    evil = [{"content": "<img src=x onerror=alert(1)>", "status": "pending"}]
    fake_anthropic.script(FakeReply(tool_calls=[FakeToolCall("todo_write", {"todos": evil})]), "ok")
    html = agent_kernel.run("%%agent\nplan").check().html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_a_slow_call_shows_a_growing_clock_then_done(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(tool_reply("Waiting.", "bash", command="sleep 3"), "Slept.")
    cell = agent_kernel.run("%%agent\nsleep a while").check()
    clocks = []
    for m in cell.messages:
        if m["msg_type"] in ("display_data", "update_display_data"):
            found = re.search(r"bash sleep 3: ([\d.]+) s", m["content"]["data"]["text/plain"])
            if found:
                clocks.append(float(found.group(1)))
    assert len(clocks) >= 2, clocks  # redrawn at least once a second while it ran
    assert clocks == sorted(clocks) and clocks[-1] > clocks[0]
    assert len(cell.order) == 1  # the clock is the turn's one display, not more outputs
    final = cell.plain
    assert "bash sleep 3: " not in final  # gone once the call ended
    assert re.search(r"\[✓ bash sleep 3\] done \([\d.]+ s\)", final)
    assert re.search(r"· [\d.]+ s$", final.strip())  # the footer ends with the wall time


def test_tool_lines_end_as_done_failed_or_denied(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    agent_kernel.run('%config LiteAgentMagics.approvals = {"delete_file": "deny"}').check()
    fake_anthropic.script(
        FakeReply(
            tool_calls=[
                FakeToolCall("read_file", {"path": "missing.txt"}),
                FakeToolCall("delete_file", {"path": "x.txt"}),
                FakeToolCall("list_files", {"pattern": "*"}),
            ]
        ),
        "Done.",
    )
    plain = agent_kernel.run("%%agent\ntry things").check().plain
    assert re.search(r"\[✗ read_file missing\.txt\] failed \([\d.]+ s\): \S", plain)
    assert "[⊘ delete_file x.txt] denied" in plain
    assert re.search(r"\[✓ list_files \*\] done", plain)


def _tools(request: object) -> set[str]:
    return {t["name"] for t in getattr(request, "body", {}).get("tools", [])}


def _prompt_text(request: object) -> str:
    content = getattr(request, "body", {})["messages"][-1]["content"]
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))


PLAN_TURN = (
    FakeReply(
        tool_calls=[
            FakeToolCall(
                "todo_write", {"todos": [{"content": "write out.txt", "status": "pending"}]}
            )
        ]
    ),
    tool_reply("Trying it early.", "write_file", path="out.txt", content="early"),
    "Plan: write out.txt with hello.",
)


def test_plan_first_reads_only_then_go_runs_the_plan(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    agent_kernel.run("%config LiteAgentMagics.kernel_tools = True").check()
    fake_anthropic.script(*PLAN_TURN)
    cell = agent_kernel.run("%%agent --plan\nplan writing out.txt").check()
    offered = _tools(fake_anthropic.message_requests[0])
    assert "read_file" in offered and "todo_write" in offered
    assert not offered & {"write_file", "edit_file", "delete_file", "bash", "run_cell"}
    assert "planning turn" in str(fake_anthropic.message_requests[0].body["system"])
    assert not (tmp_path / "work" / "out.txt").exists()  # refused without running
    assert "[⊘ write_file out.txt] denied: Not run: this is a planning turn" in cell.plain
    assert WIDGET in cell.rich_types  # the panel with Run this plan
    assert "Run it: the Run this plan button above, or `%agent go`" in cell.stream_text
    assert "[ ] write out.txt" in cell.stream_text  # the plan, kept as text
    assert re.search(r"prompt 1: %agent restore 1-", cell.plain)  # a checkpoint like any

    fake_anthropic.script(tool_reply("Writing.", "write_file", path="out.txt", content="hi"), "ok")
    go = agent_kernel.run("%agent go").check()
    run_request = fake_anthropic.message_requests[3]
    assert "Plan: write out.txt with hello." in _prompt_text(run_request)
    assert "[ ] write out.txt" in _prompt_text(run_request)
    assert {"write_file", "bash", "run_cell"} <= _tools(run_request)
    assert (tmp_path / "work" / "out.txt").read_text() == "hi"
    assert "[✓ write_file out.txt (+1 line)] done" in go.plain
    assert re.search(r"prompt 2: %agent restore 2-", go.plain)


def test_go_runs_an_edited_plan_and_plan_first_is_a_setting(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    missing = agent_kernel.run("%agent go")
    assert "no plan in this kernel yet" in missing.text
    agent_kernel.run("%config LiteAgentMagics.plan_first = True").check()
    fake_anthropic.script("Plan: step one.")
    agent_kernel.run("%%agent\nplan it").check()
    assert "write_file" not in _tools(fake_anthropic.message_requests[-1])
    fake_anthropic.script("Did the edited one.")
    agent_kernel.run("%agent go Only write b.txt, nothing else.").check()
    text = _prompt_text(fake_anthropic.message_requests[-1])
    assert "Only write b.txt, nothing else." in text and "step one" not in text


def test_run_this_plan_clicked_runs_the_edited_plan_in_the_panel(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_anthropic.script(*PLAN_TURN)
    agent_kernel.run("%%agent --plan\nplan writing out.txt").check()
    fake_anthropic.script(tool_reply("Writing.", "write_file", path="out.txt", content="hi"), "ok")
    agent_kernel.run(
        "m = get_ipython().magics_manager.registry['LiteAgentMagics']\n"
        "m.plans.plan_panel.box.value += '\\nAlso say ok.'\n"
        "m.plans.plan_panel.run.click()"
    ).check()
    done = agent_kernel.run(
        "import asyncio\nawait asyncio.wait_for(m.plans.plan_panel.task, 60)\n"
        "print(m.plans.plan_panel.status.value)\nprint(m.plans.plan_panel.output.value)"
    ).check()
    assert (tmp_path / "work" / "out.txt").read_text() == "hi"
    assert "Also say ok." in _prompt_text(fake_anthropic.message_requests[3])
    assert "<em>done</em>" in done.stream_text
    assert "write_file out.txt (+1 line)</code> <small>done" in done.stream_text


def test_cells_reading_a_variable_run_cell_changed_are_named(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    agent_kernel.run("%config LiteAgentMagics.kernel_tools = True").check()
    first = int(agent_kernel.run("print(len(In))").check().stream_text)  # the next count
    agent_kernel.run("df = [1, 2, 3]").check()
    agent_kernel.run("total = sum(df)").check()
    agent_kernel.run("print(len(df))").check()
    agent_kernel.run("other = 5").check()
    fake_anthropic.script(
        FakeReply(tool_calls=[FakeToolCall("run_cell", {"code": "df = [4, 5]"})]), "Changed."
    )
    cell = agent_kernel.run("%%agent\nreplace df").check()
    expected = f"cells [{first + 1}], [{first + 2}] read `df`, changed by this prompt: re-run them"
    assert expected in cell.plain
    assert expected in cell.html
    fake_anthropic.script("Noted.")
    agent_kernel.run("%%agent\nwhat now?").check()
    note = _prompt_text(fake_anthropic.message_requests[-1])
    assert f"notebook cells [{first + 1}], [{first + 2}] read `df`" in note
