"""Fixtures shared by every test layer.

The fake Anthropic Messages API server (``tests/fake_anthropic.py``): a real HTTP server on
127.0.0.1 that the official ``anthropic`` client talks to, scripted per test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropicServer
from pg_helpers import PG_DSN, drop_schema, new_schema

from lite_agent_jupyter.providers.servers import forget_profile

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "lite_agent_jupyter"


def largest_modules(count: int = 8) -> list[tuple[int, str]]:
    """The package's ``count`` longest modules, as (lines, path), longest first."""
    sizes = [
        (len(path.read_text(encoding="utf-8").splitlines()), str(path.relative_to(PACKAGE_ROOT)))
        for path in PACKAGE_ROOT.rglob("*.py")
    ]
    return sorted(sizes, reverse=True)[:count]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Report the largest modules after a run: size is a signal to read, not a test to pass
    (a hard line limit cut classes to fit it; docs/design.md)."""
    terminalreporter.section("largest modules (lines)")
    for lines, name in largest_modules():
        terminalreporter.write_line(f"{lines:6,}  {name}")


_ANTHROPIC_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR",
)


@pytest.fixture
def fake_anthropic(request: pytest.FixtureRequest) -> Iterator[FakeAnthropicServer]:
    """A started fake Messages API server; script it with ``fake_anthropic.script(...)``.
    Parametrised indirectly with a profile name, it plays that server instead
    (``@pytest.mark.parametrize("fake_anthropic", ["ollama"], indirect=True)``)."""
    with FakeAnthropicServer(profile=getattr(request, "param", None)) as server:
        url = server.url
        yield server
    forget_profile(url)  # its port may serve another test's server later


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


@pytest.fixture
def tmp_folder(tmp_path: Path) -> Callable[[str], Path]:
    """``tmp_folder(name)`` -> ``tmp_path/name``, made (a fresh, empty folder)."""

    def make(name: str) -> Path:
        path = tmp_path / name
        path.mkdir()
        return path

    return make


@pytest.fixture
def backend_url_for(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """``backend_url_for(name)`` -> a fresh URL for that backend, cleaned up after the test."""
    schemas: list[str] = []

    def make(name: str) -> str:
        if name == "memory":
            return "memory:"
        if name == "file":
            return f"file://{tmp_path / 'store'}"
        if name == "sqlite":
            return f"sqlite://{tmp_path / 'store.db'}"
        if name == "sqlite-memory":
            return "sqlite:///:memory:"
        if name == "postgres":
            schema = new_schema()
            schemas.append(schema)
            return f"{PG_DSN}?schema={schema}"
        raise ValueError(name)

    yield make
    for schema in schemas:
        drop_schema(schema)
