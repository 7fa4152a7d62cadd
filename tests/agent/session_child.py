"""A child process for the session-lifecycle tests (issue #8 defects 4 and 5): one ``send``
on a given session and store, talked to by lines (the kit's ``Child`` protocol).

    python session_child.py CONFIG_JSON

CONFIG_JSON: {"base_url", "api_key", "workdir", "root", "namespace", "url" (a checkpointer
URL, or "" for the default file store), "session_id", "prompt"}. Prints "ready", then (when
the turn asks) "asked TOOL" and waits for a line: "yes" approves. Ends with one line:
"result ok TEXT" or "result ERROR_TYPE MESSAGE".
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from lite_agent_jupyter import AbortSignal, ApprovalRequest, Storage, create_lite_agent
from lite_agent_jupyter.checkpoint.url import checkpointer_from_url
from lite_agent_jupyter.providers import anthropic


def say(line: str) -> None:
    sys.stdout.write(line.replace("\n", " ") + "\n")
    sys.stdout.flush()


async def on_approval(request: ApprovalRequest, signal: AbortSignal) -> bool:
    say(f"asked {request.tool_name}")
    answer: str = await asyncio.to_thread(sys.stdin.readline)
    return answer.strip() == "yes"


async def main(config: dict[str, Any]) -> None:
    url = config["url"]
    agent = create_lite_agent(
        model=anthropic(api_key=config["api_key"], base_url=config["base_url"], max_retries=0),
        workdir=config["workdir"],
        storage=Storage(config["root"], config["namespace"]),
        checkpointer=checkpointer_from_url(url) if url else None,
        session_id=config["session_id"],
        on_approval=on_approval,
    )
    async with agent:
        say("ready")
        try:
            result = await agent.send(config["prompt"])
        except Exception as exc:
            say(f"result {type(exc).__name__} {exc}")
        else:
            say(f"result ok {result.text}")


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
