"""The kernel's own agent runner, driven from a test: the widgets get the same
:class:`~lite_agent_jupyter.jupyter.runner.AgentFacade` the magics give them, and turns run
through :meth:`AgentRunner.start_turn` as ``%%agent`` runs them (so ``is_busy`` is the
kernel's own answer while a turn runs); and the file backend's logs, read back."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, FakeReply

from lite_agent_jupyter import LiteAgent, LiteAgentResult, Storage
from lite_agent_jupyter.agent.results import TurnFinished
from lite_agent_jupyter.jupyter.runner import AgentRunner, TurnError, TurnStream


def start_runner(make_agent: Callable[[], LiteAgent]) -> AgentRunner:
    """A runner whose agent is ``make_agent()`` (built on the runner's loop, as the magics
    build theirs; not handed the runner's approval callback, so its turns never ask)."""
    runner = AgentRunner()
    runner.agent("test", lambda _approve: make_agent())
    return runner


def finish(stream: TurnStream, timeout: float = 60.0) -> LiteAgentResult:
    """Read a turn to its end, as the ``%%agent`` cell does; its result (or its error)."""
    result: LiteAgentResult | None = None
    while True:
        item = stream.get(timeout)
        if item is None:
            break
        if isinstance(item, TurnError):
            raise item.error
        if isinstance(item, TurnFinished):
            result = item.result
    assert result is not None, "the turn ended without a result"
    return result


def send(runner: AgentRunner, prompt: str) -> LiteAgentResult:
    """One turn on the current session, to its end."""
    return finish(runner.start_turn(runner.agent(), prompt))


def send_in_background(runner: AgentRunner, prompt: str) -> Future[LiteAgentResult]:
    """Start a turn on the current session and read it on a thread (the agent marks the
    session busy once its loop starts the turn); the future holds its result."""
    stream = runner.start_turn(runner.agent(), prompt)
    done: Future[LiteAgentResult] = Future()

    def read() -> None:
        try:
            done.set_result(finish(stream))
        except BaseException as error:
            done.set_exception(error)

    threading.Thread(target=read, daemon=True).start()
    return done


@contextlib.contextmanager
def held_turn(
    runner: AgentRunner, server: FakeAnthropicServer, prompt: str, *, requests: int
) -> Iterator[Future[LiteAgentResult]]:
    """A turn of ``prompt`` on the current session whose answer ("slow answer") the fake
    server holds until the block ends: inside it the turn runs (the server has had its
    ``requests``-th request); the future holds the turn's result."""
    release = threading.Event()
    server.script(FakeReply("slow answer", hold=release))
    turn = send_in_background(runner, prompt)
    try:
        server.wait_for_requests(requests)
        yield turn
    finally:
        release.set()


def log_path(storage: Storage, session_id: str) -> Path:
    """The file backend's log of ``session_id``."""
    return storage.base / "sessions" / f"{session_id}.jsonl"


def logged_prompts(storage: Storage, session_id: str) -> list[object]:
    """The prompts in the log of ``session_id`` (the user events that are checkpoints)."""
    lines = log_path(storage, session_id).read_text().splitlines()
    events = [json.loads(line) for line in lines if line]
    return [e["content"] for e in events if e["type"] == "user" and e.get("checkpoint")]
