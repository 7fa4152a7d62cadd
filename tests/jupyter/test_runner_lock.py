"""The runner's lock and its loop thread: the agent's loop must never wait for the lock.

A widget callback now runs while a ``%%agent`` cell awaits (approval.py), so a facade call
(which holds ``runner.lock`` while it waits for a coroutine on the agent's loop) can overlap a
turn that ends or asks for approval on that loop. If the loop took the same lock, each would
wait for the other forever."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kernel_agent import start_runner

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.jupyter.runner import AgentFacade, AgentRunner, TurnError
from lite_agent_jupyter.providers import scripted


@pytest.fixture
def idle_runner() -> Iterator[AgentRunner]:
    """A runner with no agent: its lock and its loop thread."""
    runner = AgentRunner()
    yield runner
    runner.stop()


def test_the_loop_looks_up_approvals_and_busy_while_a_facade_call_holds_the_lock(
    idle_runner: AgentRunner,
) -> None:
    runner = idle_runner

    async def on_the_loop() -> tuple[object, bool]:  # what an approval and a turn's end ask
        return runner.asker("s1"), runner.is_busy("s1")

    with runner.lock:  # a facade call in a widget callback, waiting for the loop
        future = runner.submit(on_the_loop())
        try:
            found = future.result(timeout=60)
        except concurrent.futures.TimeoutError:
            pytest.fail("the agent's loop waited for the lock a facade call held")
    assert found == (None, False)
    assert not runner.is_busy()


def test_the_bridge_runs_any_coroutine_or_stream_on_the_agent_loop(
    idle_runner: AgentRunner,
) -> None:
    """One way in for every caller (``call`` blocking, ``acall`` from another loop,
    ``stream`` for an async iterator): the function itself is called on the loop thread."""
    runner = idle_runner

    async def where(tag: str, *, n: int) -> tuple[str, int, str]:
        return tag, n, threading.current_thread().name

    async def count(upto: int) -> AsyncIterator[tuple[int, str]]:
        for i in range(upto):
            yield i, threading.current_thread().name
        if upto == 2:
            raise ValueError("two")

    assert runner.call(where, "x", n=2) == ("x", 2, "lite-agent-loop")
    assert asyncio.run(runner.acall(where, "y", n=1)) == ("y", 1, "lite-agent-loop")
    stream = runner.stream(count, 3)
    items = []
    while (item := stream.get(60)) is not None:
        items.append(item)
    assert items == [(i, "lite-agent-loop") for i in range(3)] and stream.finished
    failing = runner.stream(count, 2)
    got = [failing.get(60), failing.get(60), failing.get(60), failing.get(60)]
    assert got[:2] == [(0, "lite-agent-loop"), (1, "lite-agent-loop")] and got[3] is None
    assert isinstance(got[2], TurnError) and str(got[2].error) == "two"


def test_a_facade_call_whose_function_reads_the_facade_does_not_wait_for_itself(
    tmp_path: Path,
) -> None:
    """``%agent checkpoints`` ran ``controls.call(lambda a: a.list_checkpoints(
    controls.session_id))``: the facade's ``call`` holds the lock while the loop runs the
    lambda, and ``session_id`` read the agent under that same lock, so the cell hung for
    good (the kernel-bridge rework). Reading the current agent takes no lock."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    runner = start_runner(
        lambda: create_lite_agent(
            model=scripted(["hello"]),
            workdir=workdir,
            storage=Storage(tmp_path / "store", "ns"),
        )
    )
    try:
        facade = AgentFacade(runner)
        result: concurrent.futures.Future[object] = concurrent.futures.Future()

        def read_checkpoints() -> None:
            try:
                result.set_result(facade.call(lambda a: a.list_checkpoints(facade.session_id)))
            except BaseException as exc:
                result.set_exception(exc)

        threading.Thread(target=read_checkpoints, daemon=True).start()
        try:
            assert result.result(timeout=60) == []  # a new session: no prompt yet
        except concurrent.futures.TimeoutError:
            pytest.fail("a facade call whose function read facade.session_id never ended")
    finally:
        runner.stop()
