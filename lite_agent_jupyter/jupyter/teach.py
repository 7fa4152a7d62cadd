"""Teaching mode in the notebook: ``%agent record PATH``, ``%agent replay PATH``, ``%agent live``.

Owns where the kernel's agent gets its answers (the live model, the live model recording to
a cassette, or a cassette replayed with no key and no network), what the ``replay`` settings
of :class:`~.magics.LiteAgentMagics` mean, the note and footer that mark replayed answers,
and the usage lines of ``%agent info`` (per session and per notebook, with a cost only from
prices the user gives). The cassette format is ``providers/cassette/``'s. Must not import
the magics (it reads them through :class:`TeachSettings`) nor register subcommands: the
``%agent record`` / ``replay`` / ``live`` commands are ``commands/teaching.py``.

A teacher records at home (``%agent record lesson.jsonl``, then the lesson's ``%%agent``
cells with the real model) and replays in class (``%agent replay lesson.jsonl``, or
``%config LiteAgentMagics.replay = "lesson.jsonl"`` in the first cell): the same cells get the
same answers and make the same files, with no API key in the room.

Loaded by ``%load_ext``: what only a cell, a setting or a subcommand needs is imported in
the function that needs it (names for annotations under ``TYPE_CHECKING``), so registering
the magics stays cheap (#32, docs/design.md "Loading on first use").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from IPython.core.error import UsageError

from . import answering

if TYPE_CHECKING:
    from ..agent import LiteAgent, Price
    from ..providers import RecordingProvider, ReplayProvider
    from ..providers.base import Provider
    from .context import NotebookLocation
    from .runner import AgentRunner


@dataclass
class TeachState:
    """The kernel's model source beyond the live model: a recording or a replay."""

    record_path: Path | None = None
    recorder: tuple[object, RecordingProvider] | None = None
    player: tuple[object, ReplayProvider] | None = None
    fresh: bool = False
    """The next ``%%agent`` cell starts a new session (set by record and replay)."""


class TeachSettings(Protocol):
    """What teaching mode reads of the magics (``LiteAgentMagics`` is one): the settings
    and state it needs, so that this module stays below the magics (no import circle)."""

    teach: TeachState
    location: NotebookLocation
    runner: AgentRunner

    @property
    def replay(self) -> str: ...

    @property
    def replay_speed(self) -> float: ...

    @property
    def replay_strict(self) -> bool: ...

    @property
    def prices(self) -> dict[Any, Any]: ...


def take_fresh_start(magics: TeachSettings, *, continued: bool) -> bool:
    """Whether the next turn must start a new session: right after ``%agent record`` or
    ``%agent replay`` (and in a new kernel with ``replay`` set), so the recorded requests and
    the replayed ones begin from the same empty conversation instead of continuing whatever
    session the notebook's storage holds."""
    state = magics.teach
    fresh = state.fresh or (bool(magics.replay) and not continued)
    state.fresh = False
    return fresh


def cassette_path(magics: TeachSettings, value: str) -> Path:
    """A cassette path as the user wrote it: relative to the notebook's folder."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else magics.location.folder / path


def choose_model(magics: TeachSettings, live: Provider | None) -> Provider | None:
    """The provider for the next turn: the replay if ``replay`` is set, else the live model
    (wrapped by a recorder while recording), else ``None`` (no key)."""
    from ..providers import record, replay

    state = magics.teach
    if magics.replay:
        path = cassette_path(magics, magics.replay)
        fallback = None if magics.replay_strict else live
        if not magics.replay_strict and fallback is None:
            raise UsageError(
                "LiteAgentMagics.replay_strict = False hands new requests to the live model, "
                "but there is no API key (%agent key)"
            )
        replay_key = (path, float(magics.replay_speed), magics.replay_strict, id(fallback))
        if state.player is None or state.player[0] != replay_key:
            player = replay(
                path,
                speed=float(magics.replay_speed),
                strict=magics.replay_strict,
                fallback=fallback,
            )
            state.player = (replay_key, player)
        return state.player[1]
    if state.record_path is not None and live is not None:
        record_key = (state.record_path, id(live))
        if state.recorder is None or state.recorder[0] != record_key:
            state.recorder = (record_key, record(live, state.record_path))
        return state.recorder[1]
    return live


def top_note(model: Provider) -> str | None:
    """The note shown above a turn's answer, if any."""
    from ..providers import ReplayProvider

    if isinstance(model, ReplayProvider):
        return (
            f"replaying {model.path.name}: answers recorded earlier, no model is called "
            "(`%agent live` for the live model)"
        )
    return None


# ------------------------------------------------------------------------ usage for %agent info


def prices(magics: TeachSettings) -> dict[str, Price] | None:
    """``LiteAgentMagics.prices`` as :class:`Price` objects (``None`` when not set)."""
    from ..agent import Price

    raw: dict[str, Any] = dict(magics.prices or {})
    if not raw:
        return None
    out: dict[str, Price] = {}
    for model, value in raw.items():
        if not isinstance(value, dict):
            raise UsageError(
                f"LiteAgentMagics.prices[{model!r}]: expected a dict like "
                "{'input': 3.0, 'output': 15.0} (per million tokens)"
            )
        try:
            out[str(model)] = Price(**value)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"LiteAgentMagics.prices[{model!r}]: {exc}") from None
    return out


def usage_rows(magics: TeachSettings, agent: LiteAgent | None) -> list[tuple[str, object]]:
    """``%agent info`` rows: where answers come from, this session's and this notebook's
    usage (read from the logs, so they include earlier kernels)."""
    from ..agent import UsageTotals
    from ..providers import RecordingProvider, ReplayProvider

    rows: list[tuple[str, object]] = []
    model = agent.model if agent is not None else None
    if isinstance(model, ReplayProvider):
        source = (
            f"replaying {model.path} ({model.recorded_calls} recorded calls; served "
            f"{model.served}, live {model.fallback_calls}; speed {model.speed:g})"
        )
    elif isinstance(model, RecordingProvider):
        inner = answering.describe(model.inner, agent.options.model_name if agent else "")
        source = f"{inner}, recording to {model.path} ({model.calls} calls so far)"
    else:
        source = answering.describe(model, agent.options.model_name if agent else "")
    rows.append(("answers", source))
    if agent is None:
        return rows
    given = prices(magics)
    facade = magics.runner.facade
    session: UsageTotals = facade.call(lambda a: a.usage(prices=given))
    rows.append(("session usage", session.summary()))
    if agent.sessions_enabled:
        by_session: dict[str, UsageTotals] = facade.call(lambda a: a.usage_by_session(prices=given))
        total = sum(by_session.values(), UsageTotals())
        count = len(by_session)
        rows.append(("notebook usage", f"{total.summary()} in {count} session{'s' * (count != 1)}"))
    return rows
