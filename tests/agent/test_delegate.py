"""``delegate``: a public method of the agent that is a held object's (``agent/delegate.py``),
read on an instance and on the class as a plain method would be."""

from __future__ import annotations

import asyncio
import inspect

from lite_agent_jupyter.agent.delegate import delegate


class _Part:
    def __init__(self, tag: str) -> None:
        self.tag = tag

    async def fetch(self, n: int, *, twice: bool = False) -> str:
        """Fetch ``n``."""
        return self.tag * n * (2 if twice else 1)

    def name(self) -> str:
        return self.tag


class _Owner:
    fetch = delegate("part", _Part.fetch)
    name = delegate("part", _Part.name)

    def __init__(self, tag: str) -> None:
        self.part = _Part(tag)


def test_an_instance_reads_the_parts_bound_method() -> None:
    owner = _Owner("ab")
    assert owner.fetch == owner.part.fetch and owner.name() == "ab"
    assert asyncio.run(owner.fetch(2, twice=True)) == "abababab"
    assert inspect.signature(owner.fetch) == inspect.signature(owner.part.fetch)


def test_the_class_gives_a_method_taking_the_owner_first() -> None:
    """As a plain method: ``Owner.fetch(owner, ...)`` works, so code that wraps the class's
    method (a test's monkeypatch) calls it the usual way."""
    owner = _Owner("x")
    unbound = _Owner.fetch
    assert inspect.iscoroutinefunction(unbound) and unbound.__doc__ == "Fetch ``n``."
    assert asyncio.run(unbound(owner, 3)) == "xxx"
    assert _Owner.name(owner) == "x" and not inspect.iscoroutinefunction(_Owner.name)
