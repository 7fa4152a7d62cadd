"""The runner's lock and its loop thread: the agent's loop must never wait for the lock.

A widget callback now runs while a ``%%agent`` cell awaits (approval.py), so a facade call
(which holds ``runner.lock`` while it waits for a coroutine on the agent's loop) can overlap a
turn that ends or asks for approval on that loop. If the loop took the same lock, each would
wait for the other forever."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator

import pytest

from lite_agent_jupyter.jupyter.runner import AgentRunner


@pytest.fixture
def idle_runner() -> Iterator[AgentRunner]:
    """A runner with no agent: its lock and its loop thread."""
    runner = AgentRunner()
    yield runner
    runner.stop()


def test_a_turn_ending_on_the_loop_while_a_facade_call_holds_the_lock(
    idle_runner: AgentRunner,
) -> None:
    runner = idle_runner
    runner.claim("s1")

    async def turn_ends() -> bool:  # what a turn's pump does when it ends, on the loop
        runner.release("s1")
        return runner.is_busy("s1")

    with runner.lock:  # a facade call in a widget callback, waiting for the loop
        future = runner.submit(turn_ends())
        try:
            busy = future.result(timeout=60)
        except concurrent.futures.TimeoutError:
            pytest.fail("the agent's loop waited for the lock a facade call held")
    assert busy is False
    assert not runner.is_busy()
