"""A tool's approval preview (``Tool.preview``): computed just before the question, shown in
place of the code argument (``edit_cell``'s diff), through the same plain-text path as every
approval; a preview that fails says so in the question and the call is still asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.agent.approvals import ApprovalRequest, input_text
from lite_agent_jupyter.providers import call, reply, scripted
from lite_agent_jupyter.tools import Tool


def _tool(preview: Any) -> Tool:
    async def swap(text: str) -> str:
        return f"swapped in {text!r}"

    return Tool(
        "swap",
        "Swap the text.",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        swap,
        kind="write",
        code_argument="text",
        preview=preview,
    )


async def _asked(tmp_path: Path, preview: Any) -> tuple[list[ApprovalRequest], str]:
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest, signal: Any) -> bool:
        asked.append(request)
        return True

    model = scripted([reply("", [call("swap", text="new line\n")]), "done"])
    async with create_lite_agent(
        model=model,
        workdir=tmp_path,
        storage=Storage(tmp_path / "store", "t"),
        tools=[_tool(preview)],
        on_approval=approve,
    ) as agent:
        result = await agent.send("swap it")
    return asked, result.text


async def test_the_preview_is_shown_in_place_of_the_code(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    async def preview(arguments: dict[str, Any]) -> str:
        seen.append(arguments)
        return "-old line\n+" + arguments["text"].rstrip() + "\x1b[31m"

    asked, text = await _asked(tmp_path, preview)
    assert seen == [{"text": "new line\n"}]
    [request] = asked
    assert request.preview == "-old line\n+new line\x1b[31m"
    shown = input_text(request)
    assert "change (2 lines):" in shown and "-old line" in shown and "+new line" in shown
    assert "\x1b" not in shown and "\\x1b" in shown  # escaped, as every approval's text
    assert text == "done"


async def test_a_failing_preview_is_named_and_the_call_still_asked(tmp_path: Path) -> None:
    async def preview(arguments: dict[str, Any]) -> str:
        raise RuntimeError("the page is gone")

    asked, text = await _asked(tmp_path, preview)
    [request] = asked
    assert request.preview == "(no preview: the page is gone)"
    assert text == "done"


async def test_without_a_preview_the_code_argument_is_shown(tmp_path: Path) -> None:
    asked, _ = await _asked(tmp_path, None)
    [request] = asked
    assert request.preview is None
    assert "text (1 line):" in input_text(request) and "new line" in input_text(request)
