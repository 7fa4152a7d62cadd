"""The kit's machinery: how a backend is described, the check registry, and the helpers
checks use. Must not import the checks or the runner (``_runner.py`` loads the checks)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..checkpoint.events import AssistantEvent, Event, ToolResultEvent, UserEvent, to_dict
from ..checkpoint.protocol import Checkpointer

URL_OPENER = "lite_agent_jupyter.checkpoint.url:checkpointer_from_url"


@dataclass(frozen=True)
class Backend:
    """A backend under test, described so that the kit (and its child processes) can open it.

    ``new_location(folder)`` names a fresh, empty store (a URL, a path, a DSN with a schema;
    ``folder`` is a private scratch folder of the check: put files there). ``opener`` is an
    importable ``"module:function"``; ``function(location)`` returns a new Checkpointer object
    on that store (child processes import it by that name).
    """

    name: str
    new_location: Callable[[Path], str]
    opener: str = URL_OPENER
    persistent: bool = True
    """Objects opened on one location share its state (a reopened object sees everything)."""
    processes: bool = True
    """Several OS processes may open the same location at once (needs ``persistent``)."""
    usable_after_close: bool = False
    """``close()`` releases nothing, so the object stays usable (the memory backend)."""
    model_examples: int = 50
    """Examples of the state-machine check (Hypothesis)."""
    drop_location: Callable[[str], None] | None = None
    """Called after each check with its location (e.g. to drop a PostgreSQL schema)."""

    def open(self, location: str) -> Checkpointer:
        return opener(self.opener)(location)


def opener(spec: str) -> Callable[[str], Checkpointer]:
    """Import ``"module:function"``."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"an opener is 'module:function', not {spec!r}")
    function = getattr(importlib.import_module(module_name), attribute)
    if not callable(function):
        raise TypeError(f"{spec} is not callable")
    return function  # type: ignore[no-any-return]


class Context:
    """What a check gets: a fresh store of the backend, and ways to open more objects on it."""

    def __init__(self, backend: Backend, folder: Path) -> None:
        self.backend = backend
        self.folder = folder
        self.location = backend.new_location(folder)
        self.store = backend.open(self.location)
        self._opened: list[Checkpointer] = [self.store]

    def reopen(self) -> Checkpointer:
        """Another object on the same store (a "fresh process" view, with cold caches)."""
        store = self.backend.open(self.location)
        self._opened.append(store)
        return store

    async def close(self) -> None:
        for store in self._opened:
            with contextlib.suppress(Exception):
                await store.close()


CheckFunction = Callable[[Context], Awaitable[None]] | Callable[[Backend, Path], None]


@dataclass(frozen=True)
class Check:
    """One rule of the contract."""

    name: str
    function: CheckFunction
    needs: frozenset[str] = frozenset()
    """Backend features the check needs: ``"persistent"``, ``"processes"``."""

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.function) or ""

    def applies_to(self, backend: Backend) -> bool:
        return all(getattr(backend, need) for need in self.needs)


CHECKS: dict[str, Check] = {}
"""Every check of the kit, by name, in a stable order."""


def check(*needs: str) -> Callable[[CheckFunction], CheckFunction]:
    """Register a check: an ``async def name(ctx: Context)``, or a plain ``def name(backend,
    folder)`` that runs its own event loops (it runs in a worker thread)."""

    def register(function: CheckFunction) -> CheckFunction:
        name = function.__name__
        assert name not in CHECKS, name
        CHECKS[name] = Check(name, function, frozenset(needs))
        return function

    return register


E = TypeVar("E", bound=BaseException)


@contextlib.contextmanager
def raises(kind: type[E], match: str = "") -> Iterator[list[E]]:
    """Assert that the block raises ``kind`` (with ``match`` in its message); yields a list
    that holds the exception afterwards."""
    caught: list[E] = []
    try:
        yield caught
    except kind as exc:
        if match not in str(exc):
            raise AssertionError(f"{exc!r} does not mention {match!r}") from exc
        caught.append(exc)
    else:
        raise AssertionError(f"expected {kind}, nothing was raised")


def user(text: str = "hello", *, checkpoint: bool = False, **extra: Any) -> UserEvent:
    """A user event (not a checkpoint unless asked), with ``extra`` fields."""
    return UserEvent(content=text, checkpoint=checkpoint, extra=dict(extra))


def prompt(text: str) -> UserEvent:
    """A user-started prompt: a checkpoint."""
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
    """``n`` user events ``tag0``, ``tag1``, ..."""
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


class Child:
    """A child Python process talked to by lines on stdin/stdout (no sleeps anywhere)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, *argv: str) -> Child:
        """``python argv...`` with this interpreter and this very package importable."""
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        env["PYTHONUNBUFFERED"] = "1"
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
        )
        return cls(process)

    async def expect(self, prefix: str) -> str:
        """The child's next line, which must start with ``prefix``."""
        assert self.process.stdout is not None
        line = (await self.process.stdout.readline()).decode()
        if not line.startswith(prefix):
            rest = (await self.process.stdout.read()).decode()
            raise AssertionError(
                f"child said {line!r} (then {rest[-2000:]!r}), expected {prefix!r}"
            )
        return line.strip()

    async def tell(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        await self.process.stdin.drain()

    async def finish(self) -> None:
        """Wait for the child to exit; it must exit 0."""
        assert self.process.stdout is not None
        rest = await self.process.stdout.read()
        code = await self.process.wait()
        assert code == 0, f"child exited {code}: {rest.decode()[-2000:]}"
