"""Two notebooks never share a namespace (#18, defect 8), in real kernels: ``Sales
Report.ipynb`` is hashed to ``sales-report-d7ed0111``, the plain name of
``sales-report-d7ed0111.ipynb``. Sessions a release before the fix kept under the old name of
such a notebook are still found."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from fake_anthropic import FakeAnthropicServer
from nbkernel import Kernel

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.providers.scripted import scripted
from lite_agent_jupyter.storage import legacy_notebook_namespace, notebook_namespace


def test_a_plain_name_equal_to_another_notebooks_hashed_name_gets_its_own_namespace(
    notebook_kernel: Callable[[Path], Kernel],
    tmp_path: Path,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    first = folder / "Sales Report.ipynb"
    second = folder / f"{notebook_namespace(first.name)}.ipynb"  # sales-report-d7ed0111.ipynb
    assert notebook_namespace(first.name) == "sales-report-d7ed0111"
    assert notebook_namespace(second.name) != notebook_namespace(first.name)
    fake_anthropic.script("For the report.", "For the other one.")
    kernels = {}
    for notebook in (first, second):
        notebook.write_text("{}")
        kernels[notebook] = notebook_kernel(notebook)
    kernels[first].run("%%agent\nprompt of the sales report").check()
    listed = kernels[second].run("%agent sessions").check().stream_text
    assert "sales report" not in listed
    checkpoints = kernels[second].run("%agent checkpoints").check().text
    assert "sales report" not in checkpoints
    kernels[second].run("%%agent\nprompt of the other notebook").check()
    assert len(fake_anthropic.message_requests[1].messages) == 1  # nothing inherited
    assert "other notebook" not in kernels[first].run("%agent sessions").check().stream_text


def test_sessions_kept_under_the_old_name_of_a_notebook_are_still_found(
    notebook_kernel: Callable[[Path], Kernel],
    tmp_path: Path,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    notebook = folder / "data-20241231.ipynb"  # "20241231" is 8 hex digits
    notebook.write_text("{}")
    old = legacy_notebook_namespace(notebook.name)
    assert old == "data-20241231" != notebook_namespace(notebook.name)

    async def written_by_an_older_release() -> None:
        async with create_lite_agent(
            model=scripted(["Noted: the answer is 42."]),
            workdir=folder,
            storage=Storage(folder / ".lite_agent", old),
        ) as agent:
            await agent.send("remember that the answer is 42")

    asyncio.run(written_by_an_older_release())
    kernel = notebook_kernel(notebook)
    fake_anthropic.script("It is 42.")
    cell = kernel.run("%%agent\nwhat is the answer?").check()
    assert "continuing session" in cell.markdown
    assert "the answer is 42" in str(fake_anthropic.message_requests[-1].messages)
