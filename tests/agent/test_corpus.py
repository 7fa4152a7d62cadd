"""Old sessions stay readable: every release's corpus (``tests/corpus/<version>/``, written by
``tests/corpus/generate.py``) opens with this release on each backend it was written with
(file logs, a SQLite database, a PostgreSQL dump restored into a fresh schema, a bundle
imported), lists the same checkpoints, undoes the restore it ended with, and restores every
checkpoint to exactly the files recorded when it was written. A change of the event or schema
format that breaks this needs a migration, with this test as its test (docs/portability.md)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_helpers import PG_DSN, drop_schema, new_schema

from lite_agent_jupyter import LiteAgent, Storage, checkpointer_from_url, create_lite_agent
from lite_agent_jupyter.providers.scripted import scripted

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
RELEASES = sorted(p for p in CORPUS.iterdir() if (p / "expected.json").is_file())
BACKENDS = ["file", "sqlite", "postgres", "bundle"]
NAMESPACE = "corpus"


def digest_files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def restore_dump(dump: Path, schema: str) -> None:
    """Replay a ``pg_dump --inserts`` of schema ``lite_agent_corpus`` as ``schema``."""
    sql = dump.read_text().replace("lite_agent_corpus", schema)
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(sql.encode())  # no parameters: run as one script


@pytest.fixture
async def opened(tmp_path: Path) -> AsyncIterator[Callable[[Path, str], Any]]:
    """``await opened(release, backend)`` -> (agent, workdir, expected): the release's store
    copied to a temporary folder (the corpus is never written) and opened by this release."""
    agents: list[LiteAgent] = []
    schemas: list[str] = []

    async def open_release(release: Path, backend: str) -> tuple[LiteAgent, Path, Any]:
        expected = json.loads((release / "expected.json").read_text())
        workdir = tmp_path / "workdir"
        shutil.copytree(release / "workdir", workdir)
        store = tmp_path / "store"
        url: str | None = None
        if backend == "bundle":
            store.mkdir()
        else:
            shutil.copytree(release / backend / "store", store)
        if backend == "sqlite":
            shutil.copy2(release / "sqlite" / "sessions.db", tmp_path / "sessions.db")
            url = f"sqlite://{tmp_path / 'sessions.db'}"
        elif backend == "postgres":
            schema = new_schema()
            schemas.append(schema)
            restore_dump(release / "postgres" / "dump.sql", schema)
            url = f"{PG_DSN}?schema={schema}"
        agent = create_lite_agent(
            model=scripted([]),
            workdir=workdir,
            storage=Storage(store, NAMESPACE),
            checkpointer=checkpointer_from_url(url) if url else None,
        )
        agents.append(agent)
        if backend == "bundle":
            result = await agent.import_session(release / "bundle" / "session.zip")
            assert result.session_id == expected["session_id"]
            assert result.notebook == "corpus.ipynb"
        return agent, workdir, expected["bundle" if backend == "bundle" else backend]

    yield open_release
    for agent in agents:
        checkpointer = agent.checkpointer
        await agent.close()
        await checkpointer.close()
    for schema in schemas:
        drop_schema(schema)


def test_there_is_a_corpus_of_this_release() -> None:
    from lite_agent_jupyter import __version__

    assert RELEASES, "no corpus: run tests/corpus/generate.py"
    assert (CORPUS / __version__ / "expected.json").is_file()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("release", RELEASES, ids=lambda p: p.name)
async def test_a_stored_session_lists_undoes_and_restores(
    release: Path, backend: str, opened: Callable[[Path, str], Any]
) -> None:
    agent, workdir, expected = await opened(release, backend)
    sid = json.loads((release / "expected.json").read_text())["session_id"]
    assert digest_files(workdir) == expected["undo"]["before"]
    listed = [
        {"seq": c.seq, "prompt": c.prompt, "ts": c.ts.isoformat(), "files": list(c.files)}
        for c in await agent.list_checkpoints(sid)
    ]
    assert listed == expected["listed"]  # as stored, times included; the last prompt rewound
    assert len(listed) == len(expected["checkpoints"]) - 1
    await agent.undo_restore(sid)  # the undo record the corpus ends with
    assert digest_files(workdir) == expected["undo"]["after"]
    checkpoints = await agent.list_checkpoints(sid)  # the last one's time is the undo's
    assert [(c.seq, c.prompt, list(c.files)) for c in checkpoints] == [
        (c["seq"], c["prompt"], c["files"]) for c in expected["checkpoints"]
    ]
    for checkpoint, want in zip(checkpoints, expected["restores"], strict=True):
        await agent.restore(sid, checkpoint.seq)
        assert digest_files(workdir) == want["files"], checkpoint.prompt
        await agent.undo_restore(sid)
        assert digest_files(workdir) == expected["undo"]["after"]
    assert (await agent.usage(sid)).calls > 0  # the assistant events still decode
