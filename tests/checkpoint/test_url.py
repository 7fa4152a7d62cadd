"""checkpointer_from_url: naming a backend by URL (config files, %config, child processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lite_agent_jupyter.checkpoint import (
    FileCheckpointer,
    MemoryCheckpointer,
    SQLiteCheckpointer,
    checkpointer_from_url,
)
from lite_agent_jupyter.checkpoint.url import redact_url


async def test_schemes(tmp_path: Path) -> None:
    stores = [
        checkpointer_from_url("memory:"),
        checkpointer_from_url(f"file://{tmp_path}/a%20b"),
        checkpointer_from_url(f"file://{tmp_path}/d?durable=yes"),
        checkpointer_from_url(f"sqlite://{tmp_path}/s.db"),
        checkpointer_from_url(f"SQLITE://{tmp_path}/s.db?durable=0"),
        checkpointer_from_url("sqlite:///:memory:"),
    ]
    assert isinstance(stores[0], MemoryCheckpointer)
    assert isinstance(stores[1], FileCheckpointer) and stores[1].directory == tmp_path / "a b"
    assert isinstance(stores[2], FileCheckpointer) and stores[2].durable
    assert isinstance(stores[3], SQLiteCheckpointer) and not stores[3].durable
    assert isinstance(stores[4], SQLiteCheckpointer) and stores[4].file == str(tmp_path / "s.db")
    assert isinstance(stores[5], SQLiteCheckpointer) and stores[5].file == ":memory:"
    for store in stores:
        await store.close()
    assert list(tmp_path.iterdir()) == []  # building one writes nothing


@pytest.mark.parametrize("url", ["ftp://x/y", "redis://localhost", "", "file://", "sqlite://"])
def test_bad_urls(url: str) -> None:
    with pytest.raises(ValueError):
        checkpointer_from_url(url)


def test_passwords_never_appear_in_errors() -> None:
    with pytest.raises(ValueError) as info:
        checkpointer_from_url("mysql://user:s3cret@host/db")
    assert "s3cret" not in str(info.value) and "user:***@host" in str(info.value)
    assert redact_url("postgresql://u:pw@h:5432/d") == "postgresql://u:***@h:5432/d"
    assert redact_url("postgresql://u@h/d") == "postgresql://u@h/d"


def test_postgres_is_imported_lazily() -> None:
    import lite_agent_jupyter.checkpoint as checkpoint

    factory = checkpoint.postgres_checkpointer
    assert callable(factory) and factory.__module__.endswith(".postgres")
    with pytest.raises(AttributeError):
        _ = checkpoint.no_such_name  # type: ignore[attr-defined]
