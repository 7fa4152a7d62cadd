"""No API key (nor any value the user names secret) in a session file, a request to the model, a
displayed tool result or an error: the key is stripped and checked when the provider is built,
and one redaction point replaces every known secret before anything is stored or sent."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, invalid_request

from lite_agent_jupyter import (
    InvalidAPIKeyError,
    MissingAPIKeyError,
    ProviderError,
    Storage,
    create_lite_agent,
)
from lite_agent_jupyter.checkpoint import file_checkpointer
from lite_agent_jupyter.checkpoint.events import ToolResultEvent
from lite_agent_jupyter.providers import anthropic
from lite_agent_jupyter.redact import REDACTED, Redactor

DB_PASSWORD = "correct-horse-battery-staple-42"
CHILD = Path(__file__).with_name("agent_env_child.py")


def leaks(secret: str, storage: Storage, server: FakeAnthropicServer) -> list[str]:
    """Every place ``secret`` turns up: session files, blobs, and requests to the model."""
    found = [
        str(path)
        for path in storage.root.rglob("*")
        if path.is_file() and secret.encode() in path.read_bytes()
    ]
    found += [
        f"request {i}"
        for i, request in enumerate(server.requests)
        if secret in json.dumps(request.body)
    ]
    return found


async def test_a_command_reading_the_parents_environ_leaks_no_secret_anywhere(
    anthropic_env: FakeAnthropicServer, tmp_path: Path
) -> None:
    """A real agent process started with the key (plus a trailing newline, as read from a
    file) in its environment; its bash tool reads the agent's own /proc/<pid>/environ."""
    key = anthropic_env.api_key
    workdir = tmp_path / "work"
    workdir.mkdir()
    storage = Storage(tmp_path / "store", "test")
    command = "tr '\\0' '\\n' < /proc/$PPID/environ; echo db=$MY_DB_PASSWORD"
    anthropic_env.script(
        FakeReply("", tool_calls=[FakeToolCall("bash", {"command": command})]),
        FakeReply("", tool_calls=[FakeToolCall("write_file", {"path": "k.txt", "content": key})]),
        "Done.",
    )
    result_file = tmp_path / "result.json"
    config = {
        "workdir": str(workdir),
        "root": str(storage.root),
        "namespace": storage.namespace,
        "prompt": f"print the environment; my key is {key}",
        "result_file": str(result_file),
    }
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": key + "\n",
        "ANTHROPIC_BASE_URL": anthropic_env.url,
        "MY_DB_PASSWORD": DB_PASSWORD,
    }
    subprocess.run(
        [sys.executable, str(CHILD), json.dumps(config)], env=env, check=True, timeout=120
    )
    result = json.loads(result_file.read_text())
    store = file_checkpointer(storage.base / "sessions")
    events = await store.read(result["session_id"])
    await store.close()

    results = [e for e in events if isinstance(e, ToolResultEvent)]
    environ = str(results[0].content)
    assert f"ANTHROPIC_API_KEY={REDACTED}" in environ  # read from the parent, persisted, redacted
    assert f"db={REDACTED}" in environ
    assert "PATH=" in environ  # the rest of the output is untouched
    assert leaks(key, storage, anthropic_env) == []
    assert leaks(DB_PASSWORD, storage, anthropic_env) == []
    shown = result["shown"]
    assert len(shown) == 2 and all(key not in s and DB_PASSWORD not in s for s in shown)
    assert (workdir / "k.txt").read_text() == REDACTED  # the model only ever saw the mark


async def test_an_error_that_quotes_the_key_is_redacted_in_the_error_and_the_log(
    anthropic_env: FakeAnthropicServer, tmp_path: Path
) -> None:
    key = anthropic_env.api_key
    anthropic_env.script(invalid_request(f"a verbose proxy says: bad request for key {key}"))
    storage = Storage(tmp_path / "store", "test")
    async with create_lite_agent(
        model=anthropic(max_retries=0), workdir=tmp_path, storage=storage
    ) as agent:
        with pytest.raises(ProviderError) as caught:
            await agent.send("hello")
        assert key not in str(caught.value) and REDACTED in str(caught.value)
        events = await agent.checkpointer.read(agent.session_id)
    assert events[-1].type == "interrupted"
    assert REDACTED in json.dumps(dataclasses.asdict(events[-1]))
    assert leaks(key, storage, anthropic_env) == []


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("sk-ant-api03-abc def-ghi", "character 17 of 24 is whitespace"),
        ("sk-ant-api03-abc\ndef-ghi", "character 17 of 24 is whitespace"),
        ("sk-ant-api03-abc\x00def-ghi", "character 17 of 24 is a control character"),
        ("sk-ant-api03-abcédef-ghi", "character 17 of 24 is a non-ASCII character"),
    ],
)
def test_a_malformed_key_is_a_clear_error_that_never_shows_it(
    value: str, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(InvalidAPIKeyError) as given:
        anthropic(api_key=value)
    checked = [(given, "api_key=")]
    if "\0" not in value:  # an environment cannot hold a NUL
        monkeypatch.setenv("ANTHROPIC_API_KEY", f"  {value}\n")
        with pytest.raises(InvalidAPIKeyError) as from_env:
            anthropic()
        checked.append((from_env, "ANTHROPIC_API_KEY"))
    for caught, source in checked:
        message = str(caught.value)
        assert why in message and source in message
        assert "abc" not in message and "ghi" not in message


def test_a_blank_key_is_a_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(MissingAPIKeyError):
        anthropic(api_key=" \n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "  sk-ant-fine  \n")
    provider = anthropic()
    assert "sk-ant-fine" in provider.secret_values()
    assert "sk-ant-fine" not in repr(provider)


def test_the_redactor_replaces_nested_values_and_keeps_clean_objects_as_they_are() -> None:
    redactor = Redactor(["secret-value-1", "x", "secret-value-1-longer"])
    assert repr(redactor) == "Redactor(2 secrets)"  # "x" is too short to redact
    clean = {"a": ["b", ("c", 1)], "n": None}
    assert redactor.value(clean) is clean
    big = "y" * 5000
    assert redactor.text(big) is big and redactor.text(big) is big
    dirty = {"k secret-value-1": ["ok", ("secret-value-1-longer!", 2)]}
    assert redactor.value(dirty) == {f"k {REDACTED}": ["ok", (f"{REDACTED}!", 2)]}
    event = ToolResultEvent(tool_use_id="t", content=[{"type": "text", "text": "secret-value-1"}])
    redacted = redactor.event(event)
    assert redacted.content == [{"type": "text", "text": REDACTED}]
    assert event.content == [{"type": "text", "text": "secret-value-1"}]  # never mutated
    same = ToolResultEvent(tool_use_id="t", content="nothing here")
    assert redactor.event(same) is same
    assert not Redactor() and Redactor().value(dirty) is dirty
