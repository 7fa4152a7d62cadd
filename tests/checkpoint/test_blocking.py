"""The inline-or-thread policy (checkpoint/_blocking.py) on its own: free locks run inline,
contended ones wait in a worker thread, nothing leaks on errors or cancellation."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from lite_agent_jupyter.checkpoint._blocking import (
    FlockGate,
    ThreadGate,
    WouldBlock,
    acquire,
    run_gated,
)


async def test_free_gates_run_inline_on_the_loop_thread() -> None:
    gates = [ThreadGate(), ThreadGate()]
    loop_thread = threading.get_ident()
    ran_on = await run_gated(gates, threading.get_ident)
    assert ran_on == loop_thread
    assert not any(gate.locked() for gate in gates)


async def test_a_contended_gate_is_awaited_in_a_worker() -> None:
    first, second = ThreadGate(), ThreadGate()
    assert second.try_acquire()  # held by "someone else"
    task = asyncio.create_task(run_gated([first, second], threading.get_ident))
    for _ in range(20):
        await asyncio.sleep(0)  # the loop is free while the task waits
    assert not task.done()
    assert first.locked()  # taken inline, handed to the worker
    second.release()
    ran_on = await task
    assert ran_on != threading.get_ident()
    assert not first.locked() and not second.locked()


async def test_would_block_moves_the_work_to_a_worker() -> None:
    gate = ThreadGate()
    calls: list[str] = []

    def inline() -> str:
        calls.append("inline")
        raise WouldBlock

    def waiting(cancelled: threading.Event) -> str:
        calls.append("waiting")
        assert gate.locked()  # still held for the worker
        return "done"

    assert await run_gated([gate], inline, waiting) == "done"
    assert calls == ["inline", "waiting"]
    assert not gate.locked()


@pytest.mark.parametrize("where", ["inline", "worker"])
async def test_errors_release_every_gate(where: str) -> None:
    gates = [ThreadGate(), ThreadGate()]

    def boom() -> None:
        raise KeyError(where)

    if where == "worker":
        assert gates[1].try_acquire()
        task = asyncio.create_task(run_gated(gates, boom))
        await asyncio.sleep(0)
        gates[1].release()
        with pytest.raises(KeyError):
            await task
    else:
        with pytest.raises(KeyError):
            await run_gated(gates, boom)
    assert not any(gate.locked() for gate in gates)


async def test_cancelling_a_wait_gives_up_and_releases() -> None:
    first, second = ThreadGate(), ThreadGate()
    assert second.try_acquire()
    ran = threading.Event()
    task = asyncio.create_task(run_gated([first, second], ran.set))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not first.locked()  # given back by the worker before the cancellation surfaced
    second.release()
    assert not ran.is_set()
    assert await run_gated([first, second], lambda: "usable") == "usable"


async def test_acquire_waits_in_a_worker_and_a_cancelled_wait_holds_nothing(
    tmp_path: Path,
) -> None:
    """:func:`acquire` (time travel's journal lock, #32): a free gate is taken inline, a held
    one is waited for off the loop, and a wait cancelled meanwhile leaves the gate free,
    also when the worker took it just as the caller gave up."""
    path = str(tmp_path / "s.lock")
    gate, other = FlockGate(path), FlockGate(path)
    await acquire(gate)
    assert not other.try_acquire()
    waiting = asyncio.create_task(acquire(other))
    for _ in range(20):
        await asyncio.sleep(0)  # the loop is free while the task waits
    assert not waiting.done()
    gate.release()
    await asyncio.wait_for(waiting, 30)
    assert not gate.try_acquire()
    other.release()
    for give_up_after in (0.0, 0.01):
        assert gate.try_acquire()
        waiting = asyncio.create_task(acquire(other))
        await asyncio.sleep(give_up_after)
        gate.release()  # the worker may take it now, just as it is cancelled
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        third = FlockGate(path)
        for _ in range(3000):  # the worker returns within a poll: then the gate is free
            if third.try_acquire():
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("a cancelled wait left the gate held")
        third.release()
