"""The README's notebook tour runs as written: its ``ipython`` blocks, in order, in a real
kernel against the fake Messages API (which writes the file the ``%%agent`` block asks for).
``tests/test_readme.py`` checks the names in every page's blocks; this runs the front door's.
"""

from __future__ import annotations

import re
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, tool_reply
from nbkernel import StartKernel
from test_readme import ALL_BLOCKS, README


def test_the_readme_notebook_tour_runs_in_a_kernel(
    start_kernel: StartKernel,
    fake_anthropic: FakeAnthropicServer,
    fake_env: dict[str, str | None],
    tmp_path: Path,
) -> None:
    fake_anthropic.script(
        tool_reply("Writing it.", "write_file", path="hello.py", content="def greet(name): ...\n"),
        "Created hello.py.",
    )
    kernel = start_kernel(tmp_path / "work", fake_env)
    blocks = [b for b in ALL_BLOCKS if b.page == README and b.lang == "ipython"]
    assert any(b.code.startswith("%%agent") for b in blocks), "the README lost its tour"
    for block in blocks:
        cell = kernel.run(block.code)
        assert cell.status == "ok", f"{block.where}\n{cell.text}"
        if block.code.startswith("%%agent"):
            assert "write_file hello.py (+1 line)" in cell.plain, cell.plain
            assert re.search(r"%agent restore \S+", cell.plain), cell.plain
    assert (tmp_path / "work" / "hello.py").exists()
