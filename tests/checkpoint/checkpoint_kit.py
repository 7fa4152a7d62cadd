"""This project's own backends, described for the public conformance kit
(:mod:`lite_agent_jupyter.testing`), plus the child-process driver of the backend-specific
lock tests (``checkpoint_child.py``)."""

from __future__ import annotations

from pathlib import Path

from pg_helpers import PG_DSN, drop_schema, new_schema, schema_of

from lite_agent_jupyter.testing import Backend, Child


def _drop_pg(location: str) -> None:
    drop_schema(schema_of(location))


KIT_BACKENDS: dict[str, Backend] = {
    "memory": Backend(
        "memory",
        lambda folder: "memory:",
        persistent=False,
        processes=False,
        usable_after_close=True,
    ),
    "file": Backend("file", lambda folder: f"file://{folder / 'store'}", model_examples=100),
    "sqlite": Backend(
        "sqlite", lambda folder: f"sqlite://{folder / 'store.db'}", model_examples=100
    ),
    "sqlite-memory": Backend(
        "sqlite-memory",
        lambda folder: "sqlite:///:memory:",
        persistent=False,
        processes=False,
        model_examples=60,
    ),
    "postgres": Backend(
        "postgres",
        lambda folder: f"{PG_DSN}?schema={new_schema()}",
        drop_location=_drop_pg,
        model_examples=50,
    ),
}

CHILD = Path(__file__).with_name("checkpoint_child.py")


async def spawn_holder(url: str, session: str) -> Child:
    """A child process that takes ``session``'s write lock the backend's way (see
    ``checkpoint_child.py``)."""
    return await Child.start(str(CHILD), "hold", url, session)
