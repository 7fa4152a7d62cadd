"""The session browser, clicked without a browser: Resume, New, Delete, Confirm delete, paging,
busy and inline errors, on the kernel's own runner and facade (``AgentRunner.facade``, what
``%agent sessions`` hands the widget) over a real agent (the official client and the fake
Messages API server), the real file backend and real files. Assertions read the agent's
current session, the files on disk and the logs."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply
from kernel_agent import held_turn, log_path, logged_prompts, send

from lite_agent_jupyter import SessionBusyError, Storage
from lite_agent_jupyter.checkpoint.protocol import SessionInfo
from lite_agent_jupyter.jupyter import render
from lite_agent_jupyter.jupyter.runner import AgentFacade, AgentRunner
from lite_agent_jupyter.jupyter.widgets import SessionBrowser, show_sessions


def make_sessions(runner: AgentRunner, prompts: list[str]) -> list[str]:
    ids = []
    for prompt in prompts:
        runner.facade.clear()
        send(runner, prompt)
        ids.append(runner.facade.session_id)
    return ids


def break_listing(storage: Storage) -> None:
    """Put a file where the sessions' folder was: listing the sessions fails with an
    OSError."""
    sessions = storage.base / "sessions"
    sessions.rename(sessions.with_name("moved"))
    sessions.write_text("not a folder")


def labels(browser: SessionBrowser) -> list[str]:
    """The rows' text as a user reads it (non-breaking spaces as spaces)."""
    return [label.replace("\u00a0", " ") for label, _ in browser.rows.options]


def test_rows_show_the_sessions_newest_first_with_the_current_one_marked(
    runner: AgentRunner, facade: AgentFacade
) -> None:
    ids = make_sessions(runner, ["first question", "second question", "third one"])
    send(runner, "a follow-up")
    browser = SessionBrowser(facade)
    texts = labels(browser)
    assert [value for _, value in browser.rows.options] == [ids[2], ids[1], ids[0]]
    assert texts[0].startswith(f"●  {ids[2][:8]}  just now")
    assert "third one" in texts[0] and " 2 prompts  " in texts[0]
    assert texts[1].startswith(f"   {ids[1][:8]}") and " 1 prompt  " in texts[1]
    assert browser.selected == ids[2]  # the current one is selected (highlighted)
    assert browser.resume_button.disabled  # no Resume of the current one
    assert "<b>Sessions</b> (3)" in browser.title.value
    summary = browser.summary()
    assert summary.splitlines()[1].startswith(f"*  {ids[2][:8]}")
    assert "first question" in summary and "older" not in summary


def test_resume_makes_the_row_current_and_the_next_turn_goes_there(
    runner: AgentRunner, facade: AgentFacade, storage: Storage
) -> None:
    ids = make_sessions(runner, ["alpha", "beta"])
    browser = SessionBrowser(facade)
    browser.select(ids[0])
    assert not browser.resume_button.disabled
    browser.resume_button.click()
    assert runner.agent().session_id == ids[0]
    assert labels(browser)[1].startswith(f"●  {ids[0][:8]}")
    assert browser.selected == ids[0] and browser.resume_button.disabled
    assert "Resumed session" in browser.report.status.value
    send(runner, "gamma")
    assert logged_prompts(storage, ids[0]) == ["alpha", "gamma"]
    assert logged_prompts(storage, ids[1]) == ["beta"]


def test_new_switches_to_an_empty_session_and_keeps_the_old_one(
    runner: AgentRunner, facade: AgentFacade, storage: Storage
) -> None:
    [old] = make_sessions(runner, ["alpha"])
    browser = SessionBrowser(facade)
    browser.new_button.click()
    new = runner.agent().session_id
    assert new != old
    assert "nothing sent yet" in browser.title.value
    assert all(not text.startswith("●") for text in labels(browser))
    assert browser.selected is None
    assert browser.resume_button.disabled and browser.delete_button.disabled
    assert "New session" in browser.report.status.value
    send(runner, "into the new one")
    assert logged_prompts(storage, new) == ["into the new one"]
    assert logged_prompts(storage, old) == ["alpha"]
    browser.refresh_button.click()
    assert labels(browser)[0].startswith(f"●  {new[:8]}")


def test_delete_needs_a_second_click_then_removes_the_log(
    runner: AgentRunner, facade: AgentFacade, storage: Storage
) -> None:
    keep, doomed = make_sessions(runner, ["keep me", "delete me"])
    facade.resume(keep)
    browser = SessionBrowser(facade)
    browser.select(doomed)
    delete = browser.delete_button
    delete.click()
    assert delete.description == "Confirm delete"
    assert log_path(storage, doomed).exists()
    assert "Confirm delete" in browser.report.status.value
    delete.click()
    assert not log_path(storage, doomed).exists()
    assert [s.id for s in facade.list_sessions()] == [keep]
    assert [value for _, value in browser.rows.options] == [keep]
    assert delete.description == "Delete"
    assert runner.agent().session_id == keep
    assert logged_prompts(storage, keep) == ["keep me"]


def test_any_other_action_cancels_a_pending_delete(
    runner: AgentRunner, facade: AgentFacade, storage: Storage
) -> None:
    first, second = make_sessions(runner, ["one", "two"])
    browser = SessionBrowser(facade)
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


def test_deleting_the_current_session_switches_to_a_new_one(
    runner: AgentRunner, facade: AgentFacade, storage: Storage
) -> None:
    [current] = make_sessions(runner, ["only"])
    browser = SessionBrowser(facade)
    browser.delete_button.click()
    browser.delete_button.click()
    assert not log_path(storage, current).exists()
    assert runner.agent().session_id != current
    assert browser.rows.options == ()
    assert browser.rows not in browser.widget.children  # no empty list box
    assert "no sessions yet" in browser.page_label.value
    send(runner, "afterwards")
    browser.refresh_button.click()
    assert browser.rows in browser.widget.children
    assert labels(browser)[0].startswith(f"●  {runner.agent().session_id[:8]}")


def assert_clicks_are_busy(
    browser: SessionBrowser, runner: AgentRunner, storage: Storage, other: str, busy: str
) -> None:
    """While the current session ``busy`` is busy: Resume of ``other``, New and Delete each
    answer "busy" and change nothing."""
    browser.select(other)
    browser.resume_button.click()
    assert "busy" in browser.report.status.value
    assert runner.agent().session_id == busy
    browser.new_button.click()
    assert "busy" in browser.report.status.value
    assert runner.agent().session_id == busy
    browser.select(busy)
    browser.delete_button.click()
    browser.delete_button.click()
    assert "busy" in browser.report.status.value
    assert log_path(storage, busy).exists()


def test_a_click_while_a_turn_runs_on_that_session_is_busy_and_changes_nothing(
    runner: AgentRunner,
    facade: AgentFacade,
    fake_anthropic: FakeAnthropicServer,
    storage: Storage,
) -> None:
    other, running = make_sessions(runner, ["other", "running"])
    browser = SessionBrowser(facade)
    with held_turn(runner, fake_anthropic, "a long question", requests=3) as turn:
        assert facade.is_busy(running)
        assert_clicks_are_busy(browser, runner, storage, other, running)
    assert turn.result(timeout=100).text == "slow answer"
    assert logged_prompts(storage, running) == ["running", "a long question"]
    browser.select(other)
    browser.resume_button.click()
    assert runner.agent().session_id == other


def test_a_click_while_a_compaction_runs_on_that_session_is_busy_and_changes_nothing(
    runner: AgentRunner,
    facade: AgentFacade,
    fake_anthropic: FakeAnthropicServer,
    storage: Storage,
) -> None:
    """``%agent compact`` (``facade.compact``) makes its session busy in the agent's table:
    a click or a rewind meanwhile answers "busy" at once instead of waiting for the lock."""
    other, compacting = make_sessions(runner, ["other", "compacting"])
    browser = SessionBrowser(facade)
    release = threading.Event()
    fake_anthropic.script(FakeReply("a held summary", hold=release, hold_after=2))
    seen = len(fake_anthropic.requests)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        compaction = pool.submit(facade.compact)
        try:
            fake_anthropic.wait_for_requests(seen + 2)  # its count, then its summary (held)
            assert facade.is_busy(compacting) and not facade.is_busy(other)
            assert_clicks_are_busy(browser, runner, storage, other, compacting)
            with pytest.raises(SessionBusyError):
                facade.call_idle(compacting, lambda a: a.restore(compacting, 0))
        finally:
            release.set()
        assert compaction.result(timeout=100).summary == "a held summary"
    assert not facade.is_busy()
    assert logged_prompts(storage, compacting) == ["compacting"]
    browser.select(other)
    browser.resume_button.click()
    assert runner.agent().session_id == other


def test_paging_through_many_sessions(runner: AgentRunner, facade: AgentFacade) -> None:
    """Pages are read one at a time, newest first; the total shows once the last page is
    reached; the current session, if on another page, is named in the title."""
    ids = make_sessions(runner, [f"prompt number {i}" for i in range(7)])
    facade.resume(ids[0])  # the oldest: on the last page
    browser = SessionBrowser(facade, page_size=3)
    assert browser.page == 0 and browser.page_label.value == "1–3 of 3+"
    assert [value for _, value in browser.rows.options] == [ids[6], ids[5], ids[4]]
    assert f"current: {ids[0][:8]} (not on this page)" in browser.title.value
    assert browser.prev_button.disabled and not browser.next_button.disabled
    browser.next_button.click()
    assert browser.page_label.value == "4–6 of 6+"
    assert [value for _, value in browser.rows.options] == [ids[3], ids[2], ids[1]]
    browser.next_button.click()
    assert browser.page_label.value == "7–7 of 7" and "<b>Sessions</b> (7)" in browser.title.value
    assert browser.next_button.disabled and not browser.prev_button.disabled
    assert browser.selected == ids[0]  # the current one, found on its page
    browser.prev_button.click()
    browser.prev_button.click()
    assert browser.prev_button.disabled
    assert "prompt number 6" in labels(browser)[0]
    browser.select(ids[0])  # selecting a row of another page turns to it
    assert browser.page == 2
    # the saved summary is one page, never the whole store
    browser.show_page(0)
    summary = browser.summary()
    assert "prompt number 6" in summary and "prompt number 3" not in summary
    assert "… and others" in summary and "not among these" in summary


def test_the_browser_asks_the_store_for_one_page_only(
    runner: AgentRunner, facade: AgentFacade, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every listing the browser makes is a page (``limit`` = page size + 1, ``before`` the
    previous page's last row), so 10,000 sessions cost it what 100 do (#24)."""
    ids = make_sessions(runner, [f"p{i}" for i in range(5)])
    calls: list[tuple[int | None, str | None]] = []
    agent = runner.agent()
    list_sessions = agent.list_sessions

    async def counting(
        *, limit: int | None = None, before: SessionInfo | None = None
    ) -> list[SessionInfo]:
        calls.append((limit, None if before is None else before.id))
        return await list_sessions(limit=limit, before=before)

    monkeypatch.setattr(agent, "list_sessions", counting)
    browser = SessionBrowser(facade, page_size=2)
    browser.next_button.click()
    browser.select(ids[0])
    browser.refresh_button.click()
    assert calls and all(limit == 3 for limit, _ in calls)
    assert calls[:2] == [(3, None), (3, ids[3])]
    assert browser.page == 2 and [v for _, v in browser.rows.options] == [ids[0]]


def test_an_error_shows_inline(runner: AgentRunner, facade: AgentFacade) -> None:
    make_sessions(runner, ["one"])
    browser = SessionBrowser(facade)
    facade.call(lambda agent: agent.close())
    browser.new_button.click()
    assert "New failed" in browser.report.status.value
    assert "AgentClosedError" in browser.report.status.value


def test_an_unexpected_error_shows_its_traceback_inline(
    runner: AgentRunner, facade: AgentFacade, storage: Storage
) -> None:
    make_sessions(runner, ["one"])
    browser = SessionBrowser(facade)
    break_listing(storage)
    browser.refresh_button.click()
    status = browser.report.status.value
    assert "Refresh failed" in status and "<summary>traceback</summary>" in status


def test_text_twin(runner: AgentRunner, facade: AgentFacade) -> None:
    ids = make_sessions(runner, ["hello there"])
    table = render.sessions_text(facade.list_sessions(), ids[0])
    assert table.splitlines()[1].startswith(f"*  {ids[0][:8]}")
    assert "hello there" in table
    facade.clear()
    assert "nothing sent yet" in render.sessions_text(facade.list_sessions(), facade.session_id)


def test_show_sessions_draws_the_frame_then_fills_it_and_prints_one_page(
    runner: AgentRunner, facade: AgentFacade, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = make_sessions(runner, [f"question {i}" for i in range(17)])
    capsys.readouterr()
    browser = show_sessions(facade)
    assert browser is not None and browser.selected == ids[-1]
    assert browser.rows in browser.widget.children and len(browser.rows.options) == 15
    printed = capsys.readouterr().out
    assert "question 16" in printed and "question 1\n" not in printed
    assert "… and others (`%agent sessions --text` lists all)" in printed  # one page read
    assert show_sessions(facade, text=True) is None
    assert "question 1\n" in capsys.readouterr().out  # --text: every session


def test_show_sessions_reports_a_failed_listing_in_the_cell(
    runner: AgentRunner, facade: AgentFacade, storage: Storage
) -> None:
    make_sessions(runner, ["one"])
    break_listing(storage)
    with pytest.raises(OSError):
        show_sessions(facade)


def test_resume_of_a_row_deleted_elsewhere_says_it_is_gone_and_does_nothing(
    runner: AgentRunner, facade: AgentFacade, storage: Storage
) -> None:
    """#18 defect 1: the browser was drawn, then another cell (or kernel) deleted a session;
    Resume on its row must not begin it again under the old id."""
    ids = make_sessions(runner, ["first question", "second question"])
    browser = SessionBrowser(facade)
    browser.rows.value = ids[0]
    facade.delete_session(ids[0])  # elsewhere, after the browser was drawn
    browser.resume_button.click()
    assert "is gone" in browser.report.status.value
    assert facade.session_id == ids[1]
    assert [value for _, value in browser.rows.options] == [ids[1]]  # the list is redrawn
    send(runner, "a follow-up")
    assert not log_path(storage, ids[0]).exists()
