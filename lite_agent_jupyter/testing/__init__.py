"""A conformance kit for Checkpointer backends: run the package's own contract on yours.

Describe how to reach a fresh store of your backend, then run every check::

    from lite_agent_jupyter.testing import Backend, validate

    backend = Backend(
        "mine",
        new_location=lambda folder: str(folder / "store"),  # a fresh, empty store
        opener="my_package.store:open_store",  # open_store(location) -> Checkpointer
    )
    report = await validate(backend)
    report.raise_for_failures()

or one pytest test per check (as this project does for its own backends)::

    @pytest.mark.parametrize("name", [c.name for c in checks_for(backend)])
    async def test_conformance(name: str) -> None:
        await run_check(name, backend)

The checks: the contract (append, read, head, list, delete, truncate, expected_head, ids,
large and odd payloads, concurrency inside one process, close, sync), several OS processes
appending at once, a writer killed with SIGKILL mid-append, a Hypothesis state machine
comparing the backend with the memory backend, and the optional session capabilities
(deletes that stay deleted, turn claims) within an object, across objects and processes.
``opener`` must be importable by name so that child processes can open the same store. The
state-machine check needs ``hypothesis``.
"""

from ._kit import (
    CHECKS,
    Backend,
    Check,
    Child,
    Context,
    assistant,
    batch,
    canon,
    canon_all,
    payloads,
    prompt,
    raises,
    tool_result,
    user,
)
from ._runner import Report, checks_for, run_check, validate

__all__ = [
    "CHECKS",
    "Backend",
    "Check",
    "Child",
    "Context",
    "Report",
    "assistant",
    "batch",
    "canon",
    "canon_all",
    "checks_for",
    "payloads",
    "prompt",
    "raises",
    "run_check",
    "tool_result",
    "user",
    "validate",
]
