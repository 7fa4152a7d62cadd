"""What ``delete_session`` costs its caller with 1,000 sessions in the store, and what the
background collection it starts costs, beside raw references from the same run.

    .venv/bin/python benchmarks/blob_gc_bench.py [--sessions 1000] [--deletes 50]

The store: a file checkpointer and the storage folder's blob store holding ``--sessions``
sessions, each with a prompt and two file snapshots (a blob of its own and one blob every
session shares), the references recorded as an agent records them. Then one agent deletes
``--deletes`` of them:

* *wait*: each ``delete_session`` call alone (the previous collection finished first);
* *overlap*: calls back to back, each while the previous one's collection runs in its
  worker thread (what a user clicking Delete several times gets).

Target: ``delete_session`` returns in <= 50 ms (median and worst reported, wall and CPU time
of this process; the machine is shared, so wall times are noisy). Raw references in the same
run: unlinking one log and one ref file (the least a delete can do), and reading every log
the way the collector before this design did on the caller's path (its cost grew with the
store). The collection itself (time from ``delete_session`` to ``wait_maintenance``
returning) is reported too: it runs off the caller's path.

What references cost a writer: ``put`` of a new 2 KB blob with a session's reference (its
ref file exists: one append + fsync more) against the same put without one, alternating;
and the same put while collections run back to back (their final pass holds the store's lock
exclusively, so a writer may wait for it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.checkpoint import file_checkpointer
from lite_agent_jupyter.checkpoint.events import FileSnapshotEvent, UserEvent
from lite_agent_jupyter.providers.scripted import scripted
from lite_agent_jupyter.storage import BlobRef, Blobs


async def build(storage: Storage, sessions: int) -> list[str]:
    """``sessions`` sessions as an agent leaves them (prompt, two snapshots, refs)."""
    checkpointer = file_checkpointer(storage.sessions_dir)
    blobs = storage.blobs
    scope = checkpointer.location
    shared = b"a file every session touched\n" * 20
    ids = []
    for i in range(sessions):
        sid = f"bench-{i:05d}"
        ref = BlobRef(scope, sid)
        own = await blobs.put(f"session {i}: its own content\n".encode() * 10, ref=ref)
        common = await blobs.put(shared, ref=ref)
        await checkpointer.append(
            sid,
            [
                UserEvent(content=f"prompt {i}", origin="user", checkpoint=True),
                FileSnapshotEvent(path=f"own-{i}.txt", before=None, after=own),
                FileSnapshotEvent(path="shared.txt", before=None, after=common),
            ],
        )
        ids.append(sid)
    await checkpointer.close()
    return ids


def raw_unlink(folder: Path, rounds: int) -> list[float]:
    """Create and unlink one small log and one ref file: the least a delete does."""
    times = []
    for i in range(rounds):
        log, ref = folder / f"raw-{i}.jsonl", folder / f"raw-{i}.refs"
        log.write_bytes(b'{"v":1}\n')
        ref.write_bytes(b"0" * 64 + b"\n")
        started = time.perf_counter()
        os.unlink(log)
        os.unlink(ref)
        times.append(time.perf_counter() - started)
    return times


async def read_every_log(storage: Storage) -> tuple[float, float]:
    """The old collector's work on the caller's path: list and read every session's log."""
    checkpointer = file_checkpointer(storage.sessions_dir)
    wall, cpu = time.perf_counter(), time.process_time()
    for info in await checkpointer.list():
        await checkpointer.read(info.id)
    result = time.perf_counter() - wall, time.process_time() - cpu
    await checkpointer.close()
    return result


async def timed_puts(blobs: Blobs, ref: BlobRef | None, count: int, pause: float) -> list[float]:
    times = []
    for _ in range(count):
        data = os.urandom(2048)
        started = time.perf_counter()
        await blobs.put(data, ref=ref)
        times.append(time.perf_counter() - started)
        await asyncio.sleep(pause)
    return times


def summary(label: str, wall: list[float], cpu: list[float]) -> str:
    ms = 1000
    return (
        f"{label:<34} wall median {statistics.median(wall) * ms:7.2f} ms  worst "
        f"{max(wall) * ms:7.2f} ms | CPU median {statistics.median(cpu) * ms:6.2f} ms  worst "
        f"{max(cpu) * ms:6.2f} ms"
    )


async def run(sessions: int, deletes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp) / "project"
        workdir.mkdir()
        storage = Storage(Path(tmp) / "store", "bench")
        ids = await build(storage, sessions)
        old_wall, old_cpu = await read_every_log(storage)
        agent = create_lite_agent(
            model=scripted([]), workdir=workdir, storage=storage, blob_grace=0
        )
        blobs_before = len(await agent.blobs.hashes())
        alone_wall, alone_cpu, collect_wall, collect_cpu = [], [], [], []
        for sid in ids[:deletes]:
            wall, cpu = time.perf_counter(), time.process_time()
            await agent.delete_session(sid)
            alone_wall.append(time.perf_counter() - wall)
            alone_cpu.append(time.process_time() - cpu)
            await agent.wait_maintenance()
            collect_wall.append(time.perf_counter() - wall)
            collect_cpu.append(time.process_time() - cpu)
        writer = BlobRef("bench:a-writer", "bench-writer")
        await agent.blobs.put(b"first", ref=writer)  # its ref file exists from now on
        plain, with_ref = [], []
        for _ in range(deletes):
            plain += await timed_puts(agent.blobs, None, 1, 0)
            with_ref += await timed_puts(agent.blobs, writer, 1, 0)
        busy = asyncio.ensure_future(timed_puts(agent.blobs, writer, 4 * deletes, 0.005))
        overlap_wall, overlap_cpu = [], []
        for sid in ids[deletes : 2 * deletes]:
            wall, cpu = time.perf_counter(), time.process_time()
            await agent.delete_session(sid)
            overlap_wall.append(time.perf_counter() - wall)
            overlap_cpu.append(time.process_time() - cpu)
            await asyncio.sleep(0.005)  # let the collection start in its thread
        await agent.wait_maintenance()
        during = await busy
        blobs_after = len(await agent.blobs.hashes())
        await agent.close()
        raw = raw_unlink(Path(tmp), deletes)

    deleted = len(alone_wall) + len(overlap_wall)  # fewer than 2 * deletes in a small store
    print(f"store: {sessions} sessions, {blobs_before} blobs; {deleted} deleted")
    print(summary("delete_session (collection idle)", alone_wall, alone_cpu))
    print(summary("delete_session (collection running)", overlap_wall, overlap_cpu))
    print(
        summary("delete + background collection", collect_wall, collect_cpu)
        + "  (off the caller's path)"
    )
    raw_ms = statistics.median(raw) * 1e3
    print(f"{'raw: unlink a log and a ref file':<34} wall median {raw_ms:7.3f} ms")
    print(
        f"{'old design: read every log':<34} wall {old_wall * 1e3:7.2f} ms  CPU "
        f"{old_cpu * 1e3:6.2f} ms (was on the caller's path, once per delete)"
    )
    worst = max(max(alone_wall), max(overlap_wall))
    print(
        f"target delete_session <= 50 ms: median {statistics.median(alone_wall) * 1e3:.2f} ms,"
        f" worst {worst * 1e3:.2f} ms -> {'reached' if worst <= 0.050 else 'NOT reached (worst)'}"
    )
    print(f"blobs left: {blobs_after} (each deleted session's own blob collected, shared kept)")
    med = statistics.median
    print(
        f"put of a new 2 KB blob: no ref {med(plain) * 1e3:.2f} ms, with a session ref "
        f"{med(with_ref) * 1e3:.2f} ms ({med(with_ref) / med(plain):.2f}x); with a ref while "
        f"collections run: median {med(during) * 1e3:.2f} ms, worst {max(during) * 1e3:.2f} ms"
        f" (idle worst {max(with_ref) * 1e3:.2f} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--deletes", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(run(args.sessions, args.deletes))


if __name__ == "__main__":
    main()
