"""Session bundles: a session exported from the file backend in one folder and imported into
SQLite or PostgreSQL in another lists the same checkpoints, restores every one byte for byte
and undoes; crafted bundles are refused with typed errors, having written nothing."""

from __future__ import annotations

import errno
import hashlib
import json
import shutil
import stat
import struct
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from workdir_helpers import files_in

from lite_agent_jupyter import (
    BundleChecksumError,
    BundleError,
    LiteAgent,
    Storage,
    UnsafeBundleError,
    UnsupportedBundleVersionError,
    checkpointer_from_url,
    create_lite_agent,
)
from lite_agent_jupyter.agent.bundle import read_manifest, referenced_blobs
from lite_agent_jupyter.checkpoint.events import FileSnapshotEvent
from lite_agent_jupyter.providers.scripted import call, reply, scripted
from lite_agent_jupyter.storage import SupportsPutMany

BIN = bytes(range(256)) * 20

SCRIPT: list[Any] = [
    reply("", [call("write_file", path="a.txt", content="one\n")]),
    "a.txt written",
    reply(
        "",
        [
            call("edit_file", path="a.txt", old_string="one", new_string="two"),
            call("bash", command="mkdir -p sub && printf 'shell\\n' > sub/s.txt"),
        ],
    ),
    "edited",
    reply("", [call("delete_file", path="a.txt"), call("write_file", path="b.txt", content="b")]),
    "deleted a, wrote b",
    reply("", [call("write_file", path="c.txt", content="c")]),
    "wrote c",
]
PROMPTS = ["create a", "edit a and run a command", "delete a, write b", "write c"]


def open_agent(
    workdir: Path, store: Path, url: str | None = None, model: Any = None, **options: Any
) -> LiteAgent:
    checkpointer = checkpointer_from_url(url) if url is not None else None
    return create_lite_agent(
        model=model if model is not None else scripted([]),
        workdir=workdir,
        storage=Storage(store, "nb"),
        checkpointer=checkpointer,
        approvals="allow",
        **options,
    )


async def close(agent: LiteAgent) -> None:
    checkpointer = agent.checkpointer
    await agent.close()
    await checkpointer.close()


async def build_source(tmp_path: Path) -> tuple[LiteAgent, Path, Path]:
    """A file-backend session of four prompts whose last one was rewound (an undo record)."""
    workdir = tmp_path / "teacher" / "project"
    workdir.mkdir(parents=True)
    (workdir / "data.bin").write_bytes(BIN)
    agent = open_agent(workdir, tmp_path / "teacher" / "store", model=scripted(SCRIPT))
    for prompt in PROMPTS:
        await agent.send(prompt)
    checkpoints = await agent.list_checkpoints()
    await agent.restore(agent.session_id, checkpoints[-1].seq)  # "write c" is undoable
    bundle = tmp_path / "lesson.zip"
    info = await agent.export_session(bundle, notebook="/home/teacher/secret/lesson.ipynb")
    assert info.events > 10 and info.records == 1 and info.blobs >= 5
    return agent, bundle, workdir


def comparable(checkpoints: list[Any]) -> list[tuple[int, str, tuple[str, ...]]]:
    return [(c.seq, c.prompt, c.files) for c in checkpoints]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_file_session_imports_into_another_backend_and_workdir(
    backend: str, tmp_path: Path, backend_url_for: Callable[[str], str]
) -> None:
    source, bundle, teacher_dir = await build_source(tmp_path)
    # the class gets the project folder as it is and the bundle; another store and backend
    student_dir = tmp_path / "student" / "project"
    shutil.copytree(teacher_dir, student_dir)
    target = open_agent(student_dir, tmp_path / "student" / "store", backend_url_for(backend))
    try:
        assert isinstance(target.blobs, SupportsPutMany)  # both: one commit for every blob
        result = await target.import_session(bundle)
        sid = source.session_id
        assert result.session_id == sid and result.renamed_from is None
        assert target.session_id == sid
        assert result.notebook == "lesson.ipynb"  # the name only: no path of the teacher's
        assert await target.list_checkpoints(sid) == await source.list_checkpoints(sid)

        # the exported restore is undoable in the class, exactly as at the teacher's
        await source.undo_restore(sid)
        await target.undo_restore(sid)
        assert files_in(student_dir) == files_in(teacher_dir)
        assert (student_dir / "c.txt").read_bytes() == b"c"
        expected = comparable(await source.list_checkpoints(sid))
        assert comparable(await target.list_checkpoints(sid)) == expected
        assert [c[1] for c in expected] == PROMPTS

        for checkpoint in await source.list_checkpoints(sid):
            await source.restore(sid, checkpoint.seq)
            await target.restore(sid, checkpoint.seq)
            assert files_in(student_dir) == files_in(teacher_dir), checkpoint.prompt
            await source.undo_restore(sid)
            await target.undo_restore(sid)
            assert files_in(student_dir) == files_in(teacher_dir), checkpoint.prompt
        assert (student_dir / "data.bin").read_bytes() == BIN
    finally:
        await close(target)
        await close(source)


async def test_into_an_empty_workdir_a_forced_restore_recreates_each_checkpoint(
    tmp_path: Path,
) -> None:
    """Without the project folder, each checkpoint's files come from the bundle's blobs."""
    source, bundle, teacher_dir = await build_source(tmp_path)
    student_dir = tmp_path / "alone"
    student_dir.mkdir()
    target = open_agent(student_dir, tmp_path / "alone-store", f"sqlite://{tmp_path / 's.db'}")
    try:
        sid = (await target.import_session(bundle)).session_id
        for checkpoint in (await source.list_checkpoints(sid))[1:]:
            await source.restore(sid, checkpoint.seq)
            await target.restore(sid, checkpoint.seq, force=True)
            changed = set(checkpoint.files)
            want = {k: v for k, v in files_in(teacher_dir).items() if k in changed}
            have = {k: v for k, v in files_in(student_dir).items() if k in changed}
            assert have == want, checkpoint.prompt
            await source.undo_restore(sid)
            await target.undo_restore(sid)
    finally:
        await close(target)
        await close(source)


async def test_an_existing_id_is_imported_under_a_new_one_unless_replace(tmp_path: Path) -> None:
    source, bundle, _ = await build_source(tmp_path)
    sid = source.session_id
    await close(source)
    target = open_agent(tmp_path / "teacher" / "project", tmp_path / "teacher" / "store")
    try:
        before = await target.checkpointer.read(sid)
        again = await target.import_session(bundle)
        assert again.renamed_from == sid and again.session_id != sid
        assert await target.checkpointer.read(sid) == before  # the original is untouched
        copy = await target.checkpointer.read(again.session_id)
        assert [(e.seq, e.ts, e.type) for e in copy] == [(e.seq, e.ts, e.type) for e in before]
        archive = target.storage.archive_dir
        assert (archive / f"{again.session_id}.restore-000001.jsonl").is_file()
        # the renamed copy's undo record is its own: undoing it there works
        await target.undo_restore(again.session_id)
        replaced = await target.import_session(bundle, replace=True)
        assert replaced.session_id == sid and replaced.renamed_from is None
        assert [e.ts for e in await target.checkpointer.read(sid)] == [e.ts for e in before]
    finally:
        await close(target)


async def test_the_bundle_holds_no_path_or_environment_of_the_exporting_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LITE_AGENT_TEST_SECRET", "s3cr3t-value-of-the-teacher")
    source, bundle, _ = await build_source(tmp_path)
    await close(source)
    with zipfile.ZipFile(bundle) as z:
        names = z.namelist()
        raw = b"".join(z.read(n) for n in names)
        manifest = json.loads(z.read("manifest.json"))
    assert str(tmp_path).encode() not in raw
    assert b"s3cr3t-value-of-the-teacher" not in raw
    assert b"/home/teacher" not in raw
    # a restore kept a branch: version 2, which a release reading only 1 refuses as newer
    assert manifest["format_version"] == 2 and manifest["notebook"] == "lesson.ipynb"
    assert names[0] == "manifest.json" and "log.jsonl" in names
    assert read_manifest(bundle)["session_id"] == manifest["session_id"]
    assert bundle.stat().st_mode & 0o777 == 0o600


# -- crafted bundles -----------------------------------------------------------------------


def rewrite(source: Path, target: Path, edit: Callable[[dict[str, bytes]], None]) -> None:
    """Copy a bundle through ``edit(entries)`` (name -> bytes), manifest checksums renewed."""
    with zipfile.ZipFile(source) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    manifest = json.loads(entries.pop("manifest.json"))
    edit(entries)
    manifest["entries"] = {
        n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in entries.items()
    }
    with zipfile.ZipFile(target, "w") as z:
        z.writestr("manifest.json", json.dumps(manifest))
        for name, data in entries.items():
            z.writestr(name, data)


@pytest.fixture
async def crafted(tmp_path: Path) -> Any:
    source, bundle, _ = await build_source(tmp_path)
    await close(source)
    (tmp_path / "t").mkdir()
    target = open_agent(tmp_path / "t", tmp_path / "t-store")

    async def refused(path: Path, error: type[Exception], match: str) -> None:
        with pytest.raises(error, match=match):
            await target.import_session(path)
        assert await target.list_sessions() == []
        assert not (tmp_path / "t-store" / "nb" / "archive").exists()
        assert not list((tmp_path / "t").rglob("*"))
        assert not list(tmp_path.rglob("evil*"))

    yield bundle, tmp_path, refused
    await close(target)


@pytest.mark.parametrize(
    "name, match",
    [
        ("../evil.txt", r"leads out of its folder"),
        ("blobs/../../evil.txt", r"leads out of its folder"),
        ("/tmp/evil.txt", r"absolute path"),
        ("archive/../../evil.jsonl", r"leads out of its folder"),
        ("archive/x.restore-000001.jsonl", r"not part of the bundle format"),
    ],
)
async def test_a_path_out_of_the_storage_is_refused(crafted: Any, name: str, match: str) -> None:
    bundle, tmp_path, refused = crafted
    bad = tmp_path / "bad.zip"
    rewrite(bundle, bad, lambda entries: entries.__setitem__(name, b"evil"))
    await refused(bad, UnsafeBundleError, match)


async def test_a_symlink_entry_is_refused(crafted: Any) -> None:
    bundle, tmp_path, refused = crafted
    bad = tmp_path / "bad.zip"
    shutil.copy(bundle, bad)
    with zipfile.ZipFile(bad, "a") as z:
        info = zipfile.ZipInfo("cassette.jsonl")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(info, "/etc/passwd")
    await refused(bad, UnsafeBundleError, "not a regular file")


async def test_a_duplicate_entry_is_refused(crafted: Any) -> None:
    bundle, tmp_path, refused = crafted
    bad = tmp_path / "bad.zip"
    shutil.copy(bundle, bad)
    with zipfile.ZipFile(bad, "a") as z, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z.writestr("log.jsonl", b"")
    await refused(bad, UnsafeBundleError, "'log.jsonl' twice")


async def test_a_bad_checksum_is_refused(crafted: Any) -> None:
    bundle, tmp_path, refused = crafted
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bundle) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    log = entries["log.jsonl"]
    entries["log.jsonl"] = log.replace(b"create a", b"create A", 1)
    with zipfile.ZipFile(bad, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    await refused(bad, BundleChecksumError, "log.jsonl' does not match its checksum")

    # a blob altered with its manifest entry renewed still fails its own hash
    def alter_blob(entries: dict[str, bytes]) -> None:
        name = next(n for n in entries if n.startswith("blobs/"))
        entries[name] = entries[name] + b"!"

    rewrite(bundle, bad, alter_blob)
    await refused(bad, BundleChecksumError, "does not match its hash")


async def test_a_newer_format_is_refused_with_a_clear_error(crafted: Any) -> None:
    bundle, tmp_path, refused = crafted
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bundle) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    manifest = json.loads(entries["manifest.json"])
    manifest["format_version"] = 3
    manifest["package_version"] = "9.0.0"
    entries["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(bad, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    await refused(bad, UnsupportedBundleVersionError, r"format version 3.*9\.0\.0.*upgrade")


async def test_a_gigabyte_declared_size_is_refused_before_reading(crafted: Any) -> None:
    bundle, tmp_path, refused = crafted
    bad = tmp_path / "bad.zip"
    shutil.copy(bundle, bad)
    with zipfile.ZipFile(bad, "a") as z:
        z.writestr("cassette.jsonl", b"x" * 100)
    # declare 1 GB for that entry in the central directory, as a hostile zip would
    data = bytearray(bad.read_bytes())
    at = data.rindex(b"PK\x01\x02")  # the last central-directory header: cassette.jsonl
    struct.pack_into("<I", data, at + 24, 1 << 30)
    bad.write_bytes(bytes(data))
    await refused(bad, UnsafeBundleError, "declares more than")


async def test_a_snapshot_path_out_of_the_workdir_is_refused(crafted: Any) -> None:
    bundle, tmp_path, refused = crafted
    bad = tmp_path / "bad.zip"

    def escape(entries: dict[str, bytes]) -> None:
        entries["log.jsonl"] = entries["log.jsonl"].replace(
            b'"path":"a.txt"', b'"path":"../../evil.txt"'
        )

    rewrite(bundle, bad, escape)
    await refused(bad, UnsafeBundleError, "outside the workdir")


async def test_not_a_bundle_is_a_bundle_error(crafted: Any) -> None:
    _bundle, tmp_path, refused = crafted
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip at all")
    await refused(bad, BundleError, "not a session bundle")


def test_referenced_blobs_reads_snapshots_of_log_and_records() -> None:
    a, b = "a" * 64, "b" * 64
    events = [FileSnapshotEvent(path="x", before=None, after=a)]
    assert referenced_blobs(events) == {a}
    events.append(FileSnapshotEvent(path="x", before=a, after=b))
    assert referenced_blobs(events) == {a, b}


async def test_the_bundles_own_words_are_checked_before_they_are_shown(crafted: Any) -> None:
    """A notebook name or version with control or bidi characters is not passed on."""
    bundle, tmp_path, _refused = crafted
    odd = tmp_path / "odd.zip"
    with zipfile.ZipFile(bundle) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    manifest = json.loads(entries["manifest.json"])
    manifest["notebook"] = "lesson\x1b[2J\u202e.ipynb"
    manifest["package_version"] = "1.0\x1b]8;;evil"
    entries["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(odd, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    target = open_agent(tmp_path / "t", tmp_path / "odd-store")
    try:
        result = await target.import_session(odd)
        assert result.notebook is None and result.package_version == "unknown"
    finally:
        await close(target)


async def test_a_bundle_carries_its_cassette_and_the_lesson_replays_offline(
    tmp_path: Path,
) -> None:
    """Recorded at the teacher's, exported with the cassette, imported elsewhere: the replay
    (no network, no key) gives the same answers and files in the student's folder."""
    from lite_agent_jupyter.providers import record, replay

    teacher_dir = tmp_path / "teacher"
    teacher_dir.mkdir()
    cassette = tmp_path / "lesson.cassette.jsonl"
    lesson = scripted(
        [reply("", [call("write_file", path="hello.py", content="print('hi')\n")]), "Wrote it."]
    )
    teacher = open_agent(teacher_dir, tmp_path / "t-store", model=record(lesson, cassette))
    answer = await teacher.send("write hello.py")
    info = await teacher.export_session(tmp_path / "lesson.zip", cassette=cassette)
    await close(teacher)
    assert info.cassette

    student_dir = tmp_path / "student"
    student_dir.mkdir()
    into = tmp_path / "student-copy.cassette.jsonl"
    importer = open_agent(student_dir, tmp_path / "s-store")
    imported = await importer.import_session(tmp_path / "lesson.zip", cassette_to=into)
    await close(importer)
    assert imported.cassette == cassette.read_bytes() == into.read_bytes()

    player = open_agent(student_dir, tmp_path / "s-store", model=replay(into, speed=0))
    try:
        player.clear()  # the lesson again, from an empty conversation, offline
        again = await player.send("write hello.py")
        assert again.text == answer.text == "Wrote it."
        assert (student_dir / "hello.py").read_text() == "print('hi')\n"
    finally:
        await close(player)


async def test_an_import_that_fails_before_its_log_is_written_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, bundle, _ = await build_source(tmp_path)
    await close(source)
    (tmp_path / "t").mkdir()
    target = open_agent(tmp_path / "t", tmp_path / "t-store", blob_grace=0)
    try:

        async def broken(*args: Any, **kwargs: Any) -> int:
            raise OSError("disk full")

        monkeypatch.setattr(target.checkpointer, "append_verbatim", broken)
        with pytest.raises(OSError, match="disk full"):
            await target.import_session(bundle)
        monkeypatch.undo()
        assert await target.list_sessions() == []
        assert not list(target.storage.archive_dir.glob("*.jsonl"))
        await target.collect_blobs()
        assert await target.blobs.hashes() == []
        again = await target.import_session(bundle)  # and the same import then works
        assert again.renamed_from is None
    finally:
        await close(target)


async def test_a_replace_that_fails_on_its_first_blob_keeps_the_old_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``replace=True`` writes the new session before the old one goes: a full disk on the
    first blob leaves the old session whole (log, checkpoints, undo record, restorable
    files) and no trace of the import."""
    source, bundle, workdir = await build_source(tmp_path)
    sid = source.session_id
    await close(source)
    target = open_agent(workdir, tmp_path / "teacher" / "store")
    try:
        before = await target.checkpointer.read(sid)
        checkpoints = await target.list_checkpoints(sid)
        records = sorted(p.name for p in target.storage.archive_dir.iterdir())
        sessions = [s.id for s in await target.list_sessions()]
        blobs = target.blobs
        assert isinstance(blobs, SupportsPutMany)

        async def full(*args: Any, **kwargs: Any) -> list[str]:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(blobs, "put_many", full)
        with pytest.raises(OSError, match="No space left"):
            await target.import_session(bundle, replace=True)
        monkeypatch.undo()

        assert await target.checkpointer.read(sid) == before
        assert await target.list_checkpoints(sid) == checkpoints
        assert sorted(p.name for p in target.storage.archive_dir.iterdir()) == records
        assert [s.id for s in await target.list_sessions()] == sessions  # no half import
        # every blob the old session names is still there: each checkpoint restores
        for checkpoint in checkpoints:
            await target.restore(sid, checkpoint.seq, force=True)
            await target.undo_restore(sid)
        # and the same replace, with room on the disk, works
        replaced = await target.import_session(bundle, replace=True)
        assert replaced.session_id == sid
        assert [s.id for s in await target.list_sessions()] == sessions
    finally:
        await close(target)


async def test_a_replace_whose_last_write_fails_keeps_the_import_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one window of a replace, between deleting the old session and writing the new
    one under its id: the import stays whole under its temporary id, named in the error."""
    source, bundle, workdir = await build_source(tmp_path)
    sid = source.session_id
    await close(source)
    target = open_agent(workdir, tmp_path / "teacher" / "store")
    try:
        expected = [(e.seq, e.type) for e in await target.checkpointer.read(sid)]
        real = target.checkpointer.append_verbatim  # type: ignore[attr-defined]
        calls: list[str] = []

        async def second_fails(session_id: str, *args: Any, **kwargs: Any) -> int:
            calls.append(session_id)
            if len(calls) == 2:
                raise OSError(errno.EIO, "I/O error")
            return await real(session_id, *args, **kwargs)

        monkeypatch.setattr(target.checkpointer, "append_verbatim", second_fails)
        with pytest.raises(BundleError, match=r"kept whole as '([0-9a-f]{32})'") as caught:
            await target.import_session(bundle, replace=True)
        monkeypatch.undo()
        staged = calls[0]
        assert calls == [staged, sid] and staged in str(caught.value)
        assert [(e.seq, e.type) for e in await target.checkpointer.read(staged)] == expected
    finally:
        await close(target)


# -- branches ------------------------------------------------------------------------------


async def test_branches_travel_with_the_session(tmp_path: Path) -> None:
    """The future a restore cut is a branch; exported and imported into another backend and
    folder, it is listed the same and switching to it brings its prompt and files back.
    Imported under a new id, the branch's undo record is renamed with it: undoing that
    restore drops the branch there, as it does at the exporter's."""
    source, bundle, teacher_dir = await build_source(tmp_path)
    sid = source.session_id
    student_dir = tmp_path / "student" / "project"
    shutil.copytree(teacher_dir, student_dir)
    target = open_agent(
        student_dir, tmp_path / "student" / "store", f"sqlite://{tmp_path / 's.db'}"
    )
    try:
        kept = await source.list_branches(sid)
        assert [b.first_prompt for b in kept] == ["write c"]
        result = await target.import_session(bundle)
        assert result.branches == 1
        assert await target.list_branches(sid) == kept

        for agent in (source, target):
            switched = await agent.switch_branch(sid, kept[0].name)
            assert switched.branch == kept[0].name
        assert files_in(student_dir) == files_in(teacher_dir)
        assert (student_dir / "c.txt").read_bytes() == b"c"
        prompts = [c.prompt for c in await target.list_checkpoints(sid)]
        assert prompts == PROMPTS == [c.prompt for c in await source.list_checkpoints(sid)]
        assert await target.list_branches(sid) == []

        # the same bundle again: a new id, its branch tied to its own undo record
        copy = await target.import_session(bundle)
        assert copy.renamed_from == sid and copy.branches == 1
        assert [b.name for b in await target.list_branches(copy.session_id)] == [kept[0].name]
        await target.undo_restore(copy.session_id)
        assert await target.list_branches(copy.session_id) == []
    finally:
        await close(target)
        await close(source)


def branch_entries(entries: dict[str, bytes]) -> tuple[str, dict[str, Any]]:
    name = next(n for n in entries if n.startswith("archive/branch-"))
    return name, json.loads(entries[name])


def put_blob(entries: dict[str, bytes], data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    entries[f"blobs/{digest}"] = data
    return digest


async def test_a_branch_snapshotting_a_path_out_of_the_workdir_is_refused(crafted: Any) -> None:
    bundle, tmp_path, refused = crafted
    bad = tmp_path / "bad.zip"

    def escape(entries: dict[str, bytes]) -> None:
        name, branch = branch_entries(entries)
        events = entries[f"blobs/{branch['events']}"]
        assert b'"path":"c.txt"' in events
        branch["events"] = put_blob(entries, events.replace(b'"path":"c.txt"', b'"path":"../evil"'))
        entries[name] = json.dumps(branch).encode()

    rewrite(bundle, bad, escape)
    await refused(bad, UnsafeBundleError, "outside the workdir")

    def escape_tip(entries: dict[str, bytes]) -> None:
        name, branch = branch_entries(entries)
        contents = json.loads(entries[f"blobs/{branch['contents']}"])
        contents["/etc/evil"] = None
        branch["contents"] = put_blob(entries, json.dumps(contents).encode())
        entries[name] = json.dumps(branch).encode()

    rewrite(bundle, bad, escape_tip)
    await refused(bad, UnsafeBundleError, "outside the workdir")


@pytest.mark.parametrize(
    "change, match",
    [
        ({"fork": "1"}, "shape of a branch"),
        ({"name": "other"}, "calls itself 'other'"),
        ({"events": "../../x"}, "other than a hash"),
        ({"contents": "f" * 64}, "lacks blob f{64}"),
        ({"created": "yesterday"}, "no valid creation time"),
        ({"record": "../x.restore-000001.jsonl"}, "odd shape"),
    ],
)
async def test_a_branch_file_of_the_wrong_shape_is_refused(
    crafted: Any, change: dict[str, Any], match: str
) -> None:
    bundle, tmp_path, refused = crafted
    bad = tmp_path / "bad.zip"

    def alter(entries: dict[str, bytes]) -> None:
        name, branch = branch_entries(entries)
        entries[name] = json.dumps({**branch, **change}).encode()

    rewrite(bundle, bad, alter)
    await refused(bad, BundleError, match)


# -- secrets in file snapshots ---------------------------------------------------------------

TOKEN = "tok-4f9a1c2e7b-SECRET-d83e"
SECRET_SCRIPT: list[Any] = [
    reply(
        "",
        [call("bash", command="printf 'user=me\\r\\ntoken=%s\\r\\n' \"$LAJ_TOKEN\" > creds.txt")],
    ),
    "saved the credentials",
    reply("", [call("write_file", path="notes.txt", content="plain\n")]),
    "wrote notes",
    reply(
        "",
        [
            call(
                "bash", command='printf \'token=%s;again=%s\' "$LAJ_TOKEN" "$LAJ_TOKEN" > creds.txt'
            )
        ],
    ),
    "rewrote them",
]
SECRET_PROMPTS = ["save the token", "write notes", "rewrite the token"]


def bundle_bytes(path: Path) -> bytes:
    """The bundle as stored and every entry decompressed: a secret hides in neither."""
    with zipfile.ZipFile(path) as z:
        return path.read_bytes() + b"".join(z.read(n) for n in z.namelist())


async def test_a_secret_a_command_wrote_to_a_text_file_is_redacted_in_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bash`` wrote a ``secret_env`` value into creds.txt: its snapshots are redacted in
    the bundle, byte for byte otherwise (CRLF kept), and every reference follows the new
    hashes, so the imported session restores every checkpoint and switches to its branch."""
    monkeypatch.setenv("LAJ_TOKEN", TOKEN)
    workdir = tmp_path / "project"
    workdir.mkdir()
    source = open_agent(
        workdir, tmp_path / "store", model=scripted(SECRET_SCRIPT), secret_env=["LAJ_TOKEN"]
    )
    for prompt in SECRET_PROMPTS:
        await source.send(prompt)
    assert TOKEN in (workdir / "creds.txt").read_text()
    sid = source.session_id
    checkpoints = await source.list_checkpoints(sid)
    await source.restore(sid, checkpoints[-1].seq)  # the last prompt kept as a branch
    kept = comparable(await source.list_checkpoints(sid))
    bundle = tmp_path / "out.zip"
    info = await source.export_session(bundle)
    await close(source)
    assert info.redacted == ("creds.txt",) and info.branches == 1
    assert TOKEN.encode() not in bundle_bytes(bundle)

    student = tmp_path / "student"
    student.mkdir()
    target = open_agent(student, tmp_path / "student-store", f"sqlite://{tmp_path / 's.db'}")
    try:
        await target.import_session(bundle)
        assert comparable(await target.list_checkpoints(sid)) == kept
        [branch] = await target.list_branches(sid)
        await target.switch_branch(sid, branch.name, force=True)
        assert (student / "creds.txt").read_bytes() == b"token=[REDACTED];again=[REDACTED]"
        again = await target.list_checkpoints(sid)
        await target.restore(sid, again[-1].seq)  # before "rewrite the token"
        assert (student / "creds.txt").read_bytes() == b"user=me\r\ntoken=[REDACTED]\r\n"
        await target.undo_restore(sid)
        assert [c.prompt for c in await target.list_checkpoints(sid)] == SECRET_PROMPTS
    finally:
        await close(target)


async def test_a_secret_in_a_binary_file_refuses_the_export_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAJ_TOKEN", TOKEN)
    workdir = tmp_path / "project"
    workdir.mkdir()
    script: list[Any] = [
        reply("", [call("bash", command="printf 'KEY\\000%s\\000' \"$LAJ_TOKEN\" > key.bin")]),
        "stored",
    ]
    agent = open_agent(
        workdir, tmp_path / "store", model=scripted(script), secret_env=["LAJ_TOKEN"]
    )
    try:
        await agent.send("store the key")
        assert TOKEN.encode() in (workdir / "key.bin").read_bytes()
        with pytest.raises(BundleError, match=r"export refused.*binary content of key\.bin"):
            await agent.export_session(tmp_path / "out.zip")
        assert not (tmp_path / "out.zip").exists()
        assert not list(tmp_path.glob(".out.zip.*"))
    finally:
        await close(agent)
