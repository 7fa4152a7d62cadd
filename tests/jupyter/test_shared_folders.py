"""A notebook whose folder is on a network file system (the mount table injected through
``LITE_AGENT_MOUNTS``: no NFS here): ``%load_ext`` says so in one line, the file backend still
works but ``refuse_network_fs`` refuses it, and PostgreSQL is the way out."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from fake_anthropic import FakeAnthropicServer
from nbkernel import SETUP, StartKernel
from pg_helpers import drop_schema


def test_a_network_home_is_named_at_load_and_refused_on_request(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    fake_anthropic: FakeAnthropicServer,
    backend_url_for: Callable[[str], str],
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    work = home / "alice"
    work.mkdir(parents=True)
    table = tmp_path / "mounts"
    table.write_text(f"/dev/sda1 / ext4 rw 0 0\nfiler:/home {home} nfs4 rw,vers=4.2 0 0\n")
    kernel = start_kernel(work, {**fake_env, "LITE_AGENT_MOUNTS": str(table)})
    fake_anthropic.default = "Done."

    loaded = kernel.run(SETUP).check()
    lines = [line for line in loaded.stream_text.splitlines() if "nfs4" in line]
    assert len(lines) == 1, loaded.stream_text
    assert "rely on local locking" in lines[0]
    assert "%config LiteAgentMagics.checkpointer_url" in lines[0]

    first = kernel.run("%%agent\nhello").check()  # warned, not blocked; said once only
    assert "Done." in first.plain and "nfs4" not in first.stream_text
    assert (work / ".lite_agent").is_dir()

    kernel.run("%config LiteAgentMagics.refuse_network_fs = True").check()
    refused = kernel.run("%%agent\nagain")
    assert refused.status == "error" and "Traceback" not in refused.stream_text
    assert "refused (refuse_network_fs is on)" in refused.stream_text, refused.text
    assert len(fake_anthropic.message_requests) == 1

    kernel.run(f"%config LiteAgentMagics.checkpointer_url = 'sqlite://{work}/sessions.db'")
    sqlite = kernel.run("%%agent\nvia sqlite")
    assert "refused (refuse_network_fs is on)" in sqlite.stream_text, sqlite.text
    assert not (work / "sessions.db").exists()

    url = backend_url_for("postgres")
    kernel.run(f"%config LiteAgentMagics.checkpointer_url = {url!r}").check()
    via_postgres = kernel.run("%%agent\nvia postgres").check()
    assert "Done." in via_postgres.plain
    assert len(fake_anthropic.message_requests) == 2


def test_each_student_has_a_schema_of_their_own(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    fake_anthropic: FakeAnthropicServer,
    backend_url_for: Callable[[str], str],
    tmp_path: Path,
) -> None:
    """The deployment of docs/jupyterhub.md: the schema named from ``JUPYTERHUB_USER``."""
    base = backend_url_for("postgres").split("?")[0]
    prefix = f"student_{uuid.uuid4().hex[:8]}_"  # test runs in parallel never share one
    fake_anthropic.default = "Done."
    listed = {}
    for user in ("alice", "bob"):
        kernel = start_kernel(tmp_path / user, {**fake_env, "JUPYTERHUB_USER": user})
        kernel.run(SETUP).check()
        kernel.run(
            "import os, re\n"
            f"schema = {prefix!r} + re.sub(r'[^a-z0-9_]', '_', os.environ['JUPYTERHUB_USER'])\n"
            f"%config LiteAgentMagics.checkpointer_url = {base!r} + '?schema=' + schema"
        ).check()
        kernel.run(f"%%agent\nhello from {user}").check()
        listed[user] = kernel.run("%agent sessions --text").check().text
    assert "hello from alice" in listed["alice"] and "hello from bob" not in listed["alice"]
    assert "hello from bob" in listed["bob"] and "hello from alice" not in listed["bob"]
    for user in ("alice", "bob"):
        drop_schema(prefix + user)


def test_a_lesson_replays_from_a_read_only_cassette(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    fake_anthropic: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    share = tmp_path / "share"
    share.mkdir()
    lesson = share / "lesson1.jsonl"
    teacher = start_kernel(tmp_path / "teacher", fake_env)
    teacher.run(SETUP).check()
    teacher.run(f"%agent record {lesson}").check()
    fake_anthropic.script("Primes: 2, 3, 5, 7.")
    teacher.run("%%agent\nlist the primes below 10").check()
    teacher.shutdown()
    lesson.chmod(0o444)
    share.chmod(0o555)
    before = (
        lesson.read_bytes(),
        lesson.stat().st_mtime_ns,
        sorted(p.name for p in share.iterdir()),
    )
    requests = len(fake_anthropic.requests)

    student = start_kernel(tmp_path / "student", {**fake_env, "JUPYTERHUB_USER": "carol"})
    student.run(SETUP).check()
    student.run(f'%config LiteAgentMagics.replay = "{lesson}"').check()
    student.run("%config LiteAgentMagics.replay_speed = 0").check()
    replayed = student.run("%%agent\nlist the primes below 10").check()
    assert "Primes: 2, 3, 5, 7." in replayed.plain
    assert len(fake_anthropic.requests) == requests  # answered offline
    after = (
        lesson.read_bytes(),
        lesson.stat().st_mtime_ns,
        sorted(p.name for p in share.iterdir()),
    )
    assert after == before
    share.chmod(0o755)
