"""File snapshots in PostgreSQL: :class:`PostgresBlobStore` (``storage.Blobs``) and its
stand-alone factory, :func:`postgres_blob_store`.

Owns the SQL of ``<schema>.blobs`` and ``<schema>.blob_refs`` and the advisory lock that
keeps a collector from deleting a blob a writer has just decided to reuse. Apart from the
checkpointer because a blob store also stands alone (its own pool) and knows nothing of
sessions or events: it stores bytes by hash and who uses them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from psycopg_pool import AsyncConnectionPool

from ...errors import CorruptLogError
from ...storage import BlobCollection, BlobRef, blob_hash
from ._database import Attempt, Conn, Database
from ._schema import lock_key

_BIG_BLOB = 16 * 1024
"""Above this size, ``put`` asks whether a blob exists before sending its content."""
PROCESS_REF_TTL = 30 * 24 * 3600.0
"""Seconds after which a process-scope blob reference is dropped: PostgreSQL cannot tell
whether a process on another machine is still alive (the file store can, with a lock)."""
_COLLECT_POLL = 0.05


class PostgresBlobStore:
    """Content-addressed file snapshots in ``<schema>.blobs`` (implements ``storage.Blobs``).

    Keyed by sha256, deduplicated with ``ON CONFLICT DO NOTHING``, content checked against
    its hash on every read. PostgreSQL compresses large values itself (TOAST), so blobs are
    stored as they are (never as deltas: ``bases`` is always empty).

    References live in ``<schema>.blob_refs``. A write records its ref and stores (or
    reuses) the blob in one transaction holding a *shared* advisory lock of the schema's
    blobs; :meth:`collect` deletes, in one transaction holding it *exclusively*, the blobs
    no ref names and not used for ``grace`` seconds. So a collector never deletes a blob
    a writer has just decided to reuse, whichever machine either runs on.
    """

    def __init__(self, db: Database, *, owns: bool) -> None:
        self._db = db
        self._owns = owns
        q = db.q
        self._where = f"{db.where} {db.schema}.blobs"
        self._key = lock_key(db.schema, "blobs")
        self._sql_put = q(
            "INSERT INTO {schema}.blobs (hash, size, data) VALUES (%s, %s, %b)"
            " ON CONFLICT (hash) DO NOTHING"
        )
        self._sql_put_touch = q(
            "INSERT INTO {schema}.blobs (hash, size, data) VALUES (%s, %s, %b)"
            " ON CONFLICT (hash) DO UPDATE SET used = now()"
        )
        self._sql_touch = q("UPDATE {schema}.blobs SET used = now() WHERE hash = %s")
        self._sql_get = q("SELECT data FROM {schema}.blobs WHERE hash = %s")
        self._sql_has = q("SELECT 1 FROM {schema}.blobs WHERE hash = %s")
        self._sql_delete = q("DELETE FROM {schema}.blobs WHERE hash = %s")
        self._sql_hashes = q("SELECT hash FROM {schema}.blobs ORDER BY hash")
        self._sql_shared = b"SELECT pg_advisory_xact_lock_shared(%s)"
        self._sql_exclusive = b"SELECT pg_try_advisory_xact_lock(%s)"
        self._sql_refs = q(
            "INSERT INTO {schema}.blob_refs (scope, owner, hash)"
            " SELECT %s, %s, unnest(%s::text[]) ON CONFLICT DO NOTHING"
        )
        self._sql_refs_touch = q(
            "INSERT INTO {schema}.blob_refs (scope, owner, hash)"
            " SELECT %s, %s, unnest(%s::text[])"
            " ON CONFLICT (scope, owner, hash) DO UPDATE SET touched = now()"
        )
        self._sql_drop = q("DELETE FROM {schema}.blob_refs WHERE scope = %s AND owner = %s")
        self._sql_expire = q(
            "DELETE FROM {schema}.blob_refs WHERE scope LIKE 'process:%%'"
            " AND touched < now() - make_interval(secs => %s)"
        )
        self._sql_collect = q(
            "DELETE FROM {schema}.blobs b WHERE b.used < now() - make_interval(secs => %s)"
            " AND NOT EXISTS (SELECT 1 FROM {schema}.blob_refs r WHERE r.hash = b.hash)"
            " RETURNING b.hash"
        )
        self._sql_count = q("SELECT count(*) FROM {schema}.blobs")

    def __repr__(self) -> str:
        return f"PostgresBlobStore({self._db.where!r}, schema={self._db.schema!r})"

    @staticmethod
    def _check(digest: str) -> str:
        if not isinstance(digest, str) or len(digest) != 64 or digest.strip("0123456789abcdef"):
            raise ValueError(f"not a blob hash: {digest!r}")
        return digest

    async def _record(self, conn: Conn, ref: BlobRef, digests: list[str]) -> None:
        """Inside a transaction holding the shared lock: ``ref`` uses ``digests``."""
        sql_refs = self._sql_refs_touch if ref.transient else self._sql_refs
        await conn.execute(sql_refs, (ref.scope, ref.owner, digests))

    async def put(self, data: bytes, *, base: str | None = None, ref: BlobRef | None = None) -> str:
        """Store ``data`` (a full copy: ``base``, the previous version, is not used here)."""
        data = bytes(data)
        digest = blob_hash(data)

        async def op(conn: Conn, attempt: Attempt) -> None:
            async with conn.transaction():
                await conn.execute(self._sql_shared, (self._key,))
                if ref is not None:
                    await self._record(conn, ref, [digest])
                    if len(data) > _BIG_BLOB:  # do not send what is already there
                        cur = await conn.execute(self._sql_has, (digest,))
                        if await cur.fetchone() is not None:
                            return
                    await conn.execute(self._sql_put, (digest, len(data), data))
                    return
                # no ref: reusing the blob restarts its grace period
                if len(data) > _BIG_BLOB:
                    cur = await conn.execute(self._sql_touch, (digest,))
                    if cur.rowcount:
                        return
                await conn.execute(self._sql_put_touch, (digest, len(data), data))

        await self._db.run(op, what=f"put of blob {digest}")
        return digest

    async def put_many(self, items: Iterable[bytes], *, ref: BlobRef) -> list[str]:
        """``storage.SupportsPutMany``: every content recorded as ``ref``'s and stored in one
        transaction (an import of a whole session: one commit, not one per blob)."""
        contents = [bytes(data) for data in items]
        digests = [blob_hash(data) for data in contents]
        unique = dict(zip(digests, contents, strict=True))

        async def op(conn: Conn, attempt: Attempt) -> None:
            async with conn.transaction():
                await conn.execute(self._sql_shared, (self._key,))
                await self._record(conn, ref, list(unique))
                async with conn.cursor() as cur:
                    await cur.executemany(
                        self._sql_put, [(d, len(data), data) for d, data in unique.items()]
                    )

        await self._db.run(op, what=f"put of {len(unique)} blobs")
        return digests

    async def get(self, digest: str) -> bytes:
        self._check(digest)

        async def op(conn: Conn, attempt: Attempt) -> bytes | None:
            cur = await conn.execute(self._sql_get, (digest,), binary=True)
            row = await cur.fetchone()
            return bytes(row[0]) if row is not None else None

        data = await self._db.run(op, what=f"get of blob {digest}")
        if data is None:
            raise KeyError(f"blob {digest} is missing from {self._where}")
        if blob_hash(data) != digest:
            raise CorruptLogError(
                f"{self._where}[{digest}]", None, "content does not match its hash"
            )
        return data

    async def has(self, digest: str) -> bool:
        self._check(digest)

        async def op(conn: Conn, attempt: Attempt) -> bool:
            cur = await conn.execute(self._sql_has, (digest,))
            return await cur.fetchone() is not None

        return await self._db.run(op, what=f"lookup of blob {digest}")

    async def add_refs(self, ref: BlobRef, digests: Iterable[str]) -> None:
        wanted = [self._check(d) for d in dict.fromkeys(digests)]
        if not wanted:
            return

        async def op(conn: Conn, attempt: Attempt) -> None:
            async with conn.transaction():
                await conn.execute(self._sql_shared, (self._key,))
                await self._record(conn, ref, wanted)

        await self._db.run(op, what=f"references of {ref.owner}")

    async def drop_refs(self, ref: BlobRef) -> None:
        async def op(conn: Conn, attempt: Attempt) -> None:
            await conn.execute(self._sql_drop, (ref.scope, ref.owner))

        await self._db.run(op, what=f"drop of the references of {ref.owner}")

    async def collect(
        self, *, grace: float, stop: Callable[[], bool] | None = None
    ) -> BlobCollection:
        """One transaction under the exclusive lock (retried until writers let it in):
        expire old process-scope refs, delete what no ref names and is older than ``grace``."""

        async def op(conn: Conn, attempt: Attempt) -> BlobCollection | None:
            async with conn.transaction():
                cur = await conn.execute(self._sql_exclusive, (self._key,))
                row = await cur.fetchone()
                if row is None or not row[0]:
                    return None
                await conn.execute(self._sql_expire, (PROCESS_REF_TTL,))
                cur = await conn.execute(self._sql_collect, (float(grace),))
                deleted = tuple(str(r[0]) for r in await cur.fetchall())
                cur = await conn.execute(self._sql_count)
                count = await cur.fetchone()
                return BlobCollection(deleted=deleted, kept=int(count[0]) if count else 0)

        while True:
            result = await self._db.run(op, what="blob collection")
            if result is not None:
                return result
            if stop is not None and stop():
                return BlobCollection(skipped="stopped")
            await asyncio.sleep(_COLLECT_POLL)

    async def delete(self, digest: str) -> None:
        self._check(digest)

        async def op(conn: Conn, attempt: Attempt) -> None:
            await conn.execute(self._sql_delete, (digest,))

        await self._db.run(op, what=f"delete of blob {digest}")

    async def bases(self, digest: str) -> list[str]:
        """Always empty: this store keeps full copies, never deltas."""
        return []

    async def hashes(self) -> list[str]:
        async def op(conn: Conn, attempt: Attempt) -> list[str]:
            cur = await conn.execute(self._sql_hashes)
            return [str(row[0]) for row in await cur.fetchall()]

        return await self._db.run(op, what="list of blobs")

    async def close(self) -> None:
        """Close the pool if this store opened it (a checkpointer's ``blobs()`` does not)."""
        if self._owns:
            await self._db.close()


def postgres_blob_store(
    dsn: str = "",
    *,
    schema: str = "lite_agent",
    pool: AsyncConnectionPool[Any] | None = None,
    min_size: int = 1,
    max_size: int = 4,
    timeout: float = 30.0,
    connect_timeout: int = 10,
) -> PostgresBlobStore:
    """A stand-alone :class:`PostgresBlobStore` with its own pool (close it when done).

    With a checkpointer at hand, prefer ``checkpointer.blobs()``, which shares its pool.
    """
    db = Database(
        dsn,
        schema,
        pool=pool,
        min_size=min_size,
        max_size=max_size,
        timeout=timeout,
        connect_timeout=connect_timeout,
    )
    return PostgresBlobStore(db, owns=True)
