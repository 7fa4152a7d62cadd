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


def test_every_status_names_the_model_that_answers(
    start_kernel: StartKernel, tmp_path: Path
) -> None:
    """Offline, nothing claims a live model: ``%agent info`` said "answers live model", the
    footer showed ``claude-sonnet-4-6`` and token counts for the stand-in, ``%agent record``
    said "no API key yet" while the scripted model was there to record."""
    kernel = start_kernel(tmp_path / "work", {})
    kernel.run(SETUP).check()
    kernel.run(SCRIPT.format(text="one")).check()
    turn = kernel.run("%%agent\nWrite a.txt.").check()
    footer = turn.text.rsplit("-- ", 1)[1]
    assert "scripted model, not a real model" in footer
    assert "claude" not in footer and "tokens" not in footer
    assert "prompt 1: %agent restore 1-" in footer
    info = kernel.run("%agent info").check().stream_text
    assert "scripted model (a stand-in" in info
    assert "(live)" not in info and "claude-sonnet" not in info and "live model" not in info
    kernel.run("import os; os.environ['ANTHROPIC_API_KEY'] = 'sk-ant-not-used-0123456789'")
    info = kernel.run("%agent info").check().stream_text  # use_model wins over a key
    assert "scripted model (a stand-in" in info and "(live)" not in info
    recording = kernel.run("%agent record lesson.jsonl").check().stream_text
    assert "answers of the scripted model" in recording and "no API key" not in recording
    kernel.run(SCRIPT.format(text="two")).check()
    kernel.run("%%agent\nWrite it again.").check()
    kernel.run("%agent replay lesson.jsonl").check()
    replayed = kernel.run("%%agent\nWrite it again.").check()
    footer = replayed.text.rsplit("-- ", 1)[1]
    assert "replayed from lesson.jsonl, not a live model" in footer
    assert "claude" not in footer and "tokens" not in footer
    info = kernel.run("%agent info").check().stream_text
    assert "replay of lesson.jsonl" in info and "(live)" not in info
    kernel.run("lite_agent_jupyter.use_model(None)").check()
    kernel.run("%agent live").check()
    info = kernel.run("%agent info").check().stream_text
    assert "claude-sonnet-4-6 (live)" in info
