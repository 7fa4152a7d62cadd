"""Fixtures of the real-browser tests: JupyterLab on 127.0.0.1 and Debian's Chromium.

Nothing here skips: without ``/usr/bin/chromium`` or Playwright the tests fail and say to run
``scripts/setup-browser.sh`` (``scripts/test`` runs it). Screenshots and the server log go to
``build/browser/`` (``LITE_AGENT_BROWSER_ARTIFACTS`` overrides).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer
from lab_browser import LAB_SETTINGS, JupyterLabServer, launch_chromium, write_then_change

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("LITE_AGENT_BROWSER_ARTIFACTS", ROOT / "build" / "browser"))


BROWSER_TIMEOUT = 600
"""pytest-timeout's bound for a browser test without its own (pyproject's 120 s is for the
rest). The bound is a hang guard, not a measure: one of these tests starts JupyterLab (twice,
for a saved notebook reopened), Chromium and a kernel, and on a busy 2-core machine (a CI run
beside a JupyterLab and a browser, load 15-20) the saved-widgets test took 125 s (#30)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(BROWSER_TIMEOUT))


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def lab_root(tmp_folder: Callable[[str], Path]) -> Path:
    """The folder JupyterLab serves: the notebooks (and the agent's workdir) live here."""
    return tmp_folder("lab")


@pytest.fixture
def notes(lab_root: Path, fake_anthropic: FakeAnthropicServer) -> Path:
    """``lab_root/notes.txt``, not written yet: the fake model is scripted to write it in the
    first prompt and change it in the second (:func:`lab_browser.write_then_change`)."""
    write_then_change(fake_anthropic)
    return lab_root / "notes.txt"


@pytest.fixture
def lab(
    lab_root: Path, tmp_path: Path, fake_anthropic: FakeAnthropicServer, artifacts: Path
) -> Iterator[JupyterLabServer]:
    """JupyterLab whose kernels reach the fake Messages API server through the environment."""
    env = {**fake_anthropic.client_env(), "LITE_AGENT_HOME": str(tmp_path / "home")}
    server = JupyterLabServer(lab_root, tmp_path / "lab-state", env=env).start()
    try:
        yield server
    finally:
        server.stop()
        (artifacts / "jupyterlab.log").write_text(server.log())


@pytest.fixture
def chromium() -> Iterator[Any]:
    """Chromium for one test. Playwright's sync API runs an event loop on this thread while
    it lives, so it must not outlive the test (the asyncio tests after it need the thread)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1280, "height": 1400})
    page = context.new_page()
    try:
        yield page
    finally:
        context.close()


DOCMANAGER = "@jupyterlab/docmanager-extension:plugin"


@pytest.fixture
def no_autosave(monkeypatch: pytest.MonkeyPatch) -> None:
    """JupyterLab saves a dirty notebook every 120 s by default: off, so that what is on
    disk is what the test (the person) saved. Use with ``pytest.mark.usefixtures``."""
    monkeypatch.setitem(LAB_SETTINGS, DOCMANAGER, {"autosave": False})
