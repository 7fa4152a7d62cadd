"""Background completion turns (SPEC §7) shown in the notebook: a job started with
``bash(background=true)`` finishes after its cell, its completion turn runs with no cell to
stream to, and the next ``%%agent`` cell shows it (answer, footer marked as a background turn).
A real kernel against the fake Messages API server."""

from __future__ import annotations

import json
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, tool_reply
from nbkernel import Kernel, StartKernel

WAIT_BACKGROUND = (
    "import lite_agent_jupyter\n"
    "await lite_agent_jupyter.get_agent().call(lambda a: a.wait_background())"
)
"""A cell that waits until the agent's background jobs and their completion turns ended."""


def test_the_next_cell_shows_a_background_completion_turn(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(
        tool_reply(
            "Starting the job.", "bash", command="sleep 1; echo job-output", background=True
        ),
        "Started it in the background.",
        "The job printed job-output.",  # the completion turn, after the job ends
        "Nothing else to do.",
    )
    first = agent_kernel.run("%%agent\nRun the job in the background").check()
    assert "Started it in the background." in first.html
    fake_anthropic.wait_for_requests(3)
    completion = fake_anthropic.message_requests[2].messages[-1]["content"]
    assert "job-output" in json.dumps(completion)
    agent_kernel.run(WAIT_BACKGROUND).check()
    second = agent_kernel.run("%%agent\nAnything else?").check()
    shown = first.html + second.html
    assert "The job printed job-output." in shown
    assert "background job bg-" in shown and "finished (exit code 0)" in shown
    assert "background turn" in shown  # its footer: no checkpoint to rewind to
    assert "Nothing else to do." in second.html
    # the plain-text twin says it too
    assert "The job printed job-output." in first.plain + second.plain


def test_a_background_turn_asking_for_approval_with_no_cell_waiting_is_denied(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    fake_anthropic: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    kernel = start_kernel(tmp_path / "work", fake_env)
    kernel.run(
        '%load_ext lite_agent_jupyter\n%config LiteAgentMagics.approvals = {"bash": "allow"}'
    ).check()
    fake_anthropic.script(
        tool_reply("Starting the job.", "bash", command="sleep 1; echo ok", background=True),
        "Started.",
        # the completion turn wants to write a file: write_file asks
        tool_reply("Writing the report.", "write_file", path="report.txt", content="ok\n"),
        "I could not write the report.",
        "Fine.",
    )
    kernel.run("%%agent\nRun the job in the background").check()
    fake_anthropic.wait_for_requests(4)
    kernel.run(WAIT_BACKGROUND).check()
    assert not (tmp_path / "work" / "report.txt").exists()
    result = fake_anthropic.message_requests[3].messages[-1]["content"][0]
    assert result["is_error"] is True and "denied" in str(result["content"])
    shown = kernel.run("%%agent\nAnd now?").check().html
    assert "I could not write the report." in shown


def test_what_a_background_job_wrote_is_not_called_a_hand_edit(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    notes = tmp_path / "work" / "notes.txt"
    notes.write_text("alpha\n")
    fake_anthropic.script(
        tool_reply("Reading.", "read_file", path="notes.txt"),
        tool_reply(
            "Appending.", "bash", command="sleep 1; echo beta >> notes.txt", background=True
        ),
        "Started.",
        "The job appended beta.",  # the completion turn
        "Nothing else.",
    )
    agent_kernel.run("%%agent\nread notes.txt, then append beta in the background").check()
    agent_kernel.run(WAIT_BACKGROUND).check()
    assert notes.read_text() == "alpha\nbeta\n"
    agent_kernel.run("%%agent\nanything else?").check()
    asked = json.dumps(fake_anthropic.last_request.messages[-1]["content"])
    assert "anything else?" in asked and "Changed outside the agent" not in asked

    notes.write_text("alpha\nbeta\nby hand\n")
    fake_anthropic.script("Noted.")
    agent_kernel.run("%%agent\nand now?").check()
    told = json.dumps(fake_anthropic.last_request.messages[-1]["content"])
    assert "Changed outside the agent since you last read or wrote them: notes.txt." in told
