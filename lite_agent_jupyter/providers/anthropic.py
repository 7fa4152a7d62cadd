"""The Anthropic Messages API provider, on the official ``anthropic`` async client.

Owns: turning a :class:`~.base.ModelRequest` into a streamed ``POST /v1/messages`` (with
prompt-cache breakpoints), the SDK events into :class:`~.base.ProviderEvent` objects, SDK
failures into :class:`~lite_agent_jupyter.errors.ProviderError`, and the abort signal into a
closed HTTP stream. Knows nothing of sessions, tools or Jupyter.

Event loops: an ``httpx`` client (and so an ``AsyncAnthropic``) is bound to the event loop that
first used it; using it from another loop fails ("bound to a different event loop"). The agent
runs on its own loop thread, so the client is created lazily, inside the running loop, on first
use, and one client is kept per loop: the same provider object works from the agent's loop
and, say, a test's loop, each with its own connections. A ``client=`` you pass is used as is,
from whatever loop calls; it stays yours to close.

Secrets: the API key (argument, else ``ANTHROPIC_API_KEY``, else ``ANTHROPIC_AUTH_TOKEN``, like
the SDK) is stripped of surrounding whitespace (a key read from a file keeps its newline) and
validated when the provider is built and again when a client is made: a malformed key raises
:class:`~lite_agent_jupyter.errors.InvalidAPIKeyError`, which says where and why but never
shows the key (the HTTP layer, given such a key, raises an error quoting it). The key is kept
in a private attribute, never put in a ``repr``, an error message or a log record of this
module, and offered to the agent's redactor through :meth:`AnthropicProvider.secret_values`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import weakref
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, Final

from ..abort import AbortSignal
from ..errors import (
    AuthenticationError,
    InvalidAPIKeyError,
    MissingAPIKeyError,
    ProviderError,
    TokenCountUnavailableError,
)
from ..redact import Redactor, env_secrets
from ._check import MAX_CACHE_BREAKPOINTS, count_cache_control
from .base import MessageDone, ModelRequest, ProviderEvent, TextDelta, ToolUseStarted, Usage
from .servers import (
    ServerProfile,
    is_anthropic,
    profile_for,
    refused_part,
    resolve_base_url,
    server_name,
)

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["DEFAULT_MAX_RETRIES", "AnthropicProvider", "anthropic"]

DEFAULT_MAX_RETRIES: Final = 4
"""Retries of 429 / 529 / 5xx / connection errors (the SDK's backoff, honouring ``retry-after``).
Higher than the SDK's 2: an agent turn is long and an overloaded API is usually brief."""

_EPHEMERAL: Final = {"type": "ephemeral"}
_DRAIN_SECONDS: Final = 1.0
"""How long to wait, after ``message_stop``, for the rest of the HTTP body."""
_NO_KEY: Final = "no-key"
"""What is sent as the key to a server other than Anthropic's when none is set: local servers
ignore it, and the client needs one."""
_MISSING_KEY: Final = (
    "No Anthropic API key: set the ANTHROPIC_API_KEY environment variable "
    "(or pass anthropic(api_key=...)). For an offline demo use providers.scripted([...])."
)


def anthropic(
    api_key: str | None = None,
    base_url: str | None = None,
    *,
    max_retries: int = DEFAULT_MAX_RETRIES,
    timeout: float | None = None,
    cache: bool = True,
    client: AsyncAnthropic | None = None,
    metadata: dict[str, Any] | None = None,
) -> AnthropicProvider:
    """The Anthropic Messages API (or a server that speaks it) as a provider.

    ``api_key``/``base_url`` default to ``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL``.
    ``base_url`` may be a preset of a local server: ``ollama`` (http://127.0.0.1:11434),
    ``lmstudio`` (:1234), ``vllm`` (:8000), ``litellm`` (:4000); see
    ``providers/servers.py`` and docs/local-models.md. A server named here other than
    Anthropic's needs no key (``no-key`` is sent when none is set; with
    ``ANTHROPIC_BASE_URL`` a key is required, as in the SDK). ``metadata`` (e.g.
    ``{"user_id": "<opaque id>"}``) goes with every request, unless the server refuses it.
    The key is stripped and checked here: a malformed one raises
    :class:`~lite_agent_jupyter.errors.InvalidAPIKeyError` at once; a missing one raises
    :class:`~lite_agent_jupyter.errors.MissingAPIKeyError` from the first call (the variable
    may be set in between). ``max_retries`` and ``timeout`` (seconds; ``None``: the SDK's
    default) go to the SDK, which retries 429/529/5xx and connection errors with backoff and
    honours ``retry-after``. ``cache`` marks prompt-cache breakpoints (see
    :meth:`AnthropicProvider.build_params`). ``client``: an ``AsyncAnthropic`` to use
    instead of creating one (then the other options are ignored).
    """
    return AnthropicProvider(
        api_key=api_key,
        base_url=base_url,
        max_retries=max_retries,
        timeout=timeout,
        cache=cache,
        client=client,
        metadata=metadata,
    )


class AnthropicProvider:
    """Streams Messages API calls through ``anthropic.AsyncAnthropic``. See :func:`anthropic`."""

    name = "anthropic"
    is_real_model = True

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float | None = None,
        cache: bool = True,
        client: AsyncAnthropic | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if base_url is not None:
            base_url = resolve_base_url(base_url)
        if api_key is not None:
            self._api_key: _Secret | None = _Secret(_checked_key(api_key, "api_key="))
        else:
            self._api_key = None
            _env_key()  # a malformed key in the environment is an error now, not mid-turn
        self._base_url = base_url
        self.max_retries = max_retries
        self.timeout = timeout
        self.cache = cache
        self._given_client = client
        self.metadata = dict(metadata) if metadata else None
        self.profile: ServerProfile = profile_for(self._where())
        """What this provider's server was seen to refuse (shared per base URL)."""
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncAnthropic] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return (
            f"AnthropicProvider(base_url={self._where()!r}, max_retries={self.max_retries}, "
            f"cache={self.cache})"
        )

    # -- client

    def _client(self) -> AsyncAnthropic:
        """The client for the running loop, created on first use (must run inside the loop)."""
        if self._given_client is not None:
            return self._given_client
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            key = self._api_key.value if self._api_key is not None else _env_key()
            if not key and self._base_url is not None and not self.is_anthropic:
                key = _NO_KEY  # a server named here, not Anthropic's: it needs no key
            if not key:
                raise MissingAPIKeyError(_MISSING_KEY) from None
            from anthropic import AsyncAnthropic  # lazy: importing the SDK costs ~0.5 s

            options: dict[str, Any] = {"max_retries": self.max_retries}
            if self._base_url is not None:
                options["base_url"] = self._base_url
            if self.timeout is not None:
                options["timeout"] = self.timeout
            client = AsyncAnthropic(api_key=key, **options)
            self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the clients this provider created (idempotent; a later call makes new ones).

        The client of the running loop is closed here; a client of another, still running loop
        is closed on that loop; one whose loop is gone is dropped.
        """
        clients, self._clients = dict(self._clients), weakref.WeakKeyDictionary()
        current = asyncio.get_running_loop()
        for loop, client in clients.items():
            if loop is current:
                await client.close()
            elif loop.is_running():
                with contextlib.suppress(Exception):
                    future = asyncio.run_coroutine_threadsafe(client.close(), loop)
                    await asyncio.wait_for(asyncio.wrap_future(future), 5)

    def secret_values(self) -> tuple[str, ...]:
        """The secret values this provider may use (its key, as given and stripped, and the
        key variables of the environment): for the agent's redactor, never for display."""
        values = env_secrets(_KEY_VARIABLES)
        if self._api_key is not None:
            values.append(self._api_key.value)
        return tuple(values)

    @property
    def base_url(self) -> str:
        """The server's base URL (the argument, else ``ANTHROPIC_BASE_URL``, else Anthropic's)."""
        return self._where()

    @property
    def is_anthropic(self) -> bool:
        """Whether the server is Anthropic's own API (prices apply; a key is required)."""
        return is_anthropic(self._where())

    @property
    def local_server(self) -> str | None:
        """``ollama at http://127.0.0.1:11434`` or the URL when a server other than
        Anthropic's was named here (``base_url=``); ``None`` otherwise. ``ANTHROPIC_BASE_URL``
        alone does not count: it is as often a gateway to Anthropic's API as a local server,
        so its models keep Anthropic's prices and names."""
        if self._base_url is None or is_anthropic(self._base_url):
            return None
        return server_name(self._base_url)

    # -- request building

    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The ``messages.create`` keyword arguments for ``request`` (never mutates it).

        With ``cache`` (default), up to four ``cache_control: ephemeral`` breakpoints mark the
        stable prefix: the last tool definition, the system prompt, the last message of the
        previous request (the user message before the latest assistant reply: read from the
        cache) and the last message (written for the next request, so the breakpoint moves
        with the conversation). A request that already carries ``cache_control`` anywhere is
        left as the caller made it.
        """
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": request.messages,
        }
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = request.tools
        if self.metadata is not None:
            params["metadata"] = self.metadata
        if self.cache and not _has_cache_control(request):
            _add_breakpoints(params)
        profile = self.profile
        if profile.drops:  # the only per-request cost of profiles, and only once one is learned
            params = profile.strip(params)
        return params

    # -- Provider protocol

    async def stream(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncGenerator[ProviderEvent, None]:
        """Stream one assistant message: text deltas, tool-use starts, then ``MessageDone``.

        The HTTP stream is read by a task of its own, so an abort closes it at once even while
        the consumer is busy elsewhere; the next step of this iterator then raises
        ``asyncio.CancelledError``. Cancelling the consuming task, or closing this iterator
        early (``contextlib.aclosing``), closes the stream as well.
        """
        signal.raise_if_aborted()
        client = self._client()
        params = self.build_params(request)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[ProviderEvent | _End] = asyncio.Queue()
        reader = loop.create_task(self._read(client, params, queue), name="anthropic-stream")

        def on_abort(reason: str) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to stop
                loop.call_soon_threadsafe(reader.cancel)

        remove_callback = signal.add_callback(on_abort)
        try:
            while True:
                item = await queue.get()
                if signal.aborted:
                    raise asyncio.CancelledError(signal.reason)
                if isinstance(item, _End):
                    if item.error is not None:
                        raise self._provider_error(item.error) from item.error
                    raise asyncio.CancelledError(signal.reason)
                yield item
                if isinstance(item, MessageDone):
                    # let the reader drain the body's last bytes so the connection is reused
                    # (mostly done already: the end came in the same read as the message's)
                    if not reader.done():
                        await asyncio.wait({reader}, timeout=_DRAIN_SECONDS)
                    return
        finally:
            remove_callback()
            if not reader.done():
                reader.cancel()
                await asyncio.wait({reader})

    async def _read(
        self,
        client: AsyncAnthropic,
        params: dict[str, Any],
        queue: asyncio.Queue[ProviderEvent | _End],
    ) -> None:
        """Run one streamed request: put its events, then an :class:`_End` unless complete."""
        stream: Any = None
        end: _End | None = _End(None)  # stays "aborted" if cancelled
        try:
            stream = await self._create(client, params)
            message = _Accumulator()
            async for event in stream:
                produced = message.add(event)
                if produced is not None:
                    queue.put_nowait(produced)
                if message.done and end is not None:
                    queue.put_nowait(message.result())
                    end = None
                # keep reading to the end of the body (it ends right after message_stop):
                # a response read to the end returns its connection to the pool for reuse
            if end is not None:
                end = _End(_IncompleteStream("the stream ended before message_stop"))
        except Exception as exc:
            end = _End(exc if stream is None else _mid_stream(exc))
        finally:
            if stream is not None:
                with contextlib.suppress(Exception):
                    await stream.close()
            if end is not None:
                queue.put_nowait(end)

    async def _create(self, client: AsyncAnthropic, params: dict[str, Any]) -> Any:
        """``messages.create(stream=True)``; a 400 naming a part the server refuses
        (``cache_control``, ``metadata``) is learned in the profile and the request sent again
        without it (once per part: nothing refused is ever sent twice)."""
        import anthropic as sdk

        while True:
            try:
                return await client.messages.create(**params, stream=True)
            except sdk.APIStatusError as exc:
                detail = exc.api_message or _error_message(exc.body) or exc.message
                part = refused_part(exc.status_code, str(detail))
                if part is None or part in self.profile.drops:
                    raise
                self.profile.learn_drop(part)
                params = self.profile.strip(params)

    async def count_tokens(self, request: ModelRequest) -> int:
        """Input tokens of ``request``, from the API's ``/v1/messages/count_tokens``.

        A server without the endpoint (404 or 405, learned once per base URL) raises
        :class:`~lite_agent_jupyter.errors.TokenCountUnavailableError` without asking again:
        the caller estimates (see ``agent/compact.py``)."""
        profile = self.profile
        if not profile.count_tokens:
            raise TokenCountUnavailableError(self._no_count_tokens())
        client = self._client()
        params: dict[str, Any] = {"model": request.model, "messages": request.messages}
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = request.tools
        if profile.drops:
            params = profile.strip(params)
        try:
            result = await client.messages.count_tokens(**params)
        except Exception as exc:
            if getattr(exc, "status_code", None) in (404, 405):
                profile.learn_no_count_tokens()
                raise TokenCountUnavailableError(self._no_count_tokens()) from exc
            raise self._provider_error(exc) from exc
        return int(result.input_tokens)

    def _no_count_tokens(self) -> str:
        return f"the server at {self._where()} has no count_tokens endpoint (404/405)"

    # -- errors

    def _provider_error(self, exc: BaseException) -> ProviderError:
        error = self._describe(exc)
        redacted = Redactor(self.secret_values()).text(str(error))
        if redacted == str(error):
            return error
        kind = AuthenticationError if isinstance(error, AuthenticationError) else ProviderError
        return kind(redacted)

    def _describe(self, exc: BaseException) -> ProviderError:
        import anthropic as sdk

        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, sdk.APIStatusError):
            status = exc.status_code
            kind = exc.type or _error_type(exc.body) or "error"
            detail = exc.api_message or _error_message(exc.body) or exc.message
            text = f"Anthropic API error {status} {kind}: {detail}"
            if status == 200:  # an SSE `error` event in the middle of a stream
                text = f"Anthropic API stream error {kind}: {detail}"
            elif status in (408, 409, 429) or status >= 500:
                text += f" (gave up after {self.max_retries} retries)"
            if status == 401:
                text += " (check ANTHROPIC_API_KEY)"
            if exc.request_id:
                text += f" [request id {exc.request_id}]"
            if status in (401, 403):  # who asked was refused: the turn withdraws its prompt
                return AuthenticationError(text)
            return ProviderError(text)
        if isinstance(exc, sdk.APITimeoutError):
            return ProviderError(
                f"the Anthropic API timed out (gave up after {self.max_retries} retries)"
            )
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__
            why = f": {type(cause).__name__}: {cause}" if cause is not None else ""
            return ProviderError(
                f"could not reach the Anthropic API at {self._where()}{why} "
                f"(gave up after {self.max_retries} retries)"
            )
        if isinstance(exc, _IncompleteStream):
            return ProviderError(f"the Anthropic API stream broke off: {exc}")
        if _is_transport_error(exc):
            return ProviderError(
                f"the connection to the Anthropic API was lost mid-stream: "
                f"{type(exc).__name__}: {exc}"
            )
        return ProviderError(
            f"unexpected error while reading the Anthropic API stream: {type(exc).__name__}: {exc}"
        )

    def _where(self) -> str:
        if self._given_client is not None:
            return str(self._given_client.base_url).rstrip("/")
        return self._base_url or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"


_KEY_VARIABLES: Final = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def _env_key() -> str | None:
    """The key from the environment, stripped and checked; ``None`` if unset or blank."""
    for name in _KEY_VARIABLES:
        value = os.environ.get(name)
        if value and value.strip():
            return _checked_key(value, name)
    return None


def _checked_key(value: str, source: str) -> str:
    """``value`` stripped of surrounding whitespace; :class:`InvalidAPIKeyError` (naming the
    source, the position and the kind of the bad character, never the key) if what remains
    is not one word of printable ASCII; :class:`MissingAPIKeyError` if nothing remains."""
    if not isinstance(value, str):
        raise InvalidAPIKeyError(f"the Anthropic API key ({source}) must be a str")
    key = value.strip()
    if not key:
        raise MissingAPIKeyError(f"the Anthropic API key ({source}) is empty. {_MISSING_KEY}")
    for index, char in enumerate(key):
        if "!" <= char <= "~":
            continue
        if char.isspace():
            kind = "whitespace"
        elif char.isprintable():
            kind = "a non-ASCII character"
        else:
            kind = "a control character"
        raise InvalidAPIKeyError(
            f"the Anthropic API key ({source}) is malformed: character {index + 1} of "
            f"{len(key)} is {kind}; a key is one word of printable ASCII (surrounding "
            "whitespace is ignored). The key itself is not shown."
        )
    return key


class _Secret:
    """Holds the API key; its repr never shows it."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<redacted>"


def _is_transport_error(exc: BaseException) -> bool:
    """An error of the HTTP transport (socket, h11, httpcore, httpx), not of our own code."""
    if isinstance(exc, OSError):
        return True
    transports = {"httpx", "httpx2", "httpcore", "httpcore2", "h11", "anyio"}
    return any(cls.__module__.split(".")[0] in transports for cls in type(exc).__mro__)


class _End:
    """The reader finished without a complete message: ``error`` or, if None, aborted."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class _IncompleteStream(Exception):
    """The HTTP body ended cleanly but before ``message_stop``."""


def _mid_stream(exc: Exception) -> BaseException:
    """What broke a stream already under way, as :meth:`AnthropicProvider._describe` names it.

    Newer SDKs (2.x) wrap a failed read of the body in ``APIConnectionError``, which before
    the response meant "could not reach the API (after retries)"; mid-stream it is the lost
    connection beneath it, never retried."""
    import anthropic as sdk

    cause = exc.__cause__
    if (
        isinstance(exc, sdk.APIConnectionError)
        and not isinstance(exc, sdk.APITimeoutError)
        and cause is not None
        and _is_transport_error(cause)
    ):
        return cause
    return exc


class _Accumulator:
    """Builds the final message from raw stream events (tool input parsed once, at its end)."""

    def __init__(self) -> None:
        self.blocks: list[dict[str, Any]] = []
        self.json_parts: dict[int, list[str]] = {}
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.model = ""
        self.done = False

    def add(self, event: Any) -> ProviderEvent | None:
        kind = event.type
        if kind == "content_block_delta":
            delta = event.delta
            block = self.blocks[event.index]
            if delta.type == "text_delta":
                block["text"] += delta.text
                return TextDelta(delta.text)
            if delta.type == "input_json_delta":
                self.json_parts.setdefault(event.index, []).append(delta.partial_json)
            elif delta.type == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.thinking
            elif delta.type == "signature_delta":
                block["signature"] = delta.signature
            elif delta.type == "citations_delta":
                block.setdefault("citations", []).append(delta.citation.to_dict(mode="json"))
        elif kind == "content_block_start":
            block = _block_dict(event.content_block)
            self.blocks.append(block)
            if block["type"] == "tool_use":
                return ToolUseStarted(block["id"], block["name"])
        elif kind == "content_block_stop":
            parts = self.json_parts.pop(event.index, None)
            if parts and "".join(parts).strip():
                try:
                    self.blocks[event.index]["input"] = json.loads("".join(parts))
                except ValueError as exc:
                    raise _IncompleteStream(f"tool input is not valid JSON ({exc})") from exc
        elif kind == "message_start":
            message = event.message
            self.model = message.model
            self.usage = _usage(message.usage)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason
            usage = event.usage  # cumulative; optional fields omitted when unchanged
            self.usage.output_tokens = usage.output_tokens
            for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
                value = getattr(usage, name, None)
                if value is not None:
                    setattr(self.usage, name, value)
        elif kind == "message_stop":
            self.done = True
        return None

    def result(self) -> MessageDone:
        return MessageDone(self.blocks, self.usage, self.stop_reason, self.model)


def _block_dict(block: Any) -> dict[str, Any]:
    """A content block as it should be sent back in the history."""
    kind = block.type
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    data: dict[str, Any] = block.to_dict(mode="json", exclude_none=True)
    return data


def _usage(usage: Any) -> Usage:
    return Usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_creation_input_tokens=usage.cache_creation_input_tokens or 0,
        cache_read_input_tokens=usage.cache_read_input_tokens or 0,
    )


def _error_type(body: object) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    return kind if isinstance(kind, str) else None


def _error_message(body: object) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else None


# -- prompt caching


def _has_cache_control(request: ModelRequest) -> bool:
    if request.has_cache_control is not None:
        return request.has_cache_control
    return count_cache_control(request.tools) + count_cache_control(request.messages) > 0


def _add_breakpoints(params: dict[str, Any]) -> None:
    """Mark the cache breakpoints in ``params``, copying whatever it changes."""
    tools: list[dict[str, Any]] | None = params.get("tools")
    if tools:
        params["tools"] = [*tools[:-1], {**tools[-1], "cache_control": _EPHEMERAL}]
    system = params.get("system")
    if isinstance(system, str):
        params["system"] = [{"type": "text", "text": system, "cache_control": _EPHEMERAL}]
    messages: list[dict[str, Any]] = list(params["messages"])
    targets = [len(messages) - 1]
    previous = _previous_request_end(messages)
    if previous is not None:
        targets.append(previous)
    budget = MAX_CACHE_BREAKPOINTS - bool(tools) - isinstance(system, str)
    for index in targets[:budget]:
        marked = _with_breakpoint(messages[index])
        if marked is not None:
            messages[index] = marked
    params["messages"] = messages


def _previous_request_end(messages: list[dict[str, Any]]) -> int | None:
    """Index of the last user message before the latest assistant message, if any."""
    seen_assistant = False
    for index in range(len(messages) - 1, -1, -1):
        role = messages[index].get("role")
        if role == "assistant" and index < len(messages) - 1:
            seen_assistant = True
        elif role == "user" and seen_assistant:
            return index
    return None


def _with_breakpoint(message: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of ``message`` whose last cacheable block carries ``cache_control``."""
    content = message.get("content")
    if isinstance(content, str):
        if not content.strip():
            return None
        return {
            **message,
            "content": [{"type": "text", "text": content, "cache_control": _EPHEMERAL}],
        }
    if not isinstance(content, list):
        return None
    for index in range(len(content) - 1, -1, -1):
        block = content[index]
        if not isinstance(block, dict) or block.get("type") in ("thinking", "redacted_thinking"):
            continue
        if block.get("type") == "text" and not str(block.get("text", "")).strip():
            continue
        blocks = list(content)
        blocks[index] = {**block, "cache_control": _EPHEMERAL}
        return {**message, "content": blocks}
    return None
