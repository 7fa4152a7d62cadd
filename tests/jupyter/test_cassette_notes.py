"""Cassettes keep what the agent was told about the notebook (#20 item 4): a session recorded
with a hand-edit note and a ``run_cell`` result replays offline, in a fresh kernel in another
folder, with the same answers, because the replayed session sends the same requests (the note
and the tool result are part of each request's key). A real kernel, the real ``anthropic``
client against the fake server for the recording, no server and no key for the replay."""

from __future__ import annotations

import json
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from nbkernel import SETUP, Kernel, StartKernel

KERNEL_TOOLS = "%config LiteAgentMagics.kernel_tools = True"
HAND_EDIT = "open('notes.txt', 'a').write('by hand\\n')"
RUN = "made_by_agent = len(open('notes.txt').read().splitlines())\nprint('lines:', made_by_agent)"


def _session(kernel: Kernel) -> tuple[str, str]:
    """The two turns of the lesson: read a file, the person edits it, the agent runs code."""
    read = kernel.run("%%agent\nread notes.txt").check()
    kernel.run(HAND_EDIT).check()
    ran = kernel.run("%%agent\ncount the lines of notes.txt in the kernel").check()
    return read.markdown, ran.markdown


def _turn(markdown: str, first_words: str) -> str:
    """The turn itself: no replay note, no footer."""
    return first_words + markdown.split(first_words, 1)[1].rsplit("<sub>", 1)[0]


def test_a_hand_edit_note_and_a_run_cell_result_replay_identically_offline(
    start_kernel: StartKernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_anthropic.script(
        FakeReply("Reading.", tool_calls=[FakeToolCall("read_file", {"path": "notes.txt"})]),
        "It has two lines.",
        FakeReply("Counting.", tool_calls=[FakeToolCall("run_cell", {"code": RUN})]),
        "Now it has three lines: someone added one by hand.",
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("alpha\nbeta\n")
    recording = start_kernel(home, fake_anthropic.client_env())
    recording.run(SETUP + KERNEL_TOOLS).check()
    recording.run("%agent record lesson.jsonl").check()
    read, ran = _session(recording)
    assert "Now it has three lines" in ran
    assert recording.run("print(made_by_agent)").check().stream_text.strip() == "3"
    told = json.dumps(fake_anthropic.message_requests[2].messages[-1]["content"])
    assert "Changed outside the agent since you last read or wrote them: notes.txt." in told
    result = json.dumps(fake_anthropic.message_requests[3].messages[-1]["content"])
    assert "lines: 3" in result and "made_by_agent" in result
    cassette = (home / "lesson.jsonl").read_text()
    assert "Changed outside the agent" in cassette and "lines: 3" in cassette

    school = tmp_path / "school"
    school.mkdir()
    (school / "notes.txt").write_text("alpha\nbeta\n")
    (school / "lesson.jsonl").write_text(cassette)
    offline = start_kernel(school, {"ANTHROPIC_API_KEY": None, "ANTHROPIC_BASE_URL": None})
    offline.run(SETUP + KERNEL_TOOLS).check()
    offline.run("%agent replay lesson.jsonl --speed 0").check()
    before = len(fake_anthropic.message_requests)
    read_again, ran_again = _session(offline)
    assert _turn(read_again, "Reading.") == _turn(read, "Reading.")
    assert _turn(ran_again, "Counting.") == _turn(ran, "Counting.")
    assert "Now it has three lines: someone added one by hand." in ran_again
    # the replayed run_cell really ran in the fresh kernel, and nothing went to a server
    assert offline.run("print(made_by_agent)").check().stream_text.strip() == "3"
    assert len(fake_anthropic.message_requests) == before

    # the note is part of what replays: the same lesson without the hand edit is not in it
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("alpha\nbeta\n")
    (other / "lesson.jsonl").write_text(cassette)
    unedited = start_kernel(other, {"ANTHROPIC_API_KEY": None, "ANTHROPIC_BASE_URL": None})
    unedited.run(SETUP + KERNEL_TOOLS).check()
    unedited.run("%agent replay lesson.jsonl --speed 0").check()
    unedited.run("%%agent\nread notes.txt").check()
    refused = unedited.run("%%agent\ncount the lines of notes.txt in the kernel")
    assert "not in the cassette" in refused.plain + refused.markdown + str(refused.error)
    assert len(fake_anthropic.message_requests) == before
