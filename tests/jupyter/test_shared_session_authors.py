"""Who did what, in real kernels: two users (``JUPYTERHUB_USER`` set per kernel) on one
PostgreSQL session. Each prompt and each approval shows its author in ``%agent checkpoints``;
with ``require_same_user_approval`` a click that a front end signs with another person's name
(the message header's ``username``, as a collaborator's front end would send it) is refused.
This test plays the widget front end, as ``test_approval_buttons.py`` does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, write_then_done
from nbkernel import Kernel, StartKernel
from test_approval_buttons import _run_answering


def _kernel(start: StartKernel, env: dict[str, str | None], folder: Path, user: str) -> Kernel:
    kernel = start(folder, {**env, "JUPYTERHUB_USER": user})
    kernel.run("%load_ext lite_agent_jupyter").check()  # approvals: "ask", the default
    return kernel


def test_two_users_on_one_postgres_session(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    fake_anthropic: FakeAnthropicServer,
    backend_url_for: Callable[[str], str],
    tmp_path: Path,
) -> None:
    url = backend_url_for("postgres")
    alice = _kernel(start_kernel, fake_env, tmp_path / "alice", "alice")
    bob = _kernel(start_kernel, fake_env, tmp_path / "bob", "bob")
    for kernel in (alice, bob):
        kernel.run(f"%config LiteAgentMagics.checkpointer_url = {url!r}").check()

    fake_anthropic.script(*write_then_done("a.txt"))
    _run_answering(alice, "%%agent\nwrite a.txt", "Allow").check()
    assert (tmp_path / "alice" / "a.txt").exists()

    assert "(1 prompt)" in bob.run("%agent resume").check().text  # alice's session
    fake_anthropic.script(*write_then_done("b.txt"))
    _run_answering(bob, "%%agent\nwrite b.txt", "Allow").check()
    assert (tmp_path / "bob" / "b.txt").exists()

    table = bob.run("%agent checkpoints --text").check().text
    assert "alice; write_file approved by alice" in table, table
    assert "bob; write_file approved by bob" in table, table
    assert alice.run("%agent checkpoints --text").check().text == table

    # a collaborator in alice's notebook: the click's header names bob
    alice.run("%config LiteAgentMagics.require_same_user_approval = True").check()
    alice.kc.session.username = "bob"
    fake_anthropic.script(*write_then_done("c.txt"))
    refused = _run_answering(alice, "%%agent\nwrite c.txt", "Allow").check()
    assert not (tmp_path / "alice" / "c.txt").exists()
    assert "only alice, who wrote this prompt" in refused.html, refused.html
    told = fake_anthropic.message_requests[-1].messages[-1]["content"][0]
    assert told["is_error"] and "the approval by bob was refused" in str(told["content"])

    # alice herself (her front end names no one else) may approve
    alice.kc.session.username = "username"
    fake_anthropic.script(*write_then_done("c.txt"))
    _run_answering(alice, "%%agent\nwrite c.txt again", "Allow").check()
    assert (tmp_path / "alice" / "c.txt").exists()
    table = bob.run("%agent checkpoints --text").check().text
    rows = [line for line in table.splitlines() if "write c.txt" in line]
    assert len(rows) == 2 and "approved by" not in rows[0]
    assert "alice; write_file approved by alice" in rows[1]
