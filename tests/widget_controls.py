"""A blocking facade over a real ``LiteAgent`` running on an event-loop thread of its own.

The widget tests use it until the magics' runner lands; it holds no logic the widgets rely on
beyond :class:`~lite_agent_jupyter.jupyter.widgets.SessionControls`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from lite_agent_jupyter import LiteAgent, LiteAgentResult
from lite_agent_jupyter.checkpoint.protocol import SessionInfo

T = TypeVar("T")


class LoopThreadControls:
    """Runs ``make_agent()`` on a private loop thread and calls it from any thread."""

    def __init__(self, make_agent: Callable[[], LiteAgent]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._running: set[str] = set()
        self._lock = threading.Lock()

        async def create() -> LiteAgent:
            return make_agent()

        self.agent = self.call(create())

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def _sync(self, fn: Callable[[], T]) -> T:
        async def body() -> T:
            return fn()

        return self.call(body())

    @property
    def session_id(self) -> str:
        return self.agent.session_id

    def list_sessions(self) -> list[SessionInfo]:
        return self.call(self.agent.list_sessions())

    def resume(self, session_id: str) -> str:
        return self._sync(lambda: self.agent.resume(session_id))

    def clear(self) -> str:
        return self._sync(self.agent.clear)

    def delete_session(self, session_id: str) -> None:
        self.call(self.agent.delete_session(session_id))

    def list_checkpoints(self, session_id: str) -> list[Any]:
        return self.call(self.agent.list_checkpoints(session_id))

    def preview_restore(self, session_id: str, seq: int) -> Any:
        return self.call(self.agent.preview_restore(session_id, seq))

    def restore(
        self,
        session_id: str,
        seq: int,
        *,
        files: bool = True,
        conversation: bool = True,
        force: bool = False,
    ) -> Any:
        return self.call(
            self.agent.restore(session_id, seq, files=files, conversation=conversation, force=force)
        )

    def undo_restore(self, session_id: str) -> Any:
        return self.call(self.agent.undo_restore(session_id))

    def is_busy(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._running

    def start_send(self, prompt: str) -> Future[LiteAgentResult]:
        """Start a turn on the current session; ``is_busy`` is true until it ends."""
        session_id = self.agent.session_id
        with self._lock:
            self._running.add(session_id)

        async def body() -> LiteAgentResult:
            try:
                return await self.agent.send(prompt, session_id=session_id)
            finally:
                with self._lock:
                    self._running.discard(session_id)

        return asyncio.run_coroutine_threadsafe(body(), self.loop)

    def send(self, prompt: str) -> LiteAgentResult:
        return self.start_send(prompt).result(timeout=60)

    def close(self) -> None:
        self.call(self.agent.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()
