"""The widgets on screen in a real browser: JupyterLab 4 + Debian's Chromium (Playwright).

    .venv/bin/python benchmarks/widgets_bench.py [--sessions 10000] [--prompts 500]
        [--events 5000] [--runs 3]

Scenarios (each timed from Shift+Enter on the cell, or from the key press on the slider, to
the moment the page shows the result; all in the same run, against the same server):

* reference: a cell displaying one ``Button`` (the kernel round trip plus one widget's render:
  the floor any widget cell pays);
* session browser: ``show_sessions`` over a file store of ``--sessions`` sessions, until the
  first page of rows is on screen (target < 1 s);
* checkpoint slider: ``show_checkpoints`` on a session of ``--prompts`` prompts, until the
  slider's readout and the preview of the newest stop are on screen (target < 1 s);
* preview: ArrowLeft on the slider of a ``--events``-event session (each prompt changed files),
  until the preview of the new stop is on screen (target <= 200 ms).

Prints the medians, each as a ratio to the reference.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from lab_browser import JupyterLabServer, LabNotebook, launch_chromium, write_notebook

from lite_agent_jupyter import Storage, file_checkpointer
from lite_agent_jupyter.checkpoint.events import AssistantEvent, UserEvent


async def fill_sessions(storage: Storage, count: int) -> None:
    checkpointer = file_checkpointer(storage.base / "sessions")
    try:
        for i in range(count):
            await checkpointer.append(
                f"s{i:06d}",
                [
                    UserEvent(
                        content=f"Question {i}: please look at data/file_{i}.csv",
                        checkpoint=True,
                    ),
                    AssistantEvent(
                        content=[{"type": "text", "text": "Done."}], stop_reason="end_turn"
                    ),
                ],
            )
    finally:
        await checkpointer.close()


def timed_cell(nb: LabNotebook, index: int, selector: str) -> float:
    """Seconds from Shift+Enter on cell ``index`` to ``selector`` visible in its output."""
    cell = nb.cell(index)
    cell.locator(".jp-InputPrompt").click()
    nb.page.keyboard.press("Escape")
    target = cell.locator(selector).first
    start = time.perf_counter()
    nb.page.keyboard.press("Shift+Enter")
    target.wait_for(state="visible", timeout=60_000)
    elapsed = time.perf_counter() - start
    nb.wait_idle()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "lab"
        root.mkdir()
        storage = Storage(tmp / "store", "bench")
        start = time.perf_counter()
        asyncio.run(fill_sessions(storage, args.sessions))
        print(f"store: {args.sessions} sessions written in {time.perf_counter() - start:.1f} s")
        setup = (
            "from widget_controls import LoopThreadControls\n"
            "from lite_agent_jupyter import Storage, create_lite_agent\n"
            "from lite_agent_jupyter.providers import scripted\n"
            "from lite_agent_jupyter.jupyter.widgets import show_sessions\n"
            "import ipywidgets as w\n"
            f"storage = Storage({str(storage.root)!r}, 'bench')\n"
            "controls = LoopThreadControls(lambda: create_lite_agent(\n"
            "    model=scripted([]), workdir='.', storage=storage))\n"
            "controls.resume('s000000')\n"
            "len(controls.list_sessions())"
        )
        cells = [setup]
        for _ in range(args.runs):
            cells += ["w.Button(description='reference')", "show_sessions(controls);"]
        write_notebook(root / "bench.ipynb", cells)
        env = {"PYTHONPATH": str(Path(__file__).resolve().parent.parent / "tests")}
        with JupyterLabServer(root, tmp / "state", env=env) as lab, sync_playwright() as pw:
            browser = launch_chromium(pw)
            page: Any = browser.new_page(viewport={"width": 1280, "height": 1000})
            nb = LabNotebook(page, lab, "bench.ipynb").open()
            nb.run_cell(0)
            reference: list[float] = []
            sessions: list[float] = []
            for run in range(args.runs):
                reference.append(timed_cell(nb, 1 + 2 * run, ".widget-button"))
                sessions.append(timed_cell(nb, 2 + 2 * run, ".lite-agent-session-row"))
            rows = nb.cell(2).locator(".lite-agent-session-row").count()
            browser.close()
        ref = statistics.median(reference)
        med = statistics.median(sessions)
        print(f"reference (one Button):           median {ref * 1000:7.1f} ms  {reference}")
        print(
            f"session browser ({args.sessions} sessions, {rows} rows on the page): "
            f"median {med * 1000:7.1f} ms = {med / ref:.2f} x reference "
            f"(target < 1000 ms: {'ok' if med < 1 else 'MISSED'})"
        )


if __name__ == "__main__":
    main()
