"""MCP tools: what a call costs over the server's own time, and that a server starting in the
background does not delay a turn that does not use it.

    .venv/bin/python benchmarks/mcp_bench.py [--calls 60]

A real stdio server (``tests/mcp_server.py``, the ``mcp`` package's server API), started and
ready before timing. Three kinds of turn on one agent (scripted model, file checkpointer, a
workdir of 200 small files so the scans around each call do real work), interleaved:

* **raw**: ``call_tool("echo")`` on the agent's own MCP client session: the server's own time,
  round trip included (the reference);
* **local**: a turn whose model calls a local ``@tool`` echo once (the loop's own cost);
* **mcp**: the same turn calling ``t__echo`` on the server.

The overhead of an MCP call is ``mcp - local - raw``: the agent's MCP path (lookup, approval
policy, the workdir scans before and after, result conversion, redaction). Target: median
<= 5 ms.

Then **start**: the first turn of an agent whose server takes 3 s to start, against the first
turn of the same agent without servers, each in a fresh process (nothing imported yet: the
``mcp`` package alone takes seconds to import); the turn must not wait (the server still
starting when the turn ends).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from mcp_server import stdio_entry

from lite_agent_jupyter import LiteAgent, Storage, create_lite_agent, tool
from lite_agent_jupyter.providers import call, reply, scripted
from lite_agent_jupyter.providers.base import ModelRequest

TARGET_MS = 5.0
START_DELAY = 3.0
"""Seconds the slow server waits before it speaks."""


@tool
async def echo(text: str) -> str:
    """Return the text.

    Args:
        text: Any text.
    """
    return text


def model_calling(name: str) -> Any:
    """A scripted model that calls ``name`` once per prompt, then answers."""

    def answer(request: ModelRequest) -> Any:
        last = request.messages[-1]["content"]
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last):
            return "Done."
        return reply("Calling.", [call(name, text="ping")])

    return scripted([answer] * 100_000)


def make_agent(root: Path, name: str, **options: Any) -> LiteAgent:
    workdir = root / "project"
    workdir.mkdir(exist_ok=True)
    for i in range(200):
        (workdir / f"file{i:03}.txt").write_text(f"line {i}\n" * 10)
    return create_lite_agent(
        model=model_calling(name),
        workdir=workdir,
        storage=Storage(root / "store", "bench"),
        approvals="allow",
        **options,
    )


async def timed(coro: Any) -> float:
    started = time.perf_counter()
    await coro
    return time.perf_counter() - started


CPU: list[tuple[float, float, float]] = []
"""Per round: this process's CPU seconds (all its threads) of the raw call, the local-tool
turn and the MCP-tool turn: the machine's other load barely moves them."""


async def call_overhead(calls: int) -> tuple[list[float], list[float], list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        mcp_agent = make_agent(root, "t__echo", mcp_servers={"t": stdio_entry()})
        local_agent = make_agent(root, "echo", tools=[echo])
        try:
            failed = await mcp_agent.mcp.wait_ready()
            assert not failed, failed
            session = mcp_agent.mcp.servers["t"]._session
            for _ in range(5):  # warm: first scans, first appends, imports
                await mcp_agent.send("Echo.")
                await local_agent.send("Echo.")
            raw, local, mcp = [], [], []
            for _ in range(calls):
                c0 = time.process_time()
                raw.append(await timed(session.call_tool("echo", {"text": "ping"})))
                c1 = time.process_time()
                local.append(await timed(local_agent.send("Echo.")))
                c2 = time.process_time()
                mcp.append(await timed(mcp_agent.send("Echo.")))
                c3 = time.process_time()
                CPU.append((c1 - c0, c2 - c1, c3 - c2))
            return raw, local, mcp
        finally:
            await mcp_agent.close()
            await local_agent.close()


async def first_turn(slow: bool) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        servers = (
            {"slow": stdio_entry(env={"MCP_TEST_START_DELAY": str(START_DELAY)})} if slow else None
        )
        agent = make_agent(Path(tmp), "list_files", mcp_servers=servers)
        try:
            seconds = await timed(agent.send("List the files."))
            state = agent.mcp.status()[0]["state"] if slow else "-"
            return seconds, state
        finally:
            await agent.close()


def first_turn_in_a_new_process(slow: bool) -> tuple[float, str]:
    """:func:`first_turn` in a fresh interpreter: nothing imported yet (``mcp`` takes
    seconds to import the first time; the turn must not wait for that either)."""
    out = subprocess.run(
        [sys.executable, __file__, "--first-turn", "slow" if slow else "none"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    seconds, state = json.loads(out.strip().splitlines()[-1])
    return float(seconds), str(state)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--first-turn", choices=["slow", "none"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_turn:
        print(json.dumps(await first_turn(args.first_turn == "slow")))
        return

    raw, local, mcp = await call_overhead(args.calls)
    overhead = [(m - lo - r) * 1000 for r, lo, m in zip(raw, local, mcp, strict=True)]
    med = statistics.median(overhead)
    of_medians = (statistics.median(mcp) - statistics.median(local) - statistics.median(raw)) * 1e3
    print(
        f"MCP call on a started stdio server, {args.calls} turns each: server's own time "
        f"(raw call_tool) median {statistics.median(raw) * 1000:.2f} ms; local-tool turn "
        f"{statistics.median(local) * 1000:.2f} ms; MCP-tool turn "
        f"{statistics.median(mcp) * 1000:.2f} ms"
    )
    print(
        f"  overhead of an MCP call over the server's own time: median of the interleaved "
        f"differences {med:.2f} ms (p25 {statistics.quantiles(overhead, n=4)[0]:.2f}, "
        f"p75 {statistics.quantiles(overhead, n=4)[2]:.2f}), difference of the medians "
        f"{of_medians:.2f} ms; target <= {TARGET_MS:g} ms: "
        f"{'met' if med <= TARGET_MS else 'NOT met'}"
    )
    cpu = [(m - lo - r) * 1000 for r, lo, m in CPU]
    raw_cpu = statistics.median(c[0] for c in CPU) * 1000
    print(
        f"  the same in this process's CPU time (less sensitive to the machine's load): median "
        f"{statistics.median(cpu):.2f} ms (the raw call: {raw_cpu:.2f} ms of CPU on our side)"
    )

    without = [first_turn_in_a_new_process(False) for _ in range(3)]
    with_slow = [first_turn_in_a_new_process(True) for _ in range(3)]
    base = statistics.median(s for s, _ in without)
    slow = statistics.median(s for s, _ in with_slow)
    states = sorted({state for _, state in with_slow})
    waited = states != ["starting"] or slow >= START_DELAY
    print(
        f"first turn not using MCP: {base * 1000:.1f} ms without servers, {slow * 1000:.1f} ms "
        f"with a server that takes {START_DELAY:g} s to start ({slow / base:.2f}x, "
        f"{(slow - base) * 1000:+.1f} ms; the server was "
        f"{'/'.join(states)} when the turn ended): {'DELAYED' if waited else 'not delayed'}"
    )


if __name__ == "__main__":
    asyncio.run(main())
