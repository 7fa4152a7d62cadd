"""A restore of 10 cell edits plus 10 files, against the same restore of the files alone, in a
real JupyterLab 4 + Debian's Chromium (Playwright): the page's real comm round trips.

    .venv/bin/python benchmarks/cells_restore_bench.py [--runs 20]

One prompt (the scripted model, approvals allowed) edits 10 cells of the open notebook with
``edit_cell`` and writes 10 files. Then a cell that awaits (as ``%agent restore`` alone in a
cell does, ``jupyter/awaiting.py``) restores to before that prompt, alternately with the
participants (the 10 cells put back through the page: one read, one ``rewind`` request, the
undo record) and without them (``state=False``: files and conversation only), and undoes each
restore untimed. Prints both medians and the difference, which #33 wants <= 100 ms, and the
median of a bare round trip to the page (the first run of each kind is left out: it warms the
path up).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from lab_browser import run_bench_notebook

CELLS = 10
TARGET = 0.1

SETUP = """\
%load_ext lite_agent_jupyter
%config LiteAgentMagics.notebook_tools = True
%config LiteAgentMagics.approvals = "allow"
%config LiteAgentMagics.workdir = "work"
"""

BENCH = """\
import asyncio, json, os, time
import lite_agent_jupyter
from lite_agent_jupyter.jupyter import _LOADED
from lite_agent_jupyter.jupyter.awaiting import agent_call, page_heard
from lite_agent_jupyter.providers import call, reply, scripted
os.makedirs("work", exist_ok=True)
magics = _LOADED[id(get_ipython())]
for _ in range(200):
    if magics.notebook.connected:
        break
    await asyncio.sleep(0.05)
edits = [call("edit_cell", cell=3 + i, source=f"y_{{i}} = {{i}} * 10") for i in range({cells})]
writes = [
    call("write_file", path=f"f{{i}}.txt", content=f"file {{i}}\\\\n" * 50)
    for i in range({cells})
]
lite_agent_jupyter.use_model(scripted([
    reply("", [call("read_notebook")]), reply("", edits + writes), "Done.",
]))
agent = lite_agent_jupyter.get_agent()
await agent.send("edit the cells and write the files")
runner = magics.runner
sid = agent.session_id
[checkpoint] = await agent.call(lambda a: a.list_checkpoints(sid))
seq = checkpoint.seq
times = {{"cells": [], "files": []}}
rewound = 0
with page_heard():
    for _ in range({runs}):
        for kind in ("files", "cells"):
            state = kind == "cells"
            start = time.perf_counter()
            done = await agent_call(runner, sid, lambda a: a.restore(sid, seq, state=state))
            times[kind].append(time.perf_counter() - start)
            if state:
                rewound = max(rewound, sum(len(s.restored) for s in done.state))
            await agent_call(runner, sid, lambda a: a.undo_restore(sid))
times["rewound"] = rewound
times["read"] = []
for _ in range({runs}):  # one round trip to the page: a rewind takes two
    start = time.perf_counter()
    await magics.notebook.request("read", cells=None)
    times["read"].append(time.perf_counter() - start)
with open("bench-result.json", "w") as out:
    json.dump(times, out)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    cells = [SETUP, BENCH.format(runs=args.runs, cells=CELLS), "pass"]
    cells += [f"y_{i} = {i}" for i in range(CELLS)]
    found = run_bench_notebook(cells, timeout=600)
    if found["rewound"] != CELLS:
        raise SystemExit(f"the restore put back {found['rewound']} cells, not {CELLS}")
    files = statistics.median(found["files"][1:])
    both = statistics.median(found["cells"][1:])
    extra = both - files
    verdict = "ok" if extra <= TARGET else "MISSED"
    print(f"{args.runs} runs each, {CELLS} cells and {CELLS} files, medians (worst):")
    print(f"  files alone:      {files * 1e3:6.1f} ms ({max(found['files'][1:]) * 1e3:.1f})")
    print(f"  files and cells:  {both * 1e3:6.1f} ms ({max(found['cells'][1:]) * 1e3:.1f})")
    print(f"  the cells' part:  {extra * 1e3:6.1f} ms (target <= {TARGET * 1e3:.0f} ms: {verdict})")
    read = statistics.median(found["read"][1:])
    print(f"  of which one round trip to the page (read, a rewind takes two): {read * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
