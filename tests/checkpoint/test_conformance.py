"""The Checkpointer contract (SPEC §4) for every backend of this project, through the same
public entry point a third party uses (:mod:`lite_agent_jupyter.testing`): each check of the
kit is one test per backend (contract, multi-process, SIGKILL, state machine)."""

from __future__ import annotations

import pytest
from checkpoint_kit import KIT_BACKENDS

from lite_agent_jupyter.testing import checks_for, run_check

CASES = [
    pytest.param(name, check.name, id=f"{check.name}[{name}]")
    for name, backend in KIT_BACKENDS.items()
    for check in checks_for(backend)
]


@pytest.mark.parametrize(("backend_name", "check"), CASES)
async def test_conformance(backend_name: str, check: str) -> None:
    await run_check(check, KIT_BACKENDS[backend_name])


def test_every_backend_gets_every_check_it_can_run() -> None:
    names = {c.name for c in checks_for(KIT_BACKENDS["postgres"])}
    assert {"processes_append_concurrently", "writer_killed_mid_append"} <= names
    assert "behaves_like_the_model" in names and "another_object_sees_everything" in names
    memory = {c.name for c in checks_for(KIT_BACKENDS["memory"])}
    assert "processes_append_concurrently" not in memory and "truncate" in memory
