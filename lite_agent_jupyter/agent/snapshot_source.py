"""Who made the change a ``file_snapshot`` records: a typed value, written and read in one
place.

Owns :class:`SnapshotSource` (a :class:`Source` kind, the tool's name, and for the snapshots
a restore or a revert records, its undo record and checkpoint), the constants
:data:`OUTSIDE`, :data:`RESTORED` and :data:`REVERTED`, :func:`by_tool`, and
:func:`snapshot_source`, the one reader. Writers put ``source.extra()`` in the event's
``extra``; nothing else reads or writes those keys (#31: there were a dozen string-key reads
and writes of ``extra["tool"]`` across the turn loop, the tracker, the planner, the reviewer
and the listings).

Why in ``extra`` and not a field of :class:`FileSnapshotEvent`: the checkpoint layer knows
nothing of agents, and the JSON stays what every release wrote and reads (``"tool":
"outside"`` beside the payload, and ``"restore"``, ``"checkpoint"`` for a revert), so old
logs read the same and older releases read new ones. Must not know Jupyter.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..checkpoint.events import FileSnapshotEvent


class Source(enum.Enum):
    """The kind of change; the value is what ``extra["tool"]`` holds for it on disk."""

    TOOL = "tool"
    """A tool call of the agent (a file tool records before acting, a shell command after)."""
    OUTSIDE = "outside"
    """A change made outside the agent (by hand, another program), found by a scan."""
    RESTORED = "restore"
    """The state a files-only restore put back (a later restore compares against it)."""
    REVERTED = "revert"
    """The state a revert of one file (or some of its hunks) put back."""


@dataclass(frozen=True, slots=True)
class SnapshotSource:
    """Who made a snapshot's change: ``kind``, the tool's ``name`` for a tool (``None``: not
    recorded, as a file tool records none unless its call was approved by a person; its
    ``tool_use`` names it), and for a restore's or revert's snapshot its undo record
    (``record``) and, for a revert, the prompt's checkpoint."""

    kind: Source
    name: str | None = None
    record: str | None = None
    checkpoint: int | None = None

    @property
    def label(self) -> str | None:
        """The tool's name, or the kind's word for a change that is no tool's (``outside``,
        ``restore``, ``revert``); ``None`` for a tool whose name was not recorded."""
        return self.name if self.kind is Source.TOOL else self.kind.value

    @property
    def agents_tool(self) -> bool:
        """A tool call of the agent: the prompt's own work (review lists it)."""
        return self.kind is Source.TOOL

    def extra(self) -> dict[str, object]:
        """The event's ``extra`` keys that carry this source (as every release wrote them)."""
        out: dict[str, object] = {}
        if self.label is not None:
            out["tool"] = self.label
        if self.record is not None:
            out["restore"] = self.record
        if self.checkpoint is not None:
            out["checkpoint"] = self.checkpoint
        return out

    def at(self, record: str, checkpoint: int | None = None) -> SnapshotSource:
        """This source with the undo record (and checkpoint) of the operation recording it."""
        return SnapshotSource(self.kind, self.name, record, checkpoint)


OUTSIDE = SnapshotSource(Source.OUTSIDE)
RESTORED = SnapshotSource(Source.RESTORED)
REVERTED = SnapshotSource(Source.REVERTED)
_KINDS = {s.kind.value: s.kind for s in (OUTSIDE, RESTORED, REVERTED)}


def by_tool(name: str) -> SnapshotSource:
    """A change the tool ``name`` made."""
    return SnapshotSource(Source.TOOL, name)


def snapshot_source(event: FileSnapshotEvent) -> SnapshotSource:
    """Who made the change ``event`` records, read from its ``extra`` (old logs included:
    the keys never changed). A tool named like a kind's word reads as that kind, as it
    always did."""
    extra = event.extra
    word = extra.get("tool")
    record = extra.get("restore")
    checkpoint = extra.get("checkpoint")
    return SnapshotSource(
        _KINDS.get(word, Source.TOOL) if isinstance(word, str) else Source.TOOL,
        word if isinstance(word, str) and word not in _KINDS else None,
        record if isinstance(record, str) else None,
        checkpoint if type(checkpoint) is int else None,
    )


def outside(event: FileSnapshotEvent) -> bool:
    """``snapshot_source(event).kind is Source.OUTSIDE``, without making the value: a move
    in time asks it of each of the session's snapshots (500 in a restore's benchmark, where
    making them was half the model's file table's rebuild, #32)."""
    return event.extra.get("tool") == _OUTSIDE_WORD


_OUTSIDE_WORD = Source.OUTSIDE.value


__all__ = [
    "OUTSIDE",
    "RESTORED",
    "REVERTED",
    "SnapshotSource",
    "Source",
    "by_tool",
    "outside",
    "snapshot_source",
]
