"""Branches and review cost what they change, not what the session holds.

    .venv/bin/python benchmarks/branches_bench.py [--repeat 20]

Scenario (issue #21), on restore_bench.py's session: 5,000 events whose prompts touched 500
files, the last prompt changing one file. A restore to before that last prompt keeps its
future as branch ``b1``; one new prompt (no file change) is added. The two branches then
differ in one file, and the benchmark switches between them ``repeat`` times each way:

* ``switch_branch``: wall and CPU time as the caller sees it. Target <= 50 ms, like restore.
  The reference, measured in the same run, is one full ``read`` of the session.
* Storage of a branch: its JSON file (target <= 1 KB) and the blobs it alone references (its
  events and its file list; file contents are the snapshots' blobs, never copied).
* ``changes`` (what ``%agent review`` shows) of a turn that changed 100 files, with the plain
  text rendered: the SDK call plus ``render.changes_text``, in this process (the kernel's
  round trip to the browser is not included). Target <= 300 ms on screen.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from restore_bench import EVENTS, build_session, spread

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.checkpoint.events import (
    AssistantEvent,
    Event,
    FileSnapshotEvent,
    ToolResultEvent,
    UserEvent,
)
from lite_agent_jupyter.jupyter import history_text
from lite_agent_jupyter.providers import scripted


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def switching(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workdir = root / "project"
        workdir.mkdir()
        storage = Storage(root / "store", "bench")
        sid = await build_session(workdir, storage, None)
        agent = create_lite_agent(model=scripted([]), workdir=workdir, storage=storage)
        checkpoints = await agent.list_checkpoints(sid)
        await agent.restore(sid, checkpoints[-1].seq)
        await agent.checkpointer.append(
            sid,
            [
                UserEvent(content="a different last prompt", checkpoint=True),
                AssistantEvent(content=[{"type": "text", "text": "Nothing to change."}]),
            ],
        )
        (branch,) = await agent.list_branches(sid)
        archive = storage.base / "archive"
        branch_file = archive / f"{sid}.branch-{branch.name}.json"
        meta = json.loads(branch_file.read_bytes())
        own = len(await agent.blobs.get(meta["events"])) + len(
            await agent.blobs.get(meta["contents"])
        )
        size = branch_file.stat().st_size

        reading, times, cpus = [], [], []
        name = branch.name
        for _ in range(repeat * 2):
            started = time.perf_counter()
            await agent.checkpointer.read(sid)
            reading.append(time.perf_counter() - started)
            started, cpu = time.perf_counter(), time.process_time()
            switched = await agent.switch_branch(sid, name)
            times.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
            changed = (*switched.result.restored, *switched.result.deleted)
            assert changed == ("src/pkg0/module_0.py",), switched
            assert switched.kept is not None
            name = switched.kept
        await agent.close()
    ref = median_ms(reading)
    print(
        f"switch_branch between branches differing in 1 file ({EVENTS} events, 500 files), "
        f"{len(times)} switches: wall {spread(times)} (target <= 50), CPU {spread(cpus)}; "
        f"median = {median_ms(times) / ref:.2f}x one full read ({ref:.2f} ms)"
    )
    print(
        f"branch storage: {size} bytes of JSON (target <= 1024) + {own} bytes of blobs it alone "
        f"references (its {branch.prompts} prompt(s) of events and its list of "
        f"{branch.files} file(s)); file contents are the snapshots' blobs"
    )


async def review(repeat: int, files: int = 100) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workdir = root / "project"
        workdir.mkdir()
        storage = Storage(root / "store", "bench")
        agent = create_lite_agent(model=scripted([]), workdir=workdir, storage=storage)
        sid = agent.session_id
        batch: list[Event] = [UserEvent(content="change a hundred files", checkpoint=True)]
        for n in range(files):
            before = "".join(f"line {i} of module {n}\n" for i in range(60)).encode()
            after = before.replace(b"line 30 ", b"LINE 30 ")
            tool_id = f"toolu_{n}"
            batch += [
                AssistantEvent(
                    content=[{"type": "tool_use", "id": tool_id, "name": "write_file", "input": {}}]
                ),
                FileSnapshotEvent(
                    path=f"src/m{n}.py",
                    before=await agent.blobs.put(before),
                    after=await agent.blobs.put(after),
                    tool_use_id=tool_id,
                ),
                ToolResultEvent(tool_use_id=tool_id, content="ok"),
            ]
        await agent.checkpointer.append(sid, batch)
        times, reading = [], []
        for _ in range(repeat):
            started = time.perf_counter()
            await agent.checkpointer.read(sid)
            reading.append(time.perf_counter() - started)
            started = time.perf_counter()
            text = history_text.changes_text(await agent.changes(sid))
            times.append(time.perf_counter() - started)
            assert text.count("changed (") == files
        await agent.close()
    print(
        f"review of a {files}-file turn (changes + plain text): wall {spread(times)} "
        f"(target <= 300 on screen); median = {median_ms(times) / median_ms(reading):.1f}x "
        f"one full read of the session ({median_ms(reading):.2f} ms)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    await switching(args.repeat)
    await review(args.repeat)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
