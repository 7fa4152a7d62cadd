"""The widgets on screen in a real browser: JupyterLab 4 + Debian's Chromium (Playwright).

    .venv/bin/python benchmarks/widgets_bench.py [--sessions 10000] [--prompts 500]
        [--events 5000] [--runs 5] [--store DIR]

Two parts, in one run:

1. **Kernel side, no browser**: the real kernel facade (``AgentRunner``) over the same store
   times what a cell costs in Python: listing the sessions, building the session browser,
   listing the checkpoints, building the slider (with the newest stop's preview), building
   the review of the 100-file turn, one slider step in the ``--events``-event session; wall
   and CPU time (``time.process_time``), and how
   many widget models each widget sends to the front end.
2. **In the browser**: each scenario timed from Shift+Enter on the cell (or from the key press
   on the slider) until the page shows the result, through the real magics:

   * reference: a cell displaying one ``Button`` (the kernel round trip plus one widget's
     render: the floor any widget cell pays);
   * ``%agent sessions`` over a file store of ``--sessions`` sessions, until the first page
     of rows is on screen (target < 1 s);
   * ``%agent checkpoints`` on a session of ``--prompts`` prompts, until the slider and the
     newest stop's preview are on screen (target < 1 s);
   * ``%agent review 1`` of a session whose one prompt wrote 100 files, until the review
     widget is on screen with its last row (#21's target: <= 300 ms);
   * a row selected in that review until its diff (made in the kernel on demand) is shown;
   * reference step: ArrowLeft on a 500-stop ``SelectionSlider`` whose callback only echoes
     the value into an ``HTML``;
   * preview: ArrowLeft on the slider of a ``--events``-event session (each prompt changed a
     file), until the new stop's preview is on screen (target <= 200 ms).

   Beside each wall time: the CPU time the kernel, the Jupyter server and Chromium spent
   meanwhile (``/proc``), which says how much of the wall time was work and how much was
   waiting for a core on a shared machine; and the cell's own time in the kernel (the cells
   run under ``%time``), which splits the wall time into kernel and front end.

``--store DIR`` keeps the generated store (and reuses it on the next run: filling 10,000
sessions takes a minute or two). Prints medians and worsts, and each median as a ratio to its
reference measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from lab_browser import (
    JupyterLabServer,
    LabNotebook,
    launch_chromium,
    no_widget_errors,
    write_notebook,
)

from lite_agent_jupyter import Storage, create_lite_agent, file_checkpointer
from lite_agent_jupyter.checkpoint.events import AssistantEvent, UserEvent
from lite_agent_jupyter.jupyter import history_text
from lite_agent_jupyter.jupyter.runner import AgentRunner
from lite_agent_jupyter.jupyter.widgets import CheckpointSlider, ReviewPanel, SessionBrowser
from lite_agent_jupyter.providers.scripted import call, reply, scripted

NAMESPACE = "bench"  # the notebook is bench.ipynb: the magics find this namespace
REVIEW_FILES = 100  # the files of the turn %agent review shows (#21: <= 300 ms on screen)


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
    """A session of ``prompts`` prompts, each writing one of 20 files of its own with the real
    agent and the offline scripted model (5 events per prompt); returns the head."""
    turns: list[Any] = []
    for i in range(prompts):
        content = f"version {i} of file {i % 20}\n" * 3
        turns += [
            reply("ok", [call("write_file", path=f"{session_id}/f{i % 20}.txt", content=content)]),
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


async def fill_review(storage: Storage, workdir: Path, files: int = REVIEW_FILES) -> int:
    """A session ``review`` whose one prompt writes ``files`` files (what ``%agent review``
    shows); returns the head."""
    calls = [
        call("write_file", path=f"review/r{i:03}.txt", content=f"line {i}\n" * 5)
        for i in range(files)
    ]
    agent = create_lite_agent(
        model=scripted([reply("ok", calls), "Done."], validate=False),
        workdir=workdir,
        storage=storage,
        approvals="allow",
        session_id="review",
    )
    async with agent:
        await agent.send(f"Write {files} files")
        return await agent.checkpointer.head("review")


def prepare(store: Path, sessions: int, prompts: int, events: int) -> tuple[Storage, Path]:
    """The store (root ``store/root``, namespace ``bench``) and the workdir, made once."""
    storage = Storage(store / "root", NAMESPACE)
    workdir = store / "lab"
    done = store / f"filled-{sessions}-{prompts}-{events}"
    if done.exists():
        print(f"store: reusing {store}")
        return storage, workdir
    shutil.rmtree(store, ignore_errors=True)
    workdir.mkdir(parents=True)
    start = time.perf_counter()
    asyncio.run(fill_sessions(storage, sessions - 2))
    heads = {
        "slider": asyncio.run(fill_prompts(storage, workdir, "slider", prompts)),
        "preview": asyncio.run(fill_prompts(storage, workdir, "preview", events // 5)),
        "review": asyncio.run(fill_review(storage, workdir)),
    }
    done.write_text("")
    print(
        f"store: {sessions} sessions, 'slider' {prompts} prompts ({heads['slider']} events), "
        f"'preview' {events // 5} prompts ({heads['preview']} events), written in "
        f"{time.perf_counter() - start:.1f} s"
    )
    return storage, workdir


# -- measuring ------------------------------------------------------------------------------


@dataclass
class Series:
    """Wall times of one scenario and the CPU time spent meanwhile (per process kind)."""

    walls: list[float] = field(default_factory=list)
    cpus: list[dict[str, float]] = field(default_factory=list)

    def add(self, wall: float, cpu: dict[str, float] | None = None) -> None:
        self.walls.append(wall)
        self.cpus.append(cpu or {})

    @property
    def median(self) -> float:
        return statistics.median(self.walls)

    @property
    def worst(self) -> float:
        return max(self.walls)

    def cpu_median(self, kind: str) -> float:
        return statistics.median(c.get(kind, 0.0) for c in self.cpus)

    def line(self, what: str, reference: Series | None = None, target: float | None = None) -> str:
        text = f"{what}: median {self.median * 1e3:7.1f} ms, worst {self.worst * 1e3:7.1f} ms"
        if reference is not None:
            text += f" = {self.median / reference.median:.2f} x reference"
        if target is not None:
            text += f" (target <= {target * 1e3:.0f} ms: "
            text += ("ok" if self.median <= target else "MISSED") + ")"
        if any(self.cpus):
            kinds = ", ".join(
                f"{kind} {self.cpu_median(kind) * 1e3:.0f}"
                for kind in ("kernel", "server", "chromium", "python")
                if any(kind in c for c in self.cpus)
            )
            text += f"\n    CPU time meanwhile (medians, ms): {kinds}"
            if any("cell" in c for c in self.cpus):
                text += (
                    f"\n    the cell itself in the kernel (%time, medians): "
                    f"{self.cpu_median('cell') * 1e3:.0f} ms wall, "
                    f"{self.cpu_median('cell CPU') * 1e3:.0f} ms CPU"
                )
        return text


_TICK = os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, tuple[int, float, str]]:
    """pid -> (ppid, utime + stime in seconds, command line) of every process we can read."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        found[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK, cmd)
    return found


def _kind(cmd: str) -> str:
    if "ipykernel" in cmd:
        return "kernel"
    if "jupyterlab" in cmd or "jupyter-lab" in cmd:
        return "server"
    if "chrom" in cmd:
        return "chromium"
    return "other"


def descendant_cpu() -> dict[str, float]:
    """CPU seconds used so far by this process's descendants (kernel, server, Chromium)."""
    procs = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    totals: dict[str, float] = {}
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        _, cpu, cmd = procs[pid]
        kind = _kind(cmd)
        totals[kind] = totals.get(kind, 0.0) + cpu
    return totals


@contextmanager
def cpu_meter() -> Iterator[dict[str, float]]:
    """Yields a dict filled on exit with the CPU seconds spent meanwhile per process kind."""
    spent: dict[str, float] = {}
    before = descendant_cpu()
    yield spent
    after = descendant_cpu()
    for kind in ("kernel", "server", "chromium"):
        spent[kind] = after.get(kind, 0.0) - before.get(kind, 0.0)


# IPython prints the Greek mu (U+03BC) in "μs"; the micro sign (U+00B5) is accepted too.
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "\u03bcs": 1e-6, "\u00b5s": 1e-6, "us": 1e-6, "ns": 1e-9}


def cell_times(output: str) -> dict[str, float]:
    """The kernel's own wall and CPU time of a ``%time`` cell, read from its output."""
    found = {}
    for kind, pattern in (
        ("cell", r"Wall time: ([\d.]+) (\S+)"),
        ("cell CPU", r"total: ([\d.]+) (\S+)"),
    ):
        match = re.search(pattern, output)
        if match is not None:
            found[kind] = float(match.group(1)) * _TIME_UNITS[match.group(2)]
    return found


def timed_cell(nb: LabNotebook, index: int, selector: str, series: Series) -> None:
    """Shift+Enter on cell ``index`` (a ``%time`` cell) until ``selector`` is visible in its
    output; with the kernel's own wall and CPU time for the cell."""
    target = nb.select_cell(index).locator(selector).first
    with cpu_meter() as cpu:
        start = time.perf_counter()
        nb.page.keyboard.press("Shift+Enter")
        target.wait_for(state="visible", timeout=60_000)
        elapsed = time.perf_counter() - start
    nb.wait_idle()
    series.add(elapsed, {**cpu, **cell_times(nb.output_text(index))})
    no_widget_errors(nb.page)


def timed_key(nb: LabNotebook, handle: Any, result: Any, expect: str, series: Series) -> None:
    """ArrowLeft on the focused slider ``handle`` until ``expect`` shows in ``result``."""
    handle.focus()
    with cpu_meter() as cpu:
        start = time.perf_counter()
        nb.page.keyboard.press("ArrowLeft")
        result.filter(has_text=expect).first.wait_for(state="visible", timeout=30_000)
        elapsed = time.perf_counter() - start
    series.add(elapsed, cpu)


def timed_select(rows: Any, shown: Any, index: int, series: Series) -> None:
    """Select the review's row ``index`` (file ``review/r{index}.txt``) until its diff (made
    on demand) is in ``shown``."""
    path = f"review/r{index:03}.txt"
    with cpu_meter() as cpu:
        start = time.perf_counter()
        rows.select_option(index=index)
        shown.filter(has_text=f"{path}: created").first.wait_for(state="visible", timeout=30_000)
        elapsed = time.perf_counter() - start
    series.add(elapsed, cpu)


# -- part 1: the kernel side, no browser ----------------------------------------------------


def kernel_side(storage: Storage, workdir: Path, runs: int, events: int) -> None:
    from ipywidgets.widgets.widget import _instances

    runner = AgentRunner()
    runner.agent(
        "bench",
        lambda _approve: create_lite_agent(model=scripted([]), workdir=workdir, storage=storage),
    )
    facade = runner.facade
    facade.resume("slider")

    def measure(what: str, fn: Callable[[], object]) -> None:
        series = Series()
        models = []
        for _ in range(runs):
            before = len(_instances)
            cpu, start = time.process_time(), time.perf_counter()
            fn()
            wall = time.perf_counter() - start
            series.add(wall, {"python": time.process_time() - cpu})
            models.append(len(_instances) - before)
        line = series.line(what)
        if max(models):
            line += f"; widget models: {models[-1]}"
        print(line)

    try:
        measure("list_sessions()", lambda: facade.call(lambda a: a.list_sessions()))
        measure("session browser built", lambda: SessionBrowser(facade))
        measure(
            "list_checkpoints('slider')",
            lambda: facade.call(lambda a: a.list_checkpoints("slider")),
        )
        measure("checkpoint slider built (with its preview)", lambda: CheckpointSlider(facade))
        measure(
            f"review of the {REVIEW_FILES}-file turn built (changes, panel, text twin)",
            lambda: review_built(facade),
        )
        slider = CheckpointSlider(facade, "preview")
        stops = iter(range(len(slider.checkpoints) - 2, -1, -1))
        measure(
            f"slider step in the {events:,}-event session (preview drawn)",
            lambda: setattr(slider.slider, "value", next(stops)),
        )
    finally:
        runner.stop()


def review_built(facade: Any) -> None:
    """What ``%agent review 1`` does in the kernel before it displays: the turn's changes
    (no diff: the panel makes one when its row is selected), the panel and its text twin."""
    changes = facade.call(lambda a: a.changes("review", None, diffs=False))
    ReviewPanel(facade, changes)
    history_text.changes_text(changes, diffs=False)


# -- part 2: in the browser -----------------------------------------------------------------

SETUP = """\
%load_ext lite_agent_jupyter
from lite_agent_jupyter.jupyter import use_model
from lite_agent_jupyter.providers import scripted
import ipywidgets as w
use_model(scripted([]))
%config LiteAgentMagics.storage_root = {root!r}
%agent resume slider"""

REFERENCE_SLIDER = """\
ref_slider = w.SelectionSlider(options=[str(i) for i in range(500)], value='499',
                               continuous_update=False)
ref_out = w.HTML('start')
ref_slider.observe(lambda change: setattr(ref_out, 'value', 'value ' + change['new']),
                   names='value')
ref_slider.add_class('ref-slider')
ref_out.add_class('ref-out')
w.VBox([ref_slider, ref_out])"""


def in_browser(storage: Storage, workdir: Path, args: argparse.Namespace) -> None:
    from playwright.sync_api import sync_playwright

    notebook = workdir / "bench.ipynb"
    cells = [SETUP.format(root=str(storage.root))]
    for _ in range(args.runs):
        cells += [
            "%time w.Button(description='reference')",
            "%time %agent sessions",
            "%time %agent checkpoints",
        ]
    cells += ["%agent resume review"] + ["%time %agent review 1"] * args.runs
    cells += ["%agent resume preview", REFERENCE_SLIDER, "%agent checkpoints"]
    write_notebook(notebook, cells)
    last_stop = f"Before prompt {args.prompts}"
    ref, sessions, slider, ref_key, preview, review, diff = (Series() for _ in range(7))
    with (
        tempfile.TemporaryDirectory() as state,
        JupyterLabServer(workdir, Path(state)) as lab,
        sync_playwright() as pw,
    ):
        browser = launch_chromium(pw)
        page: Any = browser.new_page(viewport={"width": 1280, "height": 1000})
        nb = LabNotebook(page, lab, notebook.name).open()
        nb.run_cell(0)
        for run in range(args.runs):
            base = 1 + 3 * run
            timed_cell(nb, base, ".widget-button", ref)
            timed_cell(nb, base + 1, ".lite-agent-session-rows option", sessions)
            timed_cell(nb, base + 2, f".lite-agent-preview:has-text('{last_stop}')", slider)
        reviews = 1 + 3 * args.runs
        nb.run_cell(reviews)  # %agent resume review
        last_row = f".lite-agent-review-rows option:has-text('review/r{REVIEW_FILES - 1:03}.txt')"
        for run in range(args.runs):
            timed_cell(nb, reviews + 1 + run, last_row, review)
        rows = nb.cell(reviews + args.runs).locator(".lite-agent-review-rows select")
        shown_diff = nb.cell(reviews + args.runs).locator(".lite-agent-review-diff")
        for step in range(1, 2 * args.runs + 2):
            timed_select(rows, shown_diff, step * 7, diff)
        first = reviews + 1 + args.runs
        for index in range(first, first + 3):
            nb.run_cell(index)
        ref_handle = nb.cell(first + 1).locator(".noUi-handle")
        ref_out = nb.cell(first + 1).locator(".ref-out")
        handle = nb.cell(first + 2).locator(".noUi-handle")
        shown = nb.cell(first + 2).locator(".lite-agent-preview")
        stops = args.events // 5
        for step in range(1, 2 * args.runs + 2):
            timed_key(nb, ref_handle, ref_out, f"value {499 - step}", ref_key)
            timed_key(nb, handle, shown, f"Before prompt {stops - step}", preview)
        no_widget_errors(page)
        browser.close()
    # the first step of each slider warms its path up: left out
    ref_key.walls, ref_key.cpus = ref_key.walls[1:], ref_key.cpus[1:]
    preview.walls, preview.cpus = preview.walls[1:], preview.cpus[1:]
    diff.walls, diff.cpus = diff.walls[1:], diff.cpus[1:]
    print(ref.line("reference cell (one Button)"))
    print(sessions.line(f"%agent sessions, {args.sessions} sessions", ref, 1.0))
    print(slider.line(f"%agent checkpoints, {args.prompts} prompts", ref, 1.0))
    print(review.line(f"%agent review of a {REVIEW_FILES}-file turn", ref, 0.3))
    print(diff.line("a row selected in the review, until its diff is on screen", ref_key))
    print(ref_key.line("reference slider step (the kernel echoes the value)"))
    print(
        preview.line(
            f"preview after a slider step, {stops} prompts / ~{args.events} events", ref_key, 0.2
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--prompts", type=int, default=500)
    parser.add_argument("--events", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--store", type=Path, help="keep (and reuse) the generated store here")
    parser.add_argument("--no-browser", action="store_true", help="part 1 only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store or Path(tmp) / "store"
        storage, workdir = prepare(store, args.sessions, args.prompts, args.events)
        print(f"load average at the start: {os.getloadavg()} on {os.cpu_count()} cores")
        print("-- kernel side (Python, no browser)")
        kernel_side(storage, workdir, args.runs, args.events)
        if not args.no_browser:
            print("-- in JupyterLab + Chromium")
            in_browser(storage, workdir, args)
        print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
