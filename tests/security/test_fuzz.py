"""Fuzzing the readers and the path check with Hypothesis.

Arbitrary bytes fed to the event decoder, to a file-backend log (the JSONL reader) and to a
SQLite event row (the row decoder) raise nothing but the package's typed errors; arbitrary path
strings (``..``, symlinks in and out, loops, unicode, NUL, very long) never open anything
outside the workdir or inside the storage root."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lite_agent_jupyter.abort import AbortController
from lite_agent_jupyter.checkpoint import file_checkpointer, sqlite_checkpointer
from lite_agent_jupyter.checkpoint.events import UserEvent, decode, encode
from lite_agent_jupyter.errors import LiteAgentError, ToolError
from lite_agent_jupyter.tools import ToolContext, resolve_in_workdir
from lite_agent_jupyter.tools.paths import open_path, open_target

FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

VALID = encode(UserEvent(content="hello", checkpoint=True), seq=1, ts="2026-01-01T00:00:00Z")

json_fragments = st.sampled_from(
    [
        VALID,
        '{"v":1,"seq":1,"type":"user"}',
        '{"v":2,"seq":1,"type":"user"}',
        '{"v":1,"seq":"1","type":"user"}',
        '{"v":1,"seq":1,"type":"tool_result","content":5,"tool_use_id":[]}',
        '{"v":1,"seq":1,"type":"user","content":{"x":1},"checkpoint":"yes"}',
        '{"v":1,"seq":1,"type":"assistant","content":"text","usage":3}',
        '{"v":1,"seq":1,"type":"file_snapshot","path":1,"before":2}',
        '{"v":true,"seq":1,"type":"user"}',
        "[" * 5000,
        '{"a":' * 3000,
        "NaN",
        "\ud800",
        "\x00",
        "\n",
        "{}",
        "[]",
        "null",
        '"str"',
        "1e999",
    ]
)
line_text = st.one_of(
    st.text(max_size=200),
    json_fragments,
    st.lists(json_fragments, min_size=1, max_size=4).map("".join),
)
raw_bytes = st.one_of(
    st.binary(max_size=300),
    line_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
)


def typed_only(fn: object) -> None:
    """Call ``fn``; success or a LiteAgentError is fine, anything else fails the test."""
    with contextlib.suppress(LiteAgentError):
        fn()  # type: ignore[operator]


@FUZZ
@given(data=raw_bytes)
def test_the_event_decoder_raises_only_typed_errors(data: bytes) -> None:
    typed_only(lambda: decode(data))
    typed_only(lambda: decode(data.decode("utf-8", "replace")))


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@FUZZ
@given(lines=st.lists(raw_bytes, min_size=1, max_size=5), prefix=st.booleans())
def test_the_jsonl_reader_raises_only_typed_errors(
    lines: list[bytes],
    prefix: bool,
    tmp_path_factory: pytest.TempPathFactory,
    loop: asyncio.AbstractEventLoop,
) -> None:
    folder = tmp_path_factory.mktemp("log")
    body = b"\n".join(lines)
    if prefix:
        body = VALID.encode() + b"\n" + body
    (folder / "s1.jsonl").write_bytes(body)

    async def use() -> None:
        store = file_checkpointer(folder)
        try:
            for call in (
                lambda: store.read("s1"),
                lambda: store.read("s1", after=1),
                lambda: store.head("s1"),
                store.list,
                lambda: store.append("s1", [UserEvent(content="next")]),
                lambda: store.truncate("s1", 0),
            ):
                with contextlib.suppress(LiteAgentError):
                    await call()
        finally:
            await store.close()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torn last line is repaired with a warning
        loop.run_until_complete(use())


@FUZZ
@given(
    data=st.one_of(raw_bytes, line_text, st.integers(), st.none(), st.floats()),
    as_text=st.booleans(),
)
def test_the_sqlite_row_decoder_raises_only_typed_errors(
    data: object,
    as_text: bool,
    tmp_path_factory: pytest.TempPathFactory,
    loop: asyncio.AbstractEventLoop,
) -> None:
    path = tmp_path_factory.mktemp("db") / "store.db"

    async def use() -> None:
        store = sqlite_checkpointer(path)
        try:
            await store.append("s1", [UserEvent(content="a", checkpoint=True)])
            await store.append("s1", [UserEvent(content="b", checkpoint=True)])
            try:  # what damage outside the package can do (if SQLite takes the value)
                with sqlite3.connect(path) as conn:
                    value = "CAST(? AS TEXT)" if as_text else "?"  # text: maybe not UTF-8
                    conn.execute(f"UPDATE events SET data = {value} WHERE seq = 2", (data,))
            except (sqlite3.Error, UnicodeEncodeError, OverflowError):
                return
            for call in (
                lambda: store.read("s1"),
                lambda: store.read("s1", after=1),
                lambda: store.head("s1"),
                store.list,
            ):
                with contextlib.suppress(LiteAgentError):
                    await call()
        finally:
            await store.close()

    loop.run_until_complete(use())


# ------------------------------------------------------------------------------- paths

segments = st.one_of(
    st.sampled_from(
        [
            "..",
            ".",
            "",
            "sub",
            "in_link",
            "out_link",
            "abs_link",
            "loop",
            "store",
            "a.txt",
            "~",
            "\x00",
            "ü",
            "日本",
            "a" * 300,
            "\udcff",
            "link_up",
            " ",
            "//",
        ]
    ),
    st.text(min_size=1, max_size=12),
)
paths = st.one_of(
    st.lists(segments, min_size=1, max_size=8).map("/".join),
    st.lists(segments, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts)),
    st.text(max_size=50),
    st.just("x/" * 2100),
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[ToolContext, Path, Path]:
    base = tmp_path_factory.mktemp("paths")
    workdir = base / "work"
    outside = base / "outside"
    (workdir / "sub" / "deep").mkdir(parents=True)
    (workdir / "store" / "ns").mkdir(parents=True)
    outside.mkdir()
    (workdir / "a.txt").write_text("a")
    (workdir / "sub" / "a.txt").write_text("a")
    (outside / "a.txt").write_text("outside")
    (workdir / "in_link").symlink_to("sub")
    (workdir / "out_link").symlink_to(outside)
    (workdir / "abs_link").symlink_to("/")
    (workdir / "loop").symlink_to("loop")
    (workdir / "sub" / "link_up").symlink_to("../..")
    ctx = ToolContext(
        workdir=workdir, signal=AbortController().signal, storage_root=workdir / "store"
    )
    return ctx, workdir, outside


@FUZZ
@given(text=paths)
def test_random_paths_never_resolve_or_open_outside_the_workdir(
    text: str, tree: tuple[ToolContext, Path, Path]
) -> None:
    ctx, workdir, _outside = tree
    store = workdir / "store"
    try:
        resolved = resolve_in_workdir(ctx, text)
    except ToolError:
        return
    assert resolved == workdir or resolved.is_relative_to(workdir)
    assert resolved != store and not resolved.is_relative_to(store)
    try:
        target = open_target(ctx, resolved)
    except (ToolError, FileNotFoundError):
        return
    with target:
        _assert_inside_workdir(target.dir_fd, target.name, workdir, store)


def _assert_inside_workdir(dir_fd: int, name: str, workdir: Path, store: Path) -> Path:
    """The folder ``dir_fd`` really is (as the kernel names it) lies in the workdir and not in
    the agent's store, and ``name`` is one plain entry of it. Returns the folder."""
    folder = Path(os.readlink(f"/proc/self/fd/{dir_fd}"))
    assert folder == workdir or folder.is_relative_to(workdir)
    assert folder != store and not folder.is_relative_to(store)
    assert "/" not in name and name not in ("", ".", "..")
    return folder


@FUZZ
@given(text=paths, follow_last=st.booleans())
def test_random_paths_opened_in_one_walk_never_lead_outside(
    text: str, follow_last: bool, tree: tuple[ToolContext, Path, Path]
) -> None:
    """``open_path`` (what the file tools use): resolution inside the fd walk."""
    ctx, workdir, _outside = tree
    store = workdir / "store"
    try:
        target = open_path(ctx, text, follow_last=follow_last)
    except (ToolError, FileNotFoundError):
        return
    with target:
        folder = _assert_inside_workdir(target.dir_fd, target.name, workdir, store)
        assert target.path.parent == folder and target.path.name == target.name
        if follow_last:
            assert not (folder / target.name).is_symlink()
