"""Fixtures for the Jupyter layer: real kernels (``nbkernel.Kernel``) in a temporary folder,
talking to the fake Messages API server with the real ``anthropic`` client, and the kernel's own
agent runner driven from the test (``kernel_agent``) for the widgets."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply
from kernel_agent import start_runner
from nbkernel import SETUP, Kernel, StartKernel
from process_helpers import kernel_env

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.jupyter.runner import AgentFacade, AgentRunner
from lite_agent_jupyter.providers import anthropic


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
    return {**fake_anthropic.client_env()}


@pytest.fixture
def agent_kernel(
    start_kernel: StartKernel, fake_env: dict[str, str | None], tmp_path: Path
) -> Kernel:
    """A kernel in ``tmp_path/work`` with the extension loaded and every tool allowed."""
    kernel = start_kernel(tmp_path / "work", fake_env)
    kernel.run(SETUP).check()
    return kernel


@pytest.fixture
def notebook_kernel(
    start_kernel: StartKernel, fake_env: dict[str, str | None]
) -> Callable[[Path], Kernel]:
    """``open(path)``: a kernel as JupyterLab starts one for the notebook ``path`` (in its
    folder, ``JPY_SESSION_NAME`` naming it), the extension loaded, tools allowed."""

    def open_notebook(path: Path) -> Kernel:
        kernel = start_kernel(path.parent, {**fake_env, "JPY_SESSION_NAME": str(path)})
        kernel.run(SETUP).check()
        return kernel

    return open_notebook


@pytest.fixture
def workdir(tmp_folder: Callable[[str], Path]) -> Path:
    """The runner's agent's folder: ``tmp_path/project``."""
    return tmp_folder("project")


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage(tmp_path / "store", "nb")


@pytest.fixture
def runner(
    fake_anthropic: FakeAnthropicServer, workdir: Path, storage: Storage
) -> Iterator[AgentRunner]:
    """The kernel's agent runner in this process, its agent (every tool allowed) on the real
    client and the fake server (which answers "Done." when its script is empty)."""
    fake_anthropic.default = FakeReply("Done.")
    made = start_runner(
        lambda: create_lite_agent(
            model=anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url),
            workdir=workdir,
            storage=storage,
            approvals="allow",
        )
    )
    yield made
    made.stop()


@pytest.fixture
def facade(runner: AgentRunner) -> AgentFacade:
    """What ``%agent checkpoints`` and ``%agent sessions`` hand their widgets."""
    return runner.facade
