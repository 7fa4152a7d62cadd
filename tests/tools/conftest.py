"""Fixtures of the tool tests: a workdir with a storage root inside it (the notebook-adjacent
layout), a :class:`ToolContext` factory, and a snapshot recorder that checks write-ahead."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tools_helpers import SnapshotRecorder

from lite_agent_jupyter.abort import AbortController
from lite_agent_jupyter.tools import ToolContext


@pytest.fixture
def workdir(tmp_folder: Callable[[str], Path]) -> Path:
    return tmp_folder("work")


@pytest.fixture
def storage_root(workdir: Path) -> Path:
    root = workdir / ".lite_agent"
    root.mkdir()
    (root / "ns" / "sessions").mkdir(parents=True)
    (root / "ns" / "sessions" / "s1.jsonl").write_text('{"v": 1, "needle": 1}\n')
    return root


@pytest.fixture
def recorder() -> SnapshotRecorder:
    return SnapshotRecorder()


@pytest.fixture
def controller() -> AbortController:
    return AbortController()


@pytest.fixture
def make_ctx(
    workdir: Path, storage_root: Path, recorder: SnapshotRecorder, controller: AbortController
) -> Callable[..., ToolContext]:
    def make(**overrides: Any) -> ToolContext:
        fields: dict[str, Any] = {
            "workdir": workdir,
            "signal": controller.signal,
            "session_id": "s1",
            "tool_use_id": "toolu_1",
            "storage_root": storage_root,
            "snapshot": recorder,
        }
        fields.update(overrides)
        return ToolContext(**fields)

    return make


@pytest.fixture
def ctx(make_ctx: Callable[..., ToolContext]) -> ToolContext:
    return make_ctx()
