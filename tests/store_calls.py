"""Counting what an agent asks its store for: the footer tests of #32 (no timing)."""

from __future__ import annotations

from typing import Any

from lite_agent_jupyter import LiteAgent


def count_store_calls(agent: LiteAgent) -> list[str]:
    """From now on, each read, mark read and head ``agent`` asks its checkpointer for and
    each look for a crash journal, as names in order, in the list returned. Patches the
    agent's own store and journal objects (nothing shared: the agent is the test's)."""
    asked: list[str] = []
    store, journal = agent.checkpointer, agent.timetravel.journal
    for owner, name in (
        (store, "read"),
        (store, "read_marks"),
        (store, "head"),
        (journal, "recover"),
    ):
        method = getattr(owner, name)

        def wrapped(*args: Any, _method: Any = method, _name: str = name, **kwargs: Any) -> Any:
            asked.append(_name)
            return _method(*args, **kwargs)

        setattr(owner, name, wrapped)
    return asked
