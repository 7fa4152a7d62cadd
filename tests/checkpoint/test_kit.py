"""The public conformance kit itself: ``validate`` passes a correct third-party backend and
names the checks a broken one fails."""

from __future__ import annotations

from pathlib import Path

from lite_agent_jupyter.checkpoint.memory import MemoryCheckpointer
from lite_agent_jupyter.testing import CHECKS, Backend, checks_for, validate

_SHARED: dict[str, MemoryCheckpointer] = {}


class ForgetfulHead(MemoryCheckpointer):
    """Breaks the contract: ``head`` always says 0."""

    async def head(self, session_id: str) -> int:
        await super().head(session_id)
        return 0


def open_forgetful(location: str) -> ForgetfulHead:
    return ForgetfulHead()


def open_shared(location: str) -> MemoryCheckpointer:
    """A "third-party" backend whose objects on one location share state (in this process)."""
    return _SHARED.setdefault(location, MemoryCheckpointer())


async def test_a_correct_backend_passes(tmp_path: Path) -> None:
    backend = Backend(
        "shared-memory",
        new_location=lambda folder: str(folder),
        opener=f"{__name__}:open_shared",
        processes=False,  # the state lives in one process only
        usable_after_close=True,
        model_examples=10,
    )
    report = await validate(backend)
    assert report.ok, str(report)
    assert "another_object_sees_everything" in report.passed
    assert set(report.passed) == {c.name for c in checks_for(backend)}
    assert "processes_append_concurrently" not in report.passed


async def test_a_broken_backend_fails_with_names() -> None:
    backend = Backend(
        "forgetful",
        new_location=lambda folder: "x",
        opener=f"{__name__}:open_forgetful",
        persistent=False,
        processes=False,
        usable_after_close=True,
        model_examples=10,
    )
    report = await validate(backend, only=["append_assigns_gap_free_seqs_from_one", "truncate"])
    assert not report.ok
    assert set(report.failed) == {"append_assigns_gap_free_seqs_from_one", "truncate"}
    assert "FAILED truncate" in str(report)
    try:
        report.raise_for_failures()
    except AssertionError as exc:
        assert "forgetful" in str(exc)
    else:
        raise AssertionError("raise_for_failures did not raise")


def test_every_check_documents_itself() -> None:
    checks_for(Backend("any", lambda folder: "memory:"))
    assert len(CHECKS) >= 30
    assert all(c.name and c.function for c in CHECKS.values())
