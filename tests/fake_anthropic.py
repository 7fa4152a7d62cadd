"""A fake Anthropic Messages API server, real HTTP on 127.0.0.1, for tests and benchmarks.

It speaks enough of the Messages API for the official ``anthropic`` client: ``POST
/v1/messages`` (SSE streaming and plain JSON) and ``POST /v1/messages/count_tokens``. A test
scripts what the "model" answers, in order::

    with FakeAnthropicServer() as server:
        server.script(
            FakeReply("Let me look.", tool_calls=[FakeToolCall("read_file", {"path": "a.txt"})]),
            rate_limited(retry_after=0.01),   # the next request gets a 429, the SDK retries
            "Done.",                          # a plain string is a text reply
        )
        client = AsyncAnthropic(api_key=server.api_key, base_url=server.url)
        ...
        assert server.message_requests[0].body["system"] == ...

Scripted items are :class:`FakeReply` (text and tool calls, stop reason, usage including cache
tokens, and misbehaviour: a connection dropped after N events, an SSE ``error`` event, a stream
that holds on a :class:`threading.Event` so a test can cancel mid-stream), :class:`FakeError`
(429 with ``retry-after``, 529, 500, 400 ...), a ``str``, or a callable ``(body) -> item`` for
dynamic scripts. When the script is empty the server answers with :attr:`default` (``None``:
a 500 saying so, which the client is told not to retry).

Requests are validated like the real API where it matters to an agent (API key, the
``anthropic-version`` header, ``tool_use`` answered by ``tool_result``, alternating roles, no
empty content, at most four ``cache_control`` blocks, see ``providers/_check.py``; images
that are not base64, not the type they are labelled, over 8,000 px a side or that do not
decode, with Pillow): an invalid
request gets a 400 ``invalid_request_error`` and does not consume a scripted item. Every request
is recorded (:class:`RecordedRequest`: parsed JSON body, lower-cased headers, status, the error
message, whether the client hung up mid-stream).

The handler sets ``TCP_NODELAY`` (``disable_nagle_algorithm``): without it every small write
waits ~40 ms for a delayed ACK and timings measure the stall, not the code.

``profile="ollama"`` makes it a local server with Ollama's documented gaps: any API key is
accepted, ``/v1/messages/count_tokens`` answers 404, and a request carrying ``cache_control``
anywhere or a ``metadata`` field gets a 400 naming it (recorded like any other request, so a
test can check that nothing refused is sent twice).

Usable outside pytest: ``server = FakeAnthropicServer().start()`` ... ``server.stop()``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import secrets
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lite_agent_jupyter.providers._check import check_request

__all__ = [
    "DEFAULT_API_KEY",
    "FakeAnthropicServer",
    "FakeError",
    "FakeReply",
    "FakeToolCall",
    "RecordedRequest",
    "ScriptItem",
    "api_error",
    "authentication_error",
    "estimate_tokens",
    "invalid_request",
    "overloaded",
    "rate_limited",
    "tool_reply",
]

_ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


_IMAGE_FORMATS = {
    "image/png": "PNG",
    "image/jpeg": "JPEG",
    "image/gif": "GIF",
    "image/webp": "WEBP",
}


def _image_problem(messages: object) -> str | None:
    """Why the Messages API would refuse an image of the request (base64 that does not
    decode, bytes of another type than the label, over 8,000 px a side or 5 MB of base64, a
    file that does not decode), else None. A request without images costs one walk."""
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, dict) else None
        for block in _image_blocks(content):
            problem = _one_image_problem(block.get("source"))
            if problem is not None:
                return f"messages.{i}.content: image: {problem}"
    return None


def _image_blocks(content: object) -> Iterator[dict[str, Any]]:
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "image":
            yield block
        elif isinstance(block, dict) and block.get("type") == "tool_result":
            yield from _image_blocks(block.get("content"))


def _one_image_problem(source: object) -> str | None:
    import base64
    import io

    from PIL import Image

    if not isinstance(source, dict) or source.get("type") != "base64":
        return None  # url and file sources are not fetched here
    media_type, data = source.get("media_type"), source.get("data")
    expected = _IMAGE_FORMATS.get(str(media_type))
    if expected is None:
        return f"media_type {media_type!r} is not one of {sorted(_IMAGE_FORMATS)}"
    if not isinstance(data, str) or len(data) > 5 * 1024 * 1024:
        return "image exceeds 5 MB maximum"
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        return "invalid base64 data"
    try:
        with Image.open(io.BytesIO(raw)) as pic:
            if pic.format != expected:
                return f"the image is {pic.format}, not the {media_type} it is labelled"
            if max(pic.size) > 8000:
                return "image dimensions exceed max allowed size: 8000 pixels"
            pic.load()
    except Exception:
        return "Could not process image"
    return None


def _random_tool_use_id() -> str:
    """``toolu_01`` and 22 random base-62 characters: the shape of the real API's ids."""
    return "toolu_01" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(22))


DEFAULT_API_KEY = "sk-ant-fake-test-key-0123456789"
_VERSION_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")


# --------------------------------------------------------------------------- script items


@dataclass(frozen=True)
class FakeToolCall:
    """A ``tool_use`` block the fake model emits; ``id`` defaults to a fresh random
    ``toolu_01...`` id, as the real API mints one per call (a counter would repeat ids once a
    new server, or a second script, answers a session that already holds them)."""

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class FakeError:
    """An HTTP error answer in the API's shape: ``{"type": "error", "error": {type, message}}``.

    ``headers`` go on the response (``retry-after``, ``retry-after-ms``, ``x-should-retry``).
    """

    status: int
    error_type: str
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FakeReply:
    """One assistant message, streamed as SSE (or returned whole for ``stream: false``).

    ``text`` as a string is split into deltas of ``text_chunk`` characters; as a sequence it
    is sent one delta per item. Tool inputs are sent as ``input_json_delta`` chunks of
    ``json_chunk`` characters. ``stop_reason`` defaults to ``tool_use`` when there are tool
    calls, else ``end_turn``. ``input_tokens``/``output_tokens`` default to a deterministic
    estimate (:func:`estimate_tokens`).

    Misbehaviour, counted in SSE events written (``message_start`` is event 1):
    ``drop_after=N`` closes the connection after N events without finishing the HTTP body;
    ``error_after=N`` sends an SSE ``error`` event (``error``, default overloaded) after N
    events and ends the stream; ``hold=event`` waits after ``hold_after`` events until the
    event is set (or the client hangs up); ``event_delay`` sleeps between events.
    """

    text: str | Sequence[str] = ""
    tool_calls: Sequence[FakeToolCall] = ()
    stop_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    model: str | None = None
    text_chunk: int = 16
    json_chunk: int = 24
    drop_after: int | None = None
    error_after: int | None = None
    error: FakeError | None = None
    hold: threading.Event | None = None
    hold_after: int = 3
    event_delay: float = 0.0


ScriptItem = FakeReply | FakeError | str | Callable[[dict[str, Any]], "FakeReply | FakeError | str"]


def tool_reply(text: str, name: str, /, **tool_input: Any) -> FakeReply:
    """A reply of ``text`` that calls one tool: ``tool_reply("On it.", "write_file",
    path="a.txt", content="hi")``."""
    return FakeReply(text, tool_calls=[FakeToolCall(name, tool_input)])


def write_then_done(path: str) -> list[FakeReply]:
    """The two replies of a turn that writes ``path`` (``write_file``: asks for approval
    under ``approvals="ask"``) and then answers "Done.": ``script(*write_then_done("a.txt"))``."""
    return [tool_reply("Writing.", "write_file", path=path, content="x\n"), FakeReply("Done.")]


def rate_limited(
    *, retry_after: float | None = None, retry_after_ms: float | None = None
) -> FakeError:
    """429 ``rate_limit_error``; ``retry_after`` seconds go in ``retry-after`` (the real API's
    header; the SDK accepts fractions), ``retry_after_ms`` in ``retry-after-ms``."""
    return FakeError(
        429,
        "rate_limit_error",
        "Number of request tokens has exceeded your rate limit.",
        _retry_headers(retry_after, retry_after_ms),
    )


def overloaded(
    *, retry_after: float | None = None, retry_after_ms: float | None = None
) -> FakeError:
    """529 ``overloaded_error``."""
    headers = _retry_headers(retry_after, retry_after_ms)
    return FakeError(529, "overloaded_error", "Overloaded", headers)


def api_error(
    status: int = 500, *, retry_after: float | None = None, retry_after_ms: float | None = None
) -> FakeError:
    """500 (or another 5xx) ``api_error``."""
    return FakeError(
        status, "api_error", "Internal server error", _retry_headers(retry_after, retry_after_ms)
    )


def invalid_request(message: str = "messages: invalid request") -> FakeError:
    """400 ``invalid_request_error`` (never retried by the SDK)."""
    return FakeError(400, "invalid_request_error", message)


def authentication_error() -> FakeError:
    """401 ``authentication_error``."""
    return FakeError(401, "authentication_error", "invalid x-api-key")


def _retry_headers(seconds: float | None, millis: float | None) -> dict[str, str]:
    headers = {}
    if seconds is not None:
        headers["retry-after"] = f"{seconds:g}"
    if millis is not None:
        headers["retry-after-ms"] = f"{millis:g}"
    return headers


def estimate_tokens(body: Mapping[str, Any]) -> int:
    """Deterministic input-token estimate: ~4 characters of the request's JSON per token."""
    counted = {k: body.get(k) for k in ("system", "tools", "messages") if body.get(k)}
    return max(1, len(json.dumps(counted, sort_keys=True, separators=(",", ":"))) // 4)


# --------------------------------------------------------------------------- recording


@dataclass
class RecordedRequest:
    """One request the server received, and how it answered."""

    method: str
    path: str
    headers: dict[str, str]
    """Lower-cased header names."""
    body: Any
    """The parsed JSON body (``None`` if absent or not JSON)."""
    status: int = 0
    error: str | None = None
    """The error message sent back, if the answer was an error."""
    events_sent: int = 0
    """SSE events written (streaming answers)."""
    client_disconnected: threading.Event = field(default_factory=threading.Event)
    """Set when the client closed the connection before the answer was complete."""
    finished: threading.Event = field(default_factory=threading.Event)
    """Set when the server is done with this request."""
    nodelay: bool = False
    """Whether the connection's socket had ``TCP_NODELAY`` set (no delayed-ACK stalls)."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or []) if isinstance(self.body, dict) else []


# --------------------------------------------------------------------------- the server


class _Disconnected(Exception):
    """The client went away while the server was writing or holding."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeAnthropicServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client resetting its (idle keep-alive) connection is normal; anything else is
        printed as usual."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeAnthropicServer:
    """The fake Messages API. ``start()``/``stop()`` or use as a context manager.

    Thread-safe: the server runs on its own threads; tests script and read records from any
    thread.
    """

    def __init__(
        self,
        *,
        api_key: str = DEFAULT_API_KEY,
        host: str = "127.0.0.1",
        port: int = 0,
        strict_roles: bool = True,
        default: FakeReply | FakeError | str | None = None,
        profile: str | None = None,
    ) -> None:
        if profile not in (None, "ollama"):
            raise ValueError(f"unknown server profile {profile!r} (known: 'ollama')")
        self.profile = profile
        """``None``: Anthropic's API; ``"ollama"``: a local server's gaps (see the module)."""
        self.api_key = api_key
        self.strict_roles = strict_roles
        self.default = default
        """What to answer when the script is empty (``None``: a 500 that says so)."""
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._script: deque[ScriptItem] = deque()
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)

    # -- lifecycle

    def start(self) -> FakeAnthropicServer:
        if self._httpd is not None:
            return self
        httpd = _Server((self._host, self._port), _Handler)
        httpd.fake = self
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-anthropic",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()  # releases held streams
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeAnthropicServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client_env(self) -> dict[str, str]:
        """The environment that points a real ``anthropic`` client (in a kernel, a child
        process, a JupyterLab server) at this server."""
        return {"ANTHROPIC_API_KEY": self.api_key, "ANTHROPIC_BASE_URL": self.url}

    @property
    def url(self) -> str:
        """Base URL for the client (``base_url=`` / ``ANTHROPIC_BASE_URL``)."""
        if self._httpd is None:
            raise RuntimeError("FakeAnthropicServer is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- scripting

    def script(self, *items: ScriptItem) -> FakeAnthropicServer:
        """Append answers for the next ``POST /v1/messages`` requests, in order."""
        with self._lock:
            self._script.extend(items)
        return self

    @property
    def pending(self) -> int:
        """Scripted items not consumed yet."""
        with self._lock:
            return len(self._script)

    def reset(self) -> None:
        """Forget the script and the recorded requests."""
        with self._lock:
            self._script.clear()
            self._requests.clear()

    # -- records

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, oldest first (a copy of the list)."""
        with self._lock:
            return list(self._requests)

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """The ``POST /v1/messages`` requests (not count_tokens), oldest first."""
        return [r for r in self.requests if r.path == "/v1/messages"]

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            if not self._requests:
                raise AssertionError("the fake Anthropic server received no request")
            return self._requests[-1]

    def wait_for_requests(self, count: int, timeout: float = 60.0) -> list[RecordedRequest]:
        """Block until at least ``count`` requests arrived; returns them."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"expected {count} requests, got {len(self._requests)} in {timeout}s"
                    )
                self._changed.wait(left)
            return list(self._requests)

    # -- request handling (server threads)

    def _record(self, record: RecordedRequest) -> None:
        with self._changed:
            self._requests.append(record)
            self._changed.notify_all()

    def _next_item(self, body: dict[str, Any]) -> FakeReply | FakeError:
        with self._lock:
            item: ScriptItem | None = self._script.popleft() if self._script else self.default
        if item is None:
            return FakeError(
                500,
                "api_error",
                "fake Anthropic server: no scripted reply left",
                {"x-should-retry": "false"},
            )
        if callable(item):
            item = item(body)
        if isinstance(item, str):
            item = FakeReply(item)
        return item

    def _validate(self, handler: _Handler, body: Any, *, count: bool) -> FakeError | None:
        problem = None if self.profile == "ollama" else _auth_problem(handler.headers, self.api_key)
        if problem is not None:
            return problem
        version = handler.headers.get("anthropic-version")
        if not version or not _VERSION_RE.match(version):
            return invalid_request("anthropic-version: header is required (YYYY-MM-DD)")
        if not isinstance(body, dict):
            return invalid_request("request body must be a JSON object")
        if not isinstance(body.get("model"), str) or not body["model"]:
            return invalid_request("model: Field required")
        if not count:
            max_tokens = body.get("max_tokens")
            if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
                return invalid_request("max_tokens: Field required (a positive integer)")
        system = body.get("system")
        if system is not None and not isinstance(system, str | list):
            return invalid_request("system: Input should be a string or a list of text blocks")
        if isinstance(system, list) and any(
            not isinstance(b, dict) or b.get("type") != "text" or not b.get("text") for b in system
        ):
            return invalid_request("system: blocks must be non-empty text blocks")
        tools = body.get("tools")
        if tools is not None:
            problem_text = _tools_problem(tools)
            if problem_text is not None:
                return invalid_request(problem_text)
        problem_text = check_request(
            body.get("messages"), system=system, tools=tools, strict_roles=self.strict_roles
        )
        if problem_text is None:
            problem_text = _image_problem(body.get("messages"))
        return invalid_request(problem_text) if problem_text is not None else None

    def _handle(self, handler: _Handler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = handler.path.split("?", 1)[0]
        record = RecordedRequest(
            handler.command, path, {k.lower(): v for k, v in handler.headers.items()}, body
        )
        record.nodelay = bool(handler.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        self._record(record)
        try:
            if handler.command != "POST" or path not in (
                "/v1/messages",
                "/v1/messages/count_tokens",
            ):
                self._send_error(
                    handler, record, FakeError(404, "not_found_error", f"Not found: {path}")
                )
                return
            counting = path.endswith("/count_tokens")
            if self.profile == "ollama" and counting:
                self._send_error(
                    handler, record, FakeError(404, "not_found_error", "404 page not found")
                )
                return
            error = self._validate(handler, body, count=counting)
            if error is None and self.profile == "ollama":
                error = _ollama_refusal(body)
            if error is not None:
                self._send_error(handler, record, error)
            elif counting:
                self._send_json(handler, record, 200, {"input_tokens": estimate_tokens(body)})
            else:
                item = self._next_item(body)
                if isinstance(item, FakeError):
                    self._send_error(handler, record, item)
                elif body.get("stream"):
                    self._send_stream(handler, record, body, item)
                else:
                    self._send_json(handler, record, 200, self._message(body, item))
        except _Disconnected:
            record.client_disconnected.set()
            handler.close_connection = True
        finally:
            record.finished.set()

    # -- answers

    def _request_id(self) -> str:
        return f"req_fake_{next(self._ids):06d}"

    def _send_json(
        self,
        handler: _Handler,
        record: RecordedRequest,
        status: int,
        payload: Any,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        record.status = status
        try:
            handler.send_response(status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            handler.send_header("request-id", self._request_id())
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
        except OSError as exc:
            raise _Disconnected from exc

    def _send_error(self, handler: _Handler, record: RecordedRequest, error: FakeError) -> None:
        record.error = error.message
        payload = {
            "type": "error",
            "error": {"type": error.error_type, "message": error.message},
        }
        self._send_json(handler, record, error.status, payload, error.headers)

    def _blocks(self, reply: FakeReply) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        text = reply.text if isinstance(reply.text, str) else "".join(reply.text)
        if text:
            blocks.append({"type": "text", "text": text})
        for call in reply.tool_calls:
            tool_id = call.id or _random_tool_use_id()
            blocks.append(
                {"type": "tool_use", "id": tool_id, "name": call.name, "input": dict(call.input)}
            )
        return blocks

    def _usage(
        self, body: dict[str, Any], reply: FakeReply, blocks: list[dict[str, Any]]
    ) -> dict[str, int]:
        output = reply.output_tokens
        if output is None:
            output = max(1, len(json.dumps(blocks)) // 4)
        return {
            "input_tokens": reply.input_tokens
            if reply.input_tokens is not None
            else estimate_tokens(body),
            "cache_creation_input_tokens": reply.cache_creation_input_tokens,
            "cache_read_input_tokens": reply.cache_read_input_tokens,
            "output_tokens": output,
        }

    @staticmethod
    def _stop_reason(reply: FakeReply) -> str:
        return reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")

    def _message(self, body: dict[str, Any], reply: FakeReply) -> dict[str, Any]:
        blocks = self._blocks(reply)
        return {
            "id": f"msg_fake_{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": reply.model or body["model"],
            "content": blocks,
            "stop_reason": self._stop_reason(reply),
            "stop_sequence": None,
            "usage": self._usage(body, reply, blocks),
        }

    def _events(
        self, body: dict[str, Any], reply: FakeReply
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        message = self._message(body, reply)
        usage = message["usage"]
        start = dict(message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
        yield "message_start", {"type": "message_start", "message": start}
        chunks = [reply.text] if isinstance(reply.text, str) else list(reply.text)
        for index, block in enumerate(message["content"]):
            if block["type"] == "text":
                yield (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
                for chunk in chunks:
                    for piece in _split(chunk, reply.text_chunk):
                        yield (
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": index,
                                "delta": {"type": "text_delta", "text": piece},
                            },
                        )
            else:
                yield (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": dict(block, input={}),
                    },
                )
                encoded = json.dumps(block["input"])
                for piece in ["", *_split(encoded, reply.json_chunk)]:
                    yield (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                    )
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        yield "message_stop", {"type": "message_stop"}

    def _send_stream(
        self, handler: _Handler, record: RecordedRequest, body: dict[str, Any], reply: FakeReply
    ) -> None:
        record.status = 200
        try:
            handler.send_response(200)
            handler.send_header("content-type", "text/event-stream; charset=utf-8")
            handler.send_header("cache-control", "no-cache")
            handler.send_header("transfer-encoding", "chunked")
            handler.send_header("request-id", self._request_id())
            handler.end_headers()
        except OSError as exc:
            raise _Disconnected from exc
        for sent, (name, data) in enumerate(self._events(body, reply)):
            if reply.drop_after is not None and sent >= reply.drop_after:
                record.error = f"connection dropped after {sent} events (scripted)"
                handler.close_connection = True
                with contextlib.suppress(OSError):
                    handler.connection.shutdown(socket.SHUT_RDWR)
                return
            if reply.error_after is not None and sent >= reply.error_after:
                error = reply.error or overloaded()
                record.error = error.message
                payload = {
                    "type": "error",
                    "error": {"type": error.error_type, "message": error.message},
                }
                self._write_event(handler, "error", payload)
                break
            if reply.hold is not None and sent == reply.hold_after:
                self._hold(handler, reply.hold)
            if reply.event_delay > 0 and sent:
                self._pause(handler, reply.event_delay)
            self._write_event(handler, name, data)
            record.events_sent = sent + 1
        try:
            handler.wfile.write(b"0\r\n\r\n")
        except OSError as exc:
            raise _Disconnected from exc

    @staticmethod
    def _write_event(handler: _Handler, name: str, data: dict[str, Any]) -> None:
        payload = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        try:
            handler.wfile.write(b"%x\r\n%b\r\n" % (len(payload), payload))
        except OSError as exc:
            raise _Disconnected from exc

    def _hold(self, handler: _Handler, event: threading.Event) -> None:
        """Wait for ``event`` while watching for the client hanging up."""
        while not event.wait(0.005):
            if self._stopping.is_set():
                raise _Disconnected
            if _peer_closed(handler.connection):
                raise _Disconnected

    def _pause(self, handler: _Handler, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._stopping.wait(min(left, 0.005)) or _peer_closed(handler.connection):
                raise _Disconnected


def _auth_problem(headers: Any, api_key: str) -> FakeError | None:
    given = headers.get("x-api-key")
    authorization = headers.get("authorization") or ""
    if given is None and authorization.lower().startswith("bearer "):
        given = authorization[7:].strip()
    if given == api_key:
        return None
    return FakeError(
        401,
        "authentication_error",
        "invalid x-api-key" if given else "x-api-key header is required",
    )


def _ollama_refusal(body: Any) -> FakeError | None:
    """The 400 a server without prompt caching or ``metadata`` gives a request using them."""
    if isinstance(body, dict) and "metadata" in body:
        return invalid_request("metadata: Extra inputs are not permitted")
    if '"cache_control"' in json.dumps(body):
        return invalid_request("cache_control: Extra inputs are not permitted")
    return None


def _tools_problem(tools: Any) -> str | None:
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            return f"tools.{i}: Input should be an object"
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME_RE.match(name):
            return f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
        if name in names:
            return f"tools: Tool names must be unique; {name} is repeated"
        names.add(name)
        schema = tool.get("input_schema")
        if "type" not in tool and (not isinstance(schema, dict) or schema.get("type") != "object"):
            return f"tools.{i}.input_schema.type: Input should be 'object'"
    return None


def _split(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] if text else []


def _peer_closed(conn: socket.socket) -> bool:
    """True if the client closed (or reset) its end of ``conn``."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        if not readable:
            return False
        return conn.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # TCP_NODELAY: no ~40 ms delayed-ACK stalls
    server: _Server

    def do_POST(self) -> None:
        self.server.fake._handle(self)

    def do_GET(self) -> None:
        self.server.fake._handle(self)

    def log_message(self, format: str, *args: Any) -> None:
        pass
