"""Helpers for tests that start or watch real OS processes (kernels: their environment) and
poll for a condition with a deadline."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path


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
