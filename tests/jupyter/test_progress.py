"""The clock and the checklist of a running cell (``jupyter/progress.py``), on given times:
when the clock starts, what it says, when it names the call that runs long."""

from __future__ import annotations

from lite_agent_jupyter.jupyter import progress
from lite_agent_jupyter.jupyter.progress import Progress


def test_the_clock_starts_after_a_second_of_a_call_and_ticks_each_second() -> None:
    clock = Progress(started=100.0)
    assert clock.wait(100.0, 0.25) == 0.25 and not clock.tick_due(100.5)  # no call: free
    clock.call_started("t1", "bash", "sleep 40", 101.0)
    assert clock.clock(101.5) is None  # under a second: nothing shown
    assert clock.wait(101.5, 0.25) == 0.25 and abs(clock.wait(101.9, 0.25) - 0.1) < 1e-9
    assert not clock.tick_due(101.9) and clock.tick_due(102.0)
    assert clock.clock(102.0) == "running 2.0 s · bash sleep 40: 1.0 s"
    assert not clock.tick_due(102.5) and clock.tick_due(103.0)  # once a second
    late = clock.clock(131.5)
    assert late is not None and late.startswith("running 32 s · bash sleep 40: 30 s")
    assert "bash sleep 40 is still running; Interrupt the kernel" in late
    assert clock.call_ended("t1", 132.0) == 31.0
    assert clock.tick_at is None and clock.clock(133.0) is None
    assert clock.wall(200.0) == "1 min 40 s"


def test_a_call_waiting_for_approval_starts_its_clock_when_answered() -> None:
    clock = Progress(started=0.0)
    clock.call_started("t1", "write_file", "a.txt", 1.0)
    clock.call_approved("t1", 20.0)
    assert clock.call_ended("t1", 20.5) == 0.5


def test_a_todo_write_input_becomes_a_checklist_or_nothing() -> None:
    good = {"todos": [{"content": "a <b>", "status": "in_progress"}]}
    assert progress.tasks_from(good) == [{"content": "a <b>", "status": "in_progress"}]
    assert progress.tasks_from({"todos": [{"content": "a", "status": "odd"}]}) is None
    assert progress.tasks_from({"todos": "x"}) is None
    html = progress.checklist_html([{"content": "a <b>", "status": "in_progress"}])
    assert "▶ <b>a &lt;b&gt;</b> <em>(in progress)</em>" in html
