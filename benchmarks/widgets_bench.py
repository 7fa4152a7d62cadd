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
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from lab_browser import JupyterLabServer, LabNotebook, launch_chromium, write_notebook

from lite_agent_jupyter import Storage, create_lite_agent, file_checkpointer
from lite_agent_jupyter.checkpoint.events import AssistantEvent, UserEvent
from lite_agent_jupyter.providers.scripted import call, reply, scripted


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


async def fill_prompts(storage: Storage, workdir: Path, session_id: str, prompts: int) -> int:
    """A session of ``prompts`` prompts, each writing a file with the real agent and the
    offline scripted model (5 events per prompt); returns the head."""
    turns: list[Any] = []
    for i in range(prompts):
        content = f"version {i} of file {i % 20}\n" * 3
        turns += [
            reply("ok", [call("write_file", path=f"f{i % 20}.txt", content=content)]),
            "Done.",
        ]
    agent = create_lite_agent(
        model=scripted(turns, validate=False),
        workdir=workdir,
        storage=storage,
        approvals="allow",
        session_id=session_id,
    )
    async with agent:
        for i in range(prompts):
            await agent.send(f"Prompt {i}: rewrite f{i % 20}.txt with version {i}")
        return await agent.checkpointer.head(session_id)


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


def timed_keys(nb: LabNotebook, handle: Any, result: Any, key: str, expect: str) -> float:
    """Seconds from ``key`` on the focused slider ``handle`` to ``expect`` in ``result``."""
    handle.focus()
    start = time.perf_counter()
    nb.page.keyboard.press(key)
    result.filter(has_text=expect).first.wait_for(state="visible", timeout=30_000)
    return time.perf_counter() - start


async def kernel_side_preview(storage: Storage, workdir: Path, session_id: str) -> float:
    """The preview's own cost (no browser, no kernel): median of ``preview_restore``."""
    agent = create_lite_agent(model=scripted([]), workdir=workdir, storage=storage)
    async with agent:
        checkpoints = await agent.list_checkpoints(session_id)
        times = []
        for checkpoint in checkpoints[-6:-1]:
            start = time.perf_counter()
            await agent.preview_restore(session_id, checkpoint.seq)
            times.append(time.perf_counter() - start)
        return statistics.median(times)


SETUP = """\
from widget_controls import LoopThreadControls
from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.providers import scripted
from lite_agent_jupyter.jupyter.widgets import show_checkpoints, show_sessions
import ipywidgets as w
storage = Storage({root!r}, 'bench')
controls = LoopThreadControls(lambda: create_lite_agent(
    model=scripted([]), workdir='.', storage=storage))
controls.resume('s000000')
len(controls.list_sessions())"""

REFERENCE_SLIDER = """\
ref_slider = w.SelectionSlider(options=[str(i) for i in range(500)], value='499',
                               continuous_update=False)
ref_out = w.HTML('start')
ref_slider.observe(lambda change: setattr(ref_out, 'value', 'value ' + change['new']),
                   names='value')
ref_slider.add_class('ref-slider')
ref_out.add_class('ref-out')
w.VBox([ref_slider, ref_out])"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--prompts", type=int, default=500)
    parser.add_argument("--events", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "lab"
        root.mkdir()
        storage = Storage(tmp / "store", "bench")
        start = time.perf_counter()
        asyncio.run(fill_sessions(storage, args.sessions - 2))
        (root / "slider").mkdir()
        (root / "preview").mkdir()
        heads = {
            "slider": asyncio.run(fill_prompts(storage, root, "slider", args.prompts)),
            "preview": asyncio.run(fill_prompts(storage, root, "preview", args.events // 5)),
        }
        print(
            f"store: {args.sessions} sessions, 'slider' {args.prompts} prompts "
            f"({heads['slider']} events), 'preview' {args.events // 5} prompts "
            f"({heads['preview']} events), written in {time.perf_counter() - start:.1f} s"
        )
        python_preview = asyncio.run(kernel_side_preview(storage, root, "preview"))
        cells = [SETUP.format(root=str(storage.root))]
        for _ in range(args.runs):
            cells += [
                "w.Button(description='reference')",
                "show_sessions(controls);",
                "show_checkpoints(controls, 'slider');",
            ]
        cells += [REFERENCE_SLIDER, "show_checkpoints(controls, 'preview');"]
        write_notebook(root / "bench.ipynb", cells)
        tests = str(Path(__file__).resolve().parent.parent / "tests")
        env = {
            "PYTHONPATH": os.pathsep.join([tests, *filter(None, [os.environ.get("PYTHONPATH")])])
        }
        last_slider = f"Before prompt {args.prompts}"
        with JupyterLabServer(root, tmp / "state", env=env) as lab, sync_playwright() as pw:
            browser = launch_chromium(pw)
            page: Any = browser.new_page(viewport={"width": 1280, "height": 1000})
            nb = LabNotebook(page, lab, "bench.ipynb").open()
            nb.run_cell(0)
            times: dict[str, list[float]] = {k: [] for k in ("ref", "sessions", "slider")}
            for run in range(args.runs):
                base = 1 + 3 * run
                times["ref"].append(timed_cell(nb, base, ".widget-button"))
                times["sessions"].append(
                    timed_cell(nb, base + 1, ".lite-agent-session-rows option")
                )
                times["slider"].append(
                    timed_cell(nb, base + 2, f".lite-agent-preview:has-text('{last_slider}')")
                )
            ref_cell = 1 + 3 * args.runs
            nb.run_cell(ref_cell)
            nb.run_cell(ref_cell + 1)
            ref_handle = nb.cell(ref_cell).locator(".noUi-handle")
            ref_out = nb.cell(ref_cell).locator(".ref-out")
            preview_cell = nb.cell(ref_cell + 1)
            handle = preview_cell.locator(".noUi-handle")
            preview = preview_cell.locator(".lite-agent-preview")
            prompts = args.events // 5
            key_ref: list[float] = []
            key_preview: list[float] = []
            for step in range(1, 2 * args.runs + 2):
                key_ref.append(
                    timed_keys(nb, ref_handle, ref_out, "ArrowLeft", f"value {499 - step}")
                )
                key_preview.append(
                    timed_keys(nb, handle, preview, "ArrowLeft", f"Before prompt {prompts - step}")
                )
            assert page.get_by_text("Error displaying widget").count() == 0
            browser.close()

    def med(values: list[float]) -> float:
        return statistics.median(values)

    ref = med(times["ref"])
    print(f"reference cell (one Button): median {ref * 1000:7.1f} ms  (target: none)")
    for key, what in (
        ("sessions", f"session browser, {args.sessions} sessions"),
        ("slider", f"checkpoint slider, {args.prompts} prompts"),
    ):
        value = med(times[key])
        verdict = "ok" if value < 1 else "MISSED"
        print(
            f"{what}: median {value * 1000:7.1f} ms = {value / ref:.2f} x reference "
            f"(target < 1000 ms: {verdict}); runs {[round(t * 1000) for t in times[key]]}"
        )
    ref_key = med(key_ref[1:])
    preview_key = med(key_preview[1:])
    verdict = "ok" if preview_key <= 0.2 else "MISSED"
    print(f"reference slider step (kernel echoes the value): median {ref_key * 1000:7.1f} ms")
    print(
        f"preview after a slider step, {args.events // 5} prompts / ~{args.events} events: "
        f"median {preview_key * 1000:7.1f} ms = {preview_key / ref_key:.2f} x reference step "
        f"(target <= 200 ms: {verdict}); preview_restore alone in Python: "
        f"{python_preview * 1000:.1f} ms"
    )
    print(f"load average during the run: {os.getloadavg()}")


if __name__ == "__main__":
    main()
