"""The kernel changed under the agent: exposed variables gone or changed since its last turn.

The model's picture of a variable is what it read (``inspect_variable``, ``{var}``) or what
was true at its last turn. When the person reruns a cell, edits a DataFrame or restarts the
kernel, that picture is stale and nothing tells the model. :class:`VariableWatch` keeps a
*sampled* fingerprint of each exposed variable at the end of every turn (type, shape, dtypes,
and a hash of a bounded sample: never the whole of a 1M-row DataFrame) and, before the next
prompt, says in one short note which ones changed or are missing. The names the conversation
used are read back from the session's log after a kernel restart (the calls of
``inspect_variable``), so a restart that lost them is named too.

Knows pandas/numpy only through ``sys.modules`` (nothing is imported the user did not import).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .context import is_exposed, user_variables

SAMPLE_ROWS = 64
"""Rows (or items) hashed per variable: the first, the last, and evenly spaced ones."""

TEXT_SAMPLE = 2000
"""Characters of a plain value's ``repr`` hashed."""


def _positions(length: int) -> list[int]:
    if length <= SAMPLE_ROWS:
        return list(range(length))
    step = length / SAMPLE_ROWS
    picked = {int(i * step) for i in range(SAMPLE_ROWS)} | {length - 1}
    return sorted(picked)


def fingerprint(value: object) -> str:
    """Type, shape, dtypes and a hash of a bounded sample of ``value``: equal fingerprints
    mean "very likely unchanged", at a cost independent of the value's size."""
    kind = type(value)
    digest = hashlib.blake2b(digest_size=12)
    head = f"{kind.__module__}.{kind.__qualname__}"
    try:
        pandas = sys.modules.get("pandas")
        numpy = sys.modules.get("numpy")
        if pandas is not None and isinstance(value, pandas.DataFrame | pandas.Series):
            head += f" shape={value.shape}"
            if isinstance(value, pandas.DataFrame):
                head += " dtypes=" + ",".join(f"{c}:{t}" for c, t in value.dtypes.items())
            sample = value.iloc[_positions(len(value))]
            digest.update(pandas.util.hash_pandas_object(sample, index=True).to_numpy().tobytes())
        elif numpy is not None and isinstance(value, numpy.ndarray):
            head += f" shape={value.shape} dtype={value.dtype}"
            flat = value.reshape(-1) if value.size else value
            digest.update(numpy.ascontiguousarray(flat[_positions(flat.size)]).tobytes())
        elif isinstance(value, Mapping | list | tuple):
            head += f" len={len(value)}"
            items = list(value.items()) if isinstance(value, Mapping) else value
            sample = [items[i] for i in _positions(len(items))]
            digest.update(repr(sample)[:TEXT_SAMPLE].encode("utf-8", "replace"))
        else:
            digest.update(repr(value)[:TEXT_SAMPLE].encode("utf-8", "replace"))
    except Exception as exc:  # an odd object: its type still tells a rebinding
        digest.update(f"<{type(exc).__name__}>".encode())
    return f"{head} #{digest.hexdigest()}"


@dataclass
class VariableWatch:
    """Fingerprints of the exposed variables at the end of the last turn."""

    seen: dict[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    """Names the conversation looked at (kept after a variable is gone, to name it)."""

    def record(self, user_ns: Mapping[str, Any], exposed: Sequence[str]) -> None:
        """End of a turn: remember what each exposed variable looks like now."""
        found = user_variables(user_ns, exposed)
        self.seen = {name: fingerprint(value) for name, value in found.items()}

    def remember_used(self, names: Iterable[str]) -> None:
        self.used |= set(names)

    def note(self, user_ns: Mapping[str, Any], exposed: Sequence[str]) -> str | None:
        """Before a prompt: one note naming what changed in the kernel since the last turn
        (``None`` when nothing did)."""
        if not exposed:
            return None
        found = user_variables(user_ns, exposed)
        missing = sorted(
            n for n in (set(self.seen) | self.used) if n not in found and is_exposed(n, exposed)
        )
        changed = sorted(
            n for n, old in self.seen.items() if n in found and fingerprint(found[n]) != old
        )
        parts = []
        if missing:
            parts.append(
                "no longer defined in the kernel (restarted, or deleted): " + ", ".join(missing)
            )
        if changed:
            parts.append("changed since your last turn: " + ", ".join(changed))
        if not parts:
            return None
        return (
            "[Notebook note: exposed variables " + "; ".join(parts) + ". Inspect them again "
            "before relying on what you saw; a restore rewinds only what your run_cell changed.]"
        )


def used_in_log(events: Iterable[object]) -> set[str]:
    """The variable names a session's log shows the model inspected (``inspect_variable``)."""
    names: set[str] = set()
    for event in events:
        for block in getattr(event, "content", None) or []:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_use"
                and block.get("name") == "inspect_variable"
                and isinstance((block.get("input") or {}).get("name"), str)
            ):
                names.add(block["input"]["name"])
    return names
