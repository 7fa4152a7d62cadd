"""The kernel's variables as time travel sees them: snapshots around ``run_cell``, what the
call changed, and the participant that puts them back (``agent/timetravel/participants.py``).

Before the agent's code runs (on the kernel's main thread), :func:`take_before` finds the
names the code loads, stores or deletes (``ast``) that exist in the user namespace, widens
them to their alias groups (other names bound to the same object, or to a list, tuple, dict
or set holding it: stored and restored together, so ``a = b = df`` keeps ``a is b``), and
pickles each group once (protocol 5). Functions, classes and modules are code, not data:
they are not snapshotted (stdlib pickle stores them by reference only; a rebinding of one is
named as "cannot be rewound"). What cannot be serialized (generators, open files, sockets,
locks, connections) or is over a cap (``kernel_snapshot_value_limit`` per value,
``kernel_snapshot_limit`` per call) is named "cannot be rewound"; the size is estimated
before pickling (``nbytes``, ``memory_usage(deep=True)``, a bounded ``sys.getsizeof`` walk), so
a 300 MB array is refused without being serialized.

After the call, :func:`changes` compares: created, rebound (``id``), deleted, and changed in
place (a fingerprint: a hash of the pickle for values up to :data:`EXACT_LIMIT`, above it
``drift.fingerprint``'s sampled one: type, shape, dtypes and a bounded sample). Only groups
with a change are kept: their pickles go to the session's blob store and a
``state_snapshot`` event records the call (:meth:`KernelChanges.record`).

:class:`KernelParticipant` plans and applies a rewind from those events. Unpickling is code
execution: the snapshots it reads are the session's own (an imported bundle carries none).
"""

from __future__ import annotations

import ast
import hashlib
import io
import pickle
import socket
import sqlite3
import sys
import threading
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..agent.timetravel.participants import (
    JSONDict,
    StateAction,
    StateContext,
    StatePlan,
    StateResult,
)
from ..checkpoint.events import StateSnapshotEvent
from .drift import fingerprint as sampled_fingerprint

PARTICIPANT = "kernel"
EXACT_LIMIT = 4 << 20
"""Values estimated up to this size are fingerprinted by a hash of their whole pickle (any
in-place change is seen); larger ones by a bounded sample."""
DEFAULT_LIMIT = 256 << 20
DEFAULT_VALUE_LIMIT = 128 << 20
IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})
_CONTAINER_ITEMS = 10_000
"""Containers longer than this are not searched for aliases (cost bound)."""
_WALK_ITEMS = 200_000

_CODE = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)
_UNSERIALIZABLE: tuple[tuple[type, str], ...] = (
    (types.GeneratorType, "a generator"),
    (types.CoroutineType, "a coroutine"),
    (types.AsyncGeneratorType, "an async generator"),
    (io.IOBase, "an open file or stream"),
    (socket.socket, "a socket"),
    (type(threading.Lock()), "a lock"),
    (type(threading.RLock()), "a lock"),
    (sqlite3.Connection, "a database connection"),
    (types.FrameType, "a frame"),
)


def is_user_name(name: str) -> bool:
    return not name.startswith("_") and name not in IPYTHON_NAMES


def is_code(value: object) -> bool:
    return isinstance(value, _CODE)


def code_names(code: str) -> set[str]:
    """The names ``code`` loads, stores or deletes (empty if it does not parse: running it
    then only reports the syntax error)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            names.update(node.names)
    return names


def _unserializable(value: object) -> str | None:
    for kind, why in _UNSERIALIZABLE:
        if isinstance(value, kind):
            return why
    return None


def estimate(value: object, budget: int) -> int:
    """A size estimate of ``value`` in bytes, stopping once past ``budget``, without
    serializing it."""
    numpy = sys.modules.get("numpy")
    pandas = sys.modules.get("pandas")
    if numpy is not None and isinstance(value, numpy.ndarray) and value.dtype != object:
        return int(value.nbytes)
    if pandas is not None and isinstance(value, pandas.DataFrame | pandas.Series):
        try:
            used = value.memory_usage(index=True, deep=True)
            return int(used.sum() if hasattr(used, "sum") else used)
        except Exception:
            return sys.getsizeof(value)
    total = 0
    stack: list[object] = [value]
    seen: set[int] = set()
    visited = 0
    while stack and total <= budget and visited < _WALK_ITEMS:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        visited += 1
        if numpy is not None and isinstance(item, numpy.ndarray) and item.dtype != object:
            total += int(item.nbytes)
            continue
        try:
            total += sys.getsizeof(item)
        except TypeError:
            continue
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
    return total


def value_fingerprint(value: object) -> str:
    """Equal before and after a call means unchanged: the hash of the whole pickle for a
    value up to :data:`EXACT_LIMIT`, else the sampled fingerprint."""
    small = _unserializable(value) is None and not is_code(value)
    if small and estimate(value, EXACT_LIMIT) <= EXACT_LIMIT:
        try:
            data = pickle.dumps(value, protocol=5)
        except Exception:
            pass
        else:
            kind = type(value)
            digest = hashlib.blake2b(data, digest_size=16).hexdigest()
            return f"{kind.__module__}.{kind.__qualname__} ={digest}"
    return sampled_fingerprint(value)


@dataclass(slots=True)
class Group:
    """Names stored and restored together (aliases); ``data`` their pickle, ``None`` when
    they cannot be rewound (``why``)."""

    names: list[str]
    data: bytes | None = None
    why: str = ""


@dataclass(slots=True)
class Before:
    """The namespace just before the agent's code ran."""

    ids: dict[str, int]
    groups: list[Group] = field(default_factory=list)
    fingerprints: dict[str, str] = field(default_factory=dict)
    code: set[str] = field(default_factory=set)
    """Touched names bound to functions, classes or modules (not snapshotted)."""

    def group_of(self, name: str) -> int | None:
        for i, group in enumerate(self.groups):
            if name in group.names:
                return i
        return None


def _alias_groups(ns: Mapping[str, Any], touched: set[str], ids: dict[str, int]) -> list[list[str]]:
    """``touched`` widened to the names bound to the same objects or to containers holding
    them (one level), as groups (union-find)."""
    parent: dict[str, str] = {n: n for n in touched}

    def find(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    def union(a: str, b: str) -> None:
        parent.setdefault(a, a)
        parent.setdefault(b, b)
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[rb] = ra

    owner: dict[int, str] = {}  # id of a touched object (or of an item it holds) -> a name
    for name in touched:
        value = ns[name]
        if not isinstance(value, _ATOMS):
            owner.setdefault(id(value), name)
        for item in _items(value):
            owner.setdefault(id(item), name)
    for name in ids:
        if name in touched:
            continue
        value = ns[name]
        if is_code(value):
            continue
        hit = owner.get(id(value))
        if hit is None:
            for item in _items(value):
                hit = owner.get(id(item))
                if hit is not None:
                    break
        if hit is not None:
            union(hit, name)
    for name in touched:  # touched names aliasing each other
        hit = owner.get(id(ns[name]))
        if hit is not None:
            union(hit, name)
    groups: dict[str, list[str]] = {}
    for name in parent:
        groups.setdefault(find(name), []).append(name)
    return sorted(sorted(g) for g in groups.values())


_ATOMS = (int, float, complex, str, bytes, bool, type(None), range)


def _items(value: object) -> Iterable[object]:
    """The items of a container that can make an alias: not atoms (small ints and
    interned strings are shared by every container; sharing one is not aliasing)."""
    if isinstance(value, dict):
        items: Iterable[object] = value.values() if len(value) <= _CONTAINER_ITEMS else ()
    elif isinstance(value, list | tuple | set | frozenset):
        items = value if len(value) <= _CONTAINER_ITEMS else ()
    else:
        return ()
    return [item for item in items if not isinstance(item, _ATOMS)]


def _mb(size: int) -> str:
    return f"{size / (1 << 20):.0f} MB"


def take_before(
    ns: Mapping[str, Any], code: str, *, limit: int = DEFAULT_LIMIT, value_limit: int | None = None
) -> Before:
    """Snapshot what ``code`` may touch (see the module's docstring). Touching no existing
    name costs one pass over the namespace's names."""
    ids = {k: id(v) for k, v in ns.items() if is_user_name(k)}
    names = code_names(code)
    touched = {n for n in names if n in ids}
    before = Before(ids)
    if not touched:
        return before
    before.code = {n for n in touched if is_code(ns[n])}
    touched -= before.code
    if not touched:
        return before
    cap = min(limit, value_limit if value_limit is not None else DEFAULT_VALUE_LIMIT)
    total = 0
    for names_of_group in _alias_groups(ns, touched, ids):
        group = Group(names_of_group)
        before.groups.append(group)
        values = {n: ns[n] for n in names_of_group}
        for n, v in values.items():
            why = _unserializable(v)
            if why is not None:
                group.why = f"{n} is {why}"
                break
        if not group.why:
            sizes = {n: estimate(v, cap) for n, v in values.items()}
            big = [n for n, s in sizes.items() if s > cap]
            size = sum(sizes.values())
            if big:
                group.why = f"over the per-value cap of {_mb(cap)} (~{_mb(sizes[big[0]])})"
            elif total + size > limit:
                group.why = (
                    f"over the per-call snapshot limit of {_mb(limit)} (~{_mb(size)}; "
                    "%config LiteAgentMagics.kernel_snapshot_limit)"
                )
        if not group.why:
            try:
                group.data = pickle.dumps(values, protocol=5)
            except Exception as exc:
                group.why = f"cannot be pickled ({type(exc).__name__}: {exc})"[:200]
            else:
                if len(group.data) > limit - total:
                    group.data, group.why = None, f"over the per-call snapshot limit ({_mb(limit)})"
                else:
                    total += len(group.data)
        for n, v in values.items():
            before.fingerprints[n] = value_fingerprint(v)
    return before


def foreseen_cannot(
    ns: Mapping[str, Any], code: str, *, limit: int = DEFAULT_LIMIT, value_limit: int | None = None
) -> dict[str, str]:
    """For the approval, before anything runs: the names ``code`` touches that a snapshot
    will not hold (by type and estimated size; nothing is pickled, so a value pickle refuses
    for another reason is only named in the result)."""
    cap = min(limit, value_limit if value_limit is not None else DEFAULT_VALUE_LIMIT)
    found: dict[str, str] = {}
    total = 0
    for name in sorted(code_names(code)):
        if name not in ns or not is_user_name(name) or is_code(ns[name]):
            continue
        value = ns[name]
        why = _unserializable(value)
        if why is not None:
            found[name] = f"{name} is {why}"
            continue
        size = estimate(value, cap)
        if size > cap:
            found[name] = f"over the per-value cap of {_mb(cap)} (~{_mb(size)})"
        elif total + size > limit:
            found[name] = f"over the per-call snapshot limit of {_mb(limit)}"
        else:
            total += size
    return found


def approval_preview(code: str, cannot: Mapping[str, str]) -> str | None:
    """The code as an approval shows it, with the names a restore could not put back
    (``None`` when there are none: the approval shows the code as usual)."""
    if not cannot:
        return None
    named = "; ".join(f"{n} ({w})" for n, w in sorted(cannot.items()))
    return f"{code.rstrip()}\n# cannot be rewound by a restore: {named}"


@dataclass(frozen=True, slots=True)
class KernelChanges:
    """What one ``run_cell`` did to the user namespace: the four groups, and the names that
    cannot be rewound (``name -> why``). What other parts (stale cells) read."""

    created: tuple[str, ...] = ()
    rebound: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    cannot: dict[str, str] = field(default_factory=dict)
    names: dict[str, JSONDict] = field(default_factory=dict)
    """Per name: ``change``, ``group`` (index into ``groups``) and ``after`` (fingerprint)."""
    groups: tuple[Group, ...] = ()
    """The snapshot groups kept (a change in one of their names)."""

    @property
    def touched(self) -> tuple[str, ...]:
        """Every name the call created, rebound, deleted or changed in place."""
        return tuple(sorted({*self.created, *self.rebound, *self.deleted, *self.changed}))

    def text(self) -> str:
        """The tool result's lines: the four groups on one line (the line the cell shows),
        then what cannot be rewound."""

        def group(label: str, names: Sequence[str]) -> str:
            return f"{label}: " + (", ".join(names) or "none")

        lines = [
            "; ".join(
                [
                    group("variables created", self.created),
                    group("rebound", self.rebound),
                    group("deleted", self.deleted),
                    group("changed in place", self.changed),
                ]
            )
        ]
        if self.cannot:
            lines.append(
                "cannot be rewound: "
                + "; ".join(f"{n} ({w})" for n, w in sorted(self.cannot.items()))
            )
        return "\n".join(lines)

    async def record(
        self,
        put: Callable[[bytes], Any],
        record: Callable[[str, JSONDict], Any],
    ) -> None:
        """Store the kept groups' pickles (``await put(bytes) -> hash``) and the call's
        ``state_snapshot`` event (``await record(participant, data)``)."""
        if not self.names and not self.cannot:
            return
        groups = []
        for group in self.groups:
            blob = await put(group.data) if group.data is not None else None
            groups.append({"blob": blob, "names": group.names, "why": group.why})
        data = {
            "names": self.names,
            "groups": groups,
            "cannot": self.cannot,
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        await record(PARTICIPANT, data)


def changes(before: Before, ns: Mapping[str, Any]) -> KernelChanges:
    """Compare the namespace now with ``before``; keep only the groups with a change."""
    now = {k: id(v) for k, v in ns.items() if is_user_name(k)}
    created = sorted(now.keys() - before.ids.keys())
    deleted = sorted(before.ids.keys() - now.keys())
    rebound = sorted(k for k in now.keys() & before.ids.keys() if now[k] != before.ids[k])
    changed = sorted(
        n
        for n, fp in before.fingerprints.items()
        if n in now and now[n] == before.ids[n] and value_fingerprint(ns[n]) != fp
    )
    cannot: dict[str, str] = {}
    for group in before.groups:
        if group.why:
            for n in group.names:
                cannot[n] = group.why
    moved = {*rebound, *deleted, *changed}
    kept: list[Group] = []
    index: dict[str, int] = {}
    for group in before.groups:
        if group.data is not None and moved & set(group.names):
            index.update({n: len(kept) for n in group.names})
            kept.append(group)
    names: dict[str, JSONDict] = {}

    def note(name: str, change: str) -> None:
        after = value_fingerprint(ns[name]) if name in ns else None
        names[name] = {
            "change": change,
            "group": index.get(name),
            "after": after,
            "before": before.fingerprints.get(name),
        }

    for n in created:
        note(n, "created")
    for label, found in (("rebound", rebound), ("deleted", deleted), ("changed", changed)):
        for n in found:
            note(n, label)
            if n not in index and n not in cannot:
                if n in before.code:
                    cannot[n] = "a function, class or module: code is not snapshotted"
                else:
                    cannot[n] = "not named in the code, so not snapshotted"
    for group in kept:  # aliases restored with them keep their identity
        for n in group.names:
            if n not in names:
                note(n, "unchanged")
    return KernelChanges(
        created=tuple(created),
        rebound=tuple(rebound),
        deleted=tuple(deleted),
        changed=tuple(changed),
        cannot=cannot,
        names=names,
        groups=tuple(kept),
    )


# -- rewinding -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Target:
    """One name's value after the rewind: absent, or from group ``group`` of a record
    (blob ``blob``); ``after`` what the agent (or the last operation) left."""

    blob: str | None
    before: str | None
    """The fingerprint of the value the name gets (``None``: unknown)."""
    at: str
    absent: bool = False


def _age(at: str) -> str:
    try:
        then = datetime.fromisoformat(at)
    except ValueError:
        return "of unknown age"
    seconds = max(0, int((datetime.now(UTC) - then).total_seconds()))
    if seconds < 120:
        return f"{seconds} s old"
    if seconds < 7200:
        return f"{seconds // 60} min old"
    return f"{seconds // 3600} h old"


_MOVES = ("restore", "rebuild", "conflict")


class KernelParticipant:
    """The kernel's variables as a rewind participant (``user_ns`` is the shell's)."""

    name = PARTICIPANT

    def __init__(self, user_ns: Callable[[], dict[str, Any]]) -> None:
        self._ns = user_ns

    async def plan_rewind(
        self, ctx: StateContext, snapshots: Sequence[StateSnapshotEvent]
    ) -> StatePlan:
        return await self._plan(ctx, [e.data for e in snapshots])

    async def plan_return(
        self,
        ctx: StateContext,
        record: JSONDict,
        snapshots: Sequence[StateSnapshotEvent] = (),
    ) -> StatePlan:
        # the record's values win; the future left is rewound for the other names, and
        # its last fingerprints are what the kernel should hold now
        return await self._plan(ctx, [record, *(e.data for e in snapshots)])

    async def _plan(self, ctx: StateContext, records: Sequence[JSONDict]) -> StatePlan:
        targets: dict[str, _Target] = {}
        cannot: dict[str, str] = {}
        last: dict[str, str | None] = {}
        for data in records:
            groups = data.get("groups") or []
            at = str(data.get("at", ""))
            for name, info in (data.get("names") or {}).items():
                last[name] = info.get("after")
                if name in targets or name in cannot:
                    continue
                if info.get("change") == "created":
                    targets[name] = _Target(None, None, at, absent=True)
                    continue
                fingerprint = info.get("before")
                index = info.get("group")
                blob = groups[index].get("blob") if isinstance(index, int) else None
                if blob is None:
                    cannot[name] = (data.get("cannot") or {}).get(name, "no snapshot was kept")
                elif not await ctx.blobs.has(blob):  # an imported session carries none
                    cannot[name] = "its snapshot is not in this session's store"
                else:
                    targets[name] = _Target(blob, fingerprint, at)
            for name, why in (data.get("cannot") or {}).items():
                if name not in targets:
                    cannot.setdefault(name, why)
        ns = self._ns()
        actions: list[StateAction] = []
        notes: list[str] = []
        for name in sorted(targets):
            target = targets[name]
            expected = last.get(name)
            present = name in ns
            if not present:
                if target.absent:
                    actions.append(StateAction(name, "unchanged", "already absent"))
                elif expected is None:
                    actions.append(StateAction(name, "restore", "comes back (the call deleted it)"))
                else:
                    summary = f"rebuilt from a snapshot {_age(target.at)} (not in the kernel now)"
                    actions.append(StateAction(name, "rebuild", summary))
                    notes.append(f"{name} {summary}")
                continue
            now = value_fingerprint(ns[name])
            if target.before is not None and now == target.before:  # e.g. a second restore
                actions.append(StateAction(name, "unchanged", "already as it was then"))
            elif expected is None or now != expected:
                actions.append(
                    StateAction(name, "conflict", "changed by hand since the agent's call")
                )
            elif target.absent:
                actions.append(StateAction(name, "delete", "deleted (the agent created it)"))
            else:
                actions.append(StateAction(name, "restore", "gets its value from before"))
        # a group is restored whole (one unpickle keeps its aliases), its unchanged names too
        moving = {targets[a.name].blob for a in actions if a.action in _MOVES}
        actions = [
            StateAction(a.name, "restore", "restored with its alias group")
            if a.action == "unchanged" and targets[a.name].blob in moving - {None}
            else a
            for a in actions
        ]
        for name, why in sorted(cannot.items()):
            actions.append(StateAction(name, "cannot", why))
        return StatePlan(PARTICIPANT, tuple(actions), work=targets, notes=tuple(notes))

    async def apply(
        self, ctx: StateContext, plan: StatePlan, *, force: bool
    ) -> tuple[StateResult, JSONDict]:
        targets: dict[str, _Target] = plan.work or {}
        todo = [
            a
            for a in plan.actions
            if a.action in ("restore", "delete", "rebuild") or (force and a.action == "conflict")
        ]
        ns = self._ns()
        loaded: dict[str, dict[str, Any]] = {}
        for action in todo:
            target = targets[action.name]
            if target.blob is not None and target.blob not in loaded:
                loaded[target.blob] = pickle.loads(await ctx.blobs.get(target.blob))
        # what is replaced, for the undo: the current values, pickled together (aliases)
        present = [a.name for a in todo if a.name in ns]
        record_names: dict[str, JSONDict] = {}
        record_groups: list[JSONDict] = []
        record_cannot: dict[str, str] = {}
        if present:
            try:
                data = pickle.dumps({n: ns[n] for n in present}, protocol=5)
            except Exception as exc:
                for n in present:
                    record_cannot[n] = f"cannot be pickled ({type(exc).__name__})"
            else:
                record_groups.append(
                    {"blob": await ctx.blobs.put(data, ref=ctx.ref), "names": present}
                )
        restored: list[str] = []
        deleted: list[str] = []
        replaced = {n: value_fingerprint(ns[n]) for n in present}
        for action in todo:
            name = action.name
            target = targets[name]
            was_present = name in ns
            if target.absent:
                ns.pop(name, None)
                deleted.append(name)
            else:
                assert target.blob is not None
                ns[name] = loaded[target.blob][name]
                restored.append(name)
            after = value_fingerprint(ns[name]) if name in ns else None
            if was_present and name not in record_cannot:
                record_names[name] = {
                    "change": "changed",
                    "group": 0,
                    "after": after,
                    "before": replaced.get(name),
                }
            elif not was_present:
                record_names[name] = {"change": "created", "group": None, "after": after}
        record = {
            "names": record_names,
            "groups": record_groups,
            "cannot": record_cannot,
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        result = StateResult(
            PARTICIPANT,
            restored=tuple(restored),
            deleted=tuple(deleted),
            forced=tuple(a.name for a in todo if a.action == "conflict"),
            cannot=tuple(f"{a.name} ({a.summary})" for a in plan.actions if a.action == "cannot"),
            notes=plan.notes,
        )
        return result, record if record_names else {}
