"""The cost of one update of a streaming ``%%agent`` cell's rich output (issue #17).

    .venv/bin/python benchmarks/render_bench.py [--chars 20000]

Since #17 the answer's Markdown is rendered to safe HTML in the kernel (``jupyter/safe.py``)
on every display update, on the kernel's main thread. A 20,000-character answer streamed in
20-character deltas, the cell updated every 10 deltas (about what ``stream_interval`` = 50 ms
gives at ~4,000 characters a second):

- ``incremental``: ``TurnView.html()`` as the cell calls it (``MarkdownStream``: the blocks
  before the last blank line are rendered once; an update renders the growing end);
- ``whole``: rendering the whole answer again on each update (what a naive renderer does);
- ``raw``: joining the parts into one string (what emitting ``text/markdown`` cost before
  #17): the reference, measured in the same run.

Printed: median milliseconds per update of each, ``incremental / raw`` and
``whole / incremental``, and the last update's cost (the longest answer), which is what
stays flat with ``incremental`` and grows with ``whole``. Target: the last incremental update
<= 10 ms on this machine (a fifth of the 50 ms between updates).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from lite_agent_jupyter.jupyter import render, safe

PARAGRAPH = (
    "The loader reads `data/sales.csv`, parses the *date* column and drops rows whose "
    "amount is missing; see [the pandas docs](https://pandas.pydata.org) for `to_datetime`. "
)


def answer(chars: int) -> str:
    blocks = []
    while sum(map(len, blocks)) < chars:
        blocks.append(PARAGRAPH * 3)
        blocks.append("```python\ndf = pd.read_csv('data/sales.csv')\n\ndf.dropna()\n```")
        blocks.append("- one item\n- another item with **bold**")
    return "\n\n".join(blocks)[:chars]


def updates(text: str, delta: int = 20, every: int = 10) -> list[int]:
    ends = list(range(delta * every, len(text) + 1, delta * every))
    return ends if ends and ends[-1] == len(text) else [*ends, len(text)]


def timed(render_one: Callable[[str], str], text: str, ends: list[int]) -> list[float]:
    out = []
    for end in ends:
        started = time.perf_counter()
        render_one(text[:end])
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chars", type=int, default=20000)
    args = parser.parse_args()
    text = answer(args.chars)
    ends = updates(text)

    view = render.TurnView(notes=["a note"])

    def incremental(prefix: str) -> str:
        view.parts = [prefix]
        return view.html()

    def raw(prefix: str) -> str:
        return "".join(["*a note*\n\n", prefix])

    results = {
        "raw": timed(raw, text, ends),
        "incremental": timed(incremental, text, ends),
        "whole": timed(safe.markdown_html, text, ends),
    }
    medians = {name: statistics.median(values) for name, values in results.items()}
    print(f"{len(text):,} characters, {len(ends)} updates")
    for name, values in results.items():
        print(f"  {name:<11} median {medians[name]:8.3f} ms   last update {values[-1]:8.3f} ms")
    print(f"  incremental / raw   = {medians['incremental'] / medians['raw']:,.0f}x")
    print(
        f"  whole / incremental = {medians['whole'] / medians['incremental']:.1f}x (median), "
        f"{results['whole'][-1] / results['incremental'][-1]:.1f}x (last update)"
    )
    last = results["incremental"][-1]
    print(f"  target: last incremental update <= 10 ms: {'ok' if last <= 10 else 'MISSED'}")


if __name__ == "__main__":
    main()
