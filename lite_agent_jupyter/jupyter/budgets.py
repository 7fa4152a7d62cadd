"""Cost budgets in the notebook: a cell's caps, the administrator's lock, the price table's age.

``LiteAgentMagics.max_turn_cost`` / ``max_session_cost`` (dollars) cap every ``%%agent``
cell; ``%%agent --max-cost X`` caps one. A value set in the kernel's configuration
(``ipython_config.py`` in the IPython profile, or ``--LiteAgentMagics.max_turn_cost=...`` on
the kernel's command line) is a **lock**: ``%config`` and ``--max-cost`` may lower it but
not raise or remove it.

How a lock is told apart from ``%config``: ``%config`` merges into the same ``Config``
object the application loaded the files into, so the live configuration cannot say where a
value came from. The lock is therefore read from the sources themselves: the files the
application loaded (``Application.loaded_config_files``, read again) and its command line
(``cli_config``), once per process. A student's ``%config`` (even before reloading the
extension) cannot move it. It is a classroom rule, not a sandbox: Python code in the kernel
can build its own agent or call the API directly with the key.

Must not import the magics (it is given the shell and the values).
"""

from __future__ import annotations

import os
import threading
from datetime import date
from typing import TYPE_CHECKING, Any

from traitlets import TraitError
from traitlets.config import Application, Config
from traitlets.config.loader import FileConfigLoader, JSONFileConfigLoader, PyFileConfigLoader

from ..agent.prices import PRICES_CHECKED, PRICES_SOURCE, STALE_AFTER_DAYS, prices_age_days
from ..errors import BudgetError

if TYPE_CHECKING:
    from ..agent import LiteAgentResult
    from ..agent.budget import Budget

LOCKABLE = ("max_turn_cost", "max_session_cost")
SECTION = "LiteAgentMagics"


def _application(shell: Any) -> Application | None:
    """The application that loaded the configuration (walking up the ``parent`` chain:
    shell -> kernel -> kernel app), ``None`` for a shell made without one (tests)."""
    node = shell
    for _ in range(8):
        if node is None or isinstance(node, Application):
            return node
        node = getattr(node, "parent", None)
    return None


_LOCKS: dict[str, float] | None = None
_LOCKS_GUARD = threading.Lock()


def _configured(app: Application) -> Config:
    """What the configuration files and the command line say, read from the sources."""
    config = Config()
    for path in app.loaded_config_files:
        folder, name = os.path.split(path)
        loader: FileConfigLoader = (
            JSONFileConfigLoader(name, folder)
            if name.endswith(".json")
            else PyFileConfigLoader(name, folder)
        )
        try:
            config.merge(loader.load_config())
        except Exception:  # unreadable now: it was read at start; keep what the others say
            continue
    if isinstance(app.cli_config, Config):
        config.merge(app.cli_config)
    return config


def locked_caps(shell: Any) -> dict[str, float]:
    """The caps the kernel's configuration files and command line set: name -> dollars
    (read once per process)."""
    global _LOCKS
    with _LOCKS_GUARD:
        if _LOCKS is None:
            app = _application(shell)
            _LOCKS = _caps(_configured(app)) if app is not None else {}
        return dict(_LOCKS)


def _caps(config: Config) -> dict[str, float]:
    if SECTION not in config:
        return {}
    section = config[SECTION]
    found: dict[str, float] = {}
    for name in LOCKABLE:
        if name in section:
            value = section[name]
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                found[name] = float(value)
    return found


def checked_cap(name: str, value: object, shell: Any) -> float | None:
    """A proposed value of ``name`` (``%config``): a number of dollars above 0, or ``None``;
    at most the lock when there is one. Raises ``TraitError`` (what ``%config`` reports)."""
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise TraitError(f"LiteAgentMagics.{name}: a number of dollars above 0, or None")
        value = float(value)
    lock = locked_caps(shell).get(name)
    if lock is not None and (value is None or value > lock):
        raise TraitError(
            f"LiteAgentMagics.{name} is locked at ${lock:.2f} by the kernel's configuration "
            f"(ipython_config.py): it can be lowered, not raised or removed"
        )
    return value


def cell_caps(
    max_cost: float | None, turn: float | None, session: float | None, shell: Any
) -> tuple[float | None, float | None]:
    """The ``(turn, session)`` cost caps of one ``%%agent`` cell: ``--max-cost`` (else the
    setting) for the turn, each no higher than its lock. ``--max-cost`` above the lock is
    refused with a :class:`BudgetError` naming it."""
    locks = locked_caps(shell)
    if max_cost is not None:
        if not max_cost > 0:
            raise BudgetError("%%agent --max-cost: a number of dollars above 0")
        lock = locks.get("max_turn_cost")
        if lock is not None and max_cost > lock:
            raise BudgetError(
                f"%%agent --max-cost {max_cost:g}: this kernel's configuration caps a cell at "
                f"${lock:.2f} (a lock set in ipython_config.py)"
            )
        turn = max_cost
    return _at_most(turn, locks.get("max_turn_cost")), _at_most(
        session, locks.get("max_session_cost")
    )


def capped(name: str, value: float | None, shell: Any) -> float | None:
    """The setting ``name`` (``max_turn_cost`` or ``max_session_cost``) no higher than its
    lock: the cap the kernel's agent is built with."""
    return _at_most(value, locked_caps(shell).get(name))


def _at_most(value: float | None, lock: float | None) -> float | None:
    if lock is None:
        return value
    return lock if value is None else min(value, lock)


def caps_text(turn: float | None, session: float | None, shell: Any) -> str:
    """``%agent info``'s line about the cost caps in force, and which are locked."""
    locks = locked_caps(shell)
    turn, session = cell_caps(None, turn, session, shell)
    parts = []
    for label, value, name in (
        ("per cell", turn, "max_turn_cost"),
        ("per session", session, "max_session_cost"),
    ):
        text = "none" if value is None else f"${value:.2f}"
        if name in locks:
            text += f" (locked at ${locks[name]:.2f} by the kernel's configuration)"
        parts.append(f"{label} {text}")
    return ", ".join(parts)


def budget_status(result: LiteAgentResult, budget: Budget | None) -> str | None:
    """The status line of a cell its budget stopped, naming the cap that did."""
    if result.stop_reason != "budget":
        return None
    reason = (result.reason or "").removeprefix("budget: ")
    if reason.endswith("tokens used"):
        cap = budget.turn_tokens if budget is not None else None
        limit = f" ({cap:,} tokens)" if cap else ""
        what = f"this turn's token budget{limit}"
    else:
        what = f"a cost budget ({reason})" if reason else "a budget"
    return (
        f"stopped: {what} would be passed by another model call; the session is intact and "
        "the next %%agent cell (with a higher cap if need be) continues it"
    )


def price_table_row(today: date | None = None) -> tuple[str, str]:
    """``%agent info``'s line about the price table: its date, and a warning once it is older
    than :data:`STALE_AFTER_DAYS` days."""
    age = prices_age_days(today)
    text = f"Anthropic's, in US dollars, checked {PRICES_CHECKED.isoformat()} ({PRICES_SOURCE})"
    if age > STALE_AFTER_DAYS:
        text += (
            f"; WARNING: the table is {age} days old, prices may have changed: check them and "
            "set LiteAgentMagics.prices, or upgrade lite_agent_jupyter"
        )
    return "prices", text
