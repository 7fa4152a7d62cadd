"""The @tool decorator (schema from a signature) and invoke_tool (argument validation)."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict

import jsonschema
import pytest

from lite_agent_jupyter.abort import AbortController
from lite_agent_jupyter.errors import ToolError
from lite_agent_jupyter.tools import Tool, ToolContext, default_tools, invoke_tool, tool


class Point(TypedDict):
    x: int
    y: int
    label: NotRequired[str]


async def everything(
    ctx: ToolContext,
    text: str,
    count: int,
    ratio: float,
    flag: bool,
    names: list[str],
    anything_list: list,  # type: ignore[type-arg]
    mapping: dict,  # type: ignore[type-arg]
    scores: dict[str, int],
    mode: Literal["fast", "slow"],
    level: Literal[1, 2, 3],
    maybe: Optional[int],  # noqa: UP045 - the old spelling must work too
    point: Point,
    described: Annotated[str, "From Annotated."],
    tags: list[str] | None = None,
    limit: int = 10,
    free: Any = None,
) -> str:
    """Do everything at once.

    A second paragraph that the model should also read.

    Args:
        text: From the docstring,
            continued on a second line.
        count (int): With a type in parentheses.
        described: Ignored, Annotated wins.

    Returns:
        Not part of the description.
    """
    return "ok"


def test_schema_covers_every_supported_type() -> None:
    t = tool(everything)
    schema = t.input_schema
    props = schema["properties"]
    assert t.takes_context and "ctx" not in props
    assert props["text"] == {
        "type": "string",
        "description": "From the docstring, continued on a second line.",
    }
    assert props["count"] == {"type": "integer", "description": "With a type in parentheses."}
    assert props["ratio"] == {"type": "number"}
    assert props["flag"] == {"type": "boolean"}
    assert props["names"] == {"type": "array", "items": {"type": "string"}}
    assert props["anything_list"] == {"type": "array"}
    assert props["mapping"] == {"type": "object"}
    assert props["scores"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert props["level"] == {"type": "integer", "enum": [1, 2, 3]}
    assert props["maybe"] == {"type": ["integer", "null"]}
    assert props["point"] == {
        "type": "object",
        "properties": {
            "x": {"type": "integer"},
            "y": {"type": "integer"},
            "label": {"type": "string"},
        },
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    assert props["described"] == {"type": "string", "description": "From Annotated."}
    assert props["tags"] == {
        "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
        "default": None,
    }
    assert props["limit"] == {"type": "integer", "default": 10}
    assert props["free"] == {"default": None}
    # Optional without a default is not required (it is passed as None when missing).
    assert schema["required"] == [
        "text", "count", "ratio", "flag", "names", "anything_list", "mapping", "scores",
        "mode", "level", "point", "described",
    ]  # fmt: skip
    assert schema["additionalProperties"] is False
    assert t.description == (
        "Do everything at once.\n\nA second paragraph that the model should also read."
    )
    jsonschema.Draft202012Validator.check_schema(schema)


def test_decorator_forms_name_description_kind() -> None:
    @tool(name="renamed", description="Custom.", kind="read")
    async def original(x: int) -> str:
        """Ignored."""
        return str(x)

    assert isinstance(original, Tool)
    assert (original.name, original.description, original.kind) == ("renamed", "Custom.", "read")
    assert not original.takes_context
    assert original.spec() == {
        "name": "renamed",
        "description": "Custom.",
        "input_schema": {
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "additionalProperties": False,
        },
    }

    def plain(a: str) -> str:
        return a

    assert tool(plain).name == "plain"
    assert tool(plain).kind == "other"


def test_rest_style_param_docs() -> None:
    @tool
    async def f(path: str, n: int = 1) -> str:
        """Read something.

        :param path: Where to read.
        :param int n: How many
            times.
        """
        return ""

    assert f.description == "Read something."
    assert f.input_schema["properties"]["path"]["description"] == "Where to read."
    assert f.input_schema["properties"]["n"]["description"] == "How many times."


def test_unsupported_signatures_fail_at_decoration_time() -> None:
    async def var_args(*args: int) -> str:
        return ""

    async def no_annotation(x) -> str:  # type: ignore[no-untyped-def]
        return ""

    async def a_set(x: set[int]) -> str:
        return ""

    async def ctx_not_first(x: int, ctx: ToolContext) -> str:
        return ""

    async def gen(x: int):  # type: ignore[no-untyped-def]
        yield x

    async def int_keys(x: dict[int, str]) -> str:
        return ""

    for fn, message in [
        (var_args, "*args"),
        (no_annotation, "needs a type annotation"),
        (a_set, "unsupported annotation"),
        (ctx_not_first, "must be the first"),
        (gen, "not yield"),
        (int_keys, "keys must be str"),
    ]:
        with pytest.raises(TypeError, match=re.escape(message)):
            tool(fn)
    with pytest.raises(ValueError, match="invalid tool name"):
        tool(a_set, name="has space")


# ------------------------------------------------------------------------------- validation

calls: list[dict[str, Any]] = []


@tool
async def recorded(
    path: str,
    count: int,
    ratio: float = 1.0,
    names: list[str] | None = None,
    mode: Literal["a", "b"] = "a",
    point: Point | None = None,
    flag: bool = False,
) -> str:
    calls.append(
        {"path": path, "count": count, "ratio": ratio, "names": names, "mode": mode,
         "point": point, "flag": flag}
    )  # fmt: skip
    return "done"


@pytest.fixture
def plain_ctx(ctx: ToolContext) -> ToolContext:
    calls.clear()
    return ctx


@pytest.mark.parametrize(
    ("arguments", "fragments"),
    [
        ({"count": 1}, ["missing required argument path"]),
        (
            {"path": "x", "count": 1, "bogus": 2},
            ["unknown argument bogus", "accepted: path, count"],
        ),
        ({"path": "x", "count": "5"}, ['count: expected integer, got string "5"']),
        ({"path": "x", "count": True}, ["count: expected integer, got boolean"]),
        ({"path": "x", "count": 1.5}, ["count: expected integer, got number 1.5"]),
        ({"path": "x", "count": 1, "flag": 1}, ["flag: expected boolean, got integer"]),
        ({"path": "x", "count": 1, "ratio": "1"}, ["ratio: expected number"]),
        ({"path": "x", "count": 1, "names": ["a", 2]}, ["names[1]: expected string"]),
        ({"path": "x", "count": 1, "mode": "c"}, ['mode: must be one of "a", "b"']),
        ({"path": "x", "count": 1, "point": {"x": 1}}, ["missing required argument point.y"]),
        (
            {"path": "x", "count": 1, "point": {"x": 1, "y": 2, "z": 3}},
            ["unknown argument point.z"],
        ),
        ({"path": 3}, ["path: expected string", "missing required argument count"]),
    ],
)
async def test_invalid_arguments_raise_a_clear_tool_error_and_nothing_runs(
    plain_ctx: ToolContext, arguments: dict[str, Any], fragments: list[str]
) -> None:
    with pytest.raises(ToolError) as info:
        await invoke_tool(recorded, arguments, plain_ctx)
    message = str(info.value)
    assert message.startswith("invalid arguments for recorded: ")
    for fragment in fragments:
        assert fragment in message
    assert calls == []


async def test_non_object_arguments_are_refused(plain_ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="expected a JSON object, got array"):
        await invoke_tool(recorded, ["x", 1], plain_ctx)
    assert calls == []


async def test_valid_arguments_with_the_documented_leniencies(plain_ctx: ToolContext) -> None:
    result = await invoke_tool(
        recorded,
        {
            "path": "x",
            "count": 3.0,  # integral float -> int
            "ratio": 2,  # int is a number
            "names": '["a", "b"]',  # a JSON string holding an array
            "mode": None,  # null for an optional, non-nullable argument -> the default
            "point": {"x": 1, "y": 2, "label": "p"},
        },
        plain_ctx,
    )
    assert result == "done"
    assert calls == [
        {"path": "x", "count": 3, "ratio": 2, "names": ["a", "b"], "mode": "a",
         "point": {"x": 1, "y": 2, "label": "p"}, "flag": False}
    ]  # fmt: skip
    assert type(calls[0]["count"]) is int


async def test_optional_without_default_is_passed_as_none(ctx: ToolContext) -> None:
    @tool
    async def f(a: int | None, b: Annotated[str | None, "B."]) -> str:
        return f"{a!r} {b!r}"

    assert f.input_schema["required"] == []
    assert f.input_schema["properties"]["b"] == {"type": ["string", "null"], "description": "B."}
    assert await invoke_tool(f, {}, ctx) == "None None"
    assert await invoke_tool(f, {"a": None, "b": "x"}, ctx) == "None 'x'"


async def test_context_is_passed_and_none_arguments_mean_empty(ctx: ToolContext) -> None:
    seen: list[ToolContext] = []

    @tool
    async def f(context: ToolContext) -> str:
        seen.append(context)
        return "ok"

    assert f.input_schema["properties"] == {}
    assert await invoke_tool(f, None, ctx) == "ok"
    assert seen == [ctx]


async def test_sync_functions_run_in_a_worker_thread(ctx: ToolContext) -> None:
    @tool
    def blocking(x: int) -> str:
        return f"{x} on {threading.get_ident()}"

    result = await invoke_tool(blocking, {"x": 2}, ctx)
    assert isinstance(result, str)
    assert result.startswith("2 on ")
    assert result != f"2 on {threading.get_ident()}"


async def test_outputs_are_normalized(ctx: ToolContext) -> None:
    @tool
    async def nothing() -> None:
        return None

    @tool
    async def data() -> dict[str, Any]:
        return {"a": [1, "é"]}

    @tool
    async def blocks() -> list[dict[str, Any]]:
        return [{"type": "text", "text": "hi"}]

    assert await invoke_tool(nothing, {}, ctx) == "(no output)"
    assert await invoke_tool(data, {}, ctx) == '{"a": [1, "é"]}'
    assert await invoke_tool(blocks, {}, ctx) == [{"type": "text", "text": "hi"}]


async def test_hand_built_tools_are_validated_against_their_schema(ctx: ToolContext) -> None:
    async def fn(**kwargs: Any) -> str:
        return repr(sorted(kwargs))

    hand = Tool(
        name="hand",
        description="Hand-built.",
        input_schema={
            "type": "object",
            "properties": {"q": {"type": "string", "minLength": 1}},
            "required": ["q"],
        },
        fn=fn,
    )
    with pytest.raises(ToolError, match="missing required argument q"):
        await invoke_tool(hand, {}, ctx)
    # No additionalProperties: false in this schema, so extra keys pass through; unknown
    # keywords (minLength) do not block the call.
    assert await invoke_tool(hand, {"q": "", "extra": 1}, ctx) == "['extra', 'q']"


async def test_an_aborted_signal_stops_before_running(ctx: ToolContext) -> None:
    controller = AbortController()
    controller.abort("user pressed stop")
    ran: list[bool] = []

    @tool
    async def f() -> str:
        ran.append(True)
        return ""

    ctx.signal = controller.signal
    with pytest.raises(asyncio.CancelledError):
        await invoke_tool(f, {}, ctx)
    assert ran == []


def test_default_tools_are_well_formed() -> None:
    tools = default_tools()
    names = [t.name for t in tools]
    assert names == [
        "read_file", "list_files", "grep", "write_file", "edit_file", "delete_file", "bash",
        "todo_write", "todo_read",
    ]  # fmt: skip
    kinds = {t.name: t.kind for t in tools}
    assert kinds["read_file"] == kinds["list_files"] == kinds["grep"] == "read"
    assert kinds["write_file"] == kinds["edit_file"] == kinds["delete_file"] == "write"
    assert kinds["bash"] == "shell"
    for t in tools:
        assert t.takes_context
        assert t.description and len(t.description) > 40
        jsonschema.Draft202012Validator.check_schema(t.input_schema)
        for name, prop in t.input_schema["properties"].items():
            assert prop.get("description"), f"{t.name}.{name} has no description"
    assert default_tools() is not default_tools()
