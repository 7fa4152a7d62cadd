"""Cassette replay overhead: what ``replay(speed=0)`` adds per model call over ``scripted()``.

    .venv/bin/python benchmarks/replay_bench.py [--rounds 15]

The session: 10 turns of 5 model calls each (4 ``read_file`` tool calls, then a text answer),
50 model calls in all, recorded once into a cassette from the scripted model. Then, in
alternating rounds in the same run:

* reference: the same 10 prompts answered by a fresh ``scripted()`` provider with the same
  replies (in memory sessions, so storage noise stays out);
* replay: the same prompts answered by ``replay(cassette, speed=0)`` (a fresh provider per
  round, so loading the cassette file is counted too).

Overhead per model call = (replay session time - reference session time) / 50, median over
the rounds; also the provider alone (the 50 recorded requests streamed without the agent).
Target: <= 1 ms per call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from lite_agent_jupyter import create_lite_agent
from lite_agent_jupyter.abort import AbortController
from lite_agent_jupyter.providers import (
    ModelRequest,
    Provider,
    Reply,
    call,
    record,
    replay,
    reply,
    scripted,
)

TURNS = 10
CALLS_PER_TURN = 5
PARAGRAPH = (
    "Here is what I found in the file: the loader reads each row, checks its fields and "
    "keeps the valid ones; the rest are counted and reported at the end. "
)


def replies() -> list[Reply]:
    out: list[Reply] = []
    for turn in range(TURNS):
        for step in range(CALLS_PER_TURN - 1):
            out.append(
                reply(
                    f"Step {step}: reading data{step}.txt.",
                    [call("read_file", path=f"data{step}.txt")],
                )
            )
        out.append(reply(f"Turn {turn} done. " + PARAGRAPH * 3))
    return out


async def run_session(model: Provider, workdir: Path) -> float:
    agent = create_lite_agent(
        model=model, workdir=workdir, sessions=False, session_id="bench", approvals="allow"
    )
    started = time.perf_counter()
    for turn in range(TURNS):
        result = await agent.send(f"Please look at the data files, pass {turn}.")
        assert result.model_calls == CALLS_PER_TURN, result
    elapsed = time.perf_counter() - started
    await agent.close()
    return elapsed


async def stream_all(model: Provider, requests: list[ModelRequest]) -> float:
    signal = AbortController().signal
    started = time.perf_counter()
    for request in requests:
        async for _event in model.stream(request, signal):
            pass
    return time.perf_counter() - started


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp) / "project"
        workdir.mkdir()
        for step in range(CALLS_PER_TURN - 1):
            (workdir / f"data{step}.txt").write_text("id,value\n" + "1,2\n" * 50)
        cassette = Path(tmp) / "bench.jsonl"
        source = scripted(replies())
        await run_session(record(source, cassette, workdir=workdir), workdir)
        requests: list[ModelRequest] = list(source.requests)
        calls = len(requests)
        assert calls == TURNS * CALLS_PER_TURN
        size = cassette.stat().st_size

        ref_times: list[float] = []
        rep_times: list[float] = []
        ref_stream: list[float] = []
        rep_stream: list[float] = []
        for _ in range(rounds):
            ref_times.append(await run_session(scripted(replies()), workdir))
            rep_times.append(await run_session(replay(cassette, speed=0), workdir))
            ref_stream.append(await stream_all(scripted(replies()), requests))
            player = replay(cassette, speed=0, workdir=workdir)
            rep_stream.append(await stream_all(player, requests))
            assert player.served == calls

    def per_call(times: list[float]) -> float:
        return statistics.median(times) / calls * 1e3

    overhead = [(b - a) / calls * 1e3 for a, b in zip(ref_times, rep_times, strict=True)]
    provider_overhead = [(b - a) / calls * 1e3 for a, b in zip(ref_stream, rep_stream, strict=True)]
    print(f"cassette: {calls} model calls, {size / 1024:.0f} KiB; {rounds} rounds")
    print(
        f"agent session, per model call: scripted {per_call(ref_times):.3f} ms, "
        f"replay(speed=0) {per_call(rep_times):.3f} ms, ratio "
        f"{statistics.median(rep_times) / statistics.median(ref_times):.2f}"
    )
    print(
        f"provider alone, per model call: scripted {per_call(ref_stream):.3f} ms, "
        f"replay(speed=0) {per_call(rep_stream):.3f} ms, ratio "
        f"{statistics.median(rep_stream) / statistics.median(ref_stream):.2f}"
    )
    median = statistics.median(overhead)
    print(
        f"replay overhead per model call over scripted: {median:+.3f} ms in the agent, "
        f"{statistics.median(provider_overhead):+.3f} ms provider alone (target <= 1 ms): "
        f"{'OK' if median <= 1.0 else 'MISSED'}"
    )


def _args() -> Any:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(_args().rounds))
