"""A real MCP server for the tests and benchmarks, on the ``mcp`` package's server API.

Run as ``python tests/mcp_server.py`` (stdio, what :func:`stdio_entry` configures) in the
agent's workdir (its default cwd). Tools:

* ``write_note(path, text)`` writes a file (relative to the cwd): an MCP tool changing the
  workdir, which the agent must record and rewind like a shell edit;
* ``picture()`` returns a small PNG (:data:`PNG`) and a caption: an image for the model;
* ``bad_pictures()`` returns images the API would refuse: data that is not base64, a
  truncated PNG, and the JPEG :data:`JPEG` labelled ``image/png``;
* ``echo(text)`` returns its text (the benchmark's call; marked read-only, ``readOnlyHint``);
* ``crash()`` kills the server process mid-call; ``hang()`` never answers;
* ``pid()`` returns the server's process id (to check it was stopped);
* ``authorization()`` returns the HTTP request's ``Authorization`` header (``--http PORT
  [PATH]`` serves streamable HTTP on 127.0.0.1:PORT, path PATH or ``/mcp``, instead of
  stdio; :func:`serve_http` runs it for a test);
* ``argv()`` returns the server's command-line arguments and ``endpoint()`` the path it
  serves (``--api-key ${KEY}``, ``/mcp/${TOKEN}/sse``: configuration secrets echoed);
* ``whoami()`` returns the environment variable ``MCP_TEST_TOKEN`` (a secret to redact).

``MCP_TEST_START_DELAY`` (seconds) makes the server wait that long before it speaks: a slow
server for "starting it does not delay a turn that does not use it".

``MCP_TEST_EXTRA_TOOLS``: a JSON list of more tools, ``{"name", "description", "reply",
"delete"?}``: each returns its ``reply`` (after deleting the file ``delete``, if given): tools
with names of any shape, for the name-clash tests.
"""

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8cfc0f01f00050001ff89993d1d"
    "0000000049454e44ae426082"
)
"""A 1x1 PNG (one red pixel), sound: every chunk's length and checksum right."""
JPEG = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300080606070605080707070909080a0c140d"
    "0c0b0b0c1912130f141d1a1f1e1d1a1c1c20242e2720222c231c1c2837292c30313434341f27393d3832"
    "3c2e333432ffc0000b080001000101011100ffc4001f0000010501010101010100000000000000000102"
    "030405060708090a0bffc400b5100002010303020403050504040000017d010203000411051221314106"
    "13516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a34353637"
    "38393a434445464748494a535455565758595a636465666768696a737475767778797a83848586878889"
    "8a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6"
    "d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffda0008010100003f002bffd9"
)
"""A 1x1 grey JPEG, sound."""
SCRIPT = Path(__file__).resolve()


STARTUP_TIMEOUT = 100
"""Seconds a test server may take to start and list its tools: a hang guard under the suite's
120 s per test, generous because on a loaded machine importing ``mcp`` alone took 6-9 s on
each side (the default, 30 s, is what a person waits)."""


def stdio_entry(**extra: Any) -> dict[str, Any]:
    """The ``mcp_servers`` entry starting this server over stdio (``extra``: env, timeout...)."""
    return {
        "command": sys.executable,
        "args": [str(SCRIPT)],
        "startup_timeout": STARTUP_TIMEOUT,
        **extra,
    }


@contextlib.contextmanager
def serve_http(path: str = "/mcp") -> Iterator[int]:
    """This server over streamable HTTP at ``path`` on a free port of 127.0.0.1: yields the
    port once it listens; the process is ended afterwards."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--http", str(port), path],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool:
        with socket.socket() as attempt:
            return attempt.connect_ex(("127.0.0.1", port)) == 0

    try:
        deadline = time.monotonic() + 60  # a hang guard
        while not listening():
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("the MCP test server did not start listening")
            time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(10)


def main() -> None:
    from mcp.server.mcpserver import Context, Image, MCPServer

    delay = float(os.environ.get("MCP_TEST_START_DELAY", "0") or 0)
    if delay:
        time.sleep(delay)
    server = MCPServer("lite-agent-test")

    @server.tool()
    def write_note(path: str, text: str) -> str:
        """Write text to a file (relative to the server's folder)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        return f"wrote {len(text)} characters to {path}"

    @server.tool(structured_output=False)
    def picture() -> list[Any]:
        """Return a tiny picture and its caption."""
        return [Image(data=PNG, format="png"), "a 1x1 picture"]

    @server.tool(structured_output=False)
    def bad_pictures() -> list[Any]:
        """Return three pictures no model can read as they are labelled."""
        import base64

        from mcp.types import ImageContent

        truncated = base64.b64encode(PNG[:40]).decode()
        return [
            ImageContent(type="image", data="not base64 at all!", mime_type="image/png"),
            ImageContent(type="image", data=truncated, mime_type="image/png"),
            ImageContent(type="image", data=base64.b64encode(JPEG).decode(), mime_type="image/png"),
            "three pictures",
        ]

    from mcp.types import ToolAnnotations

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def echo(text: str) -> str:
        """Return the text."""
        return text

    @server.tool()
    def crash() -> str:
        """Exit the server process in the middle of the call."""
        sys.stdout.flush()
        os._exit(3)

    @server.tool()
    async def hang() -> str:
        """Never answer (after writing ``hang.started``, so a test knows the call runs)."""
        import anyio

        Path("hang.started").write_text(str(os.getpid()))
        await anyio.sleep(3600)
        return "never"

    @server.tool()
    def pid() -> str:
        """This server's process id."""
        return str(os.getpid())

    @server.tool()
    def whoami() -> str:
        """The token this server was configured with."""
        return os.environ.get("MCP_TEST_TOKEN", "")

    @server.tool()
    def argv() -> str:
        """This server's command-line arguments."""
        return " ".join(sys.argv[1:])

    @server.tool()
    def endpoint() -> str:
        """The HTTP path this server serves (stdio: none)."""
        return sys.argv[3] if len(sys.argv) > 3 and sys.argv[1] == "--http" else "(stdio)"

    @server.tool()
    def authorization(ctx: Context) -> str:
        """The Authorization header of the HTTP request (HTTP transport)."""
        return (ctx.headers or {}).get("authorization", "(none)")

    for spec in json.loads(os.environ.get("MCP_TEST_EXTRA_TOOLS", "[]")):
        server.add_tool(_extra_tool(spec), name=spec["name"], description=spec["description"])

    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        path = sys.argv[3] if len(sys.argv) > 3 else "/mcp"
        server.run(
            "streamable-http", host="127.0.0.1", port=int(sys.argv[2]), streamable_http_path=path
        )
    else:
        server.run("stdio")


def _extra_tool(spec: dict[str, str]) -> Any:
    def run() -> str:
        if spec.get("delete"):
            Path(spec["delete"]).unlink(missing_ok=True)
        return spec["reply"]

    return run


if __name__ == "__main__":
    main()
