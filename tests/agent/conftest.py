"""Fixtures of the agent tests: a workdir, a private storage root, agents on either provider."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer

from lite_agent_jupyter import LiteAgent, Storage, create_lite_agent
from lite_agent_jupyter.providers import anthropic


@pytest.fixture
def workdir(tmp_folder: Callable[[str], Path]) -> Path:
    return tmp_folder("project")


@pytest.fixture
def gate() -> threading.Event:
    """An event a scripted reply of the fake server can be held on (``hold=gate``)."""
    return threading.Event()


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage(tmp_path / "store", "test")


@pytest.fixture
async def make_agent(workdir: Path, storage: Storage) -> AsyncIterator[Callable[..., LiteAgent]]:
    """``make_agent(model=..., **options)``: an agent on the test workdir and storage; closed
    after the test."""
    agents: list[LiteAgent] = []

    def make(**options: Any) -> LiteAgent:
        options.setdefault("workdir", workdir)
        options.setdefault("storage", storage)
        agent = create_lite_agent(**options)
        agents.append(agent)
        return agent

    yield make
    for agent in agents:
        await agent.close()


@pytest.fixture
def claude(fake_anthropic: FakeAnthropicServer) -> Callable[..., Any]:
    """``claude()``: the real Anthropic provider pointed at the fake server."""

    def make(**options: Any) -> Any:
        options.setdefault("max_retries", 2)
        return anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url, **options)

    return make


CHILD = Path(__file__).with_name("agent_child.py")


@pytest.fixture
def child_config(
    fake_anthropic: FakeAnthropicServer, workdir: Path, storage: Storage
) -> Callable[..., dict[str, Any]]:
    """``child_config(**more)``: the JSON config of a child agent process on the same fake
    server, workdir and storage as this test, plus ``more``."""

    def make(**more: Any) -> dict[str, Any]:
        return {
            "base_url": fake_anthropic.url,
            "api_key": fake_anthropic.api_key,
            "workdir": str(workdir),
            "root": str(storage.root),
            "namespace": storage.namespace,
            **more,
        }

    return make


@pytest.fixture
def child_agent(
    child_config: Callable[..., dict[str, Any]], tmp_path: Path
) -> Callable[..., tuple[list[str], Path]]:
    """``child_agent(session_id, prompt, **more) -> (argv, result_file)``: the command line of
    a child process that sends ``prompt`` on ``session_id`` with the same fake server, workdir
    and storage as this test (``agent_child.py``); ``more`` adds to or replaces keys of its
    config (another ``root``, a ``checkpointer`` URL, a ``task_list``)."""

    def make(session_id: str, prompt: str, **more: Any) -> tuple[list[str], Path]:
        out = tmp_path / f"child-{session_id}-{len(list(tmp_path.glob('child-*')))}.json"
        config = child_config(session_id=session_id, prompt=prompt, result_file=str(out), **more)
        return [sys.executable, str(CHILD), json.dumps(config)], out

    return make
