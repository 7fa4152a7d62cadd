"""Resume follows the live context, not the history.

    .venv/bin/python benchmarks/resume_bench.py [--events 100000] [--tail 50] [--runs 3]

A session of 100,000 events (prompts and answers, ~300 bytes each) whose last compaction is 50
events from the end is written on the file and SQLite backends. Then, per run, a **fresh
process** (imports done before the clock starts) builds an agent on that store, resumes the
session and sends a prompt; the figure is the time until the provider receives the first
model request (target <= 100 ms). Measured in the same child, as raw references:

* ``full read``: what a resume without the mark index costs: ``read()`` of the whole log
  through the same backend (a fresh checkpointer object), plus folding it;
* ``tail read``: ``read(after=...)`` of the last 50 events alone: the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from lite_agent_jupyter import checkpointer_from_url, create_lite_agent
from lite_agent_jupyter.abort import AbortSignal
from lite_agent_jupyter.checkpoint.events import (
    AssistantEvent,
    CompactionEvent,
    Event,
    UserEvent,
)
from lite_agent_jupyter.checkpoint.fold import fold
from lite_agent_jupyter.providers.base import MessageDone, ModelRequest, ProviderEvent, Usage

SESSION = "big-session"
TEXT = "a line of conversation of a typical length, repeated to about 300 bytes. " * 4


class FirstRequestClock:
    """A provider that notes when the first request arrives and answers at once."""

    name = "clock"
    is_real_model = False

    def __init__(self) -> None:
        self.first: float | None = None
        self.messages = 0

    async def stream(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncIterator[ProviderEvent]:
        if self.first is None:
            self.first = time.perf_counter()
            self.messages = len(request.messages)
        yield MessageDone([{"type": "text", "text": "ok"}], Usage(1, 1), "end_turn", "clock")

    async def count_tokens(self, request: ModelRequest) -> int:
        return 1

    async def aclose(self) -> None:
        pass


async def build(url: str, events: int, tail: int) -> None:
    checkpointer = checkpointer_from_url(url)
    try:
        batch: list[Event] = []
        compaction_at = events - tail
        for seq in range(1, events + 1):
            if seq == compaction_at:
                batch.append(
                    CompactionEvent(summary="summary " * 50, through_seq=seq - 1, before=9, after=1)
                )
            elif seq % 2:
                batch.append(UserEvent(content=f"{seq} {TEXT}", checkpoint=True))
            else:
                batch.append(AssistantEvent(content=[{"type": "text", "text": f"{seq} {TEXT}"}]))
            if len(batch) == 2000:
                await checkpointer.append(SESSION, batch)
                batch = []
        if batch:
            await checkpointer.append(SESSION, batch)
        await checkpointer.sync(SESSION) if hasattr(checkpointer, "sync") else None
    finally:
        await checkpointer.close()


async def child(config: dict[str, str | int]) -> dict[str, float | int]:
    url, workdir, storage = str(config["url"]), str(config["workdir"]), str(config["storage"])
    clock = FirstRequestClock()
    started = time.perf_counter()
    agent = create_lite_agent(
        model=clock,
        checkpointer=checkpointer_from_url(url),
        workdir=workdir,
        storage=storage,
        session_id=SESSION,
        auto_compact=False,
    )
    try:
        await agent.send("and now?")
    finally:
        await agent.close()
    assert clock.first is not None
    figure = clock.first - started

    reader = checkpointer_from_url(url)
    try:
        started = time.perf_counter()
        everything = await reader.read(SESSION)
        fold(everything)
        full = time.perf_counter() - started
        head = everything[-1].seq
        started = time.perf_counter()
        await reader.read(SESSION, after=head - int(config["tail"]))
        tail = time.perf_counter() - started
    finally:
        await reader.close()
    return {"figure": figure, "full": full, "tail": tail, "messages": clock.messages}


def run_child(config: dict[str, str | int]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(config)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(events: int, tail: int, runs: int) -> None:
    print(f"session: {events} events, last compaction {tail} events from the end; {runs} runs")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp) / "project"
        workdir.mkdir()
        for backend in ("file", "sqlite"):
            url = f"file://{tmp}/file-store" if backend == "file" else f"sqlite://{tmp}/store.db"
            started = time.perf_counter()
            asyncio.run(build(url, events, tail))
            built = time.perf_counter() - started
            config: dict[str, str | int] = {
                "url": url,
                "workdir": str(workdir),
                "storage": os.path.join(tmp, "storage"),
                "tail": tail,
            }
            results = [run_child(config) for _ in range(runs)]
            figure = statistics.median(r["figure"] for r in results) * 1000
            full = statistics.median(r["full"] for r in results) * 1000
            tail_ms = statistics.median(r["tail"] for r in results) * 1000
            print(
                f"{backend:6}: fresh process to first model request: median {figure:.1f} ms "
                f"[target <= 100 ms] (runs: "
                + ", ".join(f"{r['figure'] * 1000:.1f}" for r in results)
                + f"); request of {int(results[0]['messages'])} messages"
            )
            print(
                f"        raw references: full read + fold of the log {full:.0f} ms "
                f"(ratio {figure / full:.3f}); tail read of {tail} events {tail_ms:.2f} ms; "
                f"building the session took {built:.0f} s"
            )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(asyncio.run(child(json.loads(sys.argv[2])))))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--tail", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    main(args.events, args.tail, args.runs)
