"""Fixtures of the checkpoint conformance kit: every test here runs against every backend.

A backend is named by URL (``checkpointer_from_url``), so a test can hand the same store to
child processes. PostgreSQL tests use the server this machine kind runs (127.0.0.1:5432, trust
auth, database ``test``), each test in its own schema, dropped afterwards; if the server is
unreachable they fail, never skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from lite_agent_jupyter.checkpoint.protocol import Checkpointer
from lite_agent_jupyter.checkpoint.url import checkpointer_from_url

PG_DSN = os.environ.get("LITE_AGENT_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")

ALL_BACKENDS = ["memory", "file", "sqlite", "sqlite-memory", "postgres"]
SHARED_BACKENDS = ["file", "sqlite", "postgres"]
"""Backends several OS processes can share (for the multi-process tests)."""


def _pg_drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def backend_url_for(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """``backend_url_for(name)`` -> a fresh URL for that backend, cleaned up after the test."""
    schemas: list[str] = []

    def make(name: str) -> str:
        if name == "memory":
            return "memory:"
        if name == "file":
            return f"file://{tmp_path / 'store'}"
        if name == "sqlite":
            return f"sqlite://{tmp_path / 'store.db'}"
        if name == "sqlite-memory":
            return "sqlite:///:memory:"
        if name == "postgres":
            schema = f"t_{uuid.uuid4().hex[:16]}"
            schemas.append(schema)
            return f"{PG_DSN}?schema={schema}"
        raise ValueError(name)

    yield make
    for schema in schemas:
        _pg_drop_schema(schema)


@pytest.fixture(params=ALL_BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def backend_url(backend_name: str, backend_url_for: Callable[[str], str]) -> str:
    return backend_url_for(backend_name)


@pytest.fixture
async def store(backend_url: str) -> AsyncIterator[Checkpointer]:
    """A fresh, empty Checkpointer of the current backend."""
    checkpointer = checkpointer_from_url(backend_url)
    try:
        yield checkpointer
    finally:
        await checkpointer.close()


@pytest.fixture
async def reopen(backend_url: str) -> AsyncIterator[Callable[[], Checkpointer]]:
    """``reopen()`` -> another Checkpointer object on the store of ``store`` (a "fresh
    process" view, with cold caches); closed after the test. Only meaningful for backends
    whose state outlives an object (not ``memory`` / ``sqlite-memory``)."""
    opened: list[Checkpointer] = []

    def make() -> Checkpointer:
        checkpointer = checkpointer_from_url(backend_url)
        opened.append(checkpointer)
        return checkpointer

    yield make
    for checkpointer in opened:
        await checkpointer.close()
