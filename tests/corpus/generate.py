"""Write the corpus of sessions this release stores, for every later release to read.

    .venv/bin/python tests/corpus/generate.py [--out tests/corpus]

Writes ``<out>/<package version>/`` (refusing to overwrite one: a released corpus is never
regenerated, a new release adds its own folder):

* ``workdir/``          the project folder as the session left it
* ``file/store/``       the storage root of the file backend (logs, mark index, blobs, undo records)
* ``sqlite/``           ``sessions.db`` and its storage root (blobs, undo records)
* ``postgres/dump.sql`` the PostgreSQL schema as ``pg_dump --inserts`` writes it (plain SQL:
                        portable across servers; the schema is named ``lite_agent_corpus``,
                        which the test renames) and ``postgres/store/`` (undo records)
* ``bundle/session.zip`` the file backend's session exported as a bundle
* ``expected.json``     per backend: the checkpoints, and each restore's files (sha256)

The same scripted session (offline, deterministic) runs on each backend: file tools (a text
and a binary file), an edit, a delete, a shell command creating a file, a compaction, and a
last restore, so the corpus holds an undo record too. ``tests/test_corpus.py`` reads every
release's folder. See docs/portability.md: a change of the event or schema format needs a
migration, with this corpus as its test.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from pg_helpers import PG_DSN, drop_schema  # noqa: E402

from lite_agent_jupyter import (  # noqa: E402
    LiteAgent,
    Storage,
    __version__,
    checkpointer_from_url,
    create_lite_agent,
)
from lite_agent_jupyter.providers.scripted import call, reply, scripted  # noqa: E402

SESSION = "corpus-session"
NAMESPACE = "corpus"
PG_SCHEMA = "lite_agent_corpus"
BINARY = bytes(range(256)) * 3
PROMPTS = [
    "create notes.md and raw.bin",
    "edit notes.md and make a folder with the shell",
    "delete raw.bin and write plan.txt",
    "rewrite plan.txt",
]


def script() -> list[Any]:
    return [
        reply(
            "",
            [
                call("write_file", path="notes.md", content="# Notes\n\nfirst line\n"),
                call("bash", command="printf '\\000\\001\\002' > raw.bin"),
            ],
        ),
        "Created notes.md; raw.bin written by the shell.",
        reply(
            "",
            [
                call(
                    "edit_file",
                    path="notes.md",
                    old_string="first line",
                    new_string="first line, edited",
                ),
                call("bash", command="mkdir -p out && printf 'made by bash\\n' > out/log.txt"),
            ],
        ),
        "Edited; out/log.txt made.",
        "The summary of the conversation so far: notes.md and out/log.txt exist.",
        reply(
            "",
            [
                call("delete_file", path="raw.bin"),
                call("write_file", path="plan.txt", content="1. read\n2. write\n"),
            ],
        ),
        "Deleted raw.bin, wrote plan.txt.",
        reply("", [call("write_file", path="plan.txt", content="1. read\n2. write\n3. ship\n")]),
        "plan.txt rewritten.",
    ]


def digest_files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


async def run_session(agent: LiteAgent) -> None:
    """The corpus session: four prompts, a compaction after the second, a restore of the
    last prompt (its undo record stays)."""
    for number, prompt in enumerate(PROMPTS):
        await agent.send(prompt)
        if number == 1:
            await agent.compact("keep the file names")
    checkpoints = await agent.list_checkpoints(SESSION)
    await agent.restore(SESSION, checkpoints[-1].seq)


def listing(checkpoints: list[Any]) -> list[dict[str, Any]]:
    return [
        {"seq": c.seq, "prompt": c.prompt, "ts": c.ts.isoformat(), "files": list(c.files)}
        for c in checkpoints
    ]


async def expectations(agent: LiteAgent, workdir: Path) -> dict[str, Any]:
    """The checkpoints as stored (``listed``: the last prompt rewound) and after the undo of
    that restore, the undo's files, and each checkpoint's restore. (A restore to a checkpoint
    and its undo append the cut events again, with new times: only ``listed`` has the
    times the corpus stores.)"""
    undone: dict[str, Any] = {"before": digest_files(workdir)}
    await agent.undo_restore(SESSION)
    undone["after"] = digest_files(workdir)
    checkpoints = await agent.list_checkpoints(SESSION)
    restores = []
    for checkpoint in checkpoints:
        await agent.restore(SESSION, checkpoint.seq)
        restores.append({"seq": checkpoint.seq, "files": digest_files(workdir)})
        await agent.undo_restore(SESSION)
    await agent.restore(SESSION, checkpoints[-1].seq)  # back as the corpus stores it
    return {
        "listed": listing(await agent.list_checkpoints(SESSION)),
        "checkpoints": [
            {"seq": c.seq, "prompt": c.prompt, "ts": c.ts.isoformat(), "files": list(c.files)}
            for c in checkpoints
        ],
        "undo": undone,
        "restores": restores,
    }


def open_agent(workdir: Path, store: Path, url: str | None) -> LiteAgent:
    return create_lite_agent(
        model=scripted(script()),
        workdir=workdir,
        storage=Storage(store, NAMESPACE),
        checkpointer=checkpointer_from_url(url) if url else None,
        session_id=SESSION,
        approvals="allow",
        auto_compact=False,
    )


async def generate(out: Path) -> None:
    if out.exists():
        raise SystemExit(f"{out} exists: a released corpus is never regenerated")
    expected: dict[str, Any] = {"version": __version__, "session_id": SESSION}
    exported: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        temp = Path(tmp)
        for backend in ("file", "sqlite", "postgres"):
            workdir = temp / backend / "workdir"
            workdir.mkdir(parents=True)
            store = temp / backend / "store"
            url = {
                "file": None,
                "sqlite": f"sqlite://{temp / backend / 'sessions.db'}",
                "postgres": f"{PG_DSN}?schema={PG_SCHEMA}",
            }[backend]
            if backend == "postgres":
                drop_schema(PG_SCHEMA)
            agent = open_agent(workdir, store, url)
            await run_session(agent)
            if backend == "file":
                await agent.export_session(temp / "session.zip", notebook="corpus.ipynb")
                exported = listing(await agent.list_checkpoints(SESSION))
            expected[backend] = await expectations(agent, workdir)
            checkpointer = agent.checkpointer
            await agent.close()
            await checkpointer.close()
            target = out / backend
            target.mkdir(parents=True)
            shutil.copytree(store, target / "store", symlinks=True)
            if backend == "file":
                shutil.copytree(workdir, out / "workdir")
            elif backend == "sqlite":
                shutil.copy2(temp / backend / "sessions.db", target / "sessions.db")
            else:
                dump = subprocess.run(
                    [
                        "pg_dump",
                        "--inserts",
                        "--no-owner",
                        "--no-privileges",
                        f"--schema={PG_SCHEMA}",
                        PG_DSN,
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                # psql-only meta-commands (pg_dump's \restrict guard) are not SQL: dropped, so
                # any client can replay the file
                lines = [line for line in dump.splitlines() if not line.startswith("\\")]
                (target / "dump.sql").write_text("\n".join(lines) + "\n")
                drop_schema(PG_SCHEMA)
        # the file backend's session as exported (before expectations() re-stamped its tail)
        expected["bundle"] = {**expected["file"], "listed": exported}
        (out / "bundle").mkdir()
        shutil.copy2(temp / "session.zip", out / "bundle" / "session.zip")
    (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    strip_volatile(out)


VOLATILE_FILES = (".lock", ".changes", ".alive", ".gitignore")
"""Left by a running store (locks, a collector's journal, this process's liveness file)
or ignoring everything (the storage root's ``.gitignore``): nothing a reader needs, and a
``.gitignore`` of ``*`` would keep the corpus out of the repository."""


def strip_volatile(out: Path) -> None:
    for path in sorted(out.rglob("*"), reverse=True):
        if path.is_dir() and (path.name == ".locks" or path.name.startswith("p-")):
            shutil.rmtree(path)
        elif path.is_file() and (path.name in VOLATILE_FILES or path.name.endswith(".lock")):
            path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    asyncio.run(generate(args.out / __version__))


if __name__ == "__main__":
    main()
