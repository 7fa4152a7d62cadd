"""Helpers for tests that start or watch real OS processes (kernels: their environment) and
poll for a condition with a deadline.

The machine running the suite may be loaded (2 cores shared with a JupyterLab, a browser and
other test runs): a child process may take tens of seconds to import and answer. Waits are
bounded by :data:`PROCESS_WAIT`, a hang guard, never a measurement; and every child a test
starts goes through :func:`child_process` / :func:`async_child`, which kill and reap it
whatever happens, so one test's failure (or timeout) never leaves a process, a pipe or an
unclosed asyncio transport behind to break the next test's setup (#30).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

PROCESS_WAIT = 240.0
"""Seconds a test waits for a child process to reach a state (start, answer, exit): generous
for a loaded machine; tests that wait this long mark themselves ``timeout(PROCESS_TIMEOUT)``."""

PROCESS_TIMEOUT = 600
"""pytest-timeout for a test that waits for child processes (the default is 120 s)."""


@contextlib.contextmanager
def child_process(argv: Sequence[str], **popen: Any) -> Iterator[subprocess.Popen[Any]]:
    """``subprocess.Popen(argv, **popen)``, killed (its process group too, when it has one
    of its own) and reaped on the way out, its pipes closed, whatever the test did."""
    proc: subprocess.Popen[Any] = subprocess.Popen(list(argv), **popen)
    try:
        yield proc
    finally:
        end_process(proc)


def end_process(proc: subprocess.Popen[Any]) -> None:
    """Kill ``proc`` if it still runs (a stopped one too) and reap it; idempotent."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(proc.pid) == proc.pid:  # a session leader: its children go too
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=PROCESS_WAIT)  # reaps, drains and closes the pipes


@contextlib.asynccontextmanager
async def async_child(*argv: str, **options: Any) -> AsyncIterator[asyncio.subprocess.Process]:
    """``asyncio.create_subprocess_exec(*argv, **options)``, killed and reaped on the way out
    on the same event loop. A transport left to the garbage collector after its loop closed
    raises in whatever test runs next (an unraisable exception, an error in the suite)."""
    proc = await asyncio.create_subprocess_exec(*argv, **options)
    try:
        yield proc
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.communicate(), PROCESS_WAIT)


def process_alive(pid: int) -> bool:
    """True if ``pid`` runs; a zombie (dead, not yet reaped by a non-reaping PID 1) is dead."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def wait_until(
    predicate: Callable[[], bool], timeout: float = 60.0, interval: float = 0.01
) -> bool:
    """Poll ``predicate`` every ``interval`` seconds until true or ``timeout`` seconds passed
    (a hang guard, not a measurement); return its last value."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


async def async_wait_until(predicate: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def kernel_env(extra: Mapping[str, str | None]) -> dict[str, str]:
    """This process's environment without ANTHROPIC_*, JPY_* and LITE_AGENT_*, unbuffered,
    this Python's folder first on PATH, plus ``extra`` (``None`` removes a name)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "JPY_", "LITE_AGENT_"))
    }
    env["PYTHONUNBUFFERED"] = "1"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def kill_once_stopped(argv: Sequence[str], what: str) -> None:
    """Run ``argv``, a child that stops itself (SIGSTOP) mid-``what``; SIGKILL it there and
    reap it: a real process killed halfway. Killed and reaped whatever happens."""
    with child_process(argv) as proc:
        _, status = os.waitpid(proc.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), f"the child finished instead of stopping mid-{what}"
        proc.kill()
        proc.wait(PROCESS_WAIT)
    assert proc.returncode == -signal.SIGKILL
