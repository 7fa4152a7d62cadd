"""What redaction and workdir confinement cost, as ratios to raw references in the same run.

    .venv/bin/python benchmarks/security_bench.py [--rounds 400]

Redaction (target: <= 5% added): handling one 30,000-character tool result the way the agent
does -- the session's redactor on the ``tool_result`` event (once), ``SessionLog.append`` of
it to a file checkpointer, the fold of the model's messages and the JSON encoding of the
message the next request adds (not the HTTP round trip) -- with a redactor holding three
secrets (an API key and two ``secret_env`` values, none of them present) against the same
handling with an empty redactor. The two sides alternate, each in its own session; the
medians are compared.

Confinement (target: <= 50 us added per file operation): a read and an atomic write of
``src/pkg/mod/file.py`` through the tools' path (``open_path``: resolved and opened in one
walk of folder fds from the workdir down with ``O_NOFOLLOW``) against the same read or atomic
write by path with no check at all. Reported: the median of the paired differences (added
microseconds) and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from lite_agent_jupyter.abort import AbortController
from lite_agent_jupyter.agent.session import SessionLog
from lite_agent_jupyter.atomic import atomic_write, default_file_mode
from lite_agent_jupyter.checkpoint import file_checkpointer
from lite_agent_jupyter.checkpoint.events import ToolResultEvent, UserEvent
from lite_agent_jupyter.redact import Redactor
from lite_agent_jupyter.tools import ToolContext
from lite_agent_jupyter.tools.paths import open_path

RESULT_CHARS = 30_000


def tool_output(i: int) -> str:
    """A fresh 30,000-character tool result (like `cat` of a source file), new each call."""
    line = f"{i:06d}  def handler(request, response):  # some code the model asked to see\n"
    return (line * (RESULT_CHARS // len(line) + 1))[:RESULT_CHARS]


async def redaction(rounds: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = file_checkpointer(Path(tmp) / "sessions")
        secret_values = [
            "sk-ant-api03-" + secrets.token_urlsafe(70),  # an API key's shape: 108 chars
            secrets.token_hex(16),
            "db-password-" + secrets.token_urlsafe(12),
        ]
        sides = {
            "with": (SessionLog(store, "with", redactor=Redactor(secret_values)), []),
            "without": (SessionLog(store, "without", redactor=Redactor()), []),
        }
        times: dict[str, list[float]] = {"with": [], "without": []}
        for name, (log, _) in sides.items():
            await log.append([UserEvent(content="read the file", checkpoint=True)])
            times[name] = []
        for i in range(rounds):
            order = ("with", "without") if i % 2 else ("without", "with")
            for name in order:
                log = sides[name][0]
                output = tool_output(i)
                started = time.perf_counter()
                event = log.redactor.event(ToolResultEvent(tool_use_id=f"t{i}", content=output))
                await log.append([event], redacted=True)
                json.dumps(log.messages()[-1])  # what the next request's body adds
                times[name].append(time.perf_counter() - started)
        await store.close()
    # paired: each round's two sides ran back to back, so load drift cancels in the difference
    added = statistics.median(a - b for a, b in zip(times["with"], times["without"], strict=True))
    return added, statistics.median(times["without"])


def median_pair(
    confined: Callable[[], object], raw: Callable[[], object], rounds: int
) -> tuple[float, float]:
    """(median of the paired differences confined - raw, median of raw), the two run back to
    back in alternating order each round so that load drift cancels."""
    added: list[float] = []
    raws: list[float] = []
    for i in range(rounds):
        pair: dict[str, float] = {}
        for name, fn in (("c", confined), ("r", raw)) if i % 2 else (("r", raw), ("c", confined)):
            started = time.perf_counter()
            fn()
            pair[name] = time.perf_counter() - started
        added.append(pair["c"] - pair["r"])
        raws.append(pair["r"])
    return statistics.median(added), statistics.median(raws)


def confinement(rounds: int) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp) / "project"
        folder = workdir / "src" / "pkg" / "mod"
        folder.mkdir(parents=True)
        path = folder / "file.py"
        data = b"print('hello')\n" * 200
        path.write_bytes(data)
        ctx = ToolContext(
            workdir=workdir,
            signal=AbortController().signal,
            storage_root=workdir / ".lite_agent",
        )

        def confined_read() -> bytes:
            with open_path(ctx, "src/pkg/mod/file.py") as target:
                fd = target.open_regular()
            assert fd is not None
            with os.fdopen(fd, "rb") as f:
                return f.read()

        def raw_read() -> bytes:
            with open(path, "rb") as f:
                return f.read()

        def confined_write() -> None:
            with open_path(ctx, "src/pkg/mod/file.py") as target:
                target.write(data)

        def raw_write() -> None:
            atomic_write(path, data, mode=default_file_mode(), keep_mode=True)

        return {
            "read": median_pair(confined_read, raw_read, rounds),
            "atomic write": median_pair(confined_write, raw_write, rounds),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1000)
    args = parser.parse_args()

    added, without = asyncio.run(redaction(args.rounds))
    ratio = (without + added) / without
    print(
        f"redaction, 30,000-char tool result: handling {without * 1e6:.0f} us without secrets, "
        f"{added * 1e6:+.1f} us with 3 (median of paired differences) -> ratio {ratio:.3f} "
        f"(target <= 1.05) {'OK' if ratio <= 1.05 else 'MISSED'}"
    )
    worst = 0.0
    for name, (extra, raw) in confinement(args.rounds).items():
        added = extra * 1e6
        worst = max(worst, added)
        print(
            f"confinement, {name}: {raw * 1e6:.1f} us unchecked, {added:+.1f} us confined "
            f"(median of paired differences; ratio {(raw + extra) / raw:.2f}; target <= +50 us) "
            f"{'OK' if added <= 50 else 'MISSED'}"
        )
    sys.exit(0 if ratio <= 1.05 and worst <= 50 else 1)


if __name__ == "__main__":
    main()
