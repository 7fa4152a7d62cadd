"""The model check: a Hypothesis state machine compares a backend with the memory backend.

Needs Hypothesis (installed with the ``test`` extra).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from ..checkpoint.events import (
    AssistantEvent,
    CompactionEvent,
    Event,
    FileSnapshotEvent,
    ToolResultEvent,
    UnknownEvent,
    UserEvent,
)
from ..checkpoint.memory import memory_checkpointer
from ..checkpoint.protocol import Checkpointer, SessionInfo
from ..errors import CheckpointConflictError
from ._kit import Backend, canon_all, check

SESSIONS = st.sampled_from(["a", "b", "c"])
TEXT = st.text(max_size=24)
JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), TEXT)
EXTRA = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(
        lambda k: (
            k
            not in {
                "v",
                "seq",
                "ts",
                "type",
                "content",
                "origin",
                "checkpoint",
                "tool_use_id",
                "is_error",
                "usage",
                "stop_reason",
                "model",
                "path",
                "before",
                "after",
                "summary",
                "through_seq",
            }
        )
    ),
    JSON_LEAF,
    max_size=2,
)

PROMPTS = st.builds(UserEvent, content=TEXT, checkpoint=st.just(True), origin=st.just("user"))
"""Prompt checkpoints, frequent on purpose: titles and turn counts depend on them."""

EVENTS: st.SearchStrategy[Event] = st.one_of(
    PROMPTS,
    PROMPTS,
    st.builds(
        UserEvent,
        content=st.one_of(
            TEXT, st.lists(st.builds(lambda t: {"type": "text", "text": t}, TEXT), max_size=2)
        ),
        origin=st.sampled_from(["user", "background", "internal"]),
        checkpoint=st.booleans(),
        extra=EXTRA,
    ),
    st.builds(
        AssistantEvent,
        content=st.lists(st.builds(lambda t: {"type": "text", "text": t}, TEXT), max_size=2),
        stop_reason=st.sampled_from([None, "end_turn", "tool_use"]),
    ),
    st.builds(ToolResultEvent, tool_use_id=TEXT, content=TEXT, is_error=st.booleans()),
    st.builds(FileSnapshotEvent, path=TEXT, before=st.none() | st.just("0" * 64)),
    st.builds(CompactionEvent, summary=TEXT, through_seq=st.integers(0, 20)),
    st.builds(UnknownEvent, unknown_type=st.sampled_from(["future", "x_y"]), extra=EXTRA),
)
BATCHES = st.lists(EVENTS, max_size=3)
EXPECT = st.sampled_from(["none", "right", "wrong"])
POSITION = st.one_of(st.integers(-1, 6), st.sampled_from(["head", "head-1", "head+1"]))


class CheckpointerMachine(RuleBasedStateMachine):
    """Subclassed per run with ``backend`` and ``folder`` set."""

    backend: Backend
    folder: Path

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.model = memory_checkpointer()
        self.url = self.backend.new_location(Path(tempfile.mkdtemp(dir=self.folder)))
        self.store: Checkpointer = self.backend.open(self.url)

    def run(self, awaitable: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(awaitable)

    def outcome(self, call: Callable[[Checkpointer], Awaitable[Any]]) -> tuple[Any, Any]:
        """Run ``call`` on model and backend; return both outcomes (value or error facts)."""

        def one(store: Checkpointer) -> Any:
            try:
                return ("ok", self.run(call(store)))
            except CheckpointConflictError as exc:
                return ("conflict", exc.session_id, exc.expected, exc.actual)
            except (ValueError, TypeError) as exc:
                return ("error", type(exc).__name__)

        return one(self.model), one(self.store)

    def model_head(self, session: str) -> int:
        return int(self.run(self.model.head(session)))

    def expected(self, session: str, how: str) -> int | None:
        head = self.model_head(session)
        return {"none": None, "right": head, "wrong": head + 1}[how]

    def position(self, session: str, where: int | str) -> int:
        head = self.model_head(session)
        if isinstance(where, int):
            return where
        return {"head": head, "head-1": head - 1, "head+1": head + 1}[where]

    @rule(session=SESSIONS, events=BATCHES, how=EXPECT)
    def append(self, session: str, events: list[Event], how: str) -> None:
        expected = self.expected(session, how)
        model, real = self.outcome(lambda s: s.append(session, events, expected_head=expected))
        assert model == real

    @rule(session=SESSIONS, where=POSITION, how=EXPECT)
    def truncate(self, session: str, where: int | str, how: str) -> None:
        to_seq, expected = self.position(session, where), self.expected(session, how)
        model, real = self.outcome(lambda s: s.truncate(session, to_seq, expected_head=expected))
        assert model == real

    @rule(session=SESSIONS)
    def delete(self, session: str) -> None:
        model, real = self.outcome(lambda s: s.delete(session))
        assert model == real

    @rule(session=SESSIONS, where=POSITION)
    def read(self, session: str, where: int | str) -> None:
        after = self.position(session, where)
        model = self.run(self.model.read(session, after=after))
        real = self.run(self.store.read(session, after=after))
        assert canon_all(real) == canon_all(model)

    @rule(session=SESSIONS)
    def head(self, session: str) -> None:
        assert self.run(self.store.head(session)) == self.model_head(session)

    @rule()
    def listing(self) -> None:
        model = self.run(self.model.list())
        real = self.run(self.store.list())
        assert [(i.id, i.title, i.turns) for i in real] == [(i.id, i.title, i.turns) for i in model]
        for info, ref in zip(real, model, strict=True):
            assert info.head in (None, ref.head)
        pages: list[SessionInfo] = []
        before = None
        while len(got := self.run(self.store.list(limit=2, before=before))) == 2:
            pages += got
            before = got[-1]
        assert pages + got == real  # pages join up: no gap, no repeat

    @precondition(lambda self: self.backend.persistent)
    @rule()
    def reopen(self) -> None:
        self.run(self.store.close())
        self.store = self.backend.open(self.url)

    def teardown(self) -> None:
        try:
            self.run(self.store.close())
            self.run(self.model.close())
        finally:
            self.loop.close()
            if self.backend.drop_location is not None:
                self.backend.drop_location(self.url)


@check()
def behaves_like_the_model(backend: Backend, folder: Path) -> None:
    """A Hypothesis state machine drives the backend and the memory backend (the reference
    model) with the same random appends, truncates, deletes, reads and listings (and, for a
    persistent backend, reopens) and compares every outcome, errors included."""
    machine = type(
        "CheckpointerMachineFor" + "".join(c for c in backend.name.title() if c.isalnum()),
        (CheckpointerMachine,),
        {"backend": backend, "folder": folder},
    )
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=backend.model_examples,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
            database=None,
        ),
    )
