"""Branches: the future a restore abandons is kept, and a switch moves files and
conversation to any kept future's tip.

Owns :class:`Branches`: saving a future (:meth:`Branches.prepare`; a restore calls it), listing,
deleting, previewing and carrying out a switch. A branch is one small JSON file beside the
undo records (``archive/<id>.branch-<name>.json``, a few hundred bytes: its fork point, what
it holds, and two blob hashes) and two blobs under the session's reference: its events (the
cut tail, JSON lines) and its files' contents at its tip (``{path: blob hash or null}``).
File contents are never copied: the tip's versions are blobs the snapshots already hold, or
are stored once like any snapshot. Branches go with the session (``delete_session`` removes
the archive and the session's blob reference) or one by one (:meth:`Branches.delete_branch`).

A switch reuses the one conflict check (:func:`.planner.three_way`) and the crash journal
(:meth:`.journal.Journal.apply`, log change ``replace``: the log truncated to the fork, then
the branch's events appended). The future being left becomes a branch itself: its blobs are
stored while the journal is written, and its small file is carried by the journal and written
while the log changes (a rollback, here or in recovery, deletes it; recovery that finishes
writes it again); the branch switched to is dropped when the switch is done (its future is
live).
``undo_restore`` after a restore is the switch back: it drops the branch that restore made.
Must not know Jupyter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ...checkpoint.events import (
    LEGACY_NOTE_PREFIX,
    Event,
    FileSnapshotEvent,
    UserEvent,
    decode,
    encode,
    is_checkpoint,
    now_iso,
    shown_prompt,
)
from ...checkpoint.protocol import Checkpointer, validate_session_id
from ...errors import RestoreConflictError, UnknownBranchError
from ...storage import BlobRef, Blobs, Storage, blob_hash
from . import planner
from .entries import JournalEntry, file_entries
from .journal import Journal, tail_digest
from .model import FileAction, FilePlan, RestorePlan, SwitchResult
from .workdir import WorkdirFiles

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
_FILE = re.compile(r"\.branch-([A-Za-z0-9][A-Za-z0-9_.-]{0,39})\.json")


@dataclass(frozen=True, slots=True)
class Branch:
    """A kept future of a session: ``name``, the checkpoint it forks from (``fork``, a seq as
    :meth:`LiteAgent.restore` takes), how many prompts and files it holds, its first prompt's
    text (clipped) and when it was kept."""

    name: str
    fork: int
    prompts: int
    files: int
    first_prompt: str
    created: datetime


class Branches:
    """The branches of the sessions in one storage namespace."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        blobs: Blobs,
        files: WorkdirFiles,
        storage: Storage,
        journal: Journal,
    ) -> None:
        self.checkpointer = checkpointer
        self.blobs = blobs
        self.files = files
        self.storage = storage
        self.journal = journal

    # -- the branch files -----------------------------------------------------------------

    def file_name(self, session_id: str, name: str) -> str:
        """Branch ``name``'s file name in the archive folder."""
        return self._file_name(session_id, name)

    def read(self, session_id: str, name: str) -> dict[str, Any]:
        """Branch ``name``'s file (:class:`UnknownBranchError` if there is none)."""
        return self._read(session_id, name)

    def _file_name(self, session_id: str, name: str) -> str:
        return f"{session_id}.branch-{name}.json"

    def _read(self, session_id: str, name: str) -> dict[str, Any]:
        if not _NAME.fullmatch(name):
            raise UnknownBranchError(f"{name!r} is not a branch name")
        path = self.journal.archive() / self._file_name(session_id, name)
        try:
            data: dict[str, Any] = json.loads(path.read_bytes())
        except FileNotFoundError:
            known = ", ".join(b.name for b in self._kept(session_id)) or "none"
            raise UnknownBranchError(
                f"session {session_id!r} has no branch {name!r} (its branches: {known})"
            ) from None
        return data

    def _kept(self, session_id: str) -> list[Branch]:
        """The session's branches as their files say, oldest first."""
        validate_session_id(session_id)
        folder = self.journal.archive()
        if not folder.is_dir():
            return []
        found = []
        for path in folder.glob(f"{glob_escape(session_id)}.branch-*.json"):
            if not _FILE.fullmatch(path.name[len(session_id) :]):
                continue
            data = json.loads(path.read_bytes())
            found.append(
                Branch(
                    data["name"],
                    data["fork"],
                    data["prompts"],
                    data["files"],
                    data["first_prompt"],
                    datetime.fromisoformat(data["created"]),
                )
            )
        return sorted(found, key=lambda b: (b.created, b.name))

    async def list_branches(self, session_id: str) -> list[Branch]:
        """The session's branches, oldest first; the first prompt of a branch an older
        release kept with a context note in place of the person's words is read again from
        its events (#30)."""
        branches = self._kept(session_id)
        for i, branch in enumerate(branches):
            if branch.first_prompt.startswith(LEGACY_NOTE_PREFIX):
                first = await self._first_prompt(self._read(session_id, branch.name))
                if first is not None:
                    branches[i] = replace(branch, first_prompt=first)
        return branches

    async def _first_prompt(self, data: dict[str, Any]) -> str | None:
        """The first prompt of a kept branch's events, as listed; ``None`` if unreadable."""
        try:
            events_data = await self.blobs.get(data["events"])
        except KeyError:
            return None
        for line in events_data.splitlines():
            if line.strip():
                event = decode(line)
                if isinstance(event, UserEvent) and is_checkpoint(event):
                    return shown_prompt(event)[:80]
        return None

    def _free_name(self, session_id: str) -> str:
        taken = {b.name for b in self._kept(session_id)}
        number = len(taken) + 1
        while f"b{number}" in taken:
            number += 1
        return f"b{number}"

    async def prepare(
        self,
        session_id: str,
        fork: int,
        tail: Sequence[Event],
        contents: dict[str, str | None],
        ref: BlobRef,
        *,
        record: str | None = None,
        fork_mark: str | None = None,
        later: list[bytes] | None = None,
        encoded: Sequence[str] | None = None,
    ) -> dict[str, str]:
        """A new branch keeping ``tail`` (the events after checkpoint ``fork``) and the files'
        contents at its tip (blob hashes, already in the store): its blobs are stored, and
        ``{file name: JSON text}`` returned for the operation's journal to write when it is
        done (``write_on_finish``), so a killed operation leaves no branch behind and a
        finished one never lacks it. ``record``: the restore that made it (its undo drops the
        branch). ``later``: the two blobs are not stored here but added to it, for the
        operation's journal to store while it writes itself (:meth:`.journal.Journal.apply`'s
        ``blobs``: the waits for their fsyncs overlap the journal's, #32); the file names them
        by their hashes, and is written only once they are stored. ``encoded``: ``tail``'s
        lines as :func:`encode` gives them, when the caller has them (a restore's undo record
        holds the same lines)."""
        lines = encoded if encoded is not None else [encode(e) for e in tail]
        events = ("\n".join(lines) + "\n").encode("utf-8")
        mapping = json.dumps(contents, sort_keys=True, separators=(",", ":")).encode()
        prompts = [e for e in tail if isinstance(e, UserEvent) and is_checkpoint(e)]
        first = shown_prompt(prompts[0]) if prompts else ""
        if fork_mark is None:
            fork_event = await self.checkpointer.read(session_id, after=fork - 1) if fork else []
            fork_mark = tail_digest(fork_event[:1])
        name = self._free_name(session_id)
        data = {
            "name": name,
            "fork": fork,
            "fork_mark": fork_mark,
            "prompts": len(prompts),
            "files": len(contents),
            "first_prompt": first[:80],
            "created": now_iso(),
            "events": blob_hash(events),
            "contents": blob_hash(mapping),
            "record": record,
        }
        if later is None:
            stored = [await self.blobs.put(blob, ref=ref) for blob in (events, mapping)]
            assert stored == [data["events"], data["contents"]], stored
        else:
            later += (events, mapping)
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return {self._file_name(session_id, name): text}

    def delete_branch(self, session_id: str, name: str) -> None:
        """Forget branch ``name`` (its blobs go when the session does)."""
        self._read(session_id, name)
        (self.journal.archive() / self._file_name(session_id, name)).unlink()

    def made_by(self, session_id: str, record: str) -> list[str]:
        """The file names of the branches the restore ``record`` made."""
        folder = self.journal.archive()
        names = []
        for branch in self._kept(session_id):
            file_name = self._file_name(session_id, branch.name)
            if json.loads((folder / file_name).read_bytes()).get("record") == record:
                names.append(file_name)
        return names

    # -- switch ---------------------------------------------------------------------------

    async def _plan(
        self, session_id: str, name: str
    ) -> tuple[dict[str, Any], int, list[Event], list[Event], list[FilePlan]]:
        """``(branch, head, the live tail after the fork, the branch's events, per-file
        plans)``."""
        branch = self._read(session_id, name)
        fork = branch["fork"]
        live = await self.checkpointer.read(session_id, after=fork - 1) if fork else []
        if fork and (not live or tail_digest(live[:1]) != branch["fork_mark"]):
            raise UnknownBranchError(
                f"branch {name!r} forks from a prompt no longer in this session's timeline "
                "(a later restore cut it): switch to the branch that holds it first"
            )
        live = live[1:] if fork else await self.checkpointer.read(session_id)
        head = live[-1].seq if live else fork
        try:
            events_data = await self.blobs.get(branch["events"])
            contents: dict[str, str | None] = json.loads(await self.blobs.get(branch["contents"]))
        except KeyError as exc:
            raise UnknownBranchError(
                f"branch {name!r} cannot be switched to: its stored events or file list are "
                "missing from the blob store"
            ) from exc
        events = [decode(line) for line in events_data.splitlines() if line.strip()]
        at_fork: dict[str, str | None] = {}
        known: dict[str, set[str | None]] = {}
        for snap in (e for e in events if isinstance(e, FileSnapshotEvent)):
            at_fork.setdefault(snap.path, snap.before)
        for snap in (e for e in live if isinstance(e, FileSnapshotEvent)):
            at_fork.setdefault(snap.path, snap.before)
            known[snap.path] = {snap.after, snap.before}
        plans = []
        for path in sorted(set(at_fork) | set(contents)):
            target = contents[path] if path in contents else at_fork.get(path)
            try:
                disk = self.files.read(path)
            except RestoreConflictError as exc:
                plans.append(FilePlan(path, target, None, None, "conflict", blocked=str(exc)))
                continue
            disk_hash = blob_hash(disk) if disk is not None else None
            expected = known.get(path, {at_fork.get(path)})
            action = planner.three_way(disk, disk_hash, target, expected)
            plans.append(FilePlan(path, target, disk, disk_hash, action))
        return branch, head, live, events, plans

    async def preview_switch(self, session_id: str, name: str) -> RestorePlan:
        """What switching to ``name`` would do now, per file with diffs; changes nothing."""
        branch, head, live, _, plans = await self._plan(session_id, name)
        actions = []
        for item in plans:
            if item.blocked is not None:
                actions.append(FileAction(item.path, "conflict", None, item.blocked))
                continue
            new = await self.blobs.get(item.new) if item.new is not None else None
            diff, summary = planner.describe(item.path, item.action, item.disk, new)
            actions.append(FileAction(item.path, item.action, diff, summary))
        return RestorePlan(
            session_id=session_id,
            seq=branch["fork"],
            head=head,
            files=tuple(actions),
            events_cut=len(live),
            conflicts=tuple(p.path for p in plans if p.action == "conflict"),
        )

    async def switch_branch(
        self, session_id: str, name: str, ref: BlobRef, *, force: bool
    ) -> SwitchResult:
        """Move files and conversation to branch ``name``'s tip; the future left is kept as a
        new branch, whose name is returned (``None`` when there was no future after the
        fork)."""
        validate_session_id(session_id)
        async with self.journal.locked(session_id):
            await self.journal.recover_locked(session_id)
            branch, head, live, events, plans = await self._plan(session_id, name)
            todo = planner.settle(plans, force=force)
            await planner.check_blobs(self.blobs, session_id, todo)
            await self.blobs.add_refs(ref, {p.disk_hash for p in plans if p.disk_hash})
            for plan in plans:
                if plan.disk is not None and plan.disk_hash != plan.new:
                    await self.blobs.put(plan.disk, ref=ref)
            fork = branch["fork"]
            saved: dict[str, str] = {}
            later: list[bytes] = []  # stored with the journal (Journal.apply)
            if live:  # the future left behind: the files as they are now
                contents = {p.path: p.disk_hash for p in plans}
                saved = await self.prepare(
                    session_id,
                    fork,
                    live,
                    contents,
                    ref,
                    fork_mark=branch["fork_mark"],
                    later=later,
                )
            journal = JournalEntry(
                op="switch",
                session_id=session_id,
                branch=name,
                seq=fork,
                head_before=head,
                head_after=fork + len(events),
                log="replace",
                events=branch["events"],
                old_tail=tail_digest(live),
                new_tail=tail_digest(events),
                files=file_entries([(p.path, p.disk_hash, p.new) for p in todo]),
                drop_on_finish=(self._file_name(session_id, name),),
                write_on_finish=saved,
            )
            data = journal.to_bytes()
            skipped = [p.path for p in plans if p.action == "unchanged"]
            result = await self.journal.apply(
                session_id, journal, data, todo, skipped, (), True, blobs=(ref, later)
            )
            return SwitchResult(name, _branch_name(next(iter(saved), None)), result)


def _branch_name(file_name: str | None) -> str | None:
    if file_name is None:
        return None
    match = re.search(r"\.branch-(.+)\.json$", file_name)
    return match[1] if match else None


def glob_escape(text: str) -> str:
    """``text`` with glob's special characters escaped (session ids are plain, but a glob
    must never widen on what it is given)."""
    return re.sub(r"([*?\[])", r"[\1]", text)
