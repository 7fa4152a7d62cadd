"""Fixtures for the Jupyter layer: real kernels (``nbkernel.Kernel``) in a temporary folder,
talking to the fake Messages API server with the real ``anthropic`` client."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropicServer
from nbkernel import SETUP, Kernel, StartKernel
from process_helpers import kernel_env


@pytest.fixture
def start_kernel(tmp_path: Path) -> Iterator[StartKernel]:
    """``start_kernel(cwd=None, env={...})``: a started kernel, shut down after the test."""
    kernels: list[Kernel] = []

    def start(cwd: Path | None = None, env: Mapping[str, str | None] | None = None) -> Kernel:
        folder = cwd or tmp_path
        folder.mkdir(parents=True, exist_ok=True)
        kernel = Kernel(folder, kernel_env(env or {}))
        kernels.append(kernel)
        return kernel

    yield start
    for kernel in kernels:
        kernel.shutdown()


@pytest.fixture
def fake_env(fake_anthropic: FakeAnthropicServer) -> dict[str, str | None]:
    """A kernel environment pointing the real client at the fake server."""
    return {"ANTHROPIC_API_KEY": fake_anthropic.api_key, "ANTHROPIC_BASE_URL": fake_anthropic.url}


@pytest.fixture
def agent_kernel(
    start_kernel: StartKernel, fake_env: dict[str, str | None], tmp_path: Path
) -> Kernel:
    """A kernel in ``tmp_path/work`` with the extension loaded and every tool allowed."""
    kernel = start_kernel(tmp_path / "work", fake_env)
    kernel.run(SETUP).check()
    return kernel
