"""Time travel costs what it changes, not what the session holds.

    .venv/bin/python benchmarks/restore_bench.py [--repeat 30]

Scenario (issue #9): a session of 5,000 events whose prompts touched 500 files (each file
written once by the agent, with its snapshot and blobs), the last prompt changing one file.

* ``restore`` to the last checkpoint (one file rewritten, a few events cut), timed as the
  caller sees it; each timed restore is undone (untimed) before the next. Target <= 50 ms.
* ``restore`` 25 prompts back (51 files rewritten, 500 events cut), undone after each: what
  a restore of many files costs (no target; restore writes the files' temp files at once).
* ``list_checkpoints`` of the whole session, by the agent that restored and undid (it keeps
  the marks it read and reads only the newer ones), and by a fresh agent (every mark read).
  Target <= 20 ms.

Both on the file backend (the default) and SQLite; wall time and this process's CPU time
(the latter says what the code costs when the machine is busy with other work: it leaves out
waiting for a core, and for the disk's fsyncs). The reference, measured in the same run,
is what the mark index saves: one full ``read`` of the session (decoding all 5,000 events),
which is what each call would cost at least without it. Also printed: the session's sizes.

"Snapshots stay small": 100 prompts each changing a few lines of the same 1 MB CSV file,
through the real file tools' snapshot path (``blobs.put`` of before and after with the
predecessor as the delta base); the blob folder's growth is printed against the raw size
of the versions and their zlib size. Target <= 10 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.checkpoint.events import (
    AssistantEvent,
    Event,
    FileSnapshotEvent,
    ToolResultEvent,
    UserEvent,
)
from lite_agent_jupyter.checkpoint.sqlite import sqlite_checkpointer
from lite_agent_jupyter.providers import scripted

EVENTS = 5_000
FILES = 500
PROMPTS = 250  # 20 events per prompt
BACK = 25
"""The wide restore goes this many prompts back: 2 files each, and the last prompt's one."""
FILLER = "Some explanation of what was done and why, as a model writes it. " * 6


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


async def build_session(agent_workdir: Path, storage: Storage, checkpointer: object) -> str:
    """Write the 5,000-event session straight through the checkpointer and blob store."""
    agent = create_lite_agent(
        model=scripted([]),
        workdir=agent_workdir,
        storage=storage,
        checkpointer=checkpointer,  # type: ignore[arg-type]
    )
    sid = agent.session_id
    blobs = agent.blobs
    file_no = 0
    for prompt in range(PROMPTS):
        last = prompt == PROMPTS - 1
        batch: list[Event] = [
            UserEvent(content=f"prompt {prompt}: change the next files", checkpoint=True)
        ]
        touched = 1 if last else 4 if prompt == 0 else 2
        while len(batch) < 20:
            if touched:
                touched -= 1
                name = f"src/pkg{file_no % 20}/module_{file_no}.py"
                path = agent_workdir / name
                path.parent.mkdir(parents=True, exist_ok=True)
                before = f"# module {file_no}\nVALUE = 0\n".encode() * 20
                after = before.replace(b"VALUE = 0", b"VALUE = 1")
                if last:  # the one file the last prompt changes was written before
                    name = "src/pkg0/module_0.py"
                    path = agent_workdir / name
                    before = path.read_bytes()
                    after = before + b"# changed by the last prompt\n"
                path.write_bytes(after)
                b_hash = await blobs.put(before)
                a_hash = await blobs.put(after)
                tool_id = f"toolu_{prompt}_{len(batch)}"
                batch.append(
                    AssistantEvent(
                        content=[
                            {"type": "text", "text": FILLER},
                            {"type": "tool_use", "id": tool_id, "name": "write_file", "input": {}},
                        ]
                    )
                )
                batch.append(FileSnapshotEvent(path=name, before=b_hash, after=a_hash))
                batch.append(ToolResultEvent(tool_use_id=tool_id, content=f"wrote {name}"))
                file_no += 0 if last else 1
            else:
                batch.append(AssistantEvent(content=[{"type": "text", "text": FILLER}]))
                batch.append(UserEvent(content="[background note]", origin="background"))
        await agent.checkpointer.append(sid, batch[:20])
    head = await agent.checkpointer.head(sid)
    assert head == EVENTS, head
    await agent.close()
    return sid


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def spread(samples: list[float]) -> str:
    """``median / worst`` in ms."""
    return f"{median_ms(samples):6.2f} / {max(samples) * 1000:6.2f} ms"


async def time_travel(backend: str, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workdir = root / "project"
        workdir.mkdir()
        storage = Storage(root / "store", "bench")
        checkpointer = (
            sqlite_checkpointer(root / "store" / "sessions.db") if backend == "sqlite" else None
        )
        sid = await build_session(workdir, storage, checkpointer)
        agent = create_lite_agent(
            model=scripted([]), workdir=workdir, storage=storage, checkpointer=checkpointer
        )
        checkpoints = await agent.list_checkpoints(sid)
        assert len(checkpoints) == PROMPTS
        assert checkpoints[-1].files == ("src/pkg0/module_0.py",)
        assert len(checkpoints[0].files) == FILES
        target = checkpoints[-1].seq
        wide = checkpoints[-BACK - 1]
        wide_files = 2 * BACK + 1
        assert len(wide.files) == wide_files, len(wide.files)

        listing, restoring, reading, cold = [], [], [], []
        listing_cpu, restoring_cpu, cold_cpu = [], [], []
        widening: list[float] = []
        widening_cpu: list[float] = []
        for _ in range(repeat):
            started = time.perf_counter()
            await agent.checkpointer.read(sid)
            reading.append(time.perf_counter() - started)

            started, cpu = time.perf_counter(), time.process_time()
            await agent.list_checkpoints(sid)
            listing.append(time.perf_counter() - started)
            listing_cpu.append(time.process_time() - cpu)

            started, cpu = time.perf_counter(), time.process_time()
            result = await agent.restore(sid, target)
            restoring.append(time.perf_counter() - started)
            restoring_cpu.append(time.process_time() - cpu)
            assert result.restored == ("src/pkg0/module_0.py",), result
            await agent.undo_restore(sid)

            started, cpu = time.perf_counter(), time.process_time()
            result = await agent.restore(sid, wide.seq)
            widening.append(time.perf_counter() - started)
            widening_cpu.append(time.process_time() - cpu)
            assert len(result.restored) == wide_files, result
            await agent.undo_restore(sid)

            fresh = create_lite_agent(  # keeps nothing yet: reads every mark
                model=scripted([]), workdir=workdir, storage=storage, checkpointer=checkpointer
            )
            started, cpu = time.perf_counter(), time.process_time()
            assert len(await fresh.list_checkpoints(sid)) == PROMPTS
            cold.append(time.perf_counter() - started)
            cold_cpu.append(time.process_time() - cpu)
            await fresh.close()  # a checkpointer passed in is not the agent's to close
        files = sum(1 for p in workdir.rglob("*") if p.is_file())
        store = folder_size(root / "store")
        await agent.close()
        if checkpointer is not None:
            await checkpointer.close()
    ref = median_ms(reading)
    print(
        f"{backend:>6}: session {EVENTS} events, {files} files in the workdir, "
        f"store {store / 1e6:.1f} MB; {repeat} runs, median / worst"
    )
    print(
        f"        restore 1 file: wall {spread(restoring)} (target <= 50), CPU "
        f"{spread(restoring_cpu)}   median = {median_ms(restoring) / ref:.2f}x one full "
        f"read ({ref:.2f} ms)"
    )
    print(
        f"        restore {wide_files} files ({BACK} prompts back, {BACK * EVENTS // PROMPTS} "
        f"events cut): wall {spread(widening)}, CPU {spread(widening_cpu)}"
    )
    print(
        f"        list_checkpoints: wall {spread(listing)} (target <= 20), CPU "
        f"{spread(listing_cpu)}   median = {median_ms(listing) / ref:.2f}x one full read"
    )
    print(
        f"        list_checkpoints, a fresh agent's first: wall {spread(cold)}, CPU "
        f"{spread(cold_cpu)}"
    )


def csv_versions(count: int) -> list[bytes]:
    rng = random.Random(7)
    rows = ["id,date,amount,category,note"] + [
        f"{i},2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d},"
        f"{rng.random() * 1000:.2f},{rng.choice(['food', 'rent', 'travel'])},"
        f"{rng.getrandbits(64):x}"
        for i in range(21_000)
    ]
    out = [("\n".join(rows) + "\n").encode()]
    for _ in range(count):
        for _ in range(3):  # a few lines changed per prompt
            i = rng.randrange(1, len(rows))
            rows[i] = rows[i].replace(",food,", ",groceries,") + ",checked"
        out.append(("\n".join(rows) + "\n").encode())
    return out


async def snapshots_small(prompts: int) -> None:
    versions = csv_versions(prompts)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workdir = root / "project"
        workdir.mkdir()
        storage = Storage(root / "store", "bench")
        blobs = storage.blobs
        previous = await blobs.put(versions[0])
        start = folder_size(storage.base / "blobs")
        started = time.perf_counter()
        for version in versions[1:]:  # what the snapshotter stores for each write
            previous = await blobs.put(version, base=previous)
        elapsed = (time.perf_counter() - started) / prompts
        grown = folder_size(storage.base / "blobs") - start
        started = time.perf_counter()
        assert await blobs.get(previous) == versions[-1]
        read_last = time.perf_counter() - started
    raw = sum(len(v) for v in versions[1:])
    started = time.perf_counter()
    packed = sum(len(zlib.compress(v, 6)) for v in versions[1:])
    zlib_time = (time.perf_counter() - started) / prompts
    print(
        f"snapshots: {prompts} versions of a {len(versions[0]) / 1e6:.2f} MB CSV: blob storage "
        f"grew {grown / 1e6:.2f} MB (target <= 10); raw {raw / 1e6:.1f} MB, zlib alone "
        f"{packed / 1e6:.1f} MB -> {grown / packed:.3f}x of zlib; "
        f"{elapsed * 1000:.1f} ms per put (= {elapsed / zlib_time:.1f}x a zlib compress of the "
        f"version), newest read back in {read_last * 1000:.1f} ms"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--prompts", type=int, default=100)
    args = parser.parse_args()
    for backend in ("file", "sqlite"):
        await time_travel(backend, args.repeat)
    await snapshots_small(args.prompts)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
