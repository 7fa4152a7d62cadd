"""What rewinding the kernel costs a ``run_cell`` and a restore (#34).

    .venv/bin/python benchmarks/kernel_snapshot_bench.py [--repeat 5] [--rows 1000000]

Measured in this process on the functions ``run_cell`` and the kernel participant run
(``jupyter/kernel_state.py``), each next to a raw reference from the same run:

* Snapshot of a call that mutates a 1M-row, 10-column float DataFrame (``df["c0"] *= 2``):
  what the kernel's main thread pays (find the names, estimate, pickle the group,
  fingerprint before and after) vs ``pickle.dumps`` of the frame alone. Target <= 1.5x.
  Storing the kept pickle in the session's blob store (on the agent's thread, after the
  call) is printed apart, against the same reference.
* A call that touches no existing variable (``y = 1 + 1``) in a namespace of 200 variables
  holding that frame: the extra time around the code. Target <= 2 ms.
* Restore of that frame (plan + unpickle + assign) vs ``pickle.loads`` of it. Target
  <= 1.5x. The undo record (pickling the value being replaced, so ``%agent undo`` can bring
  it back) is printed apart.
* Storage: a call touching the frame and a list that changes only the list keeps one group.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from lite_agent_jupyter.agent.timetravel.participants import StateContext
from lite_agent_jupyter.checkpoint.events import StateSnapshotEvent
from lite_agent_jupyter.jupyter.kernel_state import KernelParticipant, changes, take_before
from lite_agent_jupyter.storage import BlobRef
from lite_agent_jupyter.storage.blobs import MemoryBlobStore


def best(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return min(samples)


def namespace(rows: int) -> dict[str, Any]:
    frame = pd.DataFrame(
        np.random.default_rng(1).random((rows, 10)), columns=[f"c{i}" for i in range(10)]
    )
    ns: dict[str, Any] = {"df": frame}
    for i in range(199):
        ns[f"v{i}"] = list(range(i % 20))
    return ns


def snapshot_cost(ns: dict[str, Any], repeat: int) -> None:
    df = ns["df"]
    code = 'df["c0"] *= 2'

    def around() -> None:
        before = take_before(ns, code)
        exec(code, ns)  # the agent's code (its own time is not the snapshot's)
        report = changes(before, ns)
        assert report.changed == ("df",) and len(report.groups) == 1

    references, snaps = [], []
    for _ in range(repeat):  # interleaved, so that load and memory hit both alike
        references.append(best(lambda: pickle.dumps(df, protocol=5), 1))
        run_only = best(lambda: exec(code, ns), 1)
        snaps.append(best(around, 1) - run_only)
    reference, snap = min(references), min(snaps)
    print(
        f"snapshot of a mutated {df.shape} frame: {snap * 1000:.1f} ms; pickle.dumps "
        f"{reference * 1000:.1f} ms; ratio {snap / reference:.2f}x (target <= 1.5x)"
    )
    data = pickle.dumps({"df": df}, protocol=5)
    store = MemoryBlobStore()
    ref = BlobRef("bench", "bench")

    async def put_all() -> list[float]:
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            await store.put(data, ref=ref)
            samples.append(time.perf_counter() - start)
        return samples

    stored = min(asyncio.run(put_all()))
    print(
        f"  storing it in the blob store (agent thread, after the call): {stored * 1000:.1f} "
        f"ms, {stored / reference:.2f}x pickle.dumps"
    )


def no_touch_cost(ns: dict[str, Any], repeat: int) -> None:
    code = "y = 1 + 1"

    def around() -> None:
        before = take_before(ns, code)
        exec(code, ns)
        changes(before, ns)
        del ns["y"]

    def bare() -> None:
        exec(code, ns)
        del ns["y"]

    extra = best(around, repeat * 20) - best(bare, repeat * 20)
    print(
        f"a call touching no existing variable ({len(ns)} names): {extra * 1000:.3f} ms extra "
        "(target <= 2 ms)"
    )


def restore_cost(ns: dict[str, Any], repeat: int) -> None:
    df = ns["df"]
    data = pickle.dumps({"df": df}, protocol=5)
    reference = best(lambda: pickle.loads(data), repeat)
    store = MemoryBlobStore()
    ref = BlobRef("bench", "bench")
    blob = asyncio.run(store.put(data, ref=ref))  # a hash: small
    ctx = StateContext("bench", store, ref)
    participant = KernelParticipant(lambda: ns)

    async def restore_once(undo: bool) -> float:
        from lite_agent_jupyter.jupyter import kernel_state

        ns["df"] = df.copy()
        ns["df"]["c0"] *= 2
        event = StateSnapshotEvent(
            participant="kernel",
            data={
                "names": {
                    "df": {
                        "change": "changed",
                        "group": 0,
                        "after": kernel_state.value_fingerprint(ns["df"]),
                    }
                },
                "groups": [{"blob": blob, "names": ["df"], "why": ""}],
                "cannot": {},
                "at": "2026-12-03T00:00:00+00:00",
            },
        )
        start = time.perf_counter()
        plan = await participant.plan_rewind(ctx, [event])
        if undo:
            await participant.apply(ctx, plan, force=False)
        else:  # without the undo record: unpickle and assign
            loaded = pickle.loads(await store.get(blob))
            ns.update(loaded)
        return time.perf_counter() - start

    async def runs(undo: bool) -> float:
        # one event loop: asyncio.run returning a large bytes object took seconds here
        return min([await restore_once(undo) for _ in range(repeat)])

    plain = asyncio.run(runs(False))
    with_undo = asyncio.run(runs(True))
    reference = min(reference, best(lambda: pickle.loads(data), repeat))  # after, too
    print(
        f"restore of the frame (plan + unpickle + assign): {plain * 1000:.1f} ms; "
        f"pickle.loads {reference * 1000:.1f} ms; ratio {plain / reference:.2f}x "
        "(target <= 1.5x)"
    )
    print(
        f"  with the undo record (pickling the value replaced): {with_undo * 1000:.1f} ms, "
        f"{with_undo / reference:.2f}x"
    )


def storage_count(ns: dict[str, Any]) -> None:
    ns["seen"] = [1, 2]
    code = "df.shape\nseen.append(3)"
    before = take_before(ns, code)
    exec(code, ns)
    report = changes(before, ns)
    kept = [g.names for g in report.groups]
    print(
        f"groups snapshotted {len(before.groups)}, kept {len(kept)} ({kept}): the unchanged "
        "frame is stored 0 times"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    ns = namespace(args.rows)
    snapshot_cost(ns, args.repeat)
    no_touch_cost(ns, args.repeat)
    restore_cost(ns, args.repeat)
    storage_count(ns)


if __name__ == "__main__":
    main()
