"""The note a restore, an undo or a branch switch leaves for the model's next request, kept on
disk until that request's prompt is in the log.

Why on disk: the note (``seen.rewound_note``: which files were put back) is sent with the next
user prompt, which may come from another process: the kernel restarted between the restore and
the prompt, or the session resumed elsewhere. Kept in memory only, it was lost there and the
model went on with a stale picture of the files. It cannot be appended to the log at restore
time either: an undo requires the log to be exactly as the restore left it.

Where: ``<storage>/archive/<session id>.rewound.json`` (``{"note", "token"}``, mode 0600),
beside the session's undo records; ``delete_session`` removes it with them, and export leaves
it behind (it is not a record). Exactly once: the note goes into the log as an ``internal``
user event carrying its token (``extra["rewound"]``); the file is removed once that event is
written, and a note whose token the log already holds (a crash between the two) is not sent
again. The newest restore, undo or switch replaces a note not yet sent: each leaves the
conversation its note speaks to. Without a storage folder (``sessions=False``, where there is
no time travel) notes live in memory.

Who holds it: each session's :class:`~.session.SessionLog` holds its :class:`RewoundNote`
(``session.rewound``): the note is the session's, as its log is. :class:`RewoundNotes` is the
same store seen by session id, for code that holds no log (tests, tools).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

from ..checkpoint.events import Event, UserEvent
from ..storage import ensure_private_dir, write_private_file

TOKEN_KEY = "rewound"
"""``extra`` key of the ``internal`` user event that carried a note: the note's token."""


class RewoundNote:
    """The pending note of one session: in its file under ``folder``, or in memory when
    ``folder`` is None."""

    __slots__ = ("_memory", "folder", "session_id")

    def __init__(self, folder: Path | None, session_id: str) -> None:
        self.folder = folder
        self.session_id = session_id
        self._memory: tuple[str, str] | None = None

    @property
    def path(self) -> Path:
        assert self.folder is not None
        return self.folder / f"{self.session_id}.rewound.json"

    def put(self, note: str | None) -> None:
        """Keep ``note`` for the session's next prompt (``None``: forget the pending one)."""
        if self.folder is None:
            self._memory = None if note is None else (note, uuid.uuid4().hex)
            return
        path = self.path
        if note is None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return
        ensure_private_dir(self.folder)
        data = {"note": note, "token": uuid.uuid4().hex}
        # not fsynced (#32): a note is advice, and a power loss that loses it loses only the
        # advice; a crash of the process keeps it (the rename reached the OS). Two fsyncs of
        # the twelve a one-file restore made.
        text = json.dumps(data, ensure_ascii=False).encode("utf-8")
        write_private_file(path, text, durable=False)

    def pending(self) -> tuple[str, str] | None:
        """``(note, token)`` waiting for the session's next prompt, if any. A file that does
        not read as a note is removed (a note is advice: never worth failing a turn)."""
        if self.folder is None:
            return self._memory
        try:  # every prompt asks, and there is mostly none: one open, of a string path
            with open(os.path.join(self.folder, f"{self.session_id}.rewound.json"), "rb") as f:
                data = json.loads(f.read())
            note, token = data["note"], data["token"]
            if not isinstance(note, str) or not isinstance(token, str):
                raise TypeError("not a note")
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return None
        return note, token

    def sent(self, token: str) -> None:
        """The note with ``token`` is in the log now: forget it (unless a newer one replaced
        it meanwhile)."""
        current = self.pending()
        if current is None or current[1] != token:
            return
        if self.folder is None:
            self._memory = None
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def note_event(note: str, token: str) -> UserEvent:
    """The note as the log holds it: an ``internal`` user event with its token."""
    return UserEvent(content=note, origin="internal", checkpoint=False, extra={TOKEN_KEY: token})


class RewoundNotes:
    """Pending notes by session id (each a :class:`RewoundNote`): in files under ``folder``,
    or in memory when it is None."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._notes: dict[str, RewoundNote] = {}

    def of(self, session_id: str) -> RewoundNote:
        """The session's note (one object per session, so a note in memory is kept)."""
        note = self._notes.get(session_id)
        if note is None:
            note = self._notes[session_id] = RewoundNote(self.folder, session_id)
        return note

    def put(self, session_id: str, note: str | None) -> None:
        """Keep ``note`` for the session's next prompt (``None``: forget the pending one)."""
        self.of(session_id).put(note)

    def pending(self, session_id: str) -> tuple[str, str] | None:
        """``(note, token)`` waiting for the session's next prompt, if any."""
        return self.of(session_id).pending()

    def event(self, note: str, token: str) -> UserEvent:
        """The note as the log holds it (:func:`note_event`)."""
        return note_event(note, token)

    def sent(self, session_id: str, token: str) -> None:
        """The note with ``token`` is in the log now: forget it (unless a newer one replaced
        it meanwhile)."""
        self.of(session_id).sent(token)


def holds_note(events: Sequence[Event], token: str) -> bool:
    """Whether ``events`` (a session's live context) already hold the note with ``token``."""
    return any(
        isinstance(e, UserEvent) and e.extra.get(TOKEN_KEY) == token for e in reversed(events)
    )
