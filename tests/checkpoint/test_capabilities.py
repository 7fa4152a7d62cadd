"""Optional capabilities: each backend says what it offers through ``isinstance`` on the
protocols of ``checkpoint/protocol.py``, and the agent uses exactly that."""

from __future__ import annotations

import pytest

from lite_agent_jupyter.checkpoint import (
    Checkpointer,
    SupportsBlobs,
    SupportsSync,
    SupportsTaskLists,
    SupportsTombstones,
    SupportsTurnClaims,
)

SESSIONS = {"tombstones", "turn_claims"}
"""Every backend of ours keeps deletes deleted and claims turns (issue #8, defects 4 and 5)."""
OFFERS = {
    "memory": {"sync", "task_lists", *SESSIONS},
    "file": {"sync", *SESSIONS},
    "sqlite": {"sync", "task_lists", *SESSIONS},
    "sqlite-memory": {"sync", "task_lists", *SESSIONS},
    "postgres": {"sync", "blobs", "task_lists", *SESSIONS},
}


async def test_each_backend_offers_what_it_says(backend_name: str, store: Checkpointer) -> None:
    assert isinstance(store, Checkpointer)
    offered = {
        name
        for name, protocol in (
            ("sync", SupportsSync),
            ("blobs", SupportsBlobs),
            ("task_lists", SupportsTaskLists),
            ("tombstones", SupportsTombstones),
            ("turn_claims", SupportsTurnClaims),
        )
        if isinstance(store, protocol)
    }
    assert offered == OFFERS[backend_name]


def test_a_plain_object_offers_nothing() -> None:
    class Bare:
        pass

    for protocol in (
        SupportsSync,
        SupportsBlobs,
        SupportsTaskLists,
        SupportsTombstones,
        SupportsTurnClaims,
    ):
        assert not isinstance(Bare(), protocol)


@pytest.mark.parametrize("backend_name", ["postgres"])
async def test_the_agent_puts_snapshots_where_the_backend_offers(
    store: Checkpointer, tmp_path: object
) -> None:
    from pathlib import Path

    from lite_agent_jupyter import create_lite_agent
    from lite_agent_jupyter.providers.scripted import scripted

    workdir = Path(str(tmp_path))
    agent = create_lite_agent(model=scripted([]), workdir=workdir, checkpointer=store)
    assert isinstance(store, SupportsBlobs)
    assert type(agent.blobs) is type(store.blobs())
    await agent.close()
