"""An agent's portability (``agent.portability``): a session exported to one bundle file
and imported into any agent, on any backend, machine or workdir.

:mod:`.bundle` owns the file format and every check an untrusted bundle must pass; this is
the agent's side: which session, held idle while it is read (no turn may append meanwhile,
and a half-done restore is settled first), and, on import, the order of the writes (blobs,
records, the log last) so that a failure leaves no half-visible session. ``LiteAgent``'s
``export_session`` / ``import_session`` delegate here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from ..checkpoint.protocol import Checkpointer, SupportsVerbatimAppend, new_session_id
from ..errors import BundleError
from ..redact import Redactor
from ..storage import BlobRef, Blobs, Storage, SupportsPutMany, write_private_file
from . import bundle
from .bundle import DEFAULT_MAX_SIZE, BundleInfo, ImportResult
from .bundle_secrets import redact_session
from .sessions_api import Sessions
from .turns import TurnRunner

__all__ = ["Portability"]


class Portability:
    """Export and import of this agent's sessions. ``sessions`` picks the session and
    deletes or resumes one; ``recover`` settles a half-done restore before an export (time
    travel's); the rest are the stores a bundle is read from and written to."""

    def __init__(
        self,
        sessions: Sessions,
        *,
        checkpointer: Checkpointer,
        storage: Storage,
        blobs: Blobs,
        blob_ref: Callable[[str], BlobRef],
        redactor: Redactor,
        runner: TurnRunner,
        recover: Callable[[str], Awaitable[bool]],
        ensure_storage: Callable[[], None],
    ) -> None:
        self._sessions = sessions
        self._checkpointer = checkpointer
        self._storage = storage
        self._blobs = blobs
        self._blob_ref = blob_ref
        self._redactor = redactor
        self._runner = runner
        self._recover = recover
        self._ensure_storage = ensure_storage

    async def export_session(
        self,
        path: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        cassette: str | os.PathLike[str] | None = None,
        notebook: str | None = None,
        with_kernel: bool = False,
    ) -> BundleInfo:
        """Write the session (default: the current one) to the bundle file ``path``
        (replaced atomically, mode 0600: it holds the conversation). ``cassette``: a
        cassette file to carry along. ``notebook``: the notebook's name to record (its file
        name only). The session must be idle; an interrupted restore is finished or rolled
        back first. The agent's secrets are taken out of the file snapshots the bundle
        carries (``BundleInfo.redacted`` names the files); a secret in a binary file refuses
        the export with a :class:`~.errors.BundleError` naming it (see
        :mod:`.bundle_secrets`). ``with_kernel``: carry the kernel variables' snapshots
        (pickles) too; left out by default (docs/security.md)."""
        sid = self._sessions.time_travel_session("export_session", session_id)
        cassette_data = Path(cassette).read_bytes() if cassette is not None else None
        async with self._runner.idle(sid):
            await self._recover(sid)
            events = await self._checkpointer.read(sid)
            if not events:
                raise BundleError(f"session {sid!r} has no events: nothing to export")
            records = bundle.archive_records(self._storage.archive_dir, sid)
            branches = bundle.archive_branches(self._storage.archive_dir, sid)
            needed = set(bundle.needed_blobs(events, records))
            if with_kernel:  # only those still in the store (a collected one is not needed)
                needed |= {d for d in bundle.state_blobs(events) if await self._blobs.has(d)}
            for name, data in branches:
                needed |= await self._branch_blobs(sid, name, data)
            blobs = [(d, await self._blobs.get(d)) for d in sorted(needed)]
        clean = redact_session(events, records, branches, blobs, self._redactor)
        info = bundle.write_bundle(
            path,
            sid,
            clean.events,
            clean.records,
            clean.blobs,
            cassette=cassette_data,
            notebook=notebook,
            branches=clean.branches,
        )
        return dataclasses.replace(info, redacted=clean.paths)

    async def _branch_blobs(self, sid: str, name: str, data: bytes) -> set[str]:
        """Every blob branch file ``name`` needs: its events and file list, and what they
        name."""
        events_hash, contents_hash = bundle.branch_blobs(data, name)
        try:
            events = await self._blobs.get(events_hash)
            contents = await self._blobs.get(contents_hash)
        except KeyError:
            raise BundleError(
                f"branch {name} of session {sid!r} lacks its stored events or file list, so it "
                "cannot be exported (delete_branch forgets it)"
            ) from None
        return {events_hash, contents_hash, *bundle.branch_refs(events, contents, name)}

    async def import_session(
        self,
        path: str | os.PathLike[str],
        *,
        replace: bool = False,
        cassette_to: str | os.PathLike[str] | None = None,
        max_size: int = DEFAULT_MAX_SIZE,
        with_kernel: bool = False,
    ) -> ImportResult:
        """Import the bundle at ``path`` into this agent's checkpointer, blob store and
        storage and make it the current session. The bundle's session id is kept unless a
        session with that id exists: then a new id is used, or with ``replace=True`` the
        existing session is replaced, the import written whole under a temporary id first
        (a failure while writing, a full disk, leaves the old session as it was).
        ``cassette_to``: where to write the bundle's cassette, if it has one. Raises a
        :class:`~.errors.BundleError` subclass, having written nothing, for anything the
        bundle gets wrong. ``with_kernel``: keep the kernel variables' snapshots the bundle
        carries (pickles: loading one runs code, so only from a bundle you trust); by
        default they are left out, and a restore names those variables "cannot be
        rewound"."""
        self._sessions.time_travel_session("import_session", None)
        checked = bundle.read_bundle(path, max_size)
        if not with_kernel:
            pickles = bundle.state_blobs(checked.events) - bundle.referenced_blobs(checked.events)
            kept = {d: data for d, data in checked.blobs.items() if d not in pickles}
            checked = dataclasses.replace(checked, blobs=kept)
        sid = original = checked.manifest["session_id"]
        renamed: str | None = None
        archive = self._storage.archive_dir
        exists = await self._checkpointer.head(sid) > 0 or bundle.records_exist(archive, sid)
        self._ensure_storage()
        if exists and replace:
            await self._replace_session(sid, checked)
        else:
            if exists:
                sid, renamed = new_session_id(), original
            await self._write_import(sid, checked)
        if cassette_to is not None and checked.cassette is not None:
            write_private_file(Path(cassette_to), checked.cassette)
        self._sessions.resume(sid)
        return bundle.import_result(sid, renamed, checked)

    async def _write_import(self, sid: str, checked: bundle.Checked) -> None:
        """Write ``checked`` as session ``sid``: blobs, records, the log last, so that a
        failure leaves no half-visible session (what was written is taken back)."""
        archive = self._storage.archive_dir
        ref = self._blob_ref(sid)
        written: list[Path] = []
        try:
            blobs = self._blobs
            if isinstance(blobs, SupportsPutMany):  # one durability barrier for all of them
                await blobs.put_many(checked.blobs.values(), ref=ref)
            else:
                await blobs.add_refs(ref, checked.blobs)
                for data in checked.blobs.values():
                    await blobs.put(data, ref=ref)
            written = bundle.write_records(archive, sid, checked.records, checked.branches)
            checkpointer = self._checkpointer
            if isinstance(checkpointer, SupportsVerbatimAppend):
                await checkpointer.append_verbatim(sid, checked.events, expected_head=0)
            else:  # a third-party backend: the times become the import's
                await checkpointer.append(sid, checked.events, expected_head=0)
        except BaseException:
            # the log is written last: without it nothing was imported, so take back the
            # records and the blobs' reference (the blobs go at the next collection)
            bundle.remove_files(written)
            with contextlib.suppress(Exception):  # the import's own error is the one to raise
                await self._blobs.drop_refs(ref)
            raise

    async def _replace_session(self, sid: str, checked: bundle.Checked) -> None:
        """Import ``checked`` over the existing session ``sid``: written whole under a
        temporary id first (what can fail for lack of space or a broken store fails there,
        the old session untouched), then the old session deleted and the import written again
        under ``sid`` (its blobs are stored already: only the log and records are new), then
        the temporary copy deleted. If that second write fails, the import is kept under the
        temporary id and the error names it."""
        staged = new_session_id()
        await self._write_import(staged, checked)
        try:
            await self._sessions.delete_session(sid)
        except BaseException:
            with contextlib.suppress(Exception):
                await self._sessions.delete_session(staged)
            raise
        try:
            await self._write_import(sid, checked)
        except Exception as exc:
            raise BundleError(
                f"session {sid!r} was deleted to be replaced, but the import could not be "
                f"written under its id ({type(exc).__name__}: {exc}); the imported session is "
                f"kept whole as {staged!r}"
            ) from exc
        await self._sessions.delete_session(staged)
