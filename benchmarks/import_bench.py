"""Import cost, in fresh processes with bytecode cached: what a user waits for before a prompt.

    .venv/bin/python benchmarks/import_bench.py [--runs 15]

Each run is a new interpreter (``sys.executable``) that times its own imports with
``time.perf_counter`` and prints them; the bytecode of everything it imports was written by
a warm-up run first (into a temporary ``PYTHONPYCACHEPREFIX``, so ``PYTHONDONTWRITEBYTECODE``
in the environment does not turn every run into a compile). Medians of ``--runs``; each
ratio is taken within one process (the same moment of a loaded machine) and the median of
those ratios is printed.

1. ``import lite_agent_jupyter`` alone; the heavy third-party packages it must not load
   (``tests/test_import_cost.py`` guards the list) are named if loaded.
2. ``import IPython, ipywidgets`` (the reference: what any notebook kernel with widgets has
   loaded), then ``import lite_agent_jupyter.jupyter``, then ``%load_ext lite_agent_jupyter``
   in an ``InteractiveShell`` (the import plus registering the magics, settings and hooks).
   Target (#32): ``import lite_agent_jupyter.jupyter`` after IPython + ipywidgets <= 0.75x
   their own import time; printed for ``%load_ext`` as a whole too.
3. For the record, not a target: what the first ``%%agent`` cell then imports (the agent,
   the file backend, the Anthropic SDK and its HTTP client, the Markdown renderer).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

HEAVY = ("anthropic", "httpx", "httpx2", "PIL", "markdown_it", "mcp", "ipywidgets")

PACKAGE = """
import time, sys, json
t = time.perf_counter()
import lite_agent_jupyter
took = time.perf_counter() - t
heavy = sorted({m.split('.')[0] for m in sys.modules} & set(HEAVY))
print(json.dumps({"package": took, "heavy": heavy}))
"""

JUPYTER = """
import time, json
t = time.perf_counter()
import IPython, ipywidgets
reference = time.perf_counter() - t
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
t = time.perf_counter()
import lite_agent_jupyter.jupyter
imported = time.perf_counter() - t
t = time.perf_counter()
shell.run_line_magic("load_ext", "lite_agent_jupyter")
loaded = time.perf_counter() - t
t = time.perf_counter()
import lite_agent_jupyter.agent.core, lite_agent_jupyter.checkpoint.file
import lite_agent_jupyter.providers.anthropic, anthropic
import lite_agent_jupyter.jupyter.cell, lite_agent_jupyter.jupyter.safe
first_cell = time.perf_counter() - t
print(json.dumps({"reference": reference, "jupyter": imported, "load_ext": loaded,
                  "first_cell": first_cell}))
"""


def run(code: str, env: dict[str, str]) -> dict[str, Any]:
    probe = f"HEAVY = {HEAVY!r}\n{code}"
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for code in (PACKAGE, JUPYTER):  # writes the bytecode of everything imported
            run(code, env)
        load = os.getloadavg()
        package = [run(PACKAGE, env) for _ in range(args.runs)]
        jupyter = [run(JUPYTER, env) for _ in range(args.runs)]
        after = os.getloadavg()

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.1f} ms"

    print(
        f"load average {load[0]:.1f} at the start, {after[0]:.1f} at the end (1 min); "
        f"medians of {args.runs} fresh processes, bytecode cached"
    )
    heavy = sorted({name for run_ in package for name in run_["heavy"]})
    print(
        f"1. import lite_agent_jupyter: {ms([r['package'] for r in package])}; heavy "
        f"packages loaded: {', '.join(heavy) if heavy else 'none'}"
    )
    reference = [r["reference"] for r in jupyter]
    ratio = statistics.median(r["jupyter"] / r["reference"] for r in jupyter)
    whole = statistics.median((r["jupyter"] + r["load_ext"]) / r["reference"] for r in jupyter)
    print(f"2. import IPython, ipywidgets (reference): {ms(reference)}")
    print(
        f"   import lite_agent_jupyter.jupyter after them: {ms([r['jupyter'] for r in jupyter])}"
        f" = {ratio:.2f}x the reference (target <= 0.75x: {'ok' if ratio <= 0.75 else 'MISSED'})"
    )
    print(
        f"   %load_ext lite_agent_jupyter (that import + registering): "
        f"{ms([r['jupyter'] + r['load_ext'] for r in jupyter])} = {whole:.2f}x the reference "
        f"(target <= 0.75x: {'ok' if whole <= 0.75 else 'MISSED'})"
    )
    print(
        f"3. then what a first %%agent cell imports (agent, file backend, Anthropic SDK, "
        f"Markdown renderer): {ms([r['first_cell'] for r in jupyter])} (not a target)"
    )


if __name__ == "__main__":
    main()
