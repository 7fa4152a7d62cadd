"""A child process of the kit's multi-process checks (``python -m`` this module).

    append OPENER LOCATION SESSION WRITER BATCHES [cas]
        print "ready", wait for a line on stdin, append BATCHES batches (1-3 events each,
        payload {"writer", "i", "j"}); with ``cas`` by optimistic concurrency (read the head,
        append with expected_head, retry on conflict); print "done CONFLICTS".
    ack OPENER LOCATION SESSION
        append batches of 4 large events forever, printing "ack I HEAD" after each one is
        acknowledged; the parent kills it with SIGKILL.
    stale OPENER LOCATION SESSION
        append 3 events, print "wrote HEAD", wait for a line, append one more with
        expected_head=HEAD; print "result ok" or "result ERROR-TYPE".
    claim OPENER LOCATION SESSION
        hold the session's turn claim, print "claimed", wait for a line ("release"), let go,
        print "released" (or be killed while holding it).

Every line is flushed at once: the parent waits for lines, never sleeps.
"""

from __future__ import annotations

import asyncio
import sys

from ..checkpoint.events import UserEvent
from ..checkpoint.protocol import SupportsTurnClaims
from ..errors import CheckpointConflictError
from ._kit import opener


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def append_mode(
    spec: str, location: str, session: str, writer: int, batches: int, cas: bool
) -> None:
    store = opener(spec)(location)
    await store.head(session)  # open connections before the start line
    say("ready")
    sys.stdin.readline()
    conflicts = 0
    for i in range(batches):
        events = [
            UserEvent(content=f"w{writer} i{i} j{j}", extra={"writer": writer, "i": i, "j": j})
            for j in range(1 + (writer + i) % 3)
        ]
        if not cas:
            await store.append(session, events)
            continue
        while True:
            head = await store.head(session)
            try:
                await store.append(session, events, expected_head=head)
                break
            except CheckpointConflictError:
                conflicts += 1
    await store.close()
    say(f"done {conflicts}")


async def ack_mode(spec: str, location: str, session: str) -> None:
    store = opener(spec)(location)
    filler = "x" * 48_000
    i = 0
    while True:
        events = [UserEvent(content=filler, extra={"i": i, "j": j}) for j in range(4)]
        head = await store.append(session, events)
        say(f"ack {i} {head}")
        i += 1


async def stale_mode(spec: str, location: str, session: str) -> None:
    store = opener(spec)(location)
    head = await store.append(session, [UserEvent(content=f"event {i}") for i in range(3)])
    say(f"wrote {head}")
    await asyncio.to_thread(sys.stdin.readline)
    try:
        await store.append(session, [UserEvent(content="too late")], expected_head=head)
    except Exception as exc:
        say(f"result {type(exc).__name__}")
    else:
        say("result ok")
    await store.close()


async def claim_mode(spec: str, location: str, session: str) -> None:
    store = opener(spec)(location)
    if not isinstance(store, SupportsTurnClaims):
        raise SystemExit("the backend offers no turn claims")
    async with store.claim_turn(session):
        say("claimed")
        await asyncio.to_thread(sys.stdin.readline)
    say("released")
    await store.close()


def main(argv: list[str]) -> None:
    mode, spec, location, session, *rest = argv
    if mode == "append":
        cas = rest[2:] == ["cas"]
        asyncio.run(append_mode(spec, location, session, int(rest[0]), int(rest[1]), cas))
    elif mode == "ack":
        asyncio.run(ack_mode(spec, location, session))
    elif mode == "stale":
        asyncio.run(stale_mode(spec, location, session))
    elif mode == "claim":
        asyncio.run(claim_mode(spec, location, session))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])
