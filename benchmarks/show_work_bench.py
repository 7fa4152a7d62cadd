"""The kernel's cost of showing the work (issue #35): one redraw of a running cell (the
clock ticking, the checklist changing) and the stale-cell analysis of a notebook.

    .venv/bin/python benchmarks/show_work_bench.py [--cells 300] [--repeat 200]

- ``tick``: the clock moved (``Progress.clock`` + the display bundle of ``TurnView``: safe
  HTML, the plain twin, ``safe.bundle``) and the message the kernel would send serialised
  (``json.dumps``, what ``update_display`` costs the main thread before ZeroMQ), for a turn
  of a 4,000-character answer, 12 tool lines and a 10-item checklist;
- ``checklist``: the same after a ``todo_write`` (the call's input folded in, the list
  changed);
- ``raw``: ``json.dumps`` of the same bundle alone: the reference, measured in the same run.
  Target: tick and checklist <= 1 ms each (median).
- ``stale cold``: ``Changes.stale`` over a ``--cells``-cell history (every cell ~6 lines of
  pandas-like code, one in five reading ``df``) with the ``ast`` cache emptied first;
  ``stale warm``: again, cached. Target: cold <= 20 ms for 300 cells.

Printed: median milliseconds of each and the ratios to ``raw``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from lite_agent_jupyter.agent import ToolCallFinished, ToolCallInput, ToolCallStarted
from lite_agent_jupyter.jupyter import render, safe, stale


def turn() -> render.TurnView:
    view = render.TurnView(notes=["scripted model: a stand-in"])
    view.add_text(("Loading `data/sales.csv` and cleaning the *date* column. " * 8 + "\n\n") * 8)
    for i in range(12):
        call = f"toolu_{i:02d}"
        view.tool_started(ToolCallStarted(call, "read_file"))
        view.tool_input(ToolCallInput(call, "read_file", {"path": f"data/part{i}.csv"}))
        view.tool_finished(ToolCallFinished(call, "read_file", "a,b,c\n1,2,3\n" * 60, False))
    view.html()  # the text is rendered once, as the cell has done by then
    view.tool_started(ToolCallStarted("toolu_run", "bash"))
    view.tool_input(ToolCallInput("toolu_run", "bash", {"command": "python train.py"}))
    return view


def todos(done: int) -> dict[str, object]:
    return {
        "todos": [
            {"content": f"step {i}: clean column {i}", "status": s}
            for i, s in enumerate(["completed"] * done + ["in_progress"] + ["pending"] * 9)
        ][:10]
    }


def publish(view: render.TurnView) -> str:
    bundle = safe.bundle(view.html(), view.plain())
    return json.dumps({"data": bundle, "metadata": {}, "transient": {"display_id": "x"}})


def timed(fn: Callable[[], object], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) * 1000


def notebook(cells: int) -> list[str]:
    history = [""]
    for n in range(1, cells + 1):
        if n == 1:
            history.append("import pandas as pd\ndf = pd.read_csv('data/sales.csv')")
        elif n % 5 == 0:
            history.append(
                f"subset_{n} = df[df['amount'] > {n}]\n"
                f"subset_{n}['date'] = pd.to_datetime(subset_{n}['date'])\n"
                f"summary_{n} = subset_{n}.groupby('region').sum()\n"
                f"print(summary_{n}.head())\nplot_{n} = summary_{n}.plot()\nplot_{n}"
            )
        else:
            history.append(
                f"values_{n} = [x * {n} for x in range(100)]\n"
                f"def helper_{n}(v):\n    return sum(v) / len(v)\n"
                f"mean_{n} = helper_{n}(values_{n})\nprint(mean_{n})\nmean_{n}"
            )
    return history


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()

    view = turn()
    clock = [0.0]

    def tick() -> None:
        clock[0] += 1.0
        view.clock = view.progress.clock(view.progress.started + 5 + clock[0])
        publish(view)

    step = [0]

    def checklist() -> None:
        step[0] = (step[0] + 1) % 10
        call = f"toolu_todo{step[0]}"
        view.tool_input(ToolCallInput(call, "todo_write", todos(step[0])))
        view.tool_finished(ToolCallFinished(call, "todo_write", "ok", False))
        publish(view)

    bundle = safe.bundle(view.html(), view.plain())
    raw = timed(lambda: json.dumps({"data": bundle, "transient": {"display_id": "x"}}), args.repeat)
    tick_ms = timed(tick, args.repeat)
    list_ms = timed(checklist, args.repeat)

    history = notebook(args.cells)
    changes = stale.Changes()
    changes.note(["df"], args.cells + 1)

    def cold() -> None:
        stale.clear_cache()
        changes.stale(history, args.cells + 1)

    found = changes.stale(history, args.cells + 1)
    cold_ms = timed(cold, max(5, args.repeat // 10))
    warm_ms = timed(lambda: changes.stale(history, args.cells + 1), args.repeat)

    print(f"turn display: {len(bundle['text/html']):,} chars of HTML")
    print(f"raw (json.dumps of the bundle)  {raw:7.3f} ms")
    print(
        f"tick (clock redraw)             {tick_ms:7.3f} ms  {tick_ms / raw:5.1f}x raw  (<= 1 ms)"
    )
    print(
        f"checklist (todo_write redraw)   {list_ms:7.3f} ms  {list_ms / raw:5.1f}x raw  (<= 1 ms)"
    )
    print(f"stale cells, {args.cells} cells, {len(found)} stale")
    print(f"  cold (ast cache emptied)      {cold_ms:7.3f} ms  (<= 20 ms)")
    print(f"  warm                          {warm_ms:7.3f} ms")


if __name__ == "__main__":
    main()
