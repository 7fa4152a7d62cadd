"""The notebook around the agent: where it is, what a prompt may quote, what the model may see.

- :func:`locate_notebook`: which notebook this kernel serves, by the first rule that matches:
  VS Code's ``__vsc_ipynb_file__``, jupyter-server's ``JPY_SESSION_NAME``, else the kernel's
  working folder (a console). :func:`headless_location` is the rule of a headless run
  (nbconvert, papermill: ``headless.py``). ``%agent info`` prints the rule.
- :func:`interpolate`: ``{var}``, ``{In[n]}``, ``{Out[n]}`` and ``{Err[n]}`` (the traceback of
  cell ``n``) in a ``%%agent`` cell; unknown braces stay as they are.
- :func:`variable_tools`: read-only ``list_variables`` / ``inspect_variable(name)`` for the
  names the user exposed (``expose_variables``); a description, never running the user's
  code beyond a capped ``repr``. pandas/polars are looked up in ``sys.modules`` only: nothing
  is imported that the user did not import.
- :func:`guard_notebook`: the file tools refuse to write the notebook open in this kernel (the
  front end would overwrite the change on its next save) unless the user allows it.

Knows IPython's conventions (``In``/``Out``), not IPython itself.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ToolError
from ..tools.base import ToolContext  # the tools' annotations are read at run time
from .headless import find_notebook

if TYPE_CHECKING:
    from ..tools import Tool

VALUE_CAP = 4000
"""Characters of a value's text put into a prompt or a tool result."""

RULE_VSCODE = "VS Code (__vsc_ipynb_file__)"
RULE_JUPYTER = "jupyter-server (JPY_SESSION_NAME)"
RULE_CONSOLE = "the kernel's working folder (no notebook file known: namespace 'console')"
RULE_HEADLESS = (
    "headless run (nbconvert, papermill): the notebook that holds the cells this kernel ran"
)


@dataclass(frozen=True, slots=True)
class NotebookLocation:
    """The notebook this kernel serves (``None`` for a console) and the rule that said so."""

    notebook: Path | None
    folder: Path
    rule: str


def locate_notebook(
    user_ns: Mapping[str, Any], environ: Mapping[str, str], cwd: Path
) -> NotebookLocation:
    vsc = user_ns.get("__vsc_ipynb_file__")
    if isinstance(vsc, str) and vsc.endswith(".ipynb"):
        path = Path(vsc).expanduser().absolute()
        return NotebookLocation(path, path.parent, RULE_VSCODE)
    jpy = environ.get("JPY_SESSION_NAME", "")
    if jpy.endswith(".ipynb"):
        path = Path(jpy)
        # jupyter-server gives an absolute path; older ones a path relative to the server's
        # root, while the kernel starts in the notebook's folder: keep the file name only
        path = path if path.is_absolute() else cwd / path.name
        return NotebookLocation(path, path.parent, RULE_JUPYTER)
    return NotebookLocation(None, cwd, RULE_CONSOLE)


def headless_location(
    ran: Iterable[str], environ: Mapping[str, str], cwd: Path
) -> NotebookLocation:
    """A headless kernel's notebook (:func:`headless.find_notebook`), or the console rule
    saying why none is known."""
    notebook, candidates = find_notebook(ran, cwd, environ)
    if notebook is not None:
        return NotebookLocation(notebook, notebook.parent, RULE_HEADLESS)
    why = (
        f"several notebooks hold the cells run so far ({', '.join(p.name for p in candidates)})"
        if candidates
        else "no notebook of its folder or command line holds the cells run so far"
    )
    return NotebookLocation(None, cwd, f"{RULE_CONSOLE}; headless run, but {why}")


_CELL_REF = re.compile(r"\{(In|Out|Err)\[(-?\d+)\]\}")
_NAME_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _cap(text: str, limit: int = VALUE_CAP) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


def _safe_str(value: object) -> str:
    try:
        return _cap(str(value))
    except Exception as exc:
        return f"<{type(value).__name__}: str() failed: {exc}>"


def interpolate(
    text: str, user_ns: Mapping[str, Any], errors: Mapping[int, str] | None = None
) -> str:
    """Replace ``{name}`` and ``{In[n]}``/``{Out[n]}``/``{Err[n]}``; leave anything else."""
    errors = errors or {}

    def cell(match: re.Match[str]) -> str:
        kind, n = match.group(1), int(match.group(2))
        try:
            if kind == "In":
                history = user_ns.get("In")
                if isinstance(history, Sequence) and -len(history) <= n < len(history):
                    return str(history[n])
            elif kind == "Out":
                outputs = user_ns.get("Out")
                if isinstance(outputs, Mapping) and n in outputs:
                    return _safe_str(outputs[n])
            elif n in errors:
                return errors[n]
        except Exception:
            pass
        return match.group(0)

    def name(match: re.Match[str]) -> str:
        key = match.group(1)
        if key in user_ns and not key.startswith("_"):
            return _safe_str(user_ns[key])
        return match.group(0)

    return _NAME_REF.sub(name, _CELL_REF.sub(cell, text))


def describe(value: object, *, rows: int = 5) -> str:
    """What the model may know of a value: type, shape, dtypes and first rows of a
    DataFrame, length and a sample of a sequence, a capped repr otherwise."""
    kind = type(value)
    type_name = f"{kind.__module__}.{kind.__qualname__}"
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(value, pandas.DataFrame | pandas.Series):
        head = value.head(rows).to_string()
        dtypes = value.dtypes.to_string() if isinstance(value, pandas.DataFrame) else value.dtype
        return _cap(
            f"type: {type_name}\nshape: {value.shape}\ndtypes:\n{dtypes}\n"
            f"first {rows} rows:\n{head}"
        )
    polars = sys.modules.get("polars")
    if polars is not None and isinstance(value, polars.DataFrame):
        return _cap(
            f"type: {type_name}\nshape: {value.shape}\nschema: {dict(value.schema)}\n"
            f"first {rows} rows:\n{value.head(rows)}"
        )
    if isinstance(value, Mapping):
        sample = ", ".join(f"{k!r}: {_short_repr(v)}" for k, v in list(value.items())[:rows])
        return _cap(f"type: {type_name}\nlength: {len(value)}\nfirst items: {{{sample}}}")
    if isinstance(value, list | tuple | set | frozenset):
        sample = ", ".join(_short_repr(v) for v in list(value)[:rows])
        return _cap(f"type: {type_name}\nlength: {len(value)}\nfirst items: [{sample}]")
    shape = getattr(value, "shape", None)
    extra = f"\nshape: {shape}" if isinstance(shape, tuple) else ""
    return _cap(f"type: {type_name}{extra}\nrepr: {_short_repr(value, 2000)}")


def _short_repr(value: object, limit: int = 200) -> str:
    try:
        text = repr(value)
    except Exception as exc:
        return f"<repr failed: {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_exposed(name: str, exposed: Sequence[str]) -> bool:
    return not name.startswith("_") and ("*" in exposed or name in exposed)


def user_variables(user_ns: Mapping[str, Any], exposed: Sequence[str]) -> dict[str, Any]:
    """The user's own variables that are exposed (no modules, no IPython internals)."""
    if not exposed:  # the default: none, so the namespace is not walked (each cell, #32)
        return {}
    hidden = {"In", "Out", "exit", "quit", "get_ipython", "open"}
    return {
        k: v
        for k, v in user_ns.items()
        if is_exposed(k, exposed)
        and k not in hidden
        and type(v).__name__ not in ("module", "function", "builtin_function_or_method", "type")
    }


def variable_tools(
    namespace: Callable[[], Mapping[str, Any]], exposed: Callable[[], Sequence[str]]
) -> list[Tool]:
    """``list_variables`` and ``inspect_variable`` over the exposed names of ``namespace()``."""
    from ..tools import tool

    def list_variables() -> str:
        """List the variables of the user's notebook you may look at (name, type, shape or
        length). Read-only."""
        found = user_variables(namespace(), exposed())
        if not found:
            return "No variables are exposed (the user sets LiteAgentMagics.expose_variables)."
        lines = []
        for name, value in sorted(found.items()):
            shape = getattr(value, "shape", None)
            size = f" shape {shape}" if isinstance(shape, tuple) else ""
            if not size and isinstance(value, Sequence | Mapping) and not isinstance(value, str):
                size = f" len {len(value)}"
            lines.append(f"{name}: {type(value).__name__}{size}")
        return "\n".join(lines)

    def inspect_variable(name: str) -> str:
        """Describe one variable of the user's notebook: type, shape, dtypes and first rows
        of a DataFrame, length and a sample of a sequence, a short repr otherwise. Read-only.

        Args:
            name: The variable's name, as listed by list_variables.
        """
        if not is_exposed(name, exposed()):
            raise ToolError(
                f"{name!r} is not exposed to the agent (LiteAgentMagics.expose_variables)"
            )
        ns = namespace()
        if name not in ns:
            raise ToolError(f"no variable {name!r} in the notebook")
        return describe(ns[name])

    return [
        tool(list_variables, kind="read"),
        tool(inspect_variable, kind="read"),
    ]


def guard_notebook(
    tools: Iterable[Tool], notebook: Path, identity: tuple[int, int] | None = None
) -> list[Tool]:
    """Copies of the write tools that refuse to touch ``notebook`` (the open notebook): by
    its path, and by its file ``identity`` ``(st_dev, st_ino)`` when given, so the guard
    holds under any name the notebook is renamed to while the kernel runs."""
    guarded: list[Tool] = []
    target = os.path.realpath(notebook)
    for original in tools:
        if original.kind != "write" or "path" not in original.input_schema.get("properties", {}):
            continue
        guarded.append(
            replace(original, fn=_guarded(original, target, identity), takes_context=True)
        )
    return guarded


def _guarded(original: Tool, target: str, identity: tuple[int, int] | None) -> Callable[..., Any]:
    from ..tools import resolve_in_workdir

    async def fn(ctx: ToolContext, **arguments: Any) -> Any:
        path = arguments.get("path")
        if isinstance(path, str) and _is_notebook(resolve_in_workdir(ctx, path), target, identity):
            raise ToolError(
                f"{path} is the notebook open in this kernel: the front end would overwrite "
                "the change on its next save. Show the user the change instead (they can allow "
                "it with %config LiteAgentMagics.allow_notebook_edits = True)."
            )
        if original.takes_context:
            return await original.fn(ctx, **arguments)
        return await original.fn(**arguments)

    return fn


def _is_notebook(resolved: Path, target: str, identity: tuple[int, int] | None) -> bool:
    if os.path.realpath(resolved) == target:
        return True
    if identity is None:
        return False
    try:
        st = os.stat(resolved)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == identity
