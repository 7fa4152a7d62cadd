"""A child process that runs one restore and stops itself (SIGSTOP) halfway, for the parent to
SIGKILL: a real process killed mid-restore.

    python restore_child.py CONFIG_JSON

CONFIG_JSON: {"workdir", "root", "namespace", "session_id", "seq", "stop_after": "file" |
"log"}; with "branch": NAME, a switch to that branch instead of a restore; with "revert":
PATH, a revert of that file (after the last prompt; with "hunks": [N, ...], of those hunks
only). ``file``: stop after the first workdir file was replaced (the other files and the log
not yet); ``log``: stop right after the log was truncated (before the journal is cleared; a
switch has not appended the branch yet); ``branch``: stop just before the log is truncated,
once the file of the branch the restore keeps is written (it is written while the log
changes; waited for up to a minute). The stop is this test program wrapping the
functions the restore calls; the library has no hook.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import threading
from typing import Any

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.atomic import PreparedWrite
from lite_agent_jupyter.providers import scripted

BLOB = re.compile(r"[0-9a-f]{62}")
"""A blob's file name in the file blob store (its hash after the 2-character folder)."""


def stop() -> None:
    os.kill(os.getpid(), signal.SIGSTOP)


async def main(config: dict[str, Any]) -> None:
    agent = create_lite_agent(
        model=scripted([]),
        workdir=config["workdir"],
        storage=Storage(config["root"], config["namespace"]),
    )
    if config["stop_after"] == "file":
        real_commit = PreparedWrite.commit
        first = threading.Lock()

        def commit_then_stop(self: PreparedWrite) -> os.stat_result:
            if self.name.endswith(".journal.json") or BLOB.fullmatch(self.name):
                return real_commit(self)  # bookkeeping and blobs: not a workdir file
            if not first.acquire(blocking=False):  # files are replaced at once: only the
                threading.Event().wait()  # first one is, the others wait for the SIGKILL
            st = real_commit(self)
            stop()
            return st

        PreparedWrite.commit = commit_then_stop  # type: ignore[method-assign]
    elif config["stop_after"] == "branch":
        archive = agent.storage.base / "archive"

        async def stop_before_truncate(session_id: str, to_seq: int, **kw: Any) -> None:
            for _ in range(600):  # the branch file is written in a thread meanwhile
                if any(archive.glob(f"{session_id}.branch-*.json")):
                    break
                await asyncio.sleep(0.1)
            stop()

        agent.checkpointer.truncate = stop_before_truncate  # type: ignore[method-assign]
    else:
        checkpointer = agent.checkpointer
        real_truncate = checkpointer.truncate

        async def truncate_then_stop(session_id: str, to_seq: int, **kw: Any) -> None:
            await real_truncate(session_id, to_seq, **kw)
            stop()

        checkpointer.truncate = truncate_then_stop  # type: ignore[method-assign]
    async with agent:
        if "branch" in config:  # a branch switch (same journal, same stops)
            await agent.switch_branch(config["session_id"], config["branch"])
        elif "revert" in config:  # one file reverted (same journal; "file" stop only)
            await agent.revert_file(
                config["session_id"], config["revert"], hunks=config.get("hunks")
            )
        else:
            await agent.restore(config["session_id"], config["seq"])
    sys.exit("the restore finished without being stopped")


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
