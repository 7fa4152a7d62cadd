"""Small wording and layout defects of #19 (item 9), each through the real magics in a real
kernel: what a reader of the cell sees."""

from __future__ import annotations

from pathlib import Path

from fake_anthropic import FakeAnthropicServer, tool_reply
from nbkernel import Kernel


def test_a_read_file_result_keeps_its_first_lines_indentation(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    """``read_file`` right-aligns its line numbers and the code is indented: the result shown
    in the cell starts with the first line as the tool returned it (it was stripped, so line
    1 stood out of the column the others are in)."""
    (tmp_path / "work" / "block.py").write_text("    indented = 1\n    also = 2\n")
    fake_anthropic.script(tool_reply("Reading.", "read_file", path="block.py"), "Read it.")
    cell = agent_kernel.run("%%agent\nread block.py").check()
    assert "<pre>     1\t    indented = 1\n     2\t    also = 2</pre>" in cell.markdown


def test_one_line_and_one_prompt_are_singular(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(tool_reply("", "write_file", path="one.txt", content="x\n"), "Done.")
    cell = agent_kernel.run("%%agent\nwrite one line").check()
    assert "write_file one.txt (+1 line)" in cell.markdown
    assert "[✓ write_file one.txt (+1 line)]" in cell.plain
    preview = agent_kernel.run("%agent restore 1 --preview").check().stream_text
    assert "one.txt  2 bytes now" in preview, preview  # the action is not said twice
    assert "delete (" not in preview
