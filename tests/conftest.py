"""Fixtures shared by every test layer.

The fake Anthropic Messages API server (``tests/fake_anthropic.py``): a real HTTP server on
127.0.0.1 that the official ``anthropic`` client talks to, scripted per test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_anthropic import FakeAnthropicServer

_ANTHROPIC_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR",
)


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropicServer]:
    """A started fake Messages API server; script it with ``fake_anthropic.script(...)``."""
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def anthropic_env(
    fake_anthropic: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> FakeAnthropicServer:
    """``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL`` point at the fake server (other
    ``ANTHROPIC_*`` variables of the machine are removed); returns the server."""
    for name in _ANTHROPIC_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", fake_anthropic.api_key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.url)
    return fake_anthropic
