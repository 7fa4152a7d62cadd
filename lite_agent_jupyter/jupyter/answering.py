"""Which model answers, in words: one source for every status text that names it.

Owns the names shown for the model behind the kernel's agent: in ``%agent info``, in
``%agent record``, above an answer and in its footer. A scripted stand-in is never shown with
a real model's id, a replayed cassette says it calls no model, and only a live model's turn
shows token counts in its footer (a stand-in's are estimates nobody pays for; a replay's were
paid at recording time). Knows providers, not the magics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..providers.base import Provider

__all__ = [
    "ReplayMark",
    "TurnSource",
    "describe",
    "is_live",
    "local_server",
    "mark",
    "server_rows",
    "turn_source",
]

NO_MODEL = "none (no API key: %agent key, or lite_agent_jupyter.use_model(...))"


def _stand_in(model: Provider) -> str:
    from ..providers import ScriptedProvider

    name = "scripted model" if isinstance(model, ScriptedProvider) else str(model.name)
    return f"{name} (a stand-in that replays a script, not a real model)"


def local_server(model: Provider | None) -> str | None:
    """The server a live model is reached at when it is not Anthropic's API (``ollama at
    http://127.0.0.1:11434``, a URL), else ``None``: where "local (no price)" applies."""
    from ..providers import AnthropicProvider, RecordingProvider

    if isinstance(model, RecordingProvider):
        model = model.inner
    return model.local_server if isinstance(model, AnthropicProvider) else None


def server_rows(model: Provider | None) -> list[tuple[str, object]]:
    """``%agent info`` / ``%agent model`` rows: the server a live model is reached at and,
    for a server named with ``%agent model`` or ``base_url=``, what it was seen to refuse."""
    from ..providers import AnthropicProvider, RecordingProvider

    server = local_server(model)
    if server is None:
        return [("server", "Anthropic API" if is_live(model) else "none")]
    inner = model.inner if isinstance(model, RecordingProvider) else model
    profile = inner.profile if isinstance(inner, AnthropicProvider) else None
    learned = profile.learned() if profile is not None else []
    return [("server", server), ("learned", "; ".join(learned) or "nothing refused yet")]


def is_live(model: Provider | None) -> bool:
    """Whether answers come from a real model now (a recording of one counts; a replay not)."""
    from ..providers import RecordingProvider, ReplayProvider

    if model is None or isinstance(model, ReplayProvider):
        return False
    inner = model.inner if isinstance(model, RecordingProvider) else model
    return bool(getattr(inner, "is_real_model", True))


def describe(model: Provider | None, model_name: str) -> str:
    """The model that answers the next turn: ``claude-sonnet-4-6 (live)``, ``scripted model
    (a stand-in ...)``, ``replay of lesson.jsonl (...)``, ``... , recording to lesson.jsonl``."""
    from ..providers import RecordingProvider, ReplayProvider

    if model is None:
        return NO_MODEL
    if isinstance(model, ReplayProvider):
        text = f"replay of {model.path.name} (answers recorded earlier; no model is called)"
        if model.fallback is not None:
            fallback = describe(model.fallback, model_name)
            text = f"replay of {model.path.name}; requests not in it go to {fallback}"
        return text
    if isinstance(model, RecordingProvider):
        return f"{describe(model.inner, model_name)}, recording to {model.path.name}"
    if not getattr(model, "is_real_model", True):
        return _stand_in(model)
    server = local_server(model)
    if server is not None:
        return f"{model_name} on {server} (live)"
    return f"{model_name} (live)"


@dataclass(frozen=True)
class ReplayMark:
    """A replay's counters before a turn, to tell afterwards where its answers came from."""

    served: int
    fallback_calls: int


def mark(model: Provider) -> ReplayMark | None:
    """Taken before a turn, for :func:`turn_source` after it."""
    from ..providers import ReplayProvider

    if isinstance(model, ReplayProvider):
        return ReplayMark(model.served, model.fallback_calls)
    return None


@dataclass(frozen=True)
class TurnSource:
    """Who answered a finished turn, for its footer."""

    label: str
    """``claude-sonnet-4-6``, ``scripted model, not a real model``, ``replayed from X, not a
    live model``, ``2 answers replayed from X, 1 from claude-...``, ``..., recording to X``."""
    tokens: bool
    """Whether the footer shows token counts (only when a live model answered)."""
    local: bool = False
    """A server other than Anthropic's answered: a model without a price is ``local (no
    price)``, not a gap in the table."""


def turn_source(model: Provider, model_name: str, before: ReplayMark | None) -> TurnSource:
    """Who answered the turn that ``before`` was taken ahead of."""
    from ..providers import RecordingProvider, ReplayProvider, ScriptedProvider

    if isinstance(model, ReplayProvider):
        name = model.path.name
        live = model.fallback_calls - (before.fallback_calls if before else 0)
        if live:
            replayed = model.served - (before.served if before else 0)
            fallback = turn_source(model.fallback, model_name, None) if model.fallback else None
            source = fallback.label if fallback else "the fallback"
            return TurnSource(
                f"{replayed} answers replayed from {name}, {live} from {source}",
                fallback.tokens if fallback else False,
            )
        return TurnSource(f"replayed from {name}, not a live model", False)
    if isinstance(model, RecordingProvider):
        inner = turn_source(model.inner, model_name, None)
        return TurnSource(f"{inner.label}, recording to {model.path.name}", inner.tokens)
    if not getattr(model, "is_real_model", True):
        name = "scripted model" if isinstance(model, ScriptedProvider) else str(model.name)
        return TurnSource(f"{name}, not a real model", False)
    server = local_server(model)
    if server is not None:
        return TurnSource(f"{model_name} on {server}", True, local=True)
    return TurnSource(model_name, True)
