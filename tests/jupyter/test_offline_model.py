"""The offline models in a real kernel: a scripted stand-in set with ``use_model`` (again and
again on one session) and what every status text says about the model that answers."""

from __future__ import annotations

from pathlib import Path

from nbkernel import SETUP, StartKernel

SCRIPT = """\
import lite_agent_jupyter
from lite_agent_jupyter.providers import call, reply, scripted
lite_agent_jupyter.use_model(scripted([
    reply("Writing.", [call("write_file", path="a.txt", content="{text}")]),
    "Done.",
]))
"""


def test_use_model_twice_on_one_session_keeps_tool_use_ids_unique(
    start_kernel: StartKernel, tmp_path: Path
) -> None:
    """A second ``use_model(scripted(...))`` answering the same session: the new script's tool
    calls get ids of their own (it failed with "toolu_scripted_0001 is repeated")."""
    kernel = start_kernel(tmp_path / "work", {})
    kernel.run(SETUP).check()
    kernel.run(SCRIPT.format(text="one")).check()
    first = kernel.run("%%agent\nWrite a.txt.").check()
    kernel.run(SCRIPT.format(text="two")).check()
    second = kernel.run("%%agent\nWrite it again.").check()
    assert "ProviderError" not in first.text + second.text
    assert "Done." in second.markdown
    assert (tmp_path / "work" / "a.txt").read_text() == "two"
