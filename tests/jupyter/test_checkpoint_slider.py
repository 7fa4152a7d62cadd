"""The checkpoint slider, clicked without a browser: preview, Restore, Undo restore, conflicts
and Restore anyway, files-only, busy, on the kernel's own runner and facade
(``AgentRunner.facade``, what ``%agent checkpoints`` hands the widget) over a real agent (the
official client and the fake Messages API server), the real file backend, real files and the
real restore. Assertions read the files on disk, the log and the agent's current session."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropicServer, tool_reply
from kernel_agent import held_turn, logged_prompts, send

from lite_agent_jupyter import Storage
from lite_agent_jupyter.errors import SessionBusyError
from lite_agent_jupyter.jupyter.runner import AgentFacade, AgentRunner
from lite_agent_jupyter.jupyter.widgets import NOT_REWOUND, SUMMARY_CHECKPOINTS, CheckpointSlider


def write(server: FakeAnthropicServer, path: str, content: str) -> None:
    server.script(
        tool_reply("On it.", "write_file", path=path, content=content),
        f"Wrote {path}.",
    )


@pytest.fixture
def three_prompts(runner: AgentRunner, fake_anthropic: FakeAnthropicServer, workdir: Path) -> str:
    """notes.txt written (v1) then changed (v2), then other.txt written."""
    write(fake_anthropic, "notes.txt", "version one\n")
    send(runner, "Write notes.txt with version one")
    write(fake_anthropic, "notes.txt", "version two\n")
    send(runner, "Change notes.txt to version two")
    write(fake_anthropic, "other.txt", "other\n")
    send(runner, "Add other.txt")
    return runner.agent().session_id


def test_starts_on_the_newest_stop_with_its_preview(
    facade: AgentFacade, three_prompts: str
) -> None:
    slider = CheckpointSlider(facade)
    labels = [label for label, _ in slider.slider.options]
    assert labels == [
        "before prompt 1: Write notes.txt with version one",
        "before prompt 2: Change notes.txt to version two",
        "before prompt 3: Add other.txt",
    ]
    assert slider.slider.value == 2 and not slider.restore_button.disabled
    assert slider.readout.value == "<b>before prompt 3: Add other.txt</b>"
    assert "Before prompt 3" in slider.preview.value and "Add other.txt" in slider.preview.value
    assert "<code>other.txt</code>: delete — " in slider.preview.value
    assert "delete — delete" not in slider.preview.value  # the action is not said twice
    assert "notes.txt" not in slider.preview.value
    assert NOT_REWOUND in slider.note.value
    summary = slider.summary()
    assert "(3 prompts)" in summary and "older" not in summary
    ids = [cp.id for cp in slider.checkpoints]
    assert ids[0].startswith("1-") and ids[2].startswith("3-")
    assert all(f"%agent restore {cp_id}" in summary for cp_id in ids)
    assert "Change notes.txt to version two" in summary


def test_moving_the_slider_previews_that_stop_with_diffs_on_demand(
    facade: AgentFacade, three_prompts: str
) -> None:
    slider = CheckpointSlider(facade)
    slider.slider.value = 1
    assert slider.readout.value == "<b>before prompt 2: Change notes.txt to version two</b>"
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
    facade: AgentFacade, three_prompts: str, workdir: Path, storage: Storage
) -> None:
    sid = three_prompts
    slider = CheckpointSlider(facade)
    slider.slider.value = 1
    slider.restore_button.click()
    assert (workdir / "notes.txt").read_text() == "version one\n"
    assert not (workdir / "other.txt").exists()
    assert logged_prompts(storage, sid) == ["Write notes.txt with version one"]
    assert "Restored to before prompt 2 (2-" in slider.result.value
    assert "Conversation rewound to before that prompt" in slider.result.value
    assert slider.report.status.value == "<span></span>"  # one account of it, not two
    assert slider.shows(slider.undo_button)
    assert len(slider.slider.options) == 1  # the stops after it are gone with the conversation
    # the slider now stands on prompt 1: a second click must not rewind again unasked
    assert slider.restore_button.disabled
    slider.restore_button.click()
    assert logged_prompts(storage, sid) == ["Write notes.txt with version one"]

    slider.undo_button.click()
    assert (workdir / "notes.txt").read_text() == "version two\n"
    assert (workdir / "other.txt").read_text() == "other\n"
    assert len(logged_prompts(storage, sid)) == 3
    assert "Undid the restore to before prompt 2</b>" in slider.result.value
    assert "Conversation as it was before that restore" in slider.result.value
    assert not slider.restore_button.disabled
    assert not slider.shows(slider.undo_button)
    assert len(slider.slider.options) == 3 and slider.slider.value == 2
    assert facade.session_id == sid


def test_files_only_keeps_the_conversation(
    facade: AgentFacade, three_prompts: str, workdir: Path, storage: Storage
) -> None:
    slider = CheckpointSlider(facade)
    slider.slider.value = 0
    slider.conversation_toggle.value = False
    slider.restore_button.click()
    assert not (workdir / "notes.txt").exists() and not (workdir / "other.txt").exists()
    assert len(logged_prompts(storage, three_prompts)) == 3
    assert "Conversation kept (the model is told its files were rewound)" in slider.result.value
    # on the new timeline (three prompts still) Restore waits until the slider moves
    assert slider.restore_button.disabled and slider.slider.value == 2
    slider.slider.value = 1
    assert not slider.restore_button.disabled
    slider.undo_button.click()
    assert (workdir / "notes.txt").read_text() == "version two\n"
    # the undo of a files-only restore does not claim a conversation was put back
    assert "Undid the files-only restore to before prompt 1</b>" in slider.result.value
    assert "Conversation as it was before that restore" in slider.result.value
    assert "rewound" not in slider.result.value


def test_undo_restore_after_a_revert_says_it_undid_the_revert(
    facade: AgentFacade, three_prompts: str, workdir: Path
) -> None:
    """The slider's Undo restore undoes the newest record: a revert made after its restore
    (by %agent revert or the review's Revert) is what it takes back, and it says so."""
    sid = three_prompts
    slider = CheckpointSlider(facade)
    slider.slider.value = 2
    slider.restore_button.click()  # prompt 3 (other.txt) rewound
    second = facade.list_checkpoints(sid)[1]
    facade.revert_file(sid, "notes.txt", checkpoint=second.seq)
    assert (workdir / "notes.txt").read_text() == "version one\n"
    slider.undo_button.click()
    assert (workdir / "notes.txt").read_text() == "version two\n"
    assert not (workdir / "other.txt").exists()  # the restore itself stands
    assert "Undid the revert of notes.txt (to before prompt 2)</b>" in slider.result.value
    assert "Conversation as it was before that revert" in slider.result.value
    assert "restore" not in slider.result.value.split("</b>")[0]


def test_a_file_edited_outside_the_agent_is_a_conflict_then_restore_anyway(
    facade: AgentFacade, three_prompts: str, workdir: Path, storage: Storage
) -> None:
    (workdir / "notes.txt").write_text("edited by hand\n")
    slider = CheckpointSlider(facade)
    slider.slider.value = 1
    assert "Edited outside the agent" in slider.preview.value
    slider.restore_button.click()
    assert (workdir / "notes.txt").read_text() == "edited by hand\n"
    assert (workdir / "other.txt").exists()
    assert len(logged_prompts(storage, three_prompts)) == 3
    assert "Not restored" in slider.result.value and "<code>notes.txt</code>" in slider.result.value
    assert slider.shows(slider.force_button)
    slider.force_button.click()
    assert (workdir / "notes.txt").read_text() == "version one\n"
    assert not (workdir / "other.txt").exists()
    assert not slider.shows(slider.force_button)
    slider.undo_button.click()  # the hand edit comes back too
    assert (workdir / "notes.txt").read_text() == "edited by hand\n"


def test_a_click_while_a_turn_runs_is_busy_and_changes_nothing(
    runner: AgentRunner,
    facade: AgentFacade,
    three_prompts: str,
    workdir: Path,
    storage: Storage,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    slider = CheckpointSlider(facade)
    slider.slider.value = 0
    with held_turn(runner, fake_anthropic, "a long question", requests=7) as turn:
        assert facade.is_busy(three_prompts)
        slider.restore_button.click()
        assert "busy" in slider.report.status.value
        assert (workdir / "notes.txt").read_text() == "version two\n"
        slider.undo_button.click()
        assert "busy" in slider.report.status.value
        # the agent's own answer, from this thread; what changes a session refuses on it
        assert runner.agent().busy(three_prompts) and runner.agent().busy()
        sid = three_prompts
        with pytest.raises(SessionBusyError):
            facade.call_idle(sid, lambda a: a.undo_restore(sid))
        with pytest.raises(SessionBusyError):
            facade.restore(sid, 0)  # the older spelling, kept for one release
    turn.result(timeout=100)
    assert not runner.agent().busy(three_prompts) and not facade.is_busy()
    assert len(logged_prompts(storage, three_prompts)) == 4
    slider.restore_button.click()
    assert not (workdir / "notes.txt").exists()


def test_a_session_without_prompts(facade: AgentFacade) -> None:
    slider = CheckpointSlider(facade)
    assert slider.restore_button.disabled
    assert "No prompts" in slider.preview.value
    assert "No checkpoints yet" in slider.summary()


def test_the_saved_summary_lists_the_newest_prompts_only(
    runner: AgentRunner, facade: AgentFacade
) -> None:
    for i in range(SUMMARY_CHECKPOINTS + 3):
        send(runner, f"question {i}")
    slider = CheckpointSlider(facade)
    assert len(slider.slider.options) == SUMMARY_CHECKPOINTS + 3
    summary = slider.summary()
    assert "… 3 older" in summary
    assert f"question {SUMMARY_CHECKPOINTS + 2}" in summary
    # the prompt column is padded, never at a line's end: "question 2" alone, not "question 2x"
    assert re.search(r"question 2\b", summary) is None
    assert "question 3" in summary


def test_restore_on_a_slider_whose_session_was_deleted_says_so_and_changes_nothing(
    runner: AgentRunner, facade: AgentFacade, three_prompts: str, workdir: Path
) -> None:
    """#18 defect 1: the session deleted (in the browser beside it) after the slider was
    drawn; Restore must not bring it back to life nor make it current."""
    slider = CheckpointSlider(facade)
    slider.slider.value = 0
    facade.delete_session(three_prompts)
    current = runner.agent().session_id
    assert current != three_prompts
    slider.restore_button.click()
    assert "was deleted" in slider.result.value and "Nothing was changed" in slider.result.value
    assert slider.restore_button.disabled
    assert runner.agent().session_id == current  # not made current again
    assert (workdir / "notes.txt").read_text() == "version two\n"
    assert three_prompts not in [s.id for s in facade.list_sessions()]
    assert runner.agent().checkpointer is not None
    send(runner, "a prompt in the current session")
    assert three_prompts not in [s.id for s in facade.list_sessions()]


def test_restore_on_a_stale_slider_redraws_it_and_changes_nothing(
    runner: AgentRunner,
    facade: AgentFacade,
    three_prompts: str,
    workdir: Path,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    """The session was restored elsewhere and went on with another prompt after the slider
    was drawn: the selected stop is gone, so the click redraws the slider instead of
    restoring to whatever that seq means now."""
    slider = CheckpointSlider(facade)
    slider.slider.value = 1  # before "Change notes.txt to version two"
    first = slider.checkpoints[0].seq
    facade.restore(three_prompts, first)  # another slider or %agent restore
    write(fake_anthropic, "notes.txt", "version three\n")
    send(runner, "Write notes.txt with version three")
    slider.restore_button.click()
    assert "changed since this slider was drawn" in slider.result.value
    assert (workdir / "notes.txt").read_text() == "version three\n"
    assert [c.prompt for c in slider.checkpoints] == ["Write notes.txt with version three"]
    slider.restore_button.click()  # now up to date: the click restores
    assert not (workdir / "notes.txt").exists()


def test_the_slider_shows_where_branches_fork(
    facade: AgentFacade,
    three_prompts: str,
    runner: AgentRunner,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    """After a restore to before prompt 2 the cut future is branch b1: the title names where
    it forks, the stop it forks at says so with the switch command, the summary too."""
    checkpoints = facade.list_checkpoints(three_prompts)
    facade.restore(three_prompts, checkpoints[1].seq)
    assert "after prompt 1 (the end): b1" in CheckpointSlider(facade).title.value
    write(fake_anthropic, "else.txt", "else\n")
    send(runner, "Something else")
    slider = CheckpointSlider(facade)
    assert "branches fork before prompt 2: b1" in slider.title.value
    # #30: in words: "⑂" is in no font most notebooks use (it drew a missing-glyph box)
    assert "⑂" not in slider.title.value + slider.preview.value + slider.summary()
    assert slider.slider.value == 1  # the newest stop now is before prompt 2: the fork
    assert "Branches fork here" in slider.preview.value
    assert "<code>%agent switch b1</code>" in slider.preview.value
    assert "Change notes.txt" in slider.preview.value
    slider.slider.value = 0  # before prompt 1: no fork there
    assert "Branches fork here" not in slider.preview.value
    assert "Branches fork before prompt 2: b1" in slider.summary()


def test_the_preview_and_summary_name_each_prompt_s_author(
    runner: AgentRunner,
    facade: AgentFacade,
    fake_anthropic: FakeAnthropicServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    write(fake_anthropic, "notes.txt", "by alice\n")
    send(runner, "Write notes.txt")
    monkeypatch.setenv("JUPYTERHUB_USER", "bob")
    write(fake_anthropic, "other.txt", "by bob\n")
    send(runner, "Add other.txt")
    slider = CheckpointSlider(facade)
    assert "prompt 2 by bob" in slider.preview.value
    slider.slider.value = 0
    assert "prompt 1 by alice" in slider.preview.value
    summary = slider.summary()
    assert re.search(r"Write notes\.txt\s+alice\s", summary), summary
    assert re.search(r"Add other\.txt\s+bob\s", summary), summary
