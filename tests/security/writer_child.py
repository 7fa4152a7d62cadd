"""A child process for the leftover tests: writes ``CONTENT`` to ``PATH`` with the write_file
tool in ``WORKDIR``. With ``--stall``, its fsync announces itself on stdout and then sleeps,
so the parent can look at the temp file mid-write and SIGKILL the writer there."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from lite_agent_jupyter.abort import AbortController
from lite_agent_jupyter.tools import ToolContext, invoke_tool, write_file


def main() -> None:
    workdir, path, content = sys.argv[1:4]
    if "--stall" in sys.argv:
        real_fsync = os.fsync

        def stalled_fsync(fd: int) -> None:
            print("stalled", flush=True)
            time.sleep(600)
            real_fsync(fd)

        os.fsync = stalled_fsync
    os.umask(0)
    ctx = ToolContext(workdir=Path(workdir), signal=AbortController().signal)
    print(asyncio.run(invoke_tool(write_file, {"path": path, "content": content}, ctx)))


if __name__ == "__main__":
    main()
