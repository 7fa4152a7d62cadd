"""Time travel at the edges (#18): a half-done restore settled by every operation, deleted
sessions, background jobs, saves racing a restore, odd things where a file was, missing
snapshot blobs. Real agents on the fake Messages API server, real files, real processes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer
from test_restore import (  # noqa: F401  (fixtures)
    MakeAgent,
    ThreePrompts,
    project,
    run3,
    run_killed_child,
    state,
)

from lite_agent_jupyter import Storage


async def test_deleting_a_session_with_a_half_done_restore_settles_the_files_first(
    run3: ThreePrompts,  # noqa: F811
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    project: Path,  # noqa: F811
    storage: Storage,
) -> None:
    seqs = await run3.seqs()
    await run_killed_child(run3, storage, seqs[1], "file", project)
    journal = storage.base / "archive" / f"{run3.sid}.journal.json"
    assert journal.exists() and state(project) != run3.states[3]  # half-rewound
    fresh = make_agent(model=claude())
    await fresh.delete_session(run3.sid)
    assert state(project) == run3.states[3]  # rolled back before the journal went
    assert not journal.exists()
    assert run3.sid not in [s.id for s in await fresh.list_sessions()]


async def test_compacting_a_session_with_a_half_done_restore_settles_it_first(
    run3: ThreePrompts,  # noqa: F811
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    project: Path,  # noqa: F811
    storage: Storage,
) -> None:
    seqs = await run3.seqs()
    await run_killed_child(run3, storage, seqs[1], "file", project)
    fresh = make_agent(model=claude(), session_id=run3.sid)
    fake_anthropic.script("SUMMARY of three prompts.")
    await fresh.compact()
    assert state(project) == run3.states[3]
    assert not (storage.base / "archive" / f"{run3.sid}.journal.json").exists()
