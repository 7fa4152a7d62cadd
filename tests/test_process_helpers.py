"""The process helpers keep one test's failure from breaking the next (#30).

On a loaded machine a test timed out waiting for its child; the child, left running, was
reaped later by a closed event loop and its transport's finaliser failed inside the next
test. Here a real inner pytest run has a first test whose wait runs out and a second test
that starts as the first one's child exits: the second must pass, and no child may outlive
the run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from process_helpers import PROCESS_WAIT, process_alive

INNER = """
import asyncio, gc, sys, time
from pathlib import Path

import pytest

sys.path.insert(0, {tests!r})
from process_helpers import async_child, child_process

PIDS = Path({pids!r})


async def test_an_async_child_outwaited() -> None:
    async with async_child("sleep", "2", stderr=asyncio.subprocess.PIPE) as proc:
        PIDS.write_text(f"{{proc.pid}}\\n")
        await asyncio.wait_for(proc.communicate(), 0.2)


def test_a_child_outwaited() -> None:
    with child_process(["sleep", "60"], stdout=subprocess.PIPE) as proc:
        with PIDS.open("a") as f:
            f.write(f"{{proc.pid}}\\n")
        proc.wait(0.2)


@pytest.fixture
def after_the_children_would_have_ended() -> None:
    time.sleep(3)
    gc.collect()


async def test_the_next_one(after_the_children_would_have_ended: None) -> None:
    gc.collect()
    await asyncio.sleep(0)
"""


def test_a_child_outwaited_is_killed_and_the_next_test_runs(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    inner = tmp_path / "test_inner.py"
    tests = str(Path(__file__).parent)
    inner.write_text(
        "import subprocess\n" + INNER.format(tests=tests, pids=str(pids)), encoding="utf-8"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_mode=auto",
            "-W",
            "error::pytest.PytestUnraisableExceptionWarning",
            "--rootdir",
            str(tmp_path),
            str(inner),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=PROCESS_WAIT,
    )
    out = run.stdout + run.stderr
    assert "FAILED test_inner.py::test_an_async_child_outwaited - TimeoutError" in out, out
    assert "FAILED test_inner.py::test_a_child_outwaited - subprocess.TimeoutExpired" in out, out
    assert "2 failed, 1 passed" in out, out
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) == 2
    assert not any(process_alive(pid) for pid in started)
