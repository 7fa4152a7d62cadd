"""The kit's runner: which checks apply to a backend, running one, and the report.

Owns :func:`checks_for`, :func:`run_check`, :func:`validate` and :class:`Report`, and loads
the modules that register checks on first use (not when the kit is imported: the
state-machine check needs Hypothesis). Those modules import the kit's machinery
(``_kit.py``), never this module, so the kit has no import circle.
"""

from __future__ import annotations

import asyncio
import inspect
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ._kit import CHECKS, Backend, Check, Context, check


def checks_for(backend: Backend) -> list[Check]:
    """The checks that apply to ``backend`` (a check needing processes is not run against a
    backend that says it cannot be shared)."""
    _load()
    return [c for c in CHECKS.values() if c.applies_to(backend)]


async def run_check(name: str, backend: Backend) -> None:
    """Run one check against a fresh store of ``backend``; raises what the check raises."""
    _load()
    chosen = CHECKS[name]
    if not chosen.applies_to(backend):
        needs = ", ".join(sorted(chosen.needs))
        raise ValueError(f"check {name!r} needs {needs}; backend {backend.name!r} lacks it")
    with tempfile.TemporaryDirectory(prefix="lite-agent-kit-") as scratch:
        folder = Path(scratch)
        if inspect.iscoroutinefunction(chosen.function):
            ctx = Context(backend, folder)
            try:
                await chosen.function(ctx)
            finally:
                await ctx.close()
                if backend.drop_location is not None:
                    backend.drop_location(ctx.location)
        else:
            function: Callable[[Backend, Path], None] = chosen.function  # type: ignore[assignment]
            await asyncio.to_thread(function, backend, folder)


@dataclass
class Report:
    """What :func:`validate` found: one entry per check run."""

    backend: str
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Check name -> the failure (traceback)."""

    @property
    def ok(self) -> bool:
        return not self.failed

    def raise_for_failures(self) -> None:
        if self.failed:
            names = ", ".join(self.failed)
            first = next(iter(self.failed.values()))
            raise AssertionError(f"{self.backend}: failed {names}\n\n{first}")

    def __str__(self) -> str:
        lines = [f"{self.backend}: {len(self.passed)} passed, {len(self.failed)} failed"]
        lines += [
            f"  FAILED {name}: {text.strip().splitlines()[-1]}"
            for name, text in self.failed.items()
        ]
        return "\n".join(lines)


async def validate(backend: Backend, *, only: Sequence[str] | None = None) -> Report:
    """Run every check that applies to ``backend`` (or those named in ``only``) and report."""
    report = Report(backend.name)
    for chosen in checks_for(backend):
        if only is not None and chosen.name not in only:
            continue
        try:
            await run_check(chosen.name, backend)
        except Exception:
            report.failed[chosen.name] = traceback.format_exc()
        else:
            report.passed.append(chosen.name)
    return report


def _load() -> None:
    """Import the modules that register checks (on first use, not at import of the kit)."""
    from . import _contract, _processes, _sessions  # noqa: F401

    try:
        from . import _model  # noqa: F401
    except ImportError as exc:  # Hypothesis missing: the check says so when run
        missing = str(exc)
        if "behaves_like_the_model" not in CHECKS:

            @check()
            def behaves_like_the_model(backend: Backend, folder: Path) -> None:
                """The state-machine check needs Hypothesis."""
                raise RuntimeError(
                    f"{missing}: pip install 'lite_agent_jupyter[testing]' for this check"
                )


# -- helpers for checks (and for backend-specific tests) ------------------------------------
