"""The PostgreSQL schema: its tables, their numbered migrations, applying them, and the
advisory-lock keys of a schema.

Owns what the server holds before any row is written, so the DDL and its version history
read in one place, apart from the code that opens connections (:mod:`._database`) and the
SQL each store runs (:mod:`._checkpointer`, :mod:`._blobs`, :mod:`._task_lists`). It knows
nothing of pools or event loops: :func:`migrate` gets one connection.

Schema (version 5)::

    <schema>.schema_version (version PK, applied_at)          one row per applied migration
    <schema>.sessions (id PK, head, mtime, title_json, turns) index sessions_listing_idx
                                                              (mtime DESC, id DESC) (version 5)
    <schema>.events   (session_id, seq, anchor, body)         PK (session_id, seq)
    <schema>.blobs    (hash PK, size, data bytea, created, used)
    <schema>.append_events(...)                               the append, as one plpgsql call
    <schema>.task_lists (id PK, data, mtime)                  the agent's task lists (version 2)
    <schema>.blob_refs (scope, owner, hash, touched)          who uses a blob (version 3)
    <schema>.tombstones (id PK, deleted)                      deleted sessions (version 4)

``anchor`` is true for a prompt checkpoint (the stored column keeps its version-1 name; the
code and the API say "checkpoint").

``title_json`` is the title as a JSON string: ``text`` cannot hold NUL, a prompt can.

``body text`` keeps each line exactly as ``events.encode`` wrote it (why not ``jsonb``: see
docs/design.md).

Every statement is parameterised; the schema name is quoted with
:class:`psycopg.sql.Identifier` (:func:`formatter`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg
from psycopg import sql

from ...errors import UnsupportedVersionError


@dataclass(frozen=True, slots=True)
class Function:
    """A ``CREATE FUNCTION`` migration step: ``{body}`` in ``header`` receives ``body``
    (itself formatted with the schema) as a quoted string literal, so no schema name can
    break out of the function's text."""

    header: LiteralString
    body: LiteralString


# The append of one batch, in one statement (one round trip, one implicit transaction). The
# UPDATE of the sessions row both takes the session's row lock and moves head/mtime/title_json/turns
# (under READ COMMITTED a blocked UPDATE re-reads the newest row version once it gets the lock,
# so concurrent appends to one session queue and each sees the others' heads); a new session
# is inserted instead (a concurrent creator makes the loop retry the UPDATE). Then the expected
# head is checked (LA409 with the real head as DETAIL rolls the whole statement back, the
# sessions row included) and the events are inserted with their seq spliced into the lines.
APPEND_FUNCTION = Function(
    header="""CREATE FUNCTION {schema}.append_events(
        p_id text, p_expected bigint, p_prefix text, p_tails text[], p_anchors boolean[],
        p_title_json text, p_turns integer
    ) RETURNS bigint LANGUAGE plpgsql AS {body}""",
    body="""
DECLARE
    v_head bigint;
    v_count integer := cardinality(p_tails);
BEGIN
    LOOP
        UPDATE {schema}.sessions s
        SET head = s.head + v_count, mtime = clock_timestamp(),
            title_json = coalesce(s.title_json, p_title_json), turns = s.turns + p_turns
        WHERE s.id = p_id
        RETURNING s.head - v_count INTO v_head;
        EXIT WHEN FOUND;
        INSERT INTO {schema}.sessions AS s (id, head, mtime, title_json, turns)
        VALUES (p_id, v_count, clock_timestamp(), p_title_json, p_turns)
        ON CONFLICT (id) DO NOTHING;
        IF FOUND THEN
            v_head := 0;
            EXIT;
        END IF;
        -- Another transaction created the session meanwhile: its row is there now.
    END LOOP;
    IF p_expected IS NOT NULL AND p_expected <> v_head THEN
        RAISE EXCEPTION USING ERRCODE = 'LA409', MESSAGE = 'expected head mismatch',
            DETAIL = v_head::text;
    END IF;
    INSERT INTO {schema}.events (session_id, seq, anchor, body)
    SELECT p_id, v_head + t.n, t.anchor, p_prefix || (v_head + t.n)::text || t.tail
    FROM unnest(p_tails, p_anchors) WITH ORDINALITY AS t(tail, anchor, n);
    RETURN v_head + v_count;
END
""",
)

CONFLICT_STATE = "LA409"
"""The SQLSTATE ``append_events`` raises on an ``expected_head`` mismatch (real head in DETAIL)."""

# Numbered migrations: version -> statements, applied in order, each version in the same
# transaction as its schema_version row. Never edit a released version; add the next one.
MIGRATIONS: dict[int, tuple[LiteralString | Function, ...]] = {
    1: (
        """CREATE TABLE {schema}.sessions (
            id text PRIMARY KEY,
            head bigint NOT NULL DEFAULT 0 CHECK (head >= 0),
            mtime timestamptz NOT NULL DEFAULT clock_timestamp(),
            title_json text,
            turns integer NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX sessions_mtime_idx ON {schema}.sessions (mtime DESC)",
        """CREATE TABLE {schema}.events (
            session_id text NOT NULL,
            seq bigint NOT NULL CHECK (seq > 0),
            anchor boolean NOT NULL DEFAULT false,
            body text NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""",
        """CREATE TABLE {schema}.blobs (
            hash text PRIMARY KEY CHECK (hash ~ '^[0-9a-f]{{64}}$'),
            size bigint NOT NULL,
            data bytea NOT NULL,
            created timestamptz NOT NULL DEFAULT now()
        )""",
        APPEND_FUNCTION,
    ),
    2: (
        """CREATE TABLE {schema}.task_lists (
            id text PRIMARY KEY,
            data text NOT NULL,
            mtime timestamptz NOT NULL DEFAULT clock_timestamp()
        )""",
    ),
    3: (
        # Who uses which blob (storage.BlobRef), recorded before a blob is stored or reused;
        # the blobs there before are pinned as "legacy" (a log may name them) and kept.
        """CREATE TABLE {schema}.blob_refs (
            scope text NOT NULL,
            owner text NOT NULL,
            hash text NOT NULL,
            touched timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (scope, owner, hash)
        )""",
        "CREATE INDEX blob_refs_hash_idx ON {schema}.blob_refs (hash)",
        "ALTER TABLE {schema}.blobs ADD COLUMN used timestamptz NOT NULL DEFAULT now()",
        "INSERT INTO {schema}.blob_refs (scope, owner, hash)"
        " SELECT 'legacy', 'legacy', hash FROM {schema}.blobs",
    ),
    4: (
        # Deleted sessions (SupportsTombstones): a writer that saw one is refused.
        """CREATE TABLE {schema}.tombstones (
            id text PRIMARY KEY,
            deleted timestamptz NOT NULL DEFAULT clock_timestamp()
        )""",
    ),
    5: (
        # list() (#24): an index in the listing's whole order (mtime, then id, both
        # descending), so a listing or a page is a walk of it with no sort on the server.
        "DROP INDEX {schema}.sessions_mtime_idx",
        "CREATE INDEX sessions_listing_idx ON {schema}.sessions (mtime DESC, id DESC)",
    ),
}


def lock_key(schema: str, what: str = "migrate") -> int:
    """A signed 64-bit advisory-lock key for ``what`` (migrating, the blobs) in ``schema``."""
    digest = hashlib.sha256(f"lite_agent_jupyter:{what}:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def formatter(schema: str) -> Callable[[LiteralString], bytes]:
    """A statement of ``schema`` as sent: ``{schema}`` in its text becomes the quoted name."""
    ident = sql.Identifier(schema)
    return lambda text: sql.SQL(text).format(schema=ident).as_bytes(None)


async def migrate(conn: psycopg.AsyncConnection[Any], schema: str, where: str) -> None:
    """Bring ``schema`` (at ``where``, for messages) to the latest version, on ``conn`` (in
    autocommit mode): each missing version in its own transaction with its schema_version row,
    concurrent first openers serialised by an advisory lock. A schema newer than this code
    knows raises :class:`~lite_agent_jupyter.errors.UnsupportedVersionError`."""
    q = formatter(schema)
    latest = max(MIGRATIONS)
    version = await _version(conn, schema, q)
    if version == latest:
        return
    _refuse_newer(schema, where, version, latest)
    async with conn.transaction():
        # Serialise concurrent first openers (CREATE ... IF NOT EXISTS races otherwise).
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
        await conn.execute(q("CREATE SCHEMA IF NOT EXISTS {schema}"))
        await conn.execute(
            q(
                "CREATE TABLE IF NOT EXISTS {schema}.schema_version ("
                " version integer PRIMARY KEY,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
        )
        version = await _version(conn, schema, q)
        _refuse_newer(schema, where, version, latest)
        for number in range(version + 1, latest + 1):
            for statement in MIGRATIONS[number]:
                await conn.execute(_statement(schema, statement))
            await conn.execute(
                q("INSERT INTO {schema}.schema_version (version) VALUES (%s)"),
                (number,),
            )


def _statement(schema: str, statement: LiteralString | Function) -> bytes:
    if isinstance(statement, str):
        return formatter(schema)(statement)
    ident = sql.Identifier(schema)
    body = sql.SQL(statement.body).format(schema=ident).as_string(None)
    return sql.SQL(statement.header).format(schema=ident, body=sql.Literal(body)).as_bytes(None)


async def _version(
    conn: psycopg.AsyncConnection[Any], schema: str, q: Callable[[LiteralString], bytes]
) -> int:
    cur = await conn.execute(
        "SELECT to_regclass(format('%%I.schema_version', %s::text)) IS NOT NULL",
        (schema,),
    )
    row = await cur.fetchone()
    if row is None or not row[0]:
        return 0
    cur = await conn.execute(q("SELECT coalesce(max(version), 0) FROM {schema}.schema_version"))
    row = await cur.fetchone()
    return int(row[0]) if row is not None else 0


def _refuse_newer(schema: str, where: str, version: int, latest: int) -> None:
    if version > latest:
        raise UnsupportedVersionError(
            f"PostgreSQL schema {schema!r} at {where} is at version {version}, "
            f"written by a newer lite_agent_jupyter (this one knows up to {latest}); "
            "upgrade to use it"
        )
