"""The checkpoint slider, clicked without a browser: preview, Restore, Undo restore, conflicts
and Restore anyway, files-only, busy, against a real agent (the official client and the fake
Messages API server), the real file backend, real files and the real restore."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from widget_controls import LoopThreadControls

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.jupyter.widgets import NOT_REWOUND, CheckpointSlider
from lite_agent_jupyter.providers import anthropic


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage(tmp_path / "store", "nb")


@pytest.fixture
def controls(
    fake_anthropic: FakeAnthropicServer, workdir: Path, storage: Storage
) -> Iterator[LoopThreadControls]:
    fake_anthropic.default = FakeReply("Done.")
    made = LoopThreadControls(
        lambda: create_lite_agent(
            model=anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url),
            workdir=workdir,
            storage=storage,
            approvals="allow",
        )
    )
    yield made
    made.close()


def write(server: FakeAnthropicServer, path: str, content: str) -> None:
    server.script(
        FakeReply(
            "On it.", tool_calls=[FakeToolCall("write_file", {"path": path, "content": content})]
        ),
        f"Wrote {path}.",
    )


def log_events(storage: Storage, session_id: str) -> list[dict[str, object]]:
    path = storage.base / "sessions" / f"{session_id}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def prompts(storage: Storage, session_id: str) -> list[object]:
    return [
        e["content"]
        for e in log_events(storage, session_id)
        if e["type"] == "user" and e.get("checkpoint")
    ]


@pytest.fixture
def three_prompts(
    controls: LoopThreadControls, fake_anthropic: FakeAnthropicServer, workdir: Path
) -> str:
    """notes.txt written (v1) then changed (v2), then other.txt written."""
    write(fake_anthropic, "notes.txt", "version one\n")
    controls.send("Write notes.txt with version one")
    write(fake_anthropic, "notes.txt", "version two\n")
    controls.send("Change notes.txt to version two")
    write(fake_anthropic, "other.txt", "other\n")
    controls.send("Add other.txt")
    return controls.session_id


def test_starts_on_the_newest_stop_with_its_preview(
    controls: LoopThreadControls, three_prompts: str
) -> None:
    slider = CheckpointSlider(controls)
    labels = [label for label, _ in slider.slider.options]
    assert labels == [
        "before: Write notes.txt with version one",
        "before: Change notes.txt to version two",
        "before: Add other.txt",
    ]
    assert slider.slider.value == 2 and not slider.restore_button.disabled
    assert slider.readout.value == "<b>before: Add other.txt</b>"
    assert "Before prompt 3" in slider.preview.value and "Add other.txt" in slider.preview.value
    assert "<code>other.txt</code>: delete" in slider.preview.value
    assert "notes.txt" not in slider.preview.value
    assert NOT_REWOUND in slider.widget.children[-1].value
    summary = slider.summary()
    assert "3 prompts" in summary and "%agent restore SEQ" in summary
    assert "Change notes.txt to version two" in summary


def test_moving_the_slider_previews_that_stop_with_diffs_on_demand(
    controls: LoopThreadControls, three_prompts: str
) -> None:
    slider = CheckpointSlider(controls)
    slider.slider.value = 1
    assert slider.readout.value == "<b>before: Change notes.txt to version two</b>"
    assert "Before prompt 2" in slider.preview.value
    assert "<code>notes.txt</code>: restore" in slider.preview.value
    assert slider.diffs.value == ""
    slider.diffs_button.value = True
    assert "-version two" in slider.diffs.value and "+version one" in slider.diffs.value
    slider.slider.value = 0
    assert "<code>notes.txt</code>: delete" in slider.preview.value
    slider.diffs_button.value = False
    assert slider.diffs.value == ""


def test_restore_then_undo_restore(
    controls: LoopThreadControls, three_prompts: str, workdir: Path, storage: Storage
) -> None:
    sid = three_prompts
    slider = CheckpointSlider(controls)
    slider.slider.value = 1
    slider.restore_button.click()
    assert (workdir / "notes.txt").read_text() == "version one\n"
    assert not (workdir / "other.txt").exists()
    assert prompts(storage, sid) == ["Write notes.txt with version one"]
    assert "Restored to before: Change notes.txt" in slider.result.value
    assert "Conversation rewound" in slider.result.value
    assert slider.undo_button.layout.display != "none"
    assert len(slider.slider.options) == 1  # the stops after it are gone with the conversation

    slider.undo_button.click()
    assert (workdir / "notes.txt").read_text() == "version two\n"
    assert (workdir / "other.txt").read_text() == "other\n"
    assert len(prompts(storage, sid)) == 3
    assert "Undid the last restore" in slider.result.value
    assert "Conversation put back" in slider.result.value
    assert slider.undo_button.layout.display == "none"
    assert len(slider.slider.options) == 3 and slider.slider.value == 2
    assert controls.session_id == sid


def test_files_only_keeps_the_conversation(
    controls: LoopThreadControls, three_prompts: str, workdir: Path, storage: Storage
) -> None:
    slider = CheckpointSlider(controls)
    slider.slider.value = 0
    slider.conversation_toggle.value = False
    slider.restore_button.click()
    assert not (workdir / "notes.txt").exists() and not (workdir / "other.txt").exists()
    assert len(prompts(storage, three_prompts)) == 3
    assert "Conversation kept" in slider.result.value


def test_a_file_edited_outside_the_agent_is_a_conflict_then_restore_anyway(
    controls: LoopThreadControls, three_prompts: str, workdir: Path, storage: Storage
) -> None:
    (workdir / "notes.txt").write_text("edited by hand\n")
    slider = CheckpointSlider(controls)
    slider.slider.value = 1
    assert "Edited outside the agent" in slider.preview.value
    slider.restore_button.click()
    assert (workdir / "notes.txt").read_text() == "edited by hand\n"
    assert (workdir / "other.txt").exists()
    assert len(prompts(storage, three_prompts)) == 3
    assert "Not restored" in slider.result.value and "<code>notes.txt</code>" in slider.result.value
    assert slider.force_button.layout.display != "none"
    slider.force_button.click()
    assert (workdir / "notes.txt").read_text() == "version one\n"
    assert not (workdir / "other.txt").exists()
    assert slider.force_button.layout.display == "none"
    slider.undo_button.click()  # the hand edit comes back too
    assert (workdir / "notes.txt").read_text() == "edited by hand\n"


def test_a_click_while_a_turn_runs_is_busy_and_changes_nothing(
    controls: LoopThreadControls,
    three_prompts: str,
    workdir: Path,
    storage: Storage,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    slider = CheckpointSlider(controls)
    slider.slider.value = 0
    release = threading.Event()
    fake_anthropic.script(FakeReply("slow answer", hold=release))
    turn = controls.start_send("a long question")
    try:
        fake_anthropic.wait_for_requests(7)
        slider.restore_button.click()
        assert "busy" in slider.report.status.value
        assert (workdir / "notes.txt").read_text() == "version two\n"
    finally:
        release.set()
    turn.result(timeout=30)
    assert len(prompts(storage, three_prompts)) == 4
    slider.restore_button.click()
    assert not (workdir / "notes.txt").exists()


def test_a_session_without_prompts(controls: LoopThreadControls) -> None:
    slider = CheckpointSlider(controls)
    assert slider.restore_button.disabled
    assert "No prompts" in slider.preview.value
    assert "(no prompts yet)" in slider.summary()
