"""A database password set in ``ipython_kernel_config.py`` never reaches a cell's output (issue
#17, defect 4): ``%agent config`` and ``%agent info`` print the checkpointer URL with its
userinfo password and its ``?password=`` redacted, and the backend still works with it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropicServer
from nbkernel import SETUP, StartKernel
from pg_helpers import PG_DSN, drop_schema, new_schema

SECRET = "Hunter2-db-secret"


@pytest.mark.postgres
def test_config_and_info_redact_the_checkpointer_url(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    fake_anthropic: FakeAnthropicServer,
    tmp_folder: Callable[[str], Path],
) -> None:
    schema = new_schema()
    # trust auth ignores the password: the URL works, and holds a secret to leak
    url = PG_DSN.replace("postgres@", f"postgres:{SECRET}@", 1)
    url += f"?password={SECRET}&application_name=lesson&schema={schema}"
    assert SECRET in url and "?" not in PG_DSN
    ipython_dir = tmp_folder("ipython")
    profile = ipython_dir / "profile_default"
    profile.mkdir()
    (profile / "ipython_kernel_config.py").write_text(
        f"c.LiteAgentMagics.checkpointer_url = {url!r}\n"
    )
    fake_anthropic.script("Stored in PostgreSQL.")
    kernel = start_kernel(tmp_folder("work"), {**fake_env, "IPYTHONDIR": str(ipython_dir)})
    try:
        kernel.run(SETUP).check()
        answered = kernel.run("%%agent\nhello").check()
        config = kernel.run("%agent config").check().stream_text
        info = kernel.run("%agent info").check().stream_text
    finally:
        drop_schema(schema)
    assert "Stored in PostgreSQL." in answered.plain
    assert "checkpointer_url" in config and "postgres:***@127.0.0.1" in config
    assert "password=***" in config and "application_name=lesson" in config
    assert "postgres:***@127.0.0.1" in info and "password=***" in info
    assert SECRET not in config + info + answered.text
