"""Shell scans are cheap: the before/after scan around one ``bash`` call in a 10,000-file
workdir where nothing changed.

    .venv/bin/python benchmarks/shell_scan_bench.py [--files 10000] [--calls 50]

Measured in the same run, on the same tree:

* scan: what the agent adds to a ``bash`` call, ``FileTracker.before`` + ``FileTracker.after``
  (inotify-driven re-stats, session log on the file backend, file blob store); target
  <= 30 ms per call;
* raw reference: one plain walk of the tree with an ``lstat`` of every file (``os.walk``), the
  least a scan without change notifications must do (twice per call);
* fallback: the same scans without inotify (macOS, Windows, or out of watches);
* one scan that finds one changed file (hash + store + one event), and the first scan (the
  baseline, which keeps every file's content: packed into one scratch file, see
  ``agent/tracking.py``), wall and CPU, against a raw reference: reading and hashing every
  file (the least a baseline of contents must do).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import tempfile
import time
from pathlib import Path

from lite_agent_jupyter.agent.session import SessionLog
from lite_agent_jupyter.agent.tracking import FileTracker
from lite_agent_jupyter.checkpoint.file import file_checkpointer
from lite_agent_jupyter.storage import BlobRef, Storage, process_scope


def make_tree(root: Path, files: int) -> None:
    per_folder = 100
    for i in range(files):
        folder = root / f"pkg{i // per_folder:03d}"
        if i % per_folder == 0:
            folder.mkdir()
        (folder / f"module{i % per_folder:03d}.py").write_text(f"value = {i}\n" * 20)


def raw_read(root: Path) -> int:
    """Read and hash every file: the least a content baseline costs."""
    count = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                hashlib.sha256(f.read()).digest()
            count += 1
    return count


def raw_walk(root: Path) -> int:
    count = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            os.lstat(os.path.join(folder, name))
            count += 1
    return count


async def per_call(tracker: FileTracker, session: SessionLog, calls: int) -> list[float]:
    times = []
    for i in range(calls):
        started = time.perf_counter()
        await tracker.before(session)
        await tracker.after(session, f"toolu_{i}", "bash")
        times.append(time.perf_counter() - started)
    return times


async def main(files: int, calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp) / "project"
        workdir.mkdir()
        make_tree(workdir, files)
        storage = Storage(Path(tmp) / "store", "bench")
        checkpointer = file_checkpointer(storage.base / "sessions")
        session = SessionLog(checkpointer, "bench")
        pin = BlobRef(process_scope(), "bench")
        scope = checkpointer.location

        def ref(session_id: str) -> BlobRef:
            return BlobRef(scope, session_id)

        tracker = FileTracker(workdir, storage.blobs, pin=pin, blob_ref=ref, exclude=[storage.root])
        fallback = FileTracker(
            workdir, storage.blobs, pin=pin, blob_ref=ref, exclude=[storage.root]
        )
        fallback.scanner = type(fallback.scanner)(workdir, use_inotify=False)
        try:
            started, cpu = time.perf_counter(), time.process_time()
            assert raw_read(workdir) == files
            read_ref, read_cpu = time.perf_counter() - started, time.process_time() - cpu
            started, cpu = time.perf_counter(), time.process_time()
            await tracker.before(session)
            baseline, baseline_cpu = time.perf_counter() - started, time.process_time() - cpu
            await fallback.before(session)
            assert tracker.scanner.watching and not fallback.scanner.watching

            raw = []
            for _ in range(max(3, calls // 5)):
                started = time.perf_counter()
                assert raw_walk(workdir) == files
                raw.append(time.perf_counter() - started)
            scans = await per_call(tracker, session, calls)
            slow = await per_call(fallback, session, max(3, calls // 5))

            changed = []
            for i in range(10):
                await tracker.before(session)
                (workdir / "pkg000" / "module000.py").write_text(f"changed {i}\n")
                started = time.perf_counter()
                report = await tracker.after(session, f"toolu_c{i}", "bash")
                changed.append(time.perf_counter() - started)
                assert report.modified == ["pkg000/module000.py"]
        finally:
            tracker.close()
            fallback.close()
            await checkpointer.close()

    scan_ms = statistics.median(scans) * 1000
    raw_ms = statistics.median(raw) * 1000
    print(f"workdir: {files} files in {files // 100} folders; {calls} bash calls")
    print(
        f"baseline (first scan, keeps every file's content): wall {baseline * 1000:.0f} ms, "
        f"CPU {baseline_cpu * 1000:.0f} ms (all threads); raw reference, read + sha256 of "
        f"every file: wall {read_ref * 1000:.0f} ms, CPU {read_cpu * 1000:.0f} ms "
        f"-> {baseline / read_ref:.1f}x"
    )
    print(
        f"scan per bash call, nothing changed (inotify): median {scan_ms:.3f} ms, "
        f"max {max(scans) * 1000:.3f} ms  [target <= 30 ms]"
    )
    print(f"raw reference, one os.walk + lstat of every file: median {raw_ms:.1f} ms")
    print(f"ratio scan / raw walk: {scan_ms / raw_ms:.4f}")
    slow_ms = statistics.median(slow) * 1000
    print(
        f"fallback without inotify, per call (two walks): median {slow_ms:.1f} ms "
        f"= {slow_ms / (2 * raw_ms):.2f} x two raw walks"
    )
    print(
        f"after-scan that finds one changed file: median {statistics.median(changed) * 1000:.2f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(main(args.files, args.calls))
