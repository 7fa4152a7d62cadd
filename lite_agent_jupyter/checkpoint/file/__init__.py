"""File Checkpointer: one JSONL log per session in a directory, safe across processes.

Owns the on-disk layout of a sessions directory and every read and write of it; knows
nothing of agents (it stores :mod:`..events` lines) nor of the storage root (it is handed a
directory, usually ``Storage.sessions_dir``)::

    <directory>/<id>.jsonl          the log: one event per line, line n holds seq n
    <directory>/<id>.marks          the session's mark index: copies of its checkpoint, compaction
                                    and file_snapshot lines (see docs/design.md)
    <directory>/.index.jsonl        title and turn count of every session, for list()
    <directory>/.recent             the recency journal: list(limit=) reads it backwards
                                    (see ._recent)
    <directory>/<id>.deleted        the tombstone a delete leaves (see SupportsTombstones)
    <directory>/.locks/<id>.lock    the file lock of a session (and .index.lock)
    <directory>/.locks/<id>.turn    the turn claim of a session (flock, held for a whole turn)
    <directory>/.locks/listing.json the last full listing, with the folder's key and the
                                    journal's and index's offsets it holds up to (see
                                    ._listing)

A per-session file lock makes head check + write one step across processes; a torn final
line (a crash mid-append) is repaired on the next write with a :class:`LogRepairedWarning`;
reads cost what they return. No call blocks the event loop waiting for another process (see
:mod:`.._blocking`). Folders are created 0700 and files 0600 on the first write, not before.
POSIX only. The reasoning and measurements are in ``docs/design.md``.
``read_marks`` (the MarkIndex capability) reads ``<id>.marks``, a copy of the log's mark
lines written ahead of the log under the same lock, never the log itself.

The public names are re-exported here; the backend is one private module per job, imported
only downward:

    _disk.py          the bytes on disk: safe opens, reads, a log's tail and line offsets,
                      the repair of a torn final line, decoding lines
    _recent.py        the recency journal (``.recent``)
    _listing.py       the listing snapshot (``.locks/listing.json``)
    _folder.py        _Folder: the folder, its paths and locks (gates), the per-session
                      cache, whether it is closed
    _index.py         _SessionIndex(folder): the session index (``.index.jsonl``)
    _marks.py         _MarkIndex(folder): the mark index (``<id>.marks``)
    _sessions.py      _Sessions(folder, index, marks): list() (the snapshot, the scan,
                      pages) and the recency stamps
    _checkpointer.py  FileCheckpointer (the protocol, the work under the locks) and
                      file_checkpointer

``FileCheckpointer`` is composed of these objects, not built from them: it makes the one
``_Folder`` and hands it (and the indexes, to the listing) to each part it makes, so each
part's state is what its constructor was given.
"""

from __future__ import annotations

from ._checkpointer import FileCheckpointer, file_checkpointer
from ._disk import LogRepairedWarning

__all__ = ["FileCheckpointer", "LogRepairedWarning", "file_checkpointer"]

# The public names belong to this package, wherever they are defined: help(), reprs and
# pickles name the path users import them from, not a private module.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
