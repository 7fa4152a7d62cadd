"""Model text is never code, in a real JupyterLab and Debian's Chromium (issue #17).

The payloads of ``payloads.py`` go through every surface a notebook shows: the model's
streamed answer, a tool's result, a file name, a bash command on Allow and on Deny (the record
line that replaces the buttons), an API error's status line, the prompt (a session title in
the session browser, a prompt in the checkpoint slider) and the text tables. Pass: no dialog,
no console message from a payload, no request to the Jupyter server that the test did not
make (Playwright's request events), the sentinel file never written, and the payloads'
markers still on the page as text. At the end the test runs the payload itself in the page,
to show each detector would have seen it run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, invalid_request
from lab_browser import JupyterLabServer, LabNotebook, no_widget_errors, wait_for, write_notebook
from payloads import ALL_HTML, HTML_PAYLOADS, PAYLOAD_JS, SENTINEL

FILE_NAME = "P10 <img src=x onerror=alert(10)>.txt"
"""A file name (no ``/``: the payload's own JavaScript cannot be a file name)."""
PROMPT = "Summarise the notes " + HTML_PAYLOADS["P4"]
ALLOWED = "echo '" + HTML_PAYLOADS["P1"].replace("'", "") + "'"
DENIED = "echo " + HTML_PAYLOADS["P3"].replace("'", "")

WRITES_ALLOWED = ("/api/sessions", "/api/kernels", "/lab/api/workspaces", "/lab/api/settings")
"""Where JupyterLab itself sends non-GET requests while a notebook runs (and the notebook's
own save, checked by name)."""


class Watch:
    """Everything a payload running in the page would cause: dialogs, console messages,
    requests to the Jupyter server."""

    def __init__(self, page: Any, lab: JupyterLabServer) -> None:
        self.dialogs: list[str] = []
        self.console: list[str] = []
        self.requests: list[tuple[str, str]] = []
        self.origin = lab.url
        page.on("dialog", self._dialog)
        page.on("console", lambda message: self.console.append(message.text))
        page.on("request", self._request)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _request(self, request: Any) -> None:
        if request.url.startswith(self.origin):
            self.requests.append((request.method, urlsplit(request.url).path))

    def unexpected(self, notebook: str) -> list[tuple[str, str]]:
        """Requests neither JupyterLab's own bookkeeping nor the notebook's save would make."""
        out = []
        for method, path in self.requests:
            if (
                "pwned" in path
                or path.endswith("/x")
                or "from=image" in path
                or (
                    method != "GET"
                    and not (
                        path.startswith(WRITES_ALLOWED)
                        or path.startswith(f"/api/contents/{notebook}")
                    )
                )
            ):
                out.append((method, path))
        return out


def _answer(nb: LabNotebook, cell: Any, button: str, record: str) -> None:
    """Click ``button`` of the prompt on screen; wait for its record line (the next prompt
    may already be there, with buttons of the same names)."""
    found = cell.get_by_role("button", name=button)
    found.wait_for(state="visible", timeout=60_000)
    no_widget_errors(nb.page)
    found.click()
    cell.get_by_text(record).first.wait_for(state="visible", timeout=60_000)


def test_no_payload_runs_on_any_surface(
    lab: JupyterLabServer,
    lab_root: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
    artifacts: Path,
) -> None:
    (lab_root / FILE_NAME).write_text(HTML_PAYLOADS["P2"] + "\n")
    fake_anthropic.script(
        FakeReply(
            ALL_HTML,
            tool_calls=[
                FakeToolCall("read_file", {"path": FILE_NAME}),
                FakeToolCall("bash", {"command": ALLOWED}),
            ],
        ),
        FakeReply("Next.", tool_calls=[FakeToolCall("bash", {"command": DENIED})]),
        FakeReply("Final answer: " + HTML_PAYLOADS["P5"], text_chunk=7),
        invalid_request("messages: " + HTML_PAYLOADS["P2"]),
    )
    name = "payloads.ipynb"
    write_notebook(
        lab_root / name,
        [
            "%load_ext lite_agent_jupyter",
            f"%%agent\n{PROMPT}",
            "%%agent\nand again",
            "%agent ui",
            "%agent sessions --text",
        ],
    )
    watch = Watch(page, lab)
    nb = LabNotebook(page, lab, name).open()
    nb.run_cell(0)
    cell = nb.start_cell(1)
    _answer(nb, cell, "Allow", "allowed: bash echo")
    _answer(nb, cell, "Deny", "denied: bash echo")
    nb.wait_finished(cell, timeout=120)
    nb.wait_idle()
    for index in (2, 3, 4):
        nb.run_cell(index)
    page.locator(".lite-agent-sessions").first.wait_for(state="visible", timeout=60_000)
    page.wait_for_timeout(1000)  # an image error or an iframe would have fired by now
    nb.cell(1).screenshot(path=str(artifacts / "payloads-answer.png"))

    shown = "\n".join(nb.output_text(i) for i in range(1, 5))
    for marker in (*HTML_PAYLOADS, "P10"):
        assert marker in shown, marker
    assert "ls *.ipynb" in shown  # the harmless form: not italics
    assert "allowed: bash echo 'P1 <img" in shown and "denied: bash echo P3 <svg" in shown
    assert "Final answer: P5" in shown and "invalid_request_error" in shown
    for index in range(1, 5):  # no live element of a payload in any output
        output = nb.cell(index).locator(".jp-OutputArea-output")  # what the outputs hold
        live = output.locator("script, iframe, svg, img, object, embed")
        assert live.count() == 0, [
            live.nth(i).evaluate("e => e.outerHTML") for i in range(live.count())
        ]
        assert output.locator("[onerror], [onload], [srcdoc]").count() == 0
        for link in output.locator("a[href]").all():
            assert link.get_attribute("href").startswith(("http://", "https://"))
    no_widget_errors(page)
    assert watch.dialogs == []
    assert not [m for m in watch.console if "PAYLOAD-RAN" in m]
    assert watch.unexpected(name) == []
    assert not (lab_root / SENTINEL).exists()

    # the detectors work: the payload run on purpose is seen by each of them
    page.evaluate(PAYLOAD_JS)
    wait_for(lambda: (lab_root / SENTINEL).exists(), "the payload's own file write")
    assert watch.dialogs and any("PAYLOAD-RAN" in m for m in watch.console)
    assert any("pwned" in path for _, path in watch.unexpected(name))
