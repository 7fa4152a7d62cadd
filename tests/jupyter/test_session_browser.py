"""The session browser, clicked without a browser: Resume, New, Delete, Confirm delete, paging,
busy and inline errors, against a real agent (the official client and the fake Messages API
server), the real file backend and real files."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply
from widget_controls import LoopThreadControls

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.jupyter.widgets import SessionBrowser, session_table
from lite_agent_jupyter.providers import anthropic


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage(tmp_path / "store", "nb")


@pytest.fixture
def controls(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path, storage: Storage
) -> Iterator[LoopThreadControls]:
    workdir = tmp_path / "project"
    workdir.mkdir()
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


def log_path(storage: Storage, session_id: str) -> Path:
    return storage.base / "sessions" / f"{session_id}.jsonl"


def make_sessions(controls: LoopThreadControls, prompts: list[str]) -> list[str]:
    ids = []
    for prompt in prompts:
        controls.clear()
        controls.send(prompt)
        ids.append(controls.session_id)
    return ids


def labels(browser: SessionBrowser) -> list[str]:
    """The rows' text as a user reads it (non-breaking spaces as spaces)."""
    return [label.replace("\u00a0", " ") for label, _ in browser.rows.options]


def test_rows_show_the_sessions_newest_first_with_the_current_one_marked(
    controls: LoopThreadControls,
) -> None:
    ids = make_sessions(controls, ["first question", "second question", "third one"])
    controls.send("a follow-up")
    browser = SessionBrowser(controls)
    texts = labels(browser)
    assert [value for _, value in browser.rows.options] == [ids[2], ids[1], ids[0]]
    assert texts[0].startswith(f"●  {ids[2][:8]}  just now")
    assert "third one" in texts[0] and " 2 prompts  " in texts[0]
    assert texts[1].startswith(f"   {ids[1][:8]}") and " 1 prompt  " in texts[1]
    assert browser.selected == ids[2]  # the current one is selected (highlighted)
    assert browser.resume_button.disabled  # no Resume of the current one
    summary = browser.summary()
    assert summary.startswith("Sessions (3, newest first")
    assert f"* {ids[2][:8]}" in summary and "first question" in summary


def test_resume_makes_the_row_current(controls: LoopThreadControls) -> None:
    ids = make_sessions(controls, ["alpha", "beta"])
    browser = SessionBrowser(controls)
    browser.select(ids[0])
    assert not browser.resume_button.disabled
    browser.resume_button.click()
    assert controls.session_id == ids[0]
    assert labels(browser)[1].startswith(f"●  {ids[0][:8]}")
    assert browser.selected == ids[0] and browser.resume_button.disabled
    assert "Resumed session" in browser.report.status.value
    # the next turn goes to the resumed session's log
    controls.send("gamma")
    assert "gamma" in log_path(controls.agent.storage, ids[0]).read_text()


def test_new_switches_to_an_empty_session_and_keeps_the_old_one(
    controls: LoopThreadControls,
) -> None:
    [old] = make_sessions(controls, ["alpha"])
    browser = SessionBrowser(controls)
    browser.new_button.click()
    assert controls.session_id != old
    assert log_path(controls.agent.storage, old).exists()
    assert "nothing sent yet" in browser.title.value
    assert all(not text.startswith("●") for text in labels(browser))
    assert browser.selected is None
    assert browser.resume_button.disabled and browser.delete_button.disabled
    assert "New session" in browser.report.status.value


def test_delete_needs_a_second_click_then_removes_the_log(
    controls: LoopThreadControls, storage: Storage
) -> None:
    keep, doomed = make_sessions(controls, ["keep me", "delete me"])
    controls.resume(keep)
    browser = SessionBrowser(controls)
    browser.select(doomed)
    delete = browser.delete_button
    delete.click()
    assert delete.description == "Confirm delete"
    assert log_path(storage, doomed).exists()
    assert "Confirm delete" in browser.report.status.value
    delete.click()
    assert not log_path(storage, doomed).exists()
    assert [s.id for s in controls.list_sessions()] == [keep]
    assert [value for _, value in browser.rows.options] == [keep]
    assert delete.description == "Delete"
    assert controls.session_id == keep


def test_any_other_action_cancels_a_pending_delete(
    controls: LoopThreadControls, storage: Storage
) -> None:
    first, second = make_sessions(controls, ["one", "two"])
    browser = SessionBrowser(controls)
    browser.select(first)
    browser.delete_button.click()
    browser.refresh_button.click()
    assert browser.delete_button.description == "Delete"
    browser.select(first)
    browser.delete_button.click()
    browser.select(second)  # another row: the question was about the first one
    assert browser.delete_button.description == "Delete"
    browser.delete_button.click()
    assert browser.delete_button.description == "Confirm delete"
    browser.select(first)
    browser.delete_button.click()
    assert log_path(storage, first).exists() and log_path(storage, second).exists()


def test_deleting_the_current_session(controls: LoopThreadControls, storage: Storage) -> None:
    [current] = make_sessions(controls, ["only"])
    browser = SessionBrowser(controls)
    browser.delete_button.click()
    browser.delete_button.click()
    assert not log_path(storage, current).exists()
    assert browser.rows.options == ()
    assert "no sessions yet" in browser.page_label.value


def test_a_click_while_a_turn_runs_on_that_session_is_busy_and_changes_nothing(
    controls: LoopThreadControls, fake_anthropic: FakeAnthropicServer, storage: Storage
) -> None:
    other, running = make_sessions(controls, ["other", "running"])
    browser = SessionBrowser(controls)
    release = threading.Event()
    fake_anthropic.script(FakeReply("slow answer", hold=release))
    turn = controls.start_send("a long question")
    try:
        fake_anthropic.wait_for_requests(3)
        browser.select(other)
        browser.resume_button.click()
        assert "busy" in browser.report.status.value
        assert controls.session_id == running
        browser.new_button.click()
        assert "busy" in browser.report.status.value
        assert controls.session_id == running
        browser.select(running)
        browser.delete_button.click()
        browser.delete_button.click()
        assert "busy" in browser.report.status.value
        assert log_path(storage, running).exists()
    finally:
        release.set()
    assert turn.result(timeout=30).text == "slow answer"
    browser.select(other)
    browser.resume_button.click()
    assert controls.session_id == other


def test_paging_through_many_sessions(controls: LoopThreadControls) -> None:
    ids = make_sessions(controls, [f"prompt number {i}" for i in range(7)])
    controls.resume(ids[0])  # the oldest: on the last page
    browser = SessionBrowser(controls, page_size=3)
    assert browser.pages == 3 and browser.page == 2
    assert browser.page_label.value == "7–7 of 7"
    assert browser.next_button.disabled and not browser.prev_button.disabled
    browser.prev_button.click()
    assert browser.page_label.value == "4–6 of 7"
    assert [value for _, value in browser.rows.options] == [ids[3], ids[2], ids[1]]
    browser.prev_button.click()
    assert browser.prev_button.disabled
    assert len(browser.rows.options) == 3
    assert "prompt number 6" in labels(browser)[0]
    browser.select(ids[0])  # selecting a row of another page turns to it
    assert browser.page == 2


def test_an_error_shows_inline(controls: LoopThreadControls) -> None:
    make_sessions(controls, ["one"])
    browser = SessionBrowser(controls)
    controls.call(controls.agent.close())
    browser.new_button.click()
    assert "New failed" in browser.report.status.value
    assert "AgentClosedError" in browser.report.status.value


def test_session_table_text_twin(controls: LoopThreadControls) -> None:
    ids = make_sessions(controls, ["hello there"])
    table = session_table(controls.list_sessions(), ids[0])
    assert table.splitlines()[1].startswith(f"* {ids[0][:8]}")
    assert "hello there" in table and "just now" in table
    controls.clear()
    assert "nothing sent yet" in session_table(controls.list_sessions(), controls.session_id)
