"""``%agent model [SERVER] [MODEL]``: which server and model answer (local models included).

Owns this subcommand: it sets ``LiteAgentMagics.base_url`` (a URL, or a preset: ollama,
lmstudio, vllm, litellm; ``anthropic`` for Anthropic's API) and ``model_name``, and shows what
the server was seen to refuse (its profile, ``providers/servers.py``). Must not know the
other domains' commands.
"""

from __future__ import annotations

import argparse

from IPython.core.error import UsageError

from ...providers.servers import PRESETS, resolve_base_url
from .. import answering, render
from ..magics import LiteAgentMagics
from ..registry import arg, subcommand


def _is_server(word: str) -> bool:
    if word.lower() == "anthropic":
        return True
    try:
        resolve_base_url(word)
    except ValueError:
        return False
    return True


@subcommand(
    "model",
    "Show or set the server and model: %agent model ollama qwen3-coder (presets: "
    f"{', '.join(PRESETS)}, anthropic; or a URL).",
    arg("target", nargs="?", help="a preset, a URL, or (alone) a model id"),
    arg("model", nargs="?", help="the model id on that server"),
)
def _model(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    target, model = args.target, args.model
    if target is not None:
        if model is None and not _is_server(target):
            magics.model_name = target  # one word that is not a server: the model id
        elif not _is_server(target):
            raise UsageError(
                f"%agent model: {target!r} is neither a preset ({', '.join(PRESETS)}, "
                "anthropic) nor an http(s) URL"
            )
        else:
            magics.base_url = target
            if model is not None:
                magics.model_name = model
    print(render.key_value_text(model_rows(magics)))


def model_rows(magics: LiteAgentMagics) -> list[tuple[str, object]]:
    """The model, and its server with what the server was seen to refuse."""
    rows: list[tuple[str, object]] = [
        ("model", answering.describe(magics.builder.build_model(), magics.model_name))
    ]
    return rows + answering.server_rows(magics.builder.live_model())
