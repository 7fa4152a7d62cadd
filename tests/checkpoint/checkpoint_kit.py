"""Helpers shared by the checkpoint conformance tests (imported by the test modules).

Fixtures live in ``conftest.py``; these are plain functions: event factories, a canonical
form to compare events across backends (``ts`` differs by construction), and a driver for
the child-process script ``checkpoint_child.py``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lite_agent_jupyter.checkpoint.events import (
    AssistantEvent,
    Event,
    ToolResultEvent,
    UserEvent,
    to_dict,
)

CHILD = Path(__file__).with_name("checkpoint_child.py")

PERSISTENT = ("file", "sqlite", "postgres")
"""Backends whose sessions outlive the object: another object on the same URL sees them."""


def user(text: str = "hello", *, checkpoint: bool = False, **extra: Any) -> UserEvent:
    return UserEvent(content=text, checkpoint=checkpoint, extra=dict(extra))


def prompt(text: str) -> UserEvent:
    """A user-started prompt: a checkpoint anchor."""
    return UserEvent(content=text, checkpoint=True, origin="user")


def assistant(text: str = "ok") -> AssistantEvent:
    return AssistantEvent(
        content=[{"type": "text", "text": text}],
        usage={"input_tokens": 3, "output_tokens": 5},
        stop_reason="end_turn",
        model="test-model",
    )


def tool_result(tool_use_id: str = "toolu_1", text: str = "done") -> ToolResultEvent:
    return ToolResultEvent(tool_use_id=tool_use_id, content=text)


def batch(n: int, tag: str = "e") -> list[Event]:
    return [user(f"{tag}{i}") for i in range(n)]


def canon(event: Event) -> dict[str, Any]:
    """An event as JSON without its timestamp: what must be equal across backends."""
    data = to_dict(event)
    data.pop("ts")
    return data


def canon_all(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [canon(event) for event in events]


def payloads(events: Sequence[Event]) -> list[dict[str, Any]]:
    """Events as JSON without ``seq`` and ``ts``: what the caller appended."""
    out = []
    for event in events:
        data = canon(event)
        data.pop("seq")
        out.append(data)
    return out


def child_env() -> dict[str, str]:
    """The environment for a child process: it must import this very checkout."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def spawn(*args: str) -> asyncio.subprocess.Process:
    """Start ``checkpoint_child.py`` with ``args``; talk to it by lines on stdin/stdout."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=child_env(),
    )


async def expect_line(proc: asyncio.subprocess.Process, prefix: str) -> str:
    """The child's next line, which must start with ``prefix`` (or the test fails)."""
    assert proc.stdout is not None
    line = (await proc.stdout.readline()).decode()
    if not line.startswith(prefix):
        rest = (await proc.stdout.read()).decode()
        raise AssertionError(f"child said {line!r} (then {rest[-2000:]!r}), expected {prefix!r}")
    return line.strip()


async def tell(proc: asyncio.subprocess.Process, line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line.encode() + b"\n")
    await proc.stdin.drain()


async def finish(proc: asyncio.subprocess.Process) -> None:
    """Wait for a child to exit; it must exit 0."""
    assert proc.stdout is not None
    rest = await proc.stdout.read()
    code = await proc.wait()
    assert code == 0, f"child exited {code}: {rest.decode()[-2000:]}"
