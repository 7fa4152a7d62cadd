"""A child process for the redaction test: an agent whose API key comes from its own initial
environment (so ``/proc/<pid>/environ`` really holds it), run once.

argv[1] is JSON ``{"workdir", "root", "namespace", "prompt", "result_file"}``; the displayed
tool outputs and the session id go to ``result_file`` as JSON."""

from __future__ import annotations

import asyncio
import json
import sys

from lite_agent_jupyter import Storage, ToolCallFinished, create_lite_agent
from lite_agent_jupyter.providers import anthropic


async def main(config: dict[str, str]) -> None:
    shown: list[str] = []
    async with create_lite_agent(
        model=anthropic(max_retries=0),
        workdir=config["workdir"],
        storage=Storage(config["root"], config["namespace"]),
        approvals="allow",
        secret_env=["MY_DB_PASSWORD"],
    ) as agent:
        async for event in agent.run(config["prompt"]):
            if isinstance(event, ToolCallFinished):
                shown.append(event.output)
        result = {"session_id": agent.session_id, "shown": shown}
    with open(config["result_file"], "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
