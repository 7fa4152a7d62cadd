"""A session travels in about the time it takes to read it: export and import of a bundle.

    .venv/bin/python benchmarks/bundle_bench.py [--repeat 5]

Scenario (issue #22): a session of 5,000 events whose prompts touched 500 files (each file
written once, with its snapshot: a "before" and an "after" blob, 1,000 blobs of 2-12 KB of
source-like text), on the file backend. Timed, as the caller sees them:

* ``LiteAgent.export_session`` of the whole session to a bundle. Target <= 2 s.
* ``LiteAgent.import_session`` of that bundle into a fresh SQLite store and another workdir (a new
  store each run, so every import writes every blob). Target <= 2 s.

The reference, measured in the same run, is what any export or import must do at least: one
full ``read`` of the log plus a ``get`` of every blob it names (export), or one
``append_verbatim`` of the log plus each blob written to a plain file of its own, unsynced
(import); the ratios say what the bundle's checks, checksums, zip, compression and
durability cost on top. The CPU time (this process's) leaves out waiting for the disk and
for a core, which on a busy machine is most of the wall time of an import: creating a
thousand files. Sizes: the bundle against the blobs it
carries, raw (their content) and as the blob store keeps them (compressed files on disk).
Target: bundle <= 1.2x the blobs it carries.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.agent.bundle import referenced_blobs
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
FILLER = "Some explanation of what was done and why, as a model writes it. " * 6
WORDS = ("data frame value result index column model error path config item total").split()  # noqa: SIM905


def source_text(rng: random.Random, number: int) -> bytes:
    """2-12 KB of Python-like text, distinct per file (so blobs neither dedupe nor vanish
    under compression)."""
    lines = [f'"""Module {number}."""', "", "from __future__ import annotations", ""]
    while sum(len(line) + 1 for line in lines) < rng.randint(2_000, 12_000):
        name = "_".join(rng.choices(WORDS, k=2)) + f"_{rng.randint(0, 99_999)}"
        lines += [
            f"def {name}(x: int) -> int:",
            f"    return x * {rng.randint(2, 999)} + {rng.randint(0, 10**6)}",
            "",
        ]
    return "\n".join(lines).encode()


async def build_session(workdir: Path, storage: Storage) -> tuple[str, int]:
    """The 5,000-event session, written straight through the checkpointer and blob store;
    returns its id and the raw bytes of its blobs."""
    rng = random.Random(22)
    agent = create_lite_agent(model=scripted([]), workdir=workdir, storage=storage)
    sid = agent.session_id
    blobs = agent.blobs
    ref = agent._blob_ref(sid)
    raw = 0
    file_no = 0
    for prompt in range(PROMPTS):
        batch: list[Event] = [UserEvent(content=f"prompt {prompt}: change files", checkpoint=True)]
        touched = 2
        while len(batch) < 20:
            if touched and file_no < FILES:
                touched -= 1
                name = f"src/pkg{file_no % 20}/module_{file_no}.py"
                before = source_text(rng, file_no)
                after = before + b"\n# changed by the agent\n"
                path = workdir / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(after)
                b_hash = await blobs.put(before, ref=ref)
                a_hash = await blobs.put(after, base=b_hash, ref=ref)
                raw += len(before) + len(after)
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
                file_no += 1
            else:
                batch.append(AssistantEvent(content=[{"type": "text", "text": FILLER}]))
                batch.append(UserEvent(content="[background note]", origin="background"))
        await agent.checkpointer.append(sid, batch[:20])
    assert await agent.checkpointer.head(sid) == EVENTS
    assert file_no == FILES, file_no
    await agent.close()
    return sid, raw


def median(samples: list[float]) -> float:
    return statistics.median(samples)


async def main(repeat: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workdir = root / "teacher"
        workdir.mkdir()
        storage = Storage(root / "store", "bench")
        sid, raw = await build_session(workdir, storage)
        source = create_lite_agent(model=scripted([]), workdir=workdir, storage=storage)
        bundle = root / "session.zip"
        exports, imports, read_refs, write_refs = [], [], [], []
        exports_cpu: list[float] = []
        imports_cpu: list[float] = []
        for run in range(repeat):
            started = time.perf_counter()  # the reference: read the log and every blob
            events = await source.checkpointer.read(sid)
            contents = [await source.blobs.get(d) for d in sorted(referenced_blobs(events))]
            read_refs.append(time.perf_counter() - started)

            started, cpu = time.perf_counter(), time.process_time()
            info = await source.export_session(bundle, session_id=sid)
            exports.append(time.perf_counter() - started)
            exports_cpu.append(time.process_time() - cpu)

            place = root / f"student-{run}"
            (place / "project").mkdir(parents=True)
            db = sqlite_checkpointer(place / "sessions.db")
            target = create_lite_agent(
                model=scripted([]),
                workdir=place / "project",
                storage=Storage(place / "store", "bench"),
                checkpointer=db,
            )
            started, cpu = time.perf_counter(), time.process_time()
            result = await target.import_session(bundle)
            imports.append(time.perf_counter() - started)
            imports_cpu.append(time.process_time() - cpu)
            assert result.events == EVENTS and result.blobs == len(contents), result

            reference = sqlite_checkpointer(place / "reference.db")  # the reference writes
            plain = place / "plain"
            started = time.perf_counter()
            await reference.append_verbatim("ref", events, expected_head=0)
            for number, data in enumerate(contents):  # one plain file per blob, no fsync
                folder = plain / f"{number % 256:02x}"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / str(number)).write_bytes(data)
            write_refs.append(time.perf_counter() - started)
            await reference.close()
            await target.close()
            await db.close()
        store_blobs = sum(
            p.stat().st_size
            for p in (storage.base / "blobs").rglob("*")
            if p.is_file() and len(p.parent.name) == 2
        )
        await source.close()
    size = info.size
    exp, imp = median(exports), median(imports)
    print(f"session: {EVENTS} events, {FILES} files, {info.blobs} blobs; {repeat} runs, medians")
    print(
        f"export: wall {exp:.3f} s (target <= 2 s), CPU {median(exports_cpu):.3f} s; "
        f"{exp / median(read_refs):.2f}x reading the log and every blob "
        f"({median(read_refs):.3f} s)"
    )
    print(
        f"import: wall {imp:.3f} s (target <= 2 s), CPU {median(imports_cpu):.3f} s; "
        f"{imp / median(write_refs):.2f}x appending the log and writing each blob to a "
        f"plain file, unsynced ({median(write_refs):.3f} s)"
    )
    print(
        f"bundle: {size / 1e6:.2f} MB = {size / raw:.2f}x the blobs' content "
        f"({raw / 1e6:.2f} MB; target <= 1.2x), {size / store_blobs:.2f}x the blob store's "
        f"files ({store_blobs / 1e6:.2f} MB, compressed and delta-encoded)"
    )
    ok = exp <= 2.0 and imp <= 2.0 and size <= 1.2 * raw
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    sys.exit(asyncio.run(main(parser.parse_args().repeat)))
