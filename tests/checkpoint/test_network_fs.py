"""Network file systems under a storage root, detected from an injected mount table (no NFS
here): the longest mount point wins, escapes are decoded, one read per root; the agent warns
once or refuses (``refuse_network_fs``)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from lite_agent_jupyter import create_lite_agent
from lite_agent_jupyter.checkpoint.url import local_folder
from lite_agent_jupyter.errors import NetworkFilesystemError
from lite_agent_jupyter.providers import scripted
from lite_agent_jupyter.storage import netfs
from lite_agent_jupyter.storage.netfs import (
    NetworkFilesystemWarning,
    locking_note,
    mount_of,
    network_mount,
    parse_mounts,
)

TABLE = """\
/dev/sda1 / ext4 rw,relatime 0 0
proc /proc proc rw 0 0
fileserver:/export/home {home} nfs4 rw,vers=4.2 0 0
/dev/sdb1 {home}/scratch xfs rw 0 0
//smb/share {home}/with\\040space cifs rw 0 0
"""


def _table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / "scratch").mkdir(parents=True)
    (home / "with space").mkdir()
    table = tmp_path / "mounts"
    table.write_text(TABLE.format(home=home))
    monkeypatch.setenv("LITE_AGENT_MOUNTS", str(table))
    return home


def test_the_longest_mount_point_decides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _table(tmp_path, monkeypatch)
    found = network_mount(home / "alice" / ".lite_agent")  # not made yet: its parent decides
    assert found is not None and found.fstype == "nfs4" and found.point == str(home)
    assert network_mount(home / "scratch" / "x") is None  # a local disk mounted inside
    assert network_mount(tmp_path) is None  # the root file system
    spaced = network_mount(home / "with space" / "nb")
    assert spaced is not None and spaced.fstype == "cifs"


def test_a_symlink_is_followed_to_its_real_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _table(tmp_path, monkeypatch)
    (home / "real").mkdir()
    link = tmp_path / "link"
    link.symlink_to(home / "real")
    assert network_mount(link) is not None


def test_each_network_type_and_a_partial_prefix(tmp_path: Path) -> None:
    for fstype in ("nfs", "nfs4", "cifs", "smb3", "fuse.sshfs", "lustre", "gpfs"):
        mounts = parse_mounts(f"srv:/x /data {fstype} rw 0 0\n/dev/a / ext4 rw 0 0\n")
        found = mount_of("/data/nb", mounts)
        assert found is not None and found.network, fstype
    mounts = parse_mounts("srv:/x /data nfs rw 0 0\n/dev/a / ext4 rw 0 0\n")
    assert mount_of("/database/nb", mounts) == mounts[1]  # /data is not a parent of /database
    assert parse_mounts("torn\n") == []


def test_the_table_is_read_once_per_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _table(tmp_path, monkeypatch)
    netfs._detect.cache_clear()
    for _ in range(5):
        network_mount(home / "bob")
    assert netfs._detect.cache_info().misses == 1


def test_the_note_is_one_line_naming_postgresql(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _table(tmp_path, monkeypatch)
    note = locking_note(home / "alice")
    assert note is not None and "\n" not in note
    assert "on nfs4" in note and "rely on local locking" in note
    assert "%config LiteAgentMagics.checkpointer_url" in note
    assert locking_note(home / "scratch") is None


def test_a_missing_table_detects_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITE_AGENT_MOUNTS", str(tmp_path / "absent"))
    assert network_mount(tmp_path) is None


def test_the_agent_warns_once_or_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _table(tmp_path, monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    root = home / "alice" / ".lite_agent"
    with pytest.warns(NetworkFilesystemWarning, match="on nfs4"):
        create_lite_agent(model=scripted([]), workdir=work, storage=root)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per root
        create_lite_agent(model=scripted([]), workdir=work, storage=root)
        create_lite_agent(model=scripted([]), workdir=work, storage=home / "scratch")
    with pytest.raises(NetworkFilesystemError, match="refuse_network_fs"):
        create_lite_agent(model=scripted([]), workdir=work, storage=root, refuse_network_fs=True)
    memory = create_lite_agent(
        model=scripted([]), workdir=work, storage=root, sessions=False, refuse_network_fs=True
    )
    assert not memory.sessions_enabled


def test_the_folder_a_url_locks_in() -> None:
    assert local_folder("sqlite:///srv/nb/sessions.db") == Path("/srv/nb")
    assert local_folder("file:///srv/nb/logs") == Path("/srv/nb/logs")
    assert local_folder("sqlite:///:memory:") is None
    assert local_folder("postgresql://u@h/db") is None
