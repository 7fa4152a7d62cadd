"""A real JupyterLab server driven by the system Chromium, for the browser tests and benchmarks.

:class:`JupyterLabServer` starts ``jupyter lab`` from this virtualenv on 127.0.0.1 (a free port,
a token, every ``JUPYTER*``/``IPYTHONDIR`` folder temporary, the settings that keep JupyterLab
quiet and predictable), :func:`launch_chromium` starts Debian's ``/usr/bin/chromium`` through
Playwright (never a downloaded browser), and :class:`LabNotebook` opens one notebook in a
workspace of its own and runs its cells the way a user does (Shift+Enter), waiting on the
status bar's "Idle". A missing Chromium or Playwright is an error, never a skip: run
``scripts/setup-browser.sh`` (``scripts/test`` does).

Usable outside pytest (``benchmarks/widgets_bench.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import nbformat
from fake_anthropic import FakeAnthropicServer, tool_reply
from nbclient import NotebookClient
from process_helpers import end_process, kernel_env

CHROMIUM = os.environ.get("LITE_AGENT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
IDLE = "Python 3 (ipykernel) | Idle"
FINISHED = re.compile(r"^\s*\[\s*\d+\s*\]:\s*$")
"""A cell's prompt once it ran: ``[n]:`` (``[ ]:`` before, ``[*]:`` while it runs)."""

# JupyterLab user settings (plugin id -> values) that remove network calls and the kernel
# picker dialog: both made early browser tests flaky.
LAB_SETTINGS: dict[str, dict[str, Any]] = {
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension:tracker": {"autoStartDefaultKernel": True},
}


WIDGET_STATE_SETTING = (
    Path(__file__).resolve().parents[1] / "scripts/jupyterlab/overrides.json",
    "@jupyter-widgets/jupyterlab-manager:plugin",
)
"""Where the widget-state setting of docs/widgets.md is kept, and the plugin it sets."""


SETUP_ALLOW = """\
%load_ext lite_agent_jupyter
%config LiteAgentMagics.approvals = "allow"
"""
"""The first cell of the browser tests' notebooks where every tool may run without asking."""


class BrowserSetupError(RuntimeError):
    """Chromium or Playwright is missing: run ``scripts/setup-browser.sh``."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class JupyterLabServer:
    """``jupyter lab`` in ``root`` (the folder it serves), all its state under ``state``."""

    def __init__(
        self,
        root: Path,
        state: Path,
        *,
        env: Mapping[str, str] | None = None,
        app: str = "jupyterlab",
        collaboration: bool = False,
    ) -> None:
        """``app``: ``jupyterlab`` or ``notebook`` (Notebook 7, the same front-end parts).
        ``collaboration``: real-time collaboration on (``jupyter-collaboration``, in the
        browser extra). Off by default: with it the server saves a shared notebook to disk
        by itself a second after each change, while the other tests check that nothing
        reaches the file until the person saves."""
        self.app = app
        self.collaboration = collaboration
        self.root = root
        self.state = state
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.extra_env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = state / "jupyterlab.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
        dirs = {
            "JUPYTER_CONFIG_DIR": "config",
            "JUPYTER_DATA_DIR": "data",
            "JUPYTER_RUNTIME_DIR": "runtime",
            "IPYTHONDIR": "ipython",
            "JUPYTERLAB_SETTINGS_DIR": "lab-settings",
            "JUPYTERLAB_WORKSPACES_DIR": "lab-workspaces",
        }
        for name, sub in dirs.items():
            path = self.state / sub
            path.mkdir(parents=True, exist_ok=True)
            env[name] = str(path)
        env.update(self.extra_env)
        return env

    def _write_settings(self, settings_dir: Path) -> None:
        for plugin, values in LAB_SETTINGS.items():
            package, name = plugin.split(":")
            path = settings_dir / package / f"{name}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))

    def start(self, timeout: float = 60.0) -> JupyterLabServer:
        env = self._env()
        self._write_settings(Path(env["JUPYTERLAB_SETTINGS_DIR"]))
        cmd = [
            sys.executable,
            "-m",
            self.app,
            "--no-browser",
            "--allow-root",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
        ]
        if self.app == "jupyterlab":
            cmd.append("--LabApp.news_url=")
        if not self.collaboration:
            cmd.append("--YDocExtension.disable_rtc=True")
        log = self.log_path.open("wb")
        # its own process group: a server that will not stop is killed with its kernels
        self.process = subprocess.Popen(
            cmd,
            cwd=self.root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited:\n{self.log()}")
            try:
                with urllib.request.urlopen(
                    f"{self.url}/api/status?token={self.token}", timeout=2
                ) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"jupyter lab did not answer in {timeout} s:\n{self.log()}")
            time.sleep(0.1)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()  # the server shuts its kernels down
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=60)
        end_process(self.process)  # the group, if anything of it is left
        self.process = None

    def __enter__(self) -> JupyterLabServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def keep_widget_state(self) -> None:
        """Turn on the setting of docs/widgets.md (``scripts/jupyterlab/overrides.json``) as
        a user setting: a notebook saved from now on keeps its widgets' state."""
        overrides, plugin = WIDGET_STATE_SETTING
        package, name = plugin.split(":")
        setting = self.state / "lab-settings" / package / f"{name}.jupyterlab-settings"
        setting.parent.mkdir(parents=True, exist_ok=True)
        setting.write_text(json.dumps(json.loads(overrides.read_text())[plugin]))

    def shut_down(self, name: str) -> None:
        """Shut down the kernel of the open notebook ``name`` (its session deleted through the
        REST API), as a user closing it with its kernel does: its page keeps dead widgets."""
        with urllib.request.urlopen(f"{self.url}/api/sessions?token={self.token}") as response:
            (session,) = [s for s in json.loads(response.read()) if s["path"].endswith(name)]
        request = urllib.request.Request(
            f"{self.url}/api/sessions/{session['id']}?token={self.token}", method="DELETE"
        )
        with urllib.request.urlopen(request) as response:
            assert response.status == 204  # the kernel is gone

    def notebook_url(self, name: str) -> str:
        """The notebook in a fresh workspace (else JupyterLab re-opens the last one); Notebook 7
        opens one notebook per page."""
        if self.app == "notebook":
            return f"{self.url}/notebooks/{name}?token={self.token}"
        workspace = f"w{uuid.uuid4().hex[:12]}"
        return f"{self.url}/lab/workspaces/{workspace}/tree/{name}?reset&token={self.token}"


def write_notebook(path: Path, cells: list[str]) -> Path:
    """A notebook of code cells with the ipykernel Python 3 kernel."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nbformat.write(nb, str(path))
    return path


def run_cells(path: Path, fake: FakeAnthropicServer, indexes: Sequence[int]) -> Any:
    """Open ``path`` in a new kernel (started as JupyterLab starts one for it), run the cells
    ``indexes``, save it without widget state (JupyterLab's default) and return it as read
    back from disk."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        store_widget_state=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    env = {**fake.client_env(), "JPY_SESSION_NAME": str(path)}
    with client.setup_kernel(env=kernel_env(env)):
        for index in indexes:
            client.execute_cell(notebook.cells[index], index)
    nbformat.write(notebook, str(path))
    return nbformat.read(path, as_version=4)


def launch_chromium(playwright: Any) -> Any:
    """Debian's Chromium, headless, through Playwright; an error (not a skip) when missing."""
    if not os.access(CHROMIUM, os.X_OK):
        raise BrowserSetupError(f"{CHROMIUM} is missing: run scripts/setup-browser.sh")
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


class LabNotebook:
    """One notebook open in a Playwright page of a :class:`JupyterLabServer`."""

    def __init__(self, page: Any, server: JupyterLabServer, name: str) -> None:
        self.page = page
        self.server = server
        self.name = name

    def open(self, timeout: float = 60.0) -> LabNotebook:
        self.page.goto(self.server.notebook_url(self.name))
        self.wait_idle(timeout)
        return self

    def wait_idle(self, timeout: float = 60.0) -> None:
        self.page.get_by_text(IDLE, exact=False).first.wait_for(
            state="visible", timeout=timeout * 1000
        )

    def cell(self, index: int) -> Any:
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def select_cell(self, index: int) -> Any:
        """Select cell ``index`` in command mode (the next key goes to the notebook)."""
        cell = self.cell(index)
        cell.locator(".jp-InputPrompt").click()
        self.page.keyboard.press("Escape")
        return cell

    def start_cell(self, index: int) -> Any:
        """Run cell ``index`` with Shift+Enter, without waiting for it to finish."""
        cell = self.select_cell(index)
        self.page.keyboard.press("Shift+Enter")
        return cell

    def wait_finished(self, cell: Any, timeout: float = 60.0) -> None:
        """Wait until ``cell``'s prompt shows its execution count (``[n]:``), i.e. it ended."""
        from playwright.sync_api import expect

        expect(cell.locator(".jp-InputPrompt")).to_have_text(FINISHED, timeout=timeout * 1000)

    def run_cell(self, index: int, timeout: float = 60.0) -> Any:
        """Select cell ``index``, run it with Shift+Enter, wait until it has finished."""
        cell = self.start_cell(index)
        self.wait_finished(cell, timeout)
        self.wait_idle(timeout)
        return cell

    def output_text(self, index: int) -> str:
        return str(self.cell(index).locator(".jp-OutputArea").inner_text())

    def save_with_widgets(self, index: int) -> None:
        """Save the notebook (Ctrl+S, cell ``index`` selected) and wait until the file holds
        the widgets' state (:meth:`JupyterLabServer.keep_widget_state` must be on)."""
        path = self.server.root / self.name
        self.select_cell(index)
        self.page.keyboard.press("Control+s")
        wait_for(lambda: "widget-state" in path.read_text(), "the save with the widget state")


class NotebookSevenPage(LabNotebook):
    """One notebook open in Notebook 7 (``JupyterLabServer(app="notebook")``): the same
    notebook and cell parts as JupyterLab, but no status bar to read "Idle" from; a cell
    that ran shows ``[n]:``, which is what :meth:`run_cell` waits for."""

    def wait_idle(self, timeout: float = 60.0) -> None:
        """The page shows the notebook and the server says its kernel is idle (read from
        ``/api/sessions``: keys pressed before the kernel is connected are lost)."""
        self.page.locator(".jp-Notebook .jp-Cell").first.wait_for(
            state="visible", timeout=timeout * 1000
        )
        url = f"{self.server.url}/api/sessions?token={self.server.token}"

        def idle() -> bool:
            try:  # a server too busy to answer in time is not idle yet, not a failure
                with urllib.request.urlopen(url, timeout=30) as response:
                    sessions = json.loads(response.read())
            except OSError:
                return False
            return any(
                s.get("path", "").endswith(self.name)
                and (s.get("kernel") or {}).get("execution_state") == "idle"
                for s in sessions
            )

        wait_for(idle, f"an idle kernel for {self.name}", timeout)
        self.page.wait_for_timeout(500)  # the page's kernel connection follows the server's


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def write_then_change(server: FakeAnthropicServer) -> None:
    """Script two prompts: the first writes notes.txt, the second changes it."""
    server.script(
        tool_reply("Writing it.", "write_file", path="notes.txt", content="version one\n"),
        "Wrote notes.txt.",
        tool_reply("Changing it.", "write_file", path="notes.txt", content="version two\n"),
        "Changed notes.txt.",
    )


def allow(nb: LabNotebook, index: int) -> str:
    """Wait for the next Allow button of the agent cell (cell ``index``), read the
    question, click it."""
    button = nb.cell(index).get_by_role("button", name="Allow").first
    button.wait_for(state="visible", timeout=60_000)
    question = nb.output_text(index)
    button.click()
    return question


def option_texts(select: Any) -> list[str]:
    """The options of a ``<select>`` as a person reads them (the review's rows: their
    non-breaking spaces as spaces)."""
    return [t.replace("\u00a0", " ") for t in select.locator("option").all_inner_texts()]


def no_widget_errors(page: Any) -> None:
    """No widget on the page failed to render."""
    assert page.get_by_text("Error displaying widget").count() == 0


def editor_text(nb: LabNotebook, index: int) -> str:
    """Cell ``index``'s source as the page shows it."""
    return str(nb.cell(index).locator(".jp-InputArea-editor").inner_text())


def logged_cell_changes(*folders: Path) -> list[dict[str, Any]]:
    """The data of every ``state_snapshot`` event of the notebook participant in the session
    logs under ``folders``."""
    found = []
    logs = {log.resolve() for folder in folders for log in folder.rglob("*.jsonl")}
    for log in sorted(logs):
        for line in log.read_text().splitlines():
            event = json.loads(line) if '"state_snapshot"' in line else {}
            if event.get("participant") == "notebook":
                found.append(event["data"])
    return found


def run_bench_notebook(cells: list[str], timeout: float) -> dict[str, Any]:
    """For benchmarks: a notebook of ``cells`` opened in a fresh JupyterLab and Chromium,
    cells 0 and 1 run (the setup, then the cell that times, awaiting, and writes
    ``bench-result.json`` next to the notebook); that file's JSON."""
    import tempfile

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        root, state = Path(tmp, "lab"), Path(tmp, "state")
        root.mkdir()
        write_notebook(root / "bench.ipynb", cells)
        result = root / "bench-result.json"
        with JupyterLabServer(root, state) as lab, sync_playwright() as pw:
            browser = launch_chromium(pw)
            page: Any = browser.new_page(viewport={"width": 1280, "height": 1000})
            nb = LabNotebook(page, lab, "bench.ipynb").open()
            nb.run_cell(0)
            nb.run_cell(1, timeout=timeout)
            wait_for(result.exists, "the bench cell's results", timeout)
            browser.close()
        found: dict[str, Any] = json.loads(result.read_text())
        return found
