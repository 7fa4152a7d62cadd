"""Fixtures of the checkpoint conformance kit: every test here runs against every backend.

``backend_url_for`` (in ``tests/conftest.py``) names a fresh store of any backend.

A backend is named by URL (``checkpointer_from_url``), so a test can hand the same store to
child processes. PostgreSQL tests use the server this machine kind runs (127.0.0.1:5432, trust
auth, database ``test``), each test in its own schema, dropped afterwards; if the server is
unreachable they fail, never skip.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from lite_agent_jupyter.checkpoint.protocol import Checkpointer
from lite_agent_jupyter.checkpoint.url import checkpointer_from_url

ALL_BACKENDS = ["memory", "file", "sqlite", "sqlite-memory", "postgres"]
SHARED_BACKENDS = ["file", "sqlite", "postgres"]
"""Backends several OS processes can share (for the multi-process tests)."""


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
