"""The ``%agent SUB ...`` registry: the table of subcommands, their parser and help.

Owns :data:`SUBCOMMANDS`, the :func:`subcommand` decorator, :func:`arg`, the argparse parser
that turns a usage mistake into IPython's ``UsageError`` (and ``-h`` into printed help), the
text of ``%agent help``, and reading a ``%agent`` line (:func:`find`: which subcommand, with
which arguments) and saying a subcommand's typed error (:func:`say_error`); the magics only
call the handler. Must not know any subcommand, the magics class or the agent: it
sits below all of them, so anything may register into it without an import circle.

Adding a subcommand domain is a one-file job: create ``jupyter/commands/<domain>.py`` and
register its handlers there; ``jupyter/commands/__init__.py`` imports every module of that
package when the first ``%agent`` looks a subcommand up (:func:`loaded`), so nothing else
needs editing::

    # docstring first: what this module owns, what it must not know
    import argparse

    from ..magics import LiteAgentMagics
    from ..registry import arg, subcommand


    @subcommand("review", "One line for %agent help.", arg("seq", type=int, help="..."))
    def _review(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
        magics.require_agent()
        ...

A handler gets the kernel's :class:`~.magics.LiteAgentMagics` and the parsed arguments; it
prints through ``render`` (never raw untrusted text) and raises ``UsageError`` for bad input.
A typed ``LiteAgentError`` it raises is printed as one line by the dispatcher. The handlers
of :data:`AWAITED` are coroutine functions (``awaiting.py``: they may need the page's answers).
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from IPython.core.error import UsageError

from ..controls import terminal_safe
from ..errors import LiteAgentError, RestoreConflictError

Handler = Callable[[Any, argparse.Namespace], object]
"""``handler(magics, args)``: ``magics`` is the kernel's ``LiteAgentMagics`` (typed ``Any``
here so that this module stays below the magics)."""

Argument = tuple[tuple[str, ...], dict[str, Any]]


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    handler: Handler
    arguments: Sequence[Argument]


AWAITED = frozenset({"restore", "undo", "switch", "revert"})
"""Subcommands whose handler is a coroutine function: a rewind that may put the notebook's
cells back must hear the page, so the cell awaits it where the kernel allows
(``awaiting.py``). A fixed set, known before any subcommand module is imported: the input
transformer that makes such a cell await reads it for every cell."""

SUBCOMMANDS: dict[str, Subcommand] = {}
"""``%agent NAME ...`` handlers, in the order ``%agent help`` lists them. Complete once
:func:`loaded` has run (a subcommand module registers when it is imported)."""

LOADERS: list[Callable[[], object]] = []
"""What imports the subcommand modules (``jupyter/__init__.py`` adds the loader of
``commands/``): run by :func:`loaded`, so ``%load_ext`` does not pay for every subcommand
and its widgets (#32), and this module still imports none of them."""


def loaded() -> dict[str, Subcommand]:
    """:data:`SUBCOMMANDS` with every subcommand module imported."""
    while LOADERS:
        LOADERS.pop(0)()
    return SUBCOMMANDS


H = TypeVar("H", bound=Handler)


def subcommand(name: str, help: str, *arguments: Argument) -> Callable[[H], H]:
    """Register ``%agent NAME``; ``arguments`` are ``(flags, argparse kwargs)`` pairs."""

    def register(handler: H) -> H:
        if inspect.iscoroutinefunction(handler) != (name in AWAITED):
            raise TypeError(f"%agent {name}: a coroutine function exactly when in AWAITED")
        SUBCOMMANDS[name] = Subcommand(name, help, handler, arguments)
        return handler

    return register


def arg(*flags: str, **kwargs: Any) -> Argument:
    return flags, kwargs


class Parser(argparse.ArgumentParser):
    """argparse for magics: an error is IPython's ``UsageError``; ``-h`` prints and stops."""

    def error(self, message: str) -> Any:
        raise UsageError(f"{self.prog}: {message}\n{self.format_usage()}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        if message:
            print(message)
        raise HelpShown


class HelpShown(Exception):
    """``-h`` was given: the help is printed, there is nothing to run."""


def parser(sub: Subcommand) -> Parser:
    parser = Parser(prog=f"%agent {sub.name}", description=sub.help, add_help=True)
    for flags, kwargs in sub.arguments:
        parser.add_argument(*flags, **kwargs)
    return parser


def find(line: str) -> tuple[Subcommand, argparse.Namespace, list[str]] | None:
    """The subcommand ``%agent LINE`` names, its parsed arguments and the line's words;
    ``None`` when help was printed instead (``help``, ``-h``). An unknown name is a
    ``UsageError`` that lists them."""
    import shlex

    words = shlex.split(line)
    if not words or words[0] in ("help", "-h", "--help"):
        print(help_text())
        return None
    sub = loaded().get(words[0])
    if sub is None:
        raise UsageError(f"%agent: unknown subcommand {words[0]!r}\n\n{help_text()}")
    try:
        return sub, parser(sub).parse_args(words[1:]), words
    except HelpShown:
        return None


def say_error(exc: LiteAgentError, words: Sequence[str]) -> None:
    """Print a subcommand's typed error as one line; a refused rewind in the notebook's
    words, with the command that forces it (not ``force=True`` or seqs)."""
    import shlex

    if isinstance(exc, RestoreConflictError):
        from . import history_text

        force = None if "--force" in words else shlex.join(["%agent", *words, "--force"])
        print(history_text.refusal_text(exc, force))
    else:
        print(terminal_safe(f"{type(exc).__name__}: {exc}"))


def help_text() -> str:
    width = max(len(n) for n in loaded())
    lines = ["%agent SUBCOMMAND [options]   (%agent SUBCOMMAND -h for its options)", ""]
    lines += [f"  {name.ljust(width)}  {sub.help}" for name, sub in SUBCOMMANDS.items()]
    lines += [
        "",
        "%%agent [--session ID] [--new] [--memory] [--quiet] [--no-interpolate]",
        "  the cell is the prompt; {var}, {In[n]}, {Out[n]}, {Err[n]} are filled in.",
    ]
    return "\n".join(lines)
