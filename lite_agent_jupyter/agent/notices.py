"""Fan-out of background notices to subscribers (``agent.subscribe()``).

Background completion turns have no ``run()`` caller to stream to; their events go to every
open :class:`Subscription` instead. Everything runs on the agent's event loop; a subscriber
that does not read keeps its notices queued until it reads or closes.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from .results import BackgroundNotice


class Subscription:
    """An async iterator of :data:`BackgroundNotice` from the moment it was created.

    Ends when closed (``close()``, leaving ``async with``) or when the agent closes.
    """

    def __init__(self, hub: NoticeHub) -> None:
        self._hub = hub
        self._queue: asyncio.Queue[BackgroundNotice | None] = asyncio.Queue()  # None: the end
        self._closed = False

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> BackgroundNotice:
        if self._closed and self._queue.empty():
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is None:
            raise StopAsyncIteration
        return item

    def deliver(self, notice: BackgroundNotice) -> None:
        """Queue ``notice`` for this subscriber (the hub calls it)."""
        if not self._closed:
            self._queue.put_nowait(notice)

    def close(self) -> None:
        """Stop receiving; notices already queued can still be read. Idempotent."""
        if not self._closed:
            self._closed = True
            self._hub.discard(self)
            self._queue.put_nowait(None)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class NoticeHub:
    """The agent's set of subscriptions."""

    def __init__(self) -> None:
        self._subscriptions: set[Subscription] = set()

    def subscribe(self) -> Subscription:
        subscription = Subscription(self)
        self._subscriptions.add(subscription)
        return subscription

    def discard(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)

    def publish(self, notice: BackgroundNotice) -> None:
        for subscription in self._subscriptions:
            subscription.deliver(notice)

    def close(self) -> None:
        for subscription in list(self._subscriptions):
            subscription.close()
