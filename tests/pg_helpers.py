"""The PostgreSQL server the tests use (this machine kind runs one at 127.0.0.1:5432)."""

from __future__ import annotations

import os
import uuid

PG_DSN = os.environ.get("LITE_AGENT_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
"""The PostgreSQL server of this machine kind; tests that need it fail (never skip) without it."""


def new_schema() -> str:
    """A fresh, unique schema name (created by the backend on first use)."""
    return f"t_{uuid.uuid4().hex[:16]}"


def schema_of(url: str) -> str:
    """The schema a ``postgresql://...?schema=NAME`` URL (of :func:`new_schema`) names."""
    return url.rpartition("schema=")[2]


def drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
