"""Cells left stale: notebook cells that read a kernel variable the agent changed after they ran.

When a turn's ``run_cell`` rebinds ``df``, the cells that read ``df`` and ran before show
results of the old ``df``. :func:`stale_cells` finds them from the kernel's input history
(``In``: each execution count's source, already turned into Python by IPython, so magics
parse) and the names each source reads from outside itself (:func:`reads`: Python's symbol
table, and the ``ast`` in statement order for a name a cell both reads and binds; cached per
source). A cell is known by its source: the same source run again under a later count is
the same cell, judged by its latest run, so a cell the person re-ran after the change is not
stale any more.

Which names changed comes from the seam :meth:`Changes.note` (``run_cell`` calls it with the
names it created or rebound; a future ``execute_cell`` or a restore of kernel state would call
it the same way). Names only, never values: a change made in place (``df.drop(...,
inplace=True)``) is not seen until variables are fingerprinted (``drift.py``).

Cost: a source that does not contain a changed name as a substring is never parsed, and a
parsed one is cached, so a 300-cell notebook costs a few milliseconds
(``benchmarks/show_work_bench.py``). Pure: no IPython.
"""

from __future__ import annotations

import ast
import functools
import symtable
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field


@functools.lru_cache(maxsize=4096)
def _symbols(source: str) -> tuple[frozenset[str], frozenset[str]]:
    """``(names read and never bound, names bound)`` of ``source``, from
    Python's own symbol table (C: about what parsing alone costs). A name read in a
    function, class or comprehension of the cell and not local there is read from the
    cell's globals. Code that does not parse reads nothing."""
    try:
        table = symtable.symtable(source, "<cell>", "exec")
    except (SyntaxError, ValueError):
        return frozenset(), frozenset()
    read: set[str] = set()
    bound: set[str] = set()
    for symbol in table.get_symbols():
        if symbol.is_assigned() or symbol.is_imported():
            bound.add(symbol.get_name())
        if symbol.is_referenced():
            read.add(symbol.get_name())
    nested = list(table.get_children())
    while nested:
        scope = nested.pop()
        nested += scope.get_children()
        for symbol in scope.get_symbols():
            if symbol.is_referenced() and symbol.is_global():
                read.add(symbol.get_name())
    return frozenset(read - bound), frozenset(bound)  # `df += 1` binds without a read here


@functools.lru_cache(maxsize=1024)
def _ordered_reads(source: str) -> frozenset[str]:
    """The names ``source`` reads before binding them, top-level statement by statement:
    ``df = load()`` reads ``load``, not ``df``; ``df = df.dropna()`` and ``df += 1`` read
    ``df``. Only asked for a changed name the cell binds (a walk of its
    whole tree: several times the cost of the symbol table)."""
    bound: set[str] = set()
    found: set[str] = set()
    for statement in ast.parse(source).body:
        loads: set[str] = set()
        stores: set[str] = set()
        for node in ast.walk(statement):
            if isinstance(node, ast.Name):
                (loads if isinstance(node.ctx, ast.Load) else stores).add(node.id)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                loads.add(node.target.id)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                stores.add(node.name)
        found |= loads - bound
        bound |= stores
    return frozenset(found)


def reads(source: str, names: Collection[str]) -> list[str]:
    """Which of ``names`` the cell ``source`` reads from outside itself, sorted (cached per
    source)."""
    read, both = _symbols(source)
    found = read.intersection(names)
    unsure = both.intersection(names)
    if unsure:
        found |= _ordered_reads(source) & unsure
    return sorted(found)


def clear_cache() -> None:
    """Forget every analysed source (the benchmark's cold runs)."""
    _symbols.cache_clear()
    _ordered_reads.cache_clear()


def stale_cells(
    history: Sequence[str], changed: Collection[str], before: int
) -> list[tuple[int, list[str]]]:
    """``(execution count, changed names it reads)`` of each cell whose latest run came
    before count ``before`` and reads a name in ``changed``; ``history[n]`` is the source of
    execution count ``n`` (IPython's ``In``)."""
    if not changed:
        return []
    latest: dict[str, int] = {}
    for count in range(1, len(history)):
        latest[history[count]] = count
    found = []
    for source, count in latest.items():
        if count >= before or not any(name in source for name in changed):
            continue
        names = reads(source, changed)
        if names:
            found.append((count, names))
    found.sort()
    return found


def _refs(cells: Sequence[tuple[int, list[str]]]) -> tuple[str, str]:
    counts = ", ".join(f"[{count}]" for count, _ in cells)
    names = sorted({name for _, found in cells for name in found})
    return counts, ", ".join(f"`{name}`" for name in names)


def user_line(cells: Sequence[tuple[int, list[str]]]) -> str | None:
    """``cells [3], [5] read `df`, changed by this prompt: re-run them``."""
    if not cells:
        return None
    counts, names = _refs(cells)
    if len(cells) == 1:
        return f"cell {counts} reads {names}, changed by this prompt: re-run it"
    return f"cells {counts} read {names}, changed by this prompt: re-run them"


def model_note(cells: Sequence[tuple[int, list[str]]]) -> str | None:
    """The same list for the model, in its note before the next prompt."""
    if not cells:
        return None
    counts, names = _refs(cells)
    return (
        f"[Notebook note: notebook cells {counts} read {names}, which your run_cell changed "
        "after they ran: their outputs are from before the change (the user was told to "
        "re-run them).]"
    )


@dataclass
class Changes:
    """Kernel variables the agent changed, by the execution count of the prompt that did."""

    names: dict[str, int] = field(default_factory=dict)

    def note(self, names: Iterable[str], count: int) -> None:
        """The seam: ``names`` were created or rebound by the prompt of cell ``count``."""
        for name in names:
            self.names[name] = count

    def of_prompt(self, count: int) -> set[str]:
        return {name for name, at in self.names.items() if at == count}

    def stale(
        self, history: Sequence[str], count: int | None = None
    ) -> list[tuple[int, list[str]]]:
        """The stale cells of the changes by prompt ``count`` (``None``: every change not
        reported yet); each change is judged against the count of the prompt that made it."""
        found: dict[int, set[str]] = {}
        by_prompt: dict[int, set[str]] = {}
        for name, at in self.names.items():
            if count is None or at == count:
                by_prompt.setdefault(at, set()).add(name)
        for at, names in by_prompt.items():
            for cell, read in stale_cells(history, names, at):
                found.setdefault(cell, set()).update(read)
        return [(cell, sorted(names)) for cell, names in sorted(found.items())]

    def clear(self) -> None:
        self.names.clear()
