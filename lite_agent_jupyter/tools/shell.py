"""The built-in shell tool: ``bash``, in the foreground or as a background job.

A command runs as ``/bin/bash -c COMMAND`` in the workdir, in a new session (so in its own
process group), stdin from ``/dev/null``, stdout and stderr merged into one bounded buffer
(the head and the tail are kept; the middle of a huge output is dropped with a marker).

No orphans: whatever way a command ends - it exits, it times out, the abort signal fires,
or the task running it is cancelled - the whole process group is stopped (SIGTERM, then
SIGKILL after a grace period). Processes a foreground command leaves running in the
background (``server &``) are stopped too, and the result says so; long-running work belongs
in ``background=True``. A command that deliberately leaves its group (``setsid``) escapes
this, as it would escape any tool.

Security: the agent's own API credentials (``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``)
are removed from the child's environment, so a command cannot print or send them.

Files a command creates, changes or deletes are rewound by checkpoint restore too: the agent
scans the workdir before and after each call of this tool (it is of kind ``"shell"``) and
records the changes (``agent/tracking.py``); a background job is scanned when it ends, through
``ctx.track_files``. The result lists what was recorded and what is not tracked.

This module knows nothing of the agent loop; background jobs go through
``ctx.start_background``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal as signals
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from ..abort import AbortSignal
from ..errors import ToolError
from .base import BackgroundOutcome, ToolContext
from .decorator import tool
from .paths import workdir_of

__all__ = ["SECRET_ENV_VARS", "bash", "run_command", "shell_env"]

SHELL = "/bin/bash"
DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 600
MAX_OUTPUT_CHARS = 30_000
KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL."""
SECRET_ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def shell_env() -> dict[str, str]:
    """The environment of a command: this process's, minus the agent's credentials."""
    return {k: v for k, v in os.environ.items() if k not in SECRET_ENV_VARS}


# ------------------------------------------------------------------------- process groups


def _group_alive(pgid: int) -> bool:
    """True while a live (non-zombie) process is in group ``pgid``.

    ``killpg(pgid, 0)`` also succeeds for zombies, and where PID 1 does not reap orphans
    (containers) zombies linger; on Linux, /proc tells the states apart.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc/self"):
        return True
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                return True
    return False


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _stop_group(pgid: int) -> None:
    """SIGTERM the group, wait up to KILL_GRACE for it to go, then SIGKILL what is left.

    The SIGKILL is in a ``finally``: even if this coroutine is cancelled while waiting, the
    group does not outlive it.
    """
    loop = asyncio.get_running_loop()
    try:
        _signal_group(pgid, signals.SIGTERM)
        _signal_group(pgid, signals.SIGCONT)  # a stopped process cannot act on SIGTERM
        deadline = loop.time() + KILL_GRACE
        while _group_alive(pgid) and loop.time() < deadline:
            await asyncio.sleep(0.02)
    finally:
        if _group_alive(pgid):
            _signal_group(pgid, signals.SIGKILL)


# ------------------------------------------------------------------------------ the output


class _Output:
    """Collects a process's output keeping at most the first and last ``keep`` bytes."""

    def __init__(self, keep: int = MAX_OUTPUT_CHARS * 2) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.keep:
                del self.tail[: len(self.tail) - self.keep]

    def text(self, limit: int = MAX_OUTPUT_CHARS) -> str:
        """The output, at most ``limit`` characters: the head and the tail around a marker."""
        half = limit // 2
        if self.total == len(self.head) + len(self.tail):  # nothing dropped
            full = (self.head + self.tail).decode("utf-8", errors="replace")
            if len(full) <= limit:
                return full
            head, tail = full[:half], full[-half:]
        else:
            head = self.head.decode("utf-8", errors="replace")[:half]
            tail = self.tail.decode("utf-8", errors="replace")[-half:]
        return (
            f"{head}\n\n... [output truncated: {self.total} bytes in total, the middle was "
            f"omitted; redirect to a file and read parts of it to see more] ...\n\n{tail}"
        )


# ------------------------------------------------------------------------------ running


@dataclass(slots=True)
class CommandResult:
    """How a command ended."""

    output: str
    exit_code: int | None
    """``None`` if it timed out; negative: killed by that signal."""
    timed_out: bool = False
    stopped_leftovers: bool = False
    """Processes the command left running in its group were stopped."""

    def describe(self, timeout: float | None) -> str:
        body = self.output if self.output.strip() else "(no output)"
        if self.timed_out:
            status = f"[timed out after {timeout:g} s: the command and its children were killed]"
        elif self.exit_code is not None and self.exit_code < 0:
            status = f"[killed by signal {-self.exit_code}]"
        else:
            status = f"[exit code {self.exit_code}]"
        lines = [body.rstrip("\n"), status]
        if self.stopped_leftovers:
            lines.append(
                "(processes the command left running in the background were stopped; use "
                "background=true for long-running processes)"
            )
        return "\n".join(lines)


async def run_command(
    command: str, *, cwd: Path, signal: AbortSignal, timeout: float | None
) -> CommandResult:
    """Run ``command`` with bash in ``cwd`` until it ends, times out or ``signal`` fires.

    On abort (or cancellation of the calling task) the process group is stopped and
    ``asyncio.CancelledError`` is raised.
    """
    loop = asyncio.get_running_loop()
    aborted = asyncio.Event()

    def on_abort(_reason: str) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing left to stop
            loop.call_soon_threadsafe(aborted.set)

    signal.raise_if_aborted()
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            SHELL,
            "-c",
            command,
            cwd=cwd,
            env=shell_env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    )
    try:
        proc = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        # Cancelled while asyncio was still wiring the pipes: the command may already run
        # (and have started children); asyncio would kill only the shell. Stop the group.
        started = await spawn
        await _stop_group(started.pid)
        raise
    pgid = proc.pid  # a new session's leader: its pid is the group id
    output = _Output()
    assert proc.stdout is not None
    stdout = proc.stdout

    async def pump() -> None:
        while chunk := await stdout.read(65536):
            output.feed(chunk)

    reader = asyncio.create_task(pump())
    exited = asyncio.create_task(_wait_exit(proc, reader))
    abort_wait = asyncio.create_task(aborted.wait())
    remove_callback = signal.add_callback(on_abort)
    try:
        await asyncio.wait({exited, abort_wait}, timeout=timeout, return_when="FIRST_COMPLETED")
        if not exited.done():
            await _stop_group(pgid)
            await asyncio.wait({exited}, timeout=KILL_GRACE)
            if aborted.is_set():
                raise asyncio.CancelledError(signal.reason or "aborted")
            timed_out, leftovers = True, False
        else:
            timed_out, leftovers = False, _group_alive(pgid)
            if leftovers:
                await _stop_group(pgid)
        # The group is gone, so the pipe's writers are closed; a process that left the group
        # (setsid) may still hold it: do not wait for that one.
        await asyncio.wait({reader}, timeout=1.0)
        return CommandResult(
            output=output.text(),
            exit_code=None if timed_out else proc.returncode,
            timed_out=timed_out,
            stopped_leftovers=leftovers,
        )
    finally:
        remove_callback()
        if proc.returncode is None or _group_alive(pgid):  # cancelled: leave nothing behind
            await _stop_group(pgid)
        for task in (reader, exited, abort_wait):
            task.cancel()
        await asyncio.gather(reader, exited, abort_wait, return_exceptions=True)


async def _wait_exit(proc: asyncio.subprocess.Process, reader: asyncio.Task[None]) -> None:
    """Return when the shell has exited.

    ``proc.wait()`` alone is not enough (Python 3.11): it also waits for the output pipe to
    close, which a child left running in the background keeps open. So: wait for the end of
    the output (the usual moment of exit) while polling the return code with a backoff.
    """
    delay = 0.005
    while proc.returncode is None:
        if reader.done():
            await proc.wait()
            return
        await asyncio.wait({reader}, timeout=delay)
        delay = min(delay * 2, 0.25)


# ------------------------------------------------------------------------------- the tool


@tool(kind="shell")
async def bash(
    ctx: ToolContext,
    command: Annotated[str, "The bash command line to run in the working directory."],
    timeout: Annotated[
        int | None,
        f"Seconds before the command is killed: default {DEFAULT_TIMEOUT}, at most "
        f"{MAX_TIMEOUT}. Background commands have no timeout unless one is given.",
    ] = None,
    background: Annotated[
        bool,
        "Run in the background (servers, long jobs): returns a job id at once; you are told "
        "the output and exit code when it finishes.",
    ] = False,
) -> str:
    """Run a shell command with /bin/bash in the working directory.

    stdout and stderr are returned together (long output keeps its beginning and end) with
    the exit code. stdin is empty: interactive commands get end-of-file. Processes a
    foreground command leaves running are stopped when it ends; use background=true for
    servers and other long-running work. Files the command creates, changes or deletes in
    the working directory are recorded, so the user's checkpoint restore rewinds them (except
    .git, virtualenvs, node_modules and very large files, which the result lists).
    """
    if not command.strip():
        raise ToolError("the command is empty")
    if timeout is not None and not 1 <= timeout <= MAX_TIMEOUT:
        raise ToolError(
            f"timeout must be between 1 and {MAX_TIMEOUT} seconds; for longer work use "
            "background=true"
        )
    cwd = workdir_of(ctx)
    if not background:
        limit = timeout if timeout is not None else DEFAULT_TIMEOUT
        result = await run_command(command, cwd=cwd, signal=ctx.signal, timeout=limit)
        if result.timed_out:
            raise ToolError(result.describe(limit))
        return result.describe(limit)

    if ctx.start_background is None:
        raise ToolError(
            "background commands are not available here; run the command in the foreground"
        )

    track = ctx.track_files

    async def job(job_signal: AbortSignal) -> BackgroundOutcome:
        result = await run_command(command, cwd=cwd, signal=job_signal, timeout=timeout)
        tracked = await track() if track is not None else ""
        summary = result.describe(timeout)
        return BackgroundOutcome(
            summary=f"{summary}\n{tracked}" if tracked else summary, exit_code=result.exit_code
        )

    short = command if len(command) <= 80 else command[:77] + "..."
    job_id = ctx.start_background(f"bash: {short}", job)
    return (
        f"started in the background as job {job_id}. You will be told its output and exit "
        "code when it finishes; do not wait for it."
    )
