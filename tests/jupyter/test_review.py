"""``%agent review`` and ``%agent revert`` in a real kernel, against the fake Messages API
server: a prompt's changes through the file tools and ``bash``, one file put back, the model
told, ``%agent undo``, and a hand edit made a conflict."""

from __future__ import annotations

import json
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from nbkernel import Kernel

BEFORE_CSV = b"x,y\n1,2\n"


def _three_file_turn(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.script(
        FakeReply(
            "Writing three files.",
            tool_calls=[
                FakeToolCall("write_file", {"path": "a.py", "content": "A = 1\n"}),
                FakeToolCall("bash", {"command": "printf '3,4\\n' >> b.csv"}),
                FakeToolCall("write_file", {"path": "c.md", "content": "# C\n"}),
            ],
        ),
        "Done.",
    )


def test_review_then_revert_one_file_undo_and_conflict(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    (work / "b.csv").write_bytes(BEFORE_CSV)
    agent_kernel.run("%%agent\nsay hello").check()  # prompt 1 changes nothing
    _three_file_turn(fake_anthropic)
    agent_kernel.run("%%agent\nwrite a, b and c").check()
    agent_b = (work / "b.csv").read_bytes()
    assert agent_b == BEFORE_CSV + b"3,4\n"

    review = agent_kernel.run("%agent review").check().stream_text
    assert "Prompt 2" in review and "write a, b and c" in review
    assert "a.py  created" in review and "by write_file" in review
    assert "b.csv  changed" in review and "by bash" in review
    assert "c.md  created" in review
    # the widget's twin lists the files; the widget makes a diff when its row is selected,
    # and --text prints them all
    assert "+3,4" not in review and "`%agent review 2 --text` prints the diffs" in review
    assert "+3,4" in agent_kernel.run("%agent review --text").check().stream_text
    first = agent_kernel.run("%agent review 1").check().stream_text
    assert "Prompt 1" in first and "It changed no file." in first

    # revert b.csv only: its pre-turn bytes; a.py and c.md as the agent left them
    reverted = agent_kernel.run("%agent revert b.csv").check().stream_text
    assert "Reverted b.csv to before prompt 2" in reverted
    assert (work / "b.csv").read_bytes() == BEFORE_CSV
    assert (work / "a.py").read_text() == "A = 1\n" and (work / "c.md").read_text() == "# C\n"

    # %agent undo brings the agent's b.csv back, and says it undid that revert
    undone = agent_kernel.run("%agent undo").check().stream_text
    assert (work / "b.csv").read_bytes() == agent_b
    assert undone.startswith("Undid the revert of b.csv (to before prompt 2): 1 file(s) "), undone
    assert "restore" not in undone

    # a hand edit before the revert is a conflict: nothing changed
    (work / "b.csv").write_bytes(b"hand,edit\n")
    preview = agent_kernel.run("%agent revert b.csv --prompt 2 --preview").check().stream_text
    assert "conflict  changed after prompt 2" in preview and "forcing overwrites" in preview
    assert "-hand,edit" in preview and "+x,y" in preview
    refused = agent_kernel.run("%agent revert b.csv --prompt 2")
    assert "changed after prompt 2" in refused.text
    # #30: the notebook's command, not the SDK's force=True nor the error's class name
    assert "`%agent revert b.csv --prompt 2 --force` overwrites them." in refused.text
    assert "force=True" not in refused.text and "RestoreConflictError" not in refused.text
    assert (work / "b.csv").read_bytes() == b"hand,edit\n"
    assert (work / "a.py").read_text() == "A = 1\n"

    # forced, then the model is told at the next request
    agent_kernel.run("%agent revert b.csv --prompt 2 --force").check()
    assert (work / "b.csv").read_bytes() == BEFORE_CSV
    agent_kernel.run("%%agent\nwhat changed?").check()
    sent = json.dumps(fake_anthropic.message_requests[-1].messages)
    assert "reverted b.csv to its content before prompt 2" in sent
    assert (work / "b.csv").read_bytes() == BEFORE_CSV

    # #30: an undo after later prompts says why in words, not the log's seq numbers
    later = agent_kernel.run("%agent undo")
    assert "Nothing was undone: prompts ran after the restore (or revert)" in later.text
    assert "`%agent branches`" in later.text
    assert "head" not in later.text and "RestoreConflictError" not in later.text
    assert (work / "b.csv").read_bytes() == BEFORE_CSV


def test_revert_a_file_the_prompt_did_not_change_is_a_clear_error(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    (tmp_path / "work" / "b.csv").write_bytes(BEFORE_CSV)
    _three_file_turn(fake_anthropic)
    agent_kernel.run("%%agent\nwrite a, b and c").check()
    refused = agent_kernel.run("%agent revert other.txt")
    assert "did not change 'other.txt'" in refused.text and "a.py" in refused.text
    missing = agent_kernel.run("%agent review 7")
    assert "no prompt 7" in missing.text
    # a created file reverted is deleted, and undo brings it back
    agent_kernel.run("%agent revert a.py").check()
    assert not (tmp_path / "work" / "a.py").exists()
    agent_kernel.run("%agent undo").check()
    assert (tmp_path / "work" / "a.py").read_text() == "A = 1\n"


def test_revert_one_hunk_preview_undo_and_conflict(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    data = tmp_path / "work" / "data.txt"
    original = "".join(f"line {n}\n" for n in range(1, 21))
    data.write_text(original)
    agent = original.replace("line 2\n", "agent two\n").replace("line 18\n", "agent 18\n")
    fake_anthropic.script(
        FakeReply(
            "Editing.",
            tool_calls=[FakeToolCall("write_file", {"path": "data.txt", "content": agent})],
        ),
        "Done.",
    )
    agent_kernel.run("%%agent\nchange lines 2 and 18").check()
    review = agent_kernel.run("%agent review --text").check().stream_text
    assert "@@ -1,5 +1,5 @@  hunk 1" in review and "@@ -15,6 +15,6 @@  hunk 2" in review

    preview = agent_kernel.run("%agent revert data.txt --hunk 2 --preview").check().stream_text
    assert "Revert of hunk 2 of data.txt to before prompt 1:" in preview
    assert "-agent 18" in preview and "+line 18" in preview and "Nothing was changed" in preview
    assert data.read_text() == agent

    done = agent_kernel.run("%agent revert data.txt --hunk 2").check().stream_text
    assert "Reverted hunk 2 of data.txt to before prompt 1: those lines put back" in done
    assert data.read_text() == original.replace("line 2\n", "agent two\n")
    undone = agent_kernel.run("%agent undo").check().stream_text
    assert undone.startswith("Undid the revert of hunk 2 of data.txt (to before prompt 1)")
    assert data.read_text() == agent

    # an edit to hunk 1's lines since: refused, even with --force; nothing changed
    data.write_text(agent.replace("agent two", "hand two"))
    refused = agent_kernel.run("%agent revert data.txt --hunk 1 --force").check().stream_text
    assert refused.startswith("hunk 1 of data.txt cannot be reverted"), refused
    assert "--force` overwrites" not in refused  # forcing would not do: not offered
    assert "hunk 1 no longer matches" in refused
    assert data.read_text() == agent.replace("agent two", "hand two")
    preview = agent_kernel.run("%agent revert data.txt --hunk 1 --preview").check().stream_text
    assert "refused: hunk 1 cannot be reverted: hunk 1 no longer matches" in preview


def test_branches_and_switch_in_the_kernel(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    fake_anthropic.script(
        FakeReply("", tool_calls=[FakeToolCall("write_file", {"path": "p.txt", "content": "1"})]),
        "one",
        FakeReply("", tool_calls=[FakeToolCall("write_file", {"path": "p.txt", "content": "2"})]),
        "two",
        FakeReply("", tool_calls=[FakeToolCall("bash", {"command": "echo 3 > q.txt"})]),
        "three",
    )
    for prompt in ("first prompt", "second prompt", "third prompt"):
        agent_kernel.run(f"%%agent\n{prompt}").check()
    three = {p.name: p.read_bytes() for p in work.iterdir() if p.suffix == ".txt"}
    agent_kernel.run("%agent restore 2").check()  # back to after prompt 1
    fake_anthropic.script(
        FakeReply("", tool_calls=[FakeToolCall("write_file", {"path": "n.txt", "content": "n"})]),
        "new",
    )
    agent_kernel.run("%%agent\na new second prompt").check()
    new = {p.name: p.read_bytes() for p in work.iterdir() if p.suffix == ".txt"}
    assert new == {"p.txt": b"1", "n.txt": b"n"}

    listed = agent_kernel.run("%agent branches").check().stream_text
    assert "(current)" in listed and "b1" in listed and "second prompt" in listed
    assert "prompt 2" in listed and "%agent switch b1" in listed
    preview = agent_kernel.run("%agent switch b1 --preview").check().stream_text
    assert "n.txt" in preview and "Nothing was changed" in preview
    switched = agent_kernel.run("%agent switch b1").check().stream_text
    assert "Switched to branch b1" in switched and "kept as branch b2" in switched
    assert {p.name: p.read_bytes() for p in work.iterdir() if p.suffix == ".txt"} == three
    agent_kernel.run("%agent switch b2").check()
    assert {p.name: p.read_bytes() for p in work.iterdir() if p.suffix == ".txt"} == new
    agent_kernel.run("%%agent\nwhere are we?").check()
    sent = json.dumps(fake_anthropic.message_requests[-1].messages)
    assert "a new second prompt" in sent and "third prompt" not in sent
    agent_kernel.run("%agent branches --delete b3").check()
    assert "b3" not in agent_kernel.run("%agent branches").check().stream_text


def test_rewind_to_the_second_of_three_tool_calls(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    work = tmp_path / "work"

    def write(path: str, content: str) -> FakeReply:
        call = FakeToolCall("write_file", {"path": path, "content": content})
        return FakeReply("", tool_calls=[call])

    fake_anthropic.script(
        write("a.txt", "a"),
        FakeReply("", tool_calls=[FakeToolCall("bash", {"command": "echo b > b.txt"})]),
        write("c.txt", "c"),
        "Three files.",
    )
    agent_kernel.run("%%agent\nwrite three files").check()
    listed = agent_kernel.run("%agent checkpoints --all").check().stream_text
    assert "1.1  after write_file: a.txt" in listed
    assert "1.2  after bash: b.txt" in listed and "%agent restore 1.3" in listed
    restored = agent_kernel.run("%agent restore 1.2").check().stream_text
    assert "just after tool call 1.2" in restored
    assert sorted(p.name for p in work.iterdir() if p.suffix == ".txt") == ["a.txt", "b.txt"]
    fake_anthropic.script("Carrying on.")
    agent_kernel.run("%%agent\ncarry on").check()
    messages = fake_anthropic.message_requests[-1].messages
    uses = [b["id"] for m in messages for b in m["content"] if b.get("type") == "tool_use"]
    results = [
        b["tool_use_id"] for m in messages for b in m["content"] if b.get("type") == "tool_result"
    ]
    assert len(uses) == 2 and uses == results  # every tool_use answered, the third cut
