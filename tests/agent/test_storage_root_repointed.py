"""A storage root reached through a symlink that is re-pointed while the agent runs (#18,
defect 10): the file tools keep out of the session logs wherever the link now leads."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lite_agent_jupyter import Storage
from lite_agent_jupyter.checkpoint.events import FileSnapshotEvent
from lite_agent_jupyter.providers.scripted import call, reply, scripted


def _results(model: Any) -> dict[str, tuple[bool, str]]:
    """The last request's tool results: tool name -> (is_error, content as JSON)."""
    asked, answered = model.requests[-1].messages[-2:]
    names = {b["id"]: b["name"] for b in asked["content"] if b["type"] == "tool_use"}
    return {
        names[b["tool_use_id"]]: (bool(b.get("is_error")), json.dumps(b["content"]))
        for b in answered["content"]
    }


async def test_a_re_pointed_storage_root_symlink_still_fences_the_session_logs(
    make_agent: Callable[..., Any], workdir: Path, tmp_path: Path
) -> None:
    first_place = tmp_path / "elsewhere"
    first_place.mkdir()
    link = tmp_path / "store-link"
    link.symlink_to(first_place)
    storage = Storage(link, "ns")
    moved_log: list[str] = []  # the session log's path in the workdir, once it is known
    model = scripted(
        [
            reply("", [call("list_files"), call("bash", command="true")]),
            "Listed.",
            lambda _request: reply(
                "",
                [
                    call("read_file", path=moved_log[0]),
                    call("grep", pattern="secret plan"),
                    call("list_files", pattern="moved/**"),
                    call("bash", command="echo hi > note.txt"),
                ],
            ),
            "Tried.",
            lambda _request: reply("", [call("write_file", path=moved_log[0], content="x")]),
            "Tried to write.",
        ]
    )
    agent = make_agent(model=model, storage=storage, approvals="allow")
    await agent.send("the secret plan")  # the tools have seen the root at its first place
    sid = agent.session_id
    log = Path(os.path.realpath(storage.sessions_dir)) / f"{sid}.jsonl"
    assert log.is_relative_to(first_place)

    # the store moves into the project and the link is re-pointed, while the agent runs
    shutil.move(first_place, workdir / "moved")
    new_link = tmp_path / "store-link.new"
    new_link.symlink_to(workdir / "moved")
    os.replace(new_link, link)
    moved_log.append(f"moved/ns/sessions/{sid}.jsonl")

    await agent.send("look around")
    results = _results(model)
    is_error, text = results["read_file"]
    assert is_error and "storage folder" in text, text
    assert results["grep"][1].startswith('"no matches for'), results["grep"]
    assert "sessions" not in results["list_files"][1]
    snapshots = [
        e.path for e in await agent.checkpointer.read(sid) if isinstance(e, FileSnapshotEvent)
    ]
    assert snapshots == ["note.txt"]  # the shell tracker keeps out of the moved store too
    before = (workdir / "moved" / "ns" / "sessions" / f"{sid}.jsonl").read_bytes()
    await agent.send("write")
    is_error, text = _results(model)["write_file"]
    assert is_error and "storage folder" in text, text
    log_now = (workdir / "moved" / "ns" / "sessions" / f"{sid}.jsonl").read_bytes()
    assert log_now.startswith(before) and b'"content": "x"' not in log_now[: len(before)]
