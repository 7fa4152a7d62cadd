"""WorkdirScanner on real folders: with inotify and with the plain walk, the same answers."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from lite_agent_jupyter.tools.scan import ScanDelta, WorkdirScanner


@pytest.fixture(params=["inotify", "walk"])
def scanner(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[WorkdirScanner]:
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.txt").write_text("a")
    (root / "src").mkdir()
    (root / "src" / "m.py").write_text("x = 1\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref")
    (root / "env").mkdir()
    (root / "env" / "pyvenv.cfg").write_text("home = /usr")
    (root / "env" / "lib.py").write_text("")
    (root / "store").mkdir()
    (root / "store" / "blob").write_text("")
    scanner = WorkdirScanner(
        root,
        exclude=[root / "store"],
        max_file_size=100,
        use_inotify=request.param == "inotify",
    )
    yield scanner
    scanner.close()


def sh(root: Path, command: str) -> None:
    subprocess.run(["bash", "-c", command], cwd=root, check=True)


def test_first_scan_is_the_baseline_and_skips_what_it_must(scanner: WorkdirScanner) -> None:
    delta = scanner.scan()
    assert delta.created == ["a.txt", "src/m.py"]
    assert sorted(scanner.manifest) == ["a.txt", "src/m.py"]
    assert scanner.skipped_dirs == {".git", "env", "store"}
    assert not scanner.scan()  # nothing changed


def test_created_modified_deleted_and_big(scanner: WorkdirScanner) -> None:
    scanner.scan()
    root = scanner.root
    sh(
        root,
        "sed -i s/1/2/ src/m.py && rm a.txt && echo new > b.txt && head -c 500 /dev/zero > big",
    )
    delta = scanner.scan()
    assert delta == ScanDelta(
        created=["b.txt"], modified=["src/m.py"], deleted=["a.txt"], too_big=["big"]
    )
    sh(root, "echo again >> .git/HEAD; echo x > env/lib.py; echo y > store/blob")
    assert not scanner.scan()  # skipped folders are not looked at
    sh(root, "head -c 10 /dev/zero > big")  # shrinks under the cap: now tracked
    assert scanner.scan() == ScanDelta(created=["big"])


def test_same_size_rewrite_is_seen_through_mtime(scanner: WorkdirScanner) -> None:
    scanner.scan()
    path = scanner.root / "a.txt"
    st = path.stat()
    path.write_text("b")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert scanner.scan().modified == ["a.txt"]


def test_folders_created_moved_and_removed(scanner: WorkdirScanner) -> None:
    scanner.scan()
    root = scanner.root
    sh(root, "mkdir -p new/deep && echo 1 > new/deep/f && echo 2 > new/g")
    assert scanner.scan() == ScanDelta(created=["new/deep/f", "new/g"])
    sh(root, "echo 3 > new/deep/f")  # the new folders are watched too
    assert scanner.scan() == ScanDelta(modified=["new/deep/f"])
    sh(root, "mv new moved")
    assert scanner.scan() == ScanDelta(
        created=["moved/deep/f", "moved/g"], deleted=["new/deep/f", "new/g"]
    )
    shutil.rmtree(root / "moved")
    assert scanner.scan() == ScanDelta(deleted=["moved/deep/f", "moved/g"])
    sh(root, "mkdir node_modules && echo x > node_modules/p.js")
    assert not scanner.scan()
    assert "node_modules" in scanner.skipped_dirs


def test_symlinks_are_not_followed(scanner: WorkdirScanner, tmp_path: Path) -> None:
    scanner.scan()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    (scanner.root / "link").symlink_to(outside)
    (scanner.root / "flink").symlink_to(outside / "secret")
    assert not scanner.scan()


def test_inotify_is_used_on_linux_and_can_be_turned_off(tmp_path: Path) -> None:
    watching, walking = WorkdirScanner(tmp_path), WorkdirScanner(tmp_path, use_inotify=False)
    try:
        watching.scan()
        walking.scan()
        assert watching.watching and not walking.watching
    finally:
        watching.close()
        walking.close()
