"""Tools that act on the kernel, when the person lets them (``kernel_tools = True``).

- ``run_cell``: code run in the notebook's namespace on the kernel's main thread while the
  ``%%agent`` cell waits (``AgentRunner.on_main``); asks approval under the default policy
  (kind ``shell``, so the files it changes are snapshotted); returns what it printed, its
  result, displays (images as image blocks), traceback, and the variables it created,
  rebound, deleted or changed in place (``kernel_state.py`` snapshots them first, for
  restore). A kernel interrupt stops it like any cell. What else the code raises, even
  ``SystemExit`` or a ``KeyboardInterrupt`` of its own, is its error: the model reads it and
  the turn goes on. The code cannot start a cell inside it (``%%agent`` or
  ``get_ipython().run_cell``): :class:`~..errors.ReentrantCellError`.
- ``propose_cell``: code into a new cell below the ``%%agent`` cell (IPython's
  ``set_next_input``), for the person to read and run; nothing is run. The cell's first line
  names the prompt (its checkpoint id, what ``%agent restore`` takes) and the session it came
  from, so a saved notebook tells proposed code from typed code and where it came from.

Why a proposal too: a restore rewinds what ``run_cell`` changed, within its caps and never
what cannot be pickled (``kernel_state.py``), so code with effects a snapshot cannot hold
(files opened, connections, sessions) is better passed through the person's hands.
``set_next_input`` only appends a payload to the running cell's reply (a list append), which
is safe from the loop thread: the front end creates the cell when the ``%%agent`` cell ends.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ReentrantCellError, ToolError
from ..tools import tool
from ..tools.base import ToolContext  # the tools' annotations are read at run time
from .kernel_state import (
    DEFAULT_LIMIT,
    KernelChanges,
    approval_preview,
    changes,
    foreseen_cannot,
    take_before,
)

if TYPE_CHECKING:
    from ..tools import Tool


@dataclass(slots=True)
class MainCall:
    """Put in a turn's stream when a tool must run on the kernel's main thread (``run_cell``:
    the notebook's namespace is the main thread's alone); the cell's driver runs ``fn`` and
    answers ``reply`` with its result."""

    fn: Callable[[], Any]
    reply: Callable[[Any], None]


async def on_main(runner: Any, session_id: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on the thread reading ``session_id``'s turn (the kernel's main thread, where
    the ``%%agent`` cell waits) and return its result; ``None`` if no cell reads it."""
    ask = runner.asker(session_id)
    if ask is None:
        return None
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[Any] = loop.create_future()

    def reply(value: Any) -> None:
        def settle() -> None:
            if not answer.done():
                answer.set_result(value)

        loop.call_soon_threadsafe(settle)

    ask(MainCall(fn, reply))
    return await answer


def kernel_tools(
    shell: Any,
    runner: Any,
    changed: Callable[[list[str]], None] | None = None,
    limits: Callable[[], tuple[int, int]] | None = None,
) -> list[Tool]:
    """``propose_cell`` and ``run_cell`` for ``shell`` (``kernel_tools = True``);
    ``changed(names)`` hears the variables each ``run_cell`` created, rebound, deleted or
    changed in place (on the main thread: the stale cells of ``stale.py``); ``limits()``:
    the snapshot caps (per call, per value) at the time of a call."""
    from .outputs import bundle_images

    def main(session_id: str, fn: Callable[[], Any]) -> Any:
        return on_main(runner, session_id, fn)

    return [propose_cell_tool(shell), run_cell_tool(shell, main, bundle_images, changed, limits)]


def propose_cell_tool(shell: Any) -> Tool:
    """The ``propose_cell`` tool over ``shell`` (an IPython shell with ``set_next_input``)."""
    from . import render

    async def propose_cell(ctx: ToolContext, code: str) -> str:
        """Put Python code into a new notebook cell below the current one, for the user to
        review and run themselves. The code is NOT run. Use it for code that changes the
        user's variables or does something they should see first.

        Args:
            code: The cell's code.
        """
        if not code.strip():
            raise ToolError("code is empty")
        session = render.short_id(ctx.session_id) if ctx.session_id else "memory only"
        newest = ctx.checkpoint_id  # the running prompt's id (agent/loop.py)
        checkpoint = await newest() if newest is not None else None
        at = f" at prompt {checkpoint}" if checkpoint else ""
        tag = f"# proposed by the agent{at} (session {session}); not run yet\n"
        shell.set_next_input(tag + code.rstrip() + "\n", replace=False)
        return "The code is in a new cell below the %%agent cell; the user decides to run it."

    return tool(propose_cell, kind="read")


def run_cell_tool(
    shell: Any,
    on_main: Any,
    images: Any,
    changed: Callable[[list[str]], None] | None = None,
    limits: Callable[[], tuple[int, int]] | None = None,
) -> Tool:
    """The ``run_cell`` tool: ``on_main(session_id, fn)`` runs ``fn`` on the kernel's main
    thread while the ``%%agent`` cell waits (the loop thread never touches the namespace);
    ``images(bundle_list)`` turns captured displays into content blocks. The variables the
    code may touch are snapshotted first and what it changed is recorded for time travel
    (``kernel_state.py``)."""

    async def run_cell(ctx: ToolContext, code: str) -> str | list[dict[str, Any]]:
        """Run Python code in the user's notebook kernel, in its namespace (like a cell).
        Returns what it printed, its result, its displays (images as images) or its
        traceback, and the variables it created, rebound, deleted or changed in place.
        A checkpoint restore puts changed variables back (those named "cannot be rewound"
        excepted).

        Args:
            code: The Python code to run.
        """
        if not code.strip():
            raise ToolError("code is empty")
        limit, value_limit = limits() if limits is not None else (DEFAULT_LIMIT, None)
        answer = await on_main(
            ctx.session_id, lambda: _run(shell, code, images, changed, limit, value_limit)
        )
        if answer is None:
            raise ToolError("no %%agent cell is waiting to run the code in the kernel")
        result, report = answer
        put, record = ctx.put_state_blob, ctx.record_state
        if put is not None and record is not None and ctx.session_id:
            await report.record(put, record)
        return result  # type: ignore[no-any-return]

    async def preview(arguments: dict[str, Any]) -> str | None:
        """The approval names what a restore could not put back (read while the
        ``%%agent`` cell waits: nothing else runs in the namespace then)."""
        code = arguments.get("code")
        if not isinstance(code, str):
            return None
        limit, value_limit = limits() if limits is not None else (DEFAULT_LIMIT, None)
        found = foreseen_cannot(shell.user_ns, code, limit=limit, value_limit=value_limit)
        return approval_preview(code, found)

    made = tool(run_cell, kind="shell")
    made.code_argument = "code"  # its approval shows the code as code
    made.preview = preview
    return made


class _Interrupts:
    """Whether a kernel interrupt (SIGINT) came while the code ran."""

    __slots__ = ("came",)

    def __init__(self, came: bool = False) -> None:
        self.came = came

    def handler(self, signum: int, frame: Any) -> None:
        self.came = True
        raise KeyboardInterrupt


@contextmanager
def _interruptible() -> Iterator[_Interrupts]:
    """Let a kernel interrupt raise ``KeyboardInterrupt`` inside the code, as in any cell,
    and tell it from a ``KeyboardInterrupt`` the code raises itself.

    Why: the ``%%agent`` cell runs as an awaited coroutine (ipykernel >= 7.4), and there the
    kernel answers SIGINT by cancelling the cell's task on its event loop; code blocking the
    main thread (``time.sleep``, a long loop) never gives that loop a turn, so it ran on.
    A handler of our own raises at the next bytecode or interrupted system call instead (as
    Python's does), and notes that the interrupt came: only then does the turn stop. Off the
    main thread no handler can be set, and every ``KeyboardInterrupt`` counts as one.
    """
    if threading.current_thread() is not threading.main_thread():
        yield _Interrupts(came=True)
        return
    interrupts = _Interrupts()
    previous = signal.signal(signal.SIGINT, interrupts.handler)
    try:
        yield interrupts
    finally:
        signal.signal(signal.SIGINT, previous)


_RUNNING: list[str] = []
"""The code of each ``run_cell`` running now, innermost last (the main thread's alone)."""


def refuse_nested(what: str) -> None:
    """Raise :class:`ReentrantCellError` when ``what`` (``%%agent``) is started by code
    that ``run_cell`` is running; the magics call it first thing."""
    if _RUNNING:
        raise ReentrantCellError(
            f"{what} inside the agent's run_cell: a turn cannot start inside the running "
            "turn. Nothing of it ran; run its steps in this code directly."
        )


@contextmanager
def _no_nested_cells(shell: Any) -> Iterator[None]:
    """While the code runs, ``get_ipython().run_cell(...)`` (and ``run_cell_async``) and
    ``%%agent`` raise :class:`ReentrantCellError` in it instead of starting a cell inside
    the ``%%agent`` cell (a cell of its own there: the history, ``_`` and the outputs of the
    cell around it changed, or a turn inside a turn); ``exit()`` / ``quit()`` (IPython's
    ``ask_exit``, which stops the kernel's loop) raise ``SystemExit`` like ``sys.exit()``."""

    def refuse_cell(*args: Any, **kwargs: Any) -> Any:
        raise ReentrantCellError(
            "get_ipython().run_cell(...) inside the agent's run_cell: a cell cannot run "
            "inside the %%agent cell. Nothing of it ran; run its code directly."
        )

    def refuse_exit(*args: Any, **kwargs: Any) -> Any:
        raise SystemExit("exit() in the agent's run_cell does not stop the kernel")

    patches = {"run_cell": refuse_cell, "run_cell_async": refuse_cell, "ask_exit": refuse_exit}
    own = {name: shell.__dict__[name] for name in patches if name in shell.__dict__}
    for name, patch in patches.items():
        setattr(shell, name, patch)
    _RUNNING.append("run_cell")
    try:
        yield
    finally:
        _RUNNING.pop()
        for name in patches:
            if name in own:
                setattr(shell, name, own[name])
            else:
                shell.__dict__.pop(name, None)


def _ended_by(exc: BaseException) -> str:
    """The note under the traceback of what is not an ``Exception`` (``SystemExit``, a
    ``KeyboardInterrupt`` the code raised, ``GeneratorExit``...): the code stopped there,
    the kernel did not."""
    kind = type(exc).__name__
    if isinstance(exc, KeyboardInterrupt):
        kind += " (not a kernel interrupt)"
    return f"({kind} raised by the code: run_cell ended there; the kernel goes on)"


def _run(
    shell: Any,
    code: str,
    images: Any,
    on_changed: Callable[[list[str]], None] | None = None,
    limit: int = DEFAULT_LIMIT,
    value_limit: int | None = None,
    *,
    show: bool = True,
    outputs: list[dict[str, Any]] | None = None,
) -> tuple[str | list[dict[str, Any]], KernelChanges]:
    """On the main thread: snapshot what ``code`` may touch, run it in the user's
    namespace, capture what it showed; the result for the model and what changed.
    ``show``: show the outputs in the ``%%agent`` cell too; ``outputs``: a list to fill with
    them as nbformat outputs (``execute_cell`` writes them into its cell).

    Only a kernel interrupt leaves as an exception (the turn stops); anything else the code
    raises is text for the model."""
    import ast
    import traceback

    from IPython.utils.capture import capture_output

    ns = shell.user_ns
    before = take_before(ns, code, limit=limit, value_limit=value_limit)
    value: Any = None
    error = ""
    failure: BaseException | None = None
    with capture_output() as captured, _interruptible() as interrupts, _no_nested_cells(shell):
        try:
            tree = ast.parse(code)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            assert last is None or isinstance(last, ast.Expr)
            exec(compile(tree, "<run_cell>", "exec"), ns)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), "<run_cell>", "eval"), ns)
        except Exception as exc:
            error = "".join(traceback.format_exception(exc)).strip()
            failure = exc
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) and interrupts.came:
                raise
            error = "".join(traceback.format_exception(exc)).strip() + "\n" + _ended_by(exc)
            failure = exc
    if show:
        captured.show()  # type: ignore[no-untyped-call]  # shown in the %%agent cell too
    result_data = shell.display_formatter.format(value)[0] if value is not None else None
    if show and result_data is not None:
        shell.display_pub.publish(result_data)
    if outputs is not None:
        outputs += cell_outputs(captured, result_data, failure, error)
    report = changes(before, ns)
    if on_changed is not None and report.touched:
        on_changed(list(report.touched))  # the one seam for "which names changed" (stale.py)
    text = [report.text()]  # first: the line the cell shows for the call
    if captured.stdout:
        text.append(f"stdout:\n{captured.stdout.rstrip()}")
    if captured.stderr:
        text.append(f"stderr:\n{captured.stderr.rstrip()}")
    if value is not None:
        text.append(f"result:\n{render_value(value)}")
    if error:
        text.append(f"error:\n{error}")
    blocks = images([o.data for o in captured.outputs])
    summary = "\n".join(text)
    return ([{"type": "text", "text": summary}, *blocks] if blocks else summary), report


def cell_outputs(
    captured: Any, result: dict[str, Any] | None, failure: BaseException | None, error: str
) -> list[dict[str, Any]]:
    """What a notebook cell that ran the code shows, as nbformat outputs (as a front end
    records them): its streams, displays, result and error."""
    outputs: list[dict[str, Any]] = []
    for name in ("stdout", "stderr"):
        if text := getattr(captured, name):
            outputs.append({"output_type": "stream", "name": name, "text": text})
    for shown in captured.outputs:
        data, metadata = shown.data, shown.metadata or {}
        outputs.append({"output_type": "display_data", "data": data, "metadata": metadata})
    if result is not None:
        outputs.append(
            {
                "output_type": "execute_result",
                "data": result,
                "metadata": {},
                "execution_count": None,
            }
        )
    if failure is not None:
        outputs.append(
            {
                "output_type": "error",
                "ename": type(failure).__name__,
                "evalue": str(failure),
                "traceback": error.split("\n"),
            }
        )
    return outputs


def render_value(value: Any) -> str:
    try:
        shown = repr(value)
    except Exception as exc:
        return f"<repr failed: {type(exc).__name__}>"
    return shown if len(shown) <= 4000 else shown[:4000] + f"… [{len(shown) - 4000} more chars]"
