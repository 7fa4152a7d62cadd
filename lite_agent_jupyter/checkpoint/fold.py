"""Fold a session log into the conversation a model sees. One pure function, no I/O.

The result is a list of Messages-API style messages (``{"role", "content": [blocks]}``),
which is also the neutral format every provider in this package accepts.

Rules, in order of the log:

* The latest ``compaction`` replaces every event with ``seq <= through_seq`` by one user
  message carrying its summary; earlier compactions are covered by it.
* ``user`` events become user messages, whatever their origin (a background completion or an
  internal notice is input the model must see).
* ``assistant`` events become assistant messages (empty ones are dropped).
* ``tool_result`` events become ``tool_result`` blocks in a user message.
* Consecutive messages of one role merge into one (the API requires alternation), with
  tool results first in a user message, as the API requires.
* A ``tool_use`` left without a result (a crash or an interrupt that could not write one)
  gets a synthetic error result when the conversation moves on, so the next request is valid.
  At the very end of the log an unanswered ``tool_use`` is left alone: tools may be running.
* A ``hook`` event's ``context`` (text a ``prompt_submit`` hook added) joins the user message
  it follows as a text block; the rest of a hook event (its decision, a denial's reason, which
  the tool result already carries) is a record, not shown.
* ``file_snapshot``, ``interrupted``, ``background_completed`` and unknown events are records
  for people and for restore; the model does not see them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .events import (
    AssistantEvent,
    CompactionEvent,
    Event,
    HookEvent,
    ToolResultEvent,
    UserEvent,
)

Message = dict[str, Any]

INTERRUPTED_RESULT = "Interrupted: this tool call was stopped before it returned a result."
SUMMARY_PREFIX = "Summary of the conversation so far (earlier messages were compacted):\n\n"


def _blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [dict(block) for block in content]


def fold(events: Iterable[Event]) -> list[Message]:
    """The model's message list for a session whose events are ``events`` (ascending seq)."""
    return Folder.of(events).messages


class Folder:
    """The fold, kept up to date as events are appended: each model call of a turn then costs
    what the turn added, not the whole session.

    ``Folder.of(events).messages == fold(events)``; ``extend`` applies more events and returns
    ``False`` when it meets a compaction, after which the caller must start again with
    :meth:`of` (a compaction rewrites the past).
    """

    __slots__ = ("_pending", "has_cache_control", "messages")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._pending: list[str] = []  # tool_use ids of the last assistant message unanswered
        self.has_cache_control = False
        """Whether a block of ``messages`` carries ``cache_control`` (from a user's content
        blocks): tracked as blocks are added, so nobody has to scan the conversation."""

    @classmethod
    def of(cls, events: Iterable[Event]) -> Folder:
        events = list(events)
        folder = cls()
        latest = next((e for e in reversed(events) if isinstance(e, CompactionEvent)), None)
        if latest is not None:
            summary = SUMMARY_PREFIX + latest.summary
            folder.messages.append({"role": "user", "content": [{"type": "text", "text": summary}]})
            # Events after ``through_seq`` stay verbatim, also those logged while the summary
            # was being written (between ``through_seq`` and the compaction event itself).
            events = [e for e in events if e.seq > latest.through_seq]
        # only the latest compaction counts (it covers the earlier ones)
        folder.extend(e for e in events if not isinstance(e, CompactionEvent))
        return folder

    def snapshot(self) -> list[Message]:
        """The messages so far, safe to hand out: messages are never changed in place (a
        merge replaces the last one), so later events do not alter a snapshot."""
        return list(self.messages)

    def extend(self, events: Iterable[Event]) -> bool:
        """Apply ``events``; ``False`` (and nothing applied from there) at a compaction."""
        for event in events:
            if isinstance(event, ToolResultEvent):
                if event.tool_use_id not in self._pending:
                    continue  # answers no open call (e.g. compacted away): the API refuses it
                self._pending.remove(event.tool_use_id)
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": event.tool_use_id}
                block["content"] = event.content
                if event.is_error:
                    block["is_error"] = True
                self._add("user", [block])
            elif isinstance(event, UserEvent):
                self._close_pending()
                self._add("user", _blocks(event.content))
            elif isinstance(event, AssistantEvent):
                self._close_pending()
                blocks = _blocks(event.content)
                self._add("assistant", blocks)
                self._pending.extend(
                    b["id"] for b in blocks if b.get("type") == "tool_use" and "id" in b
                )
            elif isinstance(event, HookEvent):
                if event.context:
                    self._add("user", [{"type": "text", "text": event.context}])
            elif isinstance(event, CompactionEvent):
                return False
        return True

    def _add(self, role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if not self.has_cache_control:
            self.has_cache_control = any(_marked(block) for block in blocks)
        messages = self.messages
        if messages and messages[-1]["role"] == role:
            merged = messages[-1]["content"] + blocks
            if role == "user":  # tool results must lead a user message
                merged.sort(key=lambda b: b.get("type") != "tool_result")
            messages[-1] = {"role": role, "content": merged}
        else:
            messages.append({"role": role, "content": blocks})

    def _close_pending(self) -> None:
        if self._pending:
            self._add("user", [_interrupted(tool_id) for tool_id in self._pending])
            self._pending.clear()


def _marked(block: dict[str, Any]) -> bool:
    if block.get("cache_control") is not None:
        return True
    nested = block.get("content") if block.get("type") == "tool_result" else None
    return isinstance(nested, list) and any(
        isinstance(b, dict) and b.get("cache_control") is not None for b in nested
    )


def _interrupted(tool_use_id: str) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": INTERRUPTED_RESULT,
        "is_error": True,
    }
