"""The kernel's variables rewind with the files (#34): ``run_cell`` snapshots what its code
may touch, reports what it created, rebound, deleted and changed in place, and
``%agent restore`` / ``%agent undo`` put the variables back. A real kernel, the real
``anthropic`` client against the fake server, ``kernel_tools = True``, approvals allow."""

from __future__ import annotations

import json
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from nbkernel import SETUP, Kernel, StartKernel

FRAME = """\
import pandas as pd
df = pd.DataFrame({"a": range(1000), "b": [i * 0.5 for i in range(1000)], "c": ["x"] * 1000})
original_b = df["b"].copy()
"""


def _run_cell(code: str, answer: str = "Done.") -> tuple[FakeReply, str]:
    return FakeReply("Running it.", tool_calls=[FakeToolCall("run_cell", {"code": code})]), answer


def _tool_text(fake_anthropic: FakeAnthropicServer, request: int) -> str:
    [result] = [
        b
        for b in fake_anthropic.message_requests[request].messages[-1]["content"]
        if b["type"] == "tool_result"
    ]
    return json.dumps(result["content"])


def _value(kernel: Kernel, expr: str) -> str:
    return kernel.run(f"print({expr})").check().stream_text.strip()


def _setup(kernel: Kernel, code: str) -> None:
    kernel.run("%config LiteAgentMagics.kernel_tools = True").check()
    kernel.run(code).check()


def test_an_in_place_drop_is_restored_and_the_restore_undone(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    _setup(agent_kernel, FRAME)
    fake_anthropic.script(*_run_cell('df.drop(columns=["b"], inplace=True); x = 5'))
    agent_kernel.run("%%agent\ndrop b").check()
    text = _tool_text(fake_anthropic, 1)
    assert "variables created: x" in text, text
    assert "changed in place: df" in text, text
    assert "rebound: none" in text and "deleted: none" in text, text
    assert _value(agent_kernel, "'b' in df.columns, x") == "False 5"

    preview = agent_kernel.run("%agent restore 1 --preview").check().stream_text
    assert "Kernel variables:" in preview, preview
    assert "restore   df" in preview and "delete    x" in preview, preview

    restored = agent_kernel.run("%agent restore 1").check().stream_text
    assert "Kernel variables restored: df" in restored, restored
    assert "Kernel variables deleted: x" in restored, restored
    assert _value(agent_kernel, "list(df.columns), df['b'].equals(original_b)") == (
        "['a', 'b', 'c'] True"
    )
    assert _value(agent_kernel, "'x' in globals()") == "False"

    undone = agent_kernel.run("%agent undo").check().stream_text
    assert "Kernel variables restored: df, x" in undone, undone
    assert _value(agent_kernel, "'b' in df.columns, x") == "False 5"

    fake_anthropic.script("Noted.")  # the model is told, in the note about rewound files
    agent_kernel.run("%%agent\nwhat now?").check()
    asked = json.dumps(fake_anthropic.last_request.messages)
    assert "undid the restore to before prompt 1; kernel variables (restored: df, x)" in asked


def test_aliases_stay_aliases_and_what_cannot_be_rewound_is_named(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    _setup(
        agent_kernel,
        "a = b = [1]\ng = (i for i in range(3))\nf = open('notes.txt', 'w')\n",
    )
    fake_anthropic.script(*_run_cell("a.append(2)\nnext(g)\nf.write('x')"))
    agent_kernel.run("%%agent\nappend").check()
    text = _tool_text(fake_anthropic, 1)
    assert "changed in place: a, b" in text, text
    assert "cannot be rewound: f (f is an open file or stream); g (g is a generator)" in text

    preview = agent_kernel.run("%agent restore 1 --preview").check().stream_text
    assert "Cannot be rewound: f, g" in preview, preview
    restored = agent_kernel.run("%agent restore 1").check().stream_text
    assert "Cannot be rewound: f (f is an open file or stream)" in restored, restored
    assert _value(agent_kernel, "a, a is b") == "[1] True"
    assert _value(agent_kernel, "next(g)") == "1"  # left as it was: not rewound

    fake_anthropic.script("Noted.")  # the model is told what was and was not put back
    agent_kernel.run("%%agent\nwhat now?").check()
    asked = json.dumps(fake_anthropic.last_request.messages)
    assert "kernel variables (restored: a, b; could not be rewound: f (" in asked, asked


def test_a_hand_change_is_a_conflict_unless_forced(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    _setup(agent_kernel, FRAME)
    fake_anthropic.script(*_run_cell('df.drop(columns=["b"], inplace=True)'))
    agent_kernel.run("%%agent\ndrop b").check()
    agent_kernel.run("df.loc[3, 'a'] = -1").check()  # by hand, after the agent's call

    refused = agent_kernel.run("%agent restore 1").text
    assert "changed by hand since the agent's call" in refused, refused
    assert "kernel df;" in refused and "nothing was changed" in refused, refused
    assert _value(agent_kernel, "'b' in df.columns, df.loc[3, 'a']") == "False -1"

    agent_kernel.run("%agent restore 1 --force").check()
    assert _value(agent_kernel, "'b' in df.columns, df.loc[3, 'a']") == "True 3"


def test_after_a_kernel_restart_the_restore_rebuilds_the_frame(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    _setup(agent_kernel, FRAME)
    fake_anthropic.script(*_run_cell('df.drop(columns=["b"], inplace=True); x = 5'))
    agent_kernel.run("%%agent\ndrop b").check()
    agent_kernel.restart()
    agent_kernel.run(SETUP).check()
    agent_kernel.run("%agent resume").check()  # this notebook's most recent session
    assert _value(agent_kernel, "'df' in globals()") == "False"
    restored = agent_kernel.run("%agent restore 1").check().stream_text
    assert "df rebuilt from a snapshot" in restored and "old" in restored, restored
    assert _value(agent_kernel, "list(df.columns), len(df)") == "['a', 'b', 'c'] 1000"


def test_a_value_over_the_cap_is_named_and_nothing_is_stored(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    _setup(agent_kernel, "import numpy as np\nbig = np.ones(300 * 2**20 // 8)\nsmall = [1]")
    fake_anthropic.script(*_run_cell("big[0] = 2\nsmall.append(2)"))
    agent_kernel.run("%%agent\nchange them").check()
    text = _tool_text(fake_anthropic, 1)
    assert "cannot be rewound: big (over the per-value cap of 128 MB (~300 MB))" in text, text
    stored = sum(p.stat().st_size for p in (tmp_path / "work").rglob("*") if p.is_file())
    assert stored < 5 * 2**20, stored  # the 300 MB array was never serialized into the store
    restored = agent_kernel.run("%agent restore 1").check().stream_text
    assert "Kernel variables restored: small" in restored, restored
    assert "Cannot be rewound: big" in restored, restored
    assert _value(agent_kernel, "small, big[0]") == "[1] 2.0"


def test_a_branch_switch_brings_each_branch_its_variables(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    _setup(agent_kernel, "total = [0]")
    fake_anthropic.script(*_run_cell("total.append(1); made = 'first'"))
    agent_kernel.run("%%agent\nfirst way").check()
    agent_kernel.run("%agent restore 1").check()  # the first future is kept as branch b1
    assert _value(agent_kernel, "total, 'made' in globals()") == "[0] False"
    fake_anthropic.script(*_run_cell("total.append(2); other = 'second'"))
    agent_kernel.run("%%agent\nsecond way").check()
    assert _value(agent_kernel, "total, other") == "[0, 2] second"

    preview = agent_kernel.run("%agent switch b1 --preview").check().stream_text
    assert "Kernel variables:" in preview and "delete    other" in preview, preview
    switched = agent_kernel.run("%agent switch b1").check().stream_text
    assert "Kernel variables restored: made, total" in switched, switched
    assert _value(agent_kernel, "total, made, 'other' in globals()") == "[0, 1] first False"

    back = agent_kernel.run("%agent switch b2").check().stream_text  # the future left
    assert "Kernel variables restored: other, total" in back, back
    assert _value(agent_kernel, "total, other, 'made' in globals()") == "[0, 2] second False"


def test_a_bundle_carries_kernel_snapshots_only_when_asked(
    agent_kernel: Kernel,
    fake_anthropic: FakeAnthropicServer,
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    tmp_path: Path,
) -> None:
    """A pickle is code when loaded: an import without ``--with-kernel`` keeps none, and the
    restore names the variable "cannot be rewound" instead of unpickling anything."""
    _setup(agent_kernel, FRAME)
    fake_anthropic.script(*_run_cell('df.drop(columns=["b"], inplace=True)'))
    agent_kernel.run("%%agent\ndrop b").check()
    plain, full = tmp_path / "plain.zip", tmp_path / "full.zip"
    agent_kernel.run(f"%agent export {plain}").check()
    agent_kernel.run(f"%agent export {full} --with-kernel").check()

    other = start_kernel(tmp_path / "elsewhere", fake_env)  # its own storage
    other.run(SETUP).check()
    other.run(f"%agent import {plain}").check()
    restored = other.run("%agent restore 1").check().stream_text
    assert "Cannot be rewound: df (its snapshot is not in this session's store)" in restored
    assert _value(other, "'df' in globals()") == "False"

    other.run(f"%agent import {full} --with-kernel").check()  # a new id: the session exists
    restored = other.run("%agent restore 1").check().stream_text
    assert "df rebuilt from a snapshot" in restored, restored
    assert _value(other, "list(df.columns)") == "['a', 'b', 'c']"


def test_a_kernel_only_restore_keeps_files_and_conversation_and_is_undone(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    _setup(agent_kernel, "seen = [1]")
    fake_anthropic.script(
        FakeReply(
            "Both.",
            tool_calls=[
                FakeToolCall("run_cell", {"code": "seen.append(2)"}),
                FakeToolCall("write_file", {"path": "a.txt", "content": "new\n"}),
            ],
        ),
        "Done.",
    )
    agent_kernel.run("%%agent\nchange both").check()
    restored = agent_kernel.run("%agent restore 1 --kernel-only").check().stream_text
    assert "Kernel variables restored: seen" in restored, restored
    assert _value(agent_kernel, "seen") == "[1]"
    assert (tmp_path / "work" / "a.txt").read_text() == "new\n"  # files left alone
    listed = agent_kernel.run("%agent checkpoints --all").check().text
    assert "change both" in listed, listed  # the conversation too: prompt 1 is still there

    undone = agent_kernel.run("%agent undo").check().stream_text
    assert "Undid the kernel-only restore to before prompt 1" in undone, undone
    assert _value(agent_kernel, "seen") == "[1, 2]"

    fresh = agent_kernel.run("%agent restore 1 --files-only").check().stream_text
    assert "Kernel variables" not in fresh and _value(agent_kernel, "seen") == "[1, 2]"
    assert not (tmp_path / "work" / "a.txt").exists()
