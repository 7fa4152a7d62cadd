"""Fixtures of the agent tests: a workdir, a private storage root, agents on either provider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer

from lite_agent_jupyter import LiteAgent, Storage, create_lite_agent
from lite_agent_jupyter.providers import anthropic


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


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
