"""A child process for the agent tests: one ``send`` on a given session, then report.

    python agent_child.py CONFIG_JSON

CONFIG_JSON: {"base_url", "api_key", "workdir", "root", "namespace", "session_id", "prompt",
"result_file", "ready_file"?, "checkpointer"? (a URL), "task_list"?}. Writes {"text",
"checkpoint_seq"} or {"error": type name} to result_file. Used for "resume in a new
process", "two processes on one session" and "task lists in the database" tests.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from lite_agent_jupyter import Storage, checkpointer_from_url, create_lite_agent
from lite_agent_jupyter.providers import anthropic


async def main(config: dict[str, str]) -> None:
    url = config.get("checkpointer")
    checkpointer = checkpointer_from_url(url) if url else None
    agent = create_lite_agent(
        model=anthropic(api_key=config["api_key"], base_url=config["base_url"], max_retries=0),
        workdir=config["workdir"],
        storage=Storage(config["root"], config["namespace"]),
        session_id=config["session_id"],
        checkpointer=checkpointer,
        task_list=config.get("task_list"),
    )
    out = Path(config["result_file"])
    try:
        async with agent:
            if "ready_file" in config:
                Path(config["ready_file"]).write_text("ready")
            try:
                result = await agent.send(config["prompt"])
            except Exception as exc:
                out.write_text(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
                return
    finally:
        if checkpointer is not None:
            await checkpointer.close()
    out.write_text(json.dumps({"text": result.text, "checkpoint_seq": result.checkpoint_seq}))


if __name__ == "__main__":
    # Ctrl-C as a person's terminal sends it: a test run started in the background (a
    # non-interactive shell's `&`, as a CI script may be) passes SIGINT down ignored, and
    # Python then never turns it into KeyboardInterrupt, so the SIGINT test waited forever
    signal.signal(signal.SIGINT, signal.default_int_handler)
    asyncio.run(main(json.loads(sys.argv[1])))
