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
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from lab_browser import run_bench_notebook

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
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=500)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    cells = ["%load_ext lite_agent_jupyter", BENCH.format(runs=args.runs)]
    cells += [f"x_{i} = {i}" for i in range(2, args.cells)]
    found = run_bench_notebook(cells, timeout=300)
    print(f"notebook of {found['cells']} cells, {args.runs} runs each")
    print(line("edit_cell round trip (kernel -> page -> kernel)", found["edit"], 0.05))
    print(line(f"read_notebook of {found['cells']} cells", found["read"], 0.1))


if __name__ == "__main__":
    main()
