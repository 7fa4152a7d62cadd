"""The notebook tools' channel in a real JupyterLab 4 + Debian's Chromium (Playwright).

    .venv/bin/python benchmarks/notebook_tools_bench.py [--cells 500] [--runs 30]

Measured inside the kernel, by a cell that awaits (as the ``%%agent`` cell does, so the page's
answers are handled while it waits), on the channel the tools use
(``jupyter/notebook_cells.py``):

* an ``edit_cell`` round trip: the request sent on the comm, applied by the page to the
  notebook's shared model, its answer back in the kernel (#33's target: <= 50 ms);
* ``read_notebook`` of a ``--cells``-cell notebook: the request, the page's answer with every
  cell, and the text the model gets made from it (#33's target: <= 100 ms).

Prints medians and worsts (the first run of each is left out: it warms the path up).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from lab_browser import JupyterLabServer, LabNotebook, launch_chromium, wait_for, write_notebook

BENCH = """\
import asyncio, json, time
from lite_agent_jupyter.jupyter import _LOADED
from lite_agent_jupyter.jupyter.notebook_cells import _cell_text
channel = _LOADED[id(get_ipython())].notebook
for _ in range(200):
    if channel.connected:
        break
    await asyncio.sleep(0.05)
edits, reads = [], []
for i in range({runs}):
    start = time.perf_counter()
    await channel.request("edit", cell=2, source=f"x_2 = {{i}}")
    edits.append(time.perf_counter() - start)
for i in range({runs}):
    start = time.perf_counter()
    found = await channel.request("read", cells=None)
    text = "\\n\\n".join(_cell_text(c) for c in found["cells"])
    reads.append(time.perf_counter() - start)
with open("bench-result.json", "w") as out:
    json.dump({{"edit": edits, "read": reads, "cells": len(found["cells"])}}, out)
"""


def line(what: str, walls: list[float], target: float) -> str:
    walls = walls[1:]
    median, worst = statistics.median(walls), max(walls)
    verdict = "ok" if median <= target else "MISSED"
    return (
        f"{what}: median {median * 1e3:6.1f} ms, worst {worst * 1e3:6.1f} ms "
        f"(target <= {target * 1e3:.0f} ms: {verdict})"
    )


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=500)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, state = Path(tmp, "lab"), Path(tmp, "state")
        root.mkdir()
        cells = ["%load_ext lite_agent_jupyter", BENCH.format(runs=args.runs)]
        cells += [f"x_{i} = {i}" for i in range(2, args.cells)]
        write_notebook(root / "bench.ipynb", cells)
        result = root / "bench-result.json"
        with JupyterLabServer(root, state) as lab, sync_playwright() as pw:
            browser = launch_chromium(pw)
            page: Any = browser.new_page(viewport={"width": 1280, "height": 1000})
            nb = LabNotebook(page, lab, "bench.ipynb").open()
            nb.run_cell(0)
            nb.run_cell(1, timeout=300)
            wait_for(result.exists, "the bench cell's results", 300)
            browser.close()
        found = json.loads(result.read_text())
    print(f"notebook of {found['cells']} cells, {args.runs} runs each")
    print(line("edit_cell round trip (kernel -> page -> kernel)", found["edit"], 0.05))
    print(line(f"read_notebook of {found['cells']} cells", found["read"], 0.1))


if __name__ == "__main__":
    main()
