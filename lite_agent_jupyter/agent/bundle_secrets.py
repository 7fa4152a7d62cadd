"""Secrets out of an exported session's file snapshots (``LiteAgent.export_session``).

The log never holds a secret (the redactor runs before every append), but the blob store
holds files as they were: a ``bash`` command that wrote ``$API_TOKEN`` into ``creds.txt``
left the token in that file's snapshot. A bundle leaves the machine, so before it is written
every blob is checked for the agent's secrets (``secret_env`` values, the API key, MCP
configuration secrets):

* a text blob (no NUL byte) has each secret's bytes replaced by ``[REDACTED]``, every other
  byte kept (line endings, encodings that write ASCII as ASCII);
* a binary blob holding a secret refuses the export, naming the file: replacing bytes inside
  a binary format would corrupt it, and keeping them would leak the secret.

A changed blob has a new hash, so every reference to the old one is rewritten: the log's and
the undo records' snapshots, the branches' events, tip file lists and files (and a branch's
fork mark, a digest of the event it forks from). References are rewritten where they are
JSON string values equal to the hash, never inside a file's content. Must not know Jupyter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..checkpoint.events import Event, FileSnapshotEvent, decode, encode
from ..errors import BundleError
from ..redact import Redactor
from ..storage import blob_hash
from . import bundle
from .images import event_images
from .timetravel.journal import tail_digest

__all__ = ["Redacted", "redact_session"]


@dataclass(frozen=True, slots=True)
class Redacted:
    """A session's parts as a bundle may carry them, and the files whose content had a
    secret replaced (``paths``, sorted)."""

    events: list[Event]
    records: list[tuple[str, bytes]]
    branches: list[tuple[str, bytes]]
    blobs: list[tuple[str, bytes]]
    paths: tuple[str, ...]


def redact_session(
    events: Sequence[Event],
    records: Sequence[tuple[str, bytes]],
    branches: Sequence[tuple[str, bytes]],
    blobs: Sequence[tuple[str, bytes]],
    redactor: Redactor,
) -> Redacted:
    """``events``, ``records``, ``branches`` and ``blobs`` with every secret of
    ``redactor`` out of the blobs (see the module docstring); the parts unchanged, the same
    objects, when no blob holds one. Raises :class:`BundleError` naming the files when a
    binary one does."""
    unchanged = Redacted(list(events), list(records), list(branches), list(blobs), ())
    if not redactor:
        return unchanged
    inner = _branch_blobs(branches)
    hits = [d for d, data in blobs if d not in inner and redactor.in_bytes(data)]
    if not hits:
        return unchanged
    contents = dict(blobs)
    names = _names(events, records, branches, contents)
    binary = [d for d in hits if b"\x00" in contents[d]]
    if binary:
        shown = sorted({n for d in binary for n in names.get(d, [f"blob {d[:12]}"])})
        raise BundleError(
            "export refused: a secret (a secret_env value, the API key or an MCP secret) is in "
            f"the binary content of {', '.join(shown)}, recorded in this session's file "
            "snapshots; a binary file cannot be redacted without breaking it. Delete the "
            "session, or export one that never held that file."
        )
    mapping: dict[str, str] = {}
    for digest in hits:
        new = redactor.bytes(contents.pop(digest))
        mapping[digest] = blob_hash(new)
        contents[mapping[digest]] = new
    for digest in sorted(inner):  # a branch's events and tip file list name the files
        if digest in contents:
            new = _rehash(contents[digest], mapping)
            if new is not contents[digest]:
                del contents[digest]
                mapping[digest] = blob_hash(new)
                contents[mapping[digest]] = new
    new_events: list[Event] = []
    marks: dict[str, str] = {}
    for event in events:
        line = encode(event).encode("utf-8")
        rewritten = _rehash(line, mapping)
        if rewritten is line:
            new_events.append(event)
            continue
        new_events.append(decode(rewritten))
        marks[tail_digest([event])] = tail_digest(new_events[-1:])
    new_branches = [(n, _fork_mark(_rehash(data, mapping), marks)) for n, data in branches]
    paths = sorted({n for d in hits for n in names.get(d, [f"blob {d[:12]}"])})
    return Redacted(
        new_events,
        [(name, _rehash(data, mapping)) for name, data in records],
        new_branches,
        sorted(contents.items()),
        tuple(paths),
    )


def _branch_blobs(branches: Sequence[tuple[str, bytes]]) -> set[str]:
    """The blobs that are a branch's own JSON (its events, its tip file list), not a file."""
    return {d for name, data in branches for d in bundle.branch_blobs(data, name)}


def _names(
    events: Sequence[Event],
    records: Sequence[tuple[str, bytes]],
    branches: Sequence[tuple[str, bytes]],
    blobs: dict[str, bytes],
) -> dict[str, list[str]]:
    """Blob hash -> the file paths (or "an image in the conversation") it is the content
    of, for the messages."""
    found: dict[str, set[str]] = {}
    every: list[Event] = list(events)
    for _name, data in records:
        every += [decode(line) for line in data.splitlines() if line.strip()]
    for name, data in branches:
        events_hash, contents_hash = bundle.branch_blobs(data, name)
        if events_hash in blobs:
            every += [decode(line) for line in blobs[events_hash].splitlines() if line.strip()]
        if contents_hash in blobs:
            for path, digest in json.loads(blobs[contents_hash]).items():
                if digest is not None:
                    found.setdefault(digest, set()).add(path)
    for event in every:
        if isinstance(event, FileSnapshotEvent):
            for digest in (event.before, event.after):
                if digest is not None:
                    found.setdefault(digest, set()).add(event.path)
        for digest in event_images(event):
            found.setdefault(digest, set()).add("an image in the conversation")
    return {digest: sorted(paths) for digest, paths in found.items()}


def _rehash(data: bytes, mapping: dict[str, str]) -> bytes:
    """JSON ``data`` with every string value equal to an old hash of ``mapping`` replaced by
    the new one (the same object when none is there). A hash inside a longer string (a tool's
    output quoting it) is not a reference and stays."""
    out = data
    for old, new in mapping.items():
        quoted = f'"{old}"'.encode("ascii")
        if quoted in out:
            out = out.replace(quoted, f'"{new}"'.encode("ascii"))
    return out


def _fork_mark(data: bytes, marks: dict[str, str]) -> bytes:
    """A branch file whose fork event was rewritten: its fork mark follows (a switch checks
    that the event it forks from is still the one it was made at)."""
    if not marks:
        return data
    branch = json.loads(data)
    mark = branch.get("fork_mark")
    if mark not in marks:
        return data
    branch["fork_mark"] = marks[mark]
    return json.dumps(branch, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
