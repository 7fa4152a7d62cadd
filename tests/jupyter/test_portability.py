"""Portable sessions and cost budgets in real kernels: ``%agent export`` in one folder and
``%agent import`` in a fresh kernel elsewhere, on SQLite (the checkpoint listing identical,
every restore byte for byte, undo); ``%%agent --max-cost`` stopping between two requests;
a cap set in ``ipython_config.py`` that ``%config`` and ``--max-cost`` cannot raise."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, tool_reply
from nbkernel import SETUP, Kernel, StartKernel
from payloads import elements, math_runs
from workdir_helpers import files_in

STORE = ".lite_agent"


def no_store(path: Path) -> bool:
    return STORE in path.parts or path.suffix == ".zip"


def checkpoints_text(kernel: Kernel) -> str:
    return kernel.run("%agent checkpoints --text").check().stream_text


def timeless(listing: str) -> str:
    """A checkpoint listing with its dates and times of day masked."""
    listing = re.sub(r"\d{4}-\d{2}-\d{2}", "<date>", listing)
    return re.sub(r"\b\d{1,2}:\d{2}(?::\d{2})?\b", "<time>", listing)


def test_a_session_exported_in_one_folder_imports_into_sqlite_elsewhere(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    fake_anthropic: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    teacher_dir = tmp_path / "teacher"
    teacher = start_kernel(teacher_dir, fake_env)
    teacher.run(SETUP).check()
    fake_anthropic.script(
        tool_reply("Writing.", "write_file", path="a.txt", content="one\n"),
        FakeReply("a.txt written."),
        tool_reply("Editing.", "write_file", path="a.txt", content="one\ntwo\n"),
        FakeReply("a.txt edited."),
        FakeReply(
            "Both.",
            tool_calls=[
                FakeToolCall("write_file", {"path": "b.bin", "content": "bee"}),
                FakeToolCall("delete_file", {"path": "a.txt"}),
            ],
        ),
        FakeReply("b.bin written, a.txt deleted."),
    )
    for prompt in ("write a.txt", "add a line", "swap them"):
        teacher.run(f"%%agent\n{prompt}").check()
    sid = teacher.run("%agent info").check().stream_text.split("session")[1].split()[0]
    exported = teacher.run(f"%agent export lesson.zip --session {sid[:8]}").check().stream_text
    assert sid in exported
    assert "exported session" in exported and "3 stored file snapshot(s) and image(s)" in exported
    listing = checkpoints_text(teacher)

    # the class: a copy of the folder (the notebook and its files), a fresh kernel, SQLite
    student_dir = tmp_path / "student"
    shutil.copytree(teacher_dir, student_dir, ignore=shutil.ignore_patterns(STORE))
    student = start_kernel(student_dir, fake_env)
    student.run(SETUP).check()
    student.run(
        f'%config LiteAgentMagics.checkpointer_url = "sqlite://{tmp_path / "class.db"}"'
    ).check()
    imported = student.run("%agent import lesson.zip").check().stream_text
    assert "imported session" in imported and "current session" in imported
    assert checkpoints_text(student) == listing
    assert (tmp_path / "class.db").is_file() and not (student_dir / STORE / "sessions").exists()

    seqs = [int(n) for n in __import__("re").findall(r"%agent restore (\d+)", listing)]
    assert len(seqs) == 3, listing
    for seq in seqs:
        for kernel in (teacher, student):
            kernel.run(f"%agent restore {seq}").check()
        assert files_in(student_dir, no_store) == files_in(teacher_dir, no_store), seq
        for kernel in (teacher, student):
            kernel.run("%agent undo").check()
        assert files_in(student_dir, no_store) == files_in(teacher_dir, no_store), seq
    assert (student_dir / "b.bin").read_bytes() == b"bee"

    # a restore keeps the cut prompt as a branch: it travels, and switching to it works
    teacher.run(f"%agent restore {seqs[-1]}").check()
    teacher.run("%agent export lesson2.zip").check()
    shutil.copy(teacher_dir / "lesson2.zip", student_dir / "lesson2.zip")
    for kernel in (teacher, student):
        if kernel is student:
            again = student.run("%agent import lesson2.zip --replace").check().stream_text
            assert "1 branch(es)" in again, again
        branches = kernel.run("%agent branches").check().stream_text
        assert "b1" in branches and "swap them" in branches, branches
        kernel.run("%agent switch b1").check()
    assert files_in(student_dir, no_store) == files_in(teacher_dir, no_store)
    assert (student_dir / "b.bin").read_bytes() == b"bee" and not (student_dir / "a.txt").exists()
    # a switch appends the branch's events anew, stamped now: the same prompts and files,
    # each listing's times those of its own switch (a minute apart when it crossed one)
    assert timeless(checkpoints_text(student)) == timeless(checkpoints_text(teacher))
    assert timeless(checkpoints_text(teacher)) == timeless(listing)


def test_max_cost_stops_between_requests_and_a_higher_cap_continues(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    # 20,000 in + 1,000 out on Sonnet: $0.075 a call; a second would pass $0.10
    fake_anthropic.script(
        FakeReply(
            "Reading.",
            tool_calls=[FakeToolCall("read_file", {"path": "data.csv"})],
            input_tokens=20_000,
            output_tokens=1_000,
        ),
        FakeReply("never sent"),
    )
    stopped = agent_kernel.run("%%agent --max-cost 0.10\nlook around").check()
    assert "stopped: a cost budget (this turn spent $0.0750 of its $0.10)" in stopped.plain
    # #30: the call not run names its path and why, not a bare "✗ read_file"
    not_run = r"✗ read_file data.csv\]? failed( \([\d.]+ s\))?: Not run: the turn's budget"
    assert re.search(not_run, stopped.plain), stopped.plain
    summary = text_of(stopped.html.split("<summary>", 1)[1].split("</summary>", 1)[0])
    assert re.match(not_run, summary), summary
    assert math_runs(stopped.html) == [] and "$0.0750 of its $0.10" in text_of(stopped.html)
    assert len(fake_anthropic.message_requests) == 1 and fake_anthropic.pending == 1
    fake_anthropic.reset()
    fake_anthropic.script(
        FakeReply("Carried on: $5 and $10 stay text.", input_tokens=100, output_tokens=10)
    )
    follow = agent_kernel.run("%%agent --max-cost 1\ngo on").check()
    assert "Carried on: $5 and $10 stay text." in text_of(follow.html)
    assert math_runs(follow.html) == []  # #30: no $ pair a typesetter could read as maths
    assert fake_anthropic.message_requests[-1].status == 200  # the log the API got was valid


def test_a_cap_in_ipython_config_is_a_lock(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    fake_anthropic: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text("c.LiteAgentMagics.max_turn_cost = 0.10\n")
    kernel = start_kernel(tmp_path / "work", {**fake_env, "IPYTHONDIR": str(tmp_path / "ipython")})
    kernel.run(SETUP).check()
    raised = kernel.run("%config LiteAgentMagics.max_turn_cost = 5.0")
    assert "locked at $0.10" in raised.text
    removed = kernel.run("%config LiteAgentMagics.max_turn_cost = None")
    assert "locked at $0.10" in removed.text
    kernel.run("%unload_ext lite_agent_jupyter\n%load_ext lite_agent_jupyter").check()
    again = kernel.run("%config LiteAgentMagics.max_turn_cost = 5.0")
    assert "locked at $0.10" in again.text  # the lock is the configuration's, not the magics'
    refused = kernel.run("%%agent --max-cost 5\nhello")
    assert refused.status != "ok" and "caps a cell at $0.10" in refused.text
    assert fake_anthropic.message_requests == []
    kernel.run("%config LiteAgentMagics.max_turn_cost = 0.05").check()  # lowering is fine
    assert "0.05" in kernel.run("%config LiteAgentMagics.max_turn_cost").check().text

    fake_anthropic.script(
        FakeReply(
            "Reading.",
            tool_calls=[FakeToolCall("list_files", {"path": "."})],
            input_tokens=20_000,
            output_tokens=1_000,
        ),
        FakeReply("never sent"),
    )
    stopped = kernel.run("%%agent\nlook around").check()  # the cell's cap: the lowered one
    assert "of its $0.05" in stopped.plain and len(fake_anthropic.message_requests) == 1
    assert "locked at $0.10" in kernel.run("%agent info").check().stream_text


def test_hand_the_session_to_the_class_with_no_key(
    start_kernel: StartKernel, tmp_path: Path
) -> None:
    """docs/teaching.md's "hand the session to your class": a bundle with its cassette,
    imported in a kernel with no API key, lists the lesson's checkpoints, rewinds them, and
    the lesson's prompt replays offline."""
    import asyncio

    from lite_agent_jupyter import Storage, create_lite_agent
    from lite_agent_jupyter.providers import call, record, reply, scripted

    teacher_dir = tmp_path / "teacher"
    teacher_dir.mkdir()
    cassette = tmp_path / "recorded.jsonl"

    async def lesson() -> None:
        model = record(
            scripted(
                [reply("", [call("write_file", path="hello.py", content="print(1)\n")]), "Done."]
            ),
            cassette,
        )
        async with create_lite_agent(
            model=model,
            workdir=teacher_dir,
            storage=Storage(tmp_path / "t-store", "lesson"),
            approvals="allow",
        ) as agent:
            await agent.send("write hello.py")
            await agent.export_session(tmp_path / "class" / "lesson.zip", cassette=cassette)

    (tmp_path / "class").mkdir()
    asyncio.run(lesson())
    shutil.copy(teacher_dir / "hello.py", tmp_path / "class")  # the folder, as the lesson left it
    student = start_kernel(tmp_path / "class", {})  # no ANTHROPIC_* at all
    student.run(SETUP).check()
    # The lesson was recorded from the SDK, whose agent has no notebook tools; a replay needs
    # the recording's tools (docs/teaching.md), so the class turns cell_output off.
    student.run("%config LiteAgentMagics.share_outputs = False").check()
    imported = student.run("%agent import lesson.zip").check().stream_text
    assert "lesson.cassette.jsonl" in imported
    student.run("%agent replay lesson.cassette.jsonl").check()
    listing = student.run("%agent checkpoints --text").check().stream_text
    assert "write hello.py" in listing, listing
    student.run("%agent restore 1").check()
    assert not (tmp_path / "class" / "hello.py").exists()
    student.run("%agent undo").check()
    assert (tmp_path / "class" / "hello.py").read_text() == "print(1)\n"
    replayed = student.run("%%agent\nwrite hello.py").check()
    assert (
        "Done." in replayed.markdown and "replayed from lesson.cassette.jsonl" in replayed.markdown
    )


def text_of(html: str) -> str:
    """The text a page shows of ``html``."""
    return "".join(elements(html).text)
